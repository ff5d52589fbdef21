//! loadgen against the real broker: verify mode finds every acknowledged
//! message once and in order, and the run's logs and summary are written
//! and read back. (Figures are measured by scripts/bench.sh, not here.)

mod support;

use std::time::Duration;

use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use loadgen::options::parse;
use loadgen::run::run_load;
use support::start_broker;

#[test]
fn verify_mode_accounts_for_every_acknowledged_message_and_writes_its_logs() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let out = dir.path().join("results");
    let line = format!(
        "verify --bootstrap {} --topic checked --partitions 4 --producers 2 --consumers 2 \
         --keys 100 --rate 20000 --duration 2 --warmup 1 --no-pin --out {} --name v",
        broker.bootstrap(),
        out.display()
    );
    let args: Vec<String> = line.split_whitespace().map(String::from).collect();
    let options = parse(&args).unwrap();
    let outcome = run_load(options).expect("a clean verify run");
    let verdict = outcome.verdicts[0];
    assert_eq!((verdict.lost, verdict.out_of_order), (0, 0), "{verdict:?}");
    // 2 producers at 10k/s each for 3 s (warm-up included).
    assert!(
        verdict.checked >= 50_000,
        "{} messages checked",
        verdict.checked
    );
    let (measured, span) = outcome.run.measured();
    assert_eq!(span, Duration::from_secs(2));
    assert!(measured.produced > 30_000 && measured.consumed > 30_000);
    // Paced, each acknowledged message's latency is also split in two at
    // the start of its request's building: both parts recorded for every
    // message, each a real share (lingering before, the broker's sync
    // after), adding up to the whole (means within the histograms'
    // rounding and the 1 µs floor of a record).
    let (whole, queued, request) = (
        &measured.produce_latency,
        &measured.produce_queued,
        &measured.produce_request,
    );
    assert_eq!((queued.len(), request.len()), (whole.len(), whole.len()));
    assert!(queued.max() <= whole.max() && request.max() <= whole.max());
    assert!(
        queued.mean() > 5.0 && request.mean() > 5.0,
        "{} {}",
        queued.mean(),
        request.mean()
    );
    let parts = queued.mean() + request.mean();
    assert!(
        (parts - whole.mean()).abs() <= whole.mean() * 0.01 + 2.0,
        "parts {parts} against the whole {}",
        whole.mean()
    );
    // The interval logs hold one histogram per measured second, each with
    // that second's messages; the summary names the figures.
    for log in ["v-produce.hlog", "v-e2e.hlog"] {
        let bytes = std::fs::read(out.join(log)).unwrap();
        let intervals = IntervalLogIterator::new(&bytes)
            .filter(|e| matches!(e, Ok(LogEntry::Interval(_))))
            .count();
        assert_eq!(intervals, 2, "{log}");
    }
    let json = std::fs::read_to_string(out.join("v.json")).unwrap();
    assert!(json.contains("\"verify_lost\": 0"), "{json}");
    assert!(json.contains("\"produce_latency_us\": {\"p50\""), "{json}");
    assert!(json.contains("\"produce_queued_us\": {\"p50\""), "{json}");
    assert!(json.contains("\"produce_request_us\": {\"p50\""), "{json}");
}

#[test]
fn many_producers_share_a_thread_and_each_sends_its_share() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let line = format!(
        "verify --bootstrap {} --topic shared --partitions 4 --producers 50 --producer-threads 1 \
         --max-in-flight-bytes 65536 --keys 100 --rate 5000 --duration 1 --warmup 1 --no-pin",
        broker.bootstrap(),
    );
    let args: Vec<String> = line.split_whitespace().map(String::from).collect();
    let options = parse(&args).unwrap();
    assert_eq!(options.producer_threads, 1);
    let outcome = run_load(options).expect("a clean verify run");
    let verdict = outcome.verdicts[0];
    assert_eq!((verdict.lost, verdict.out_of_order), (0, 0), "{verdict:?}");
    // Each producer sends its 100 msgs/s for 2 s: 8,000 checked needs at
    // least 40 of the 50 to have run side by side on the one thread.
    assert!(
        verdict.checked >= 8_000,
        "{} messages checked",
        verdict.checked
    );
}

#[test]
fn a_consumer_told_a_count_reads_exactly_that_many_and_stops() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let run = |line: String| {
        let args: Vec<String> = line.split_whitespace().map(String::from).collect();
        run_load(parse(&args).unwrap()).expect("a clean run")
    };
    // Plain producers: only the byte window bounds their requests in
    // flight (the default without idempotence), 64 KiB here.
    let produced = run(format!(
        "produce --bootstrap {} --topic counted --partitions 1 --producers 2 --idempotence off \
         --max-in-flight-bytes 65536 --batch-bytes 4096 --messages 1500 --warmup 0 --no-pin",
        broker.bootstrap()
    ));
    assert_eq!(produced.run.measured().0.produced, 3000);
    // Not paced: the latency is not split (two more records a message
    // would cost a flat-out run).
    assert!(produced.run.measured().0.produce_queued.is_empty());
    assert!(produced.run.measured().0.produce_request.is_empty());
    let started = std::time::Instant::now();
    // The deadline is far; the count ends the run, all of it measured.
    let read = run(format!(
        "consume --bootstrap {} --topic counted --partitions 1 --consumers 1 --from earliest \
         --messages 3000 --duration 600 --warmup 0 --no-pin",
        broker.bootstrap()
    ));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(300), "the count ended the run");
    let (measured, span) = read.run.measured();
    assert_eq!(measured.consumed, 3000);
    // The rate is over the time the reading took, not whole seconds.
    assert!(span <= took, "measured over {span:?} of a {took:?} run");
}
