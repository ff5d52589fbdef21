//! One load run: the topic prepared, the workers started together, each
//! second's reports merged and printed, the verdict of verify mode.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use client::connection::ClientError;
use client::consumer::{list_offsets, StartAt};

use crate::options::{Mode, Options};
use crate::prefault;
use crate::report::{Interval, Run};
use crate::verify::{Tally, Verdict};
use crate::{consume, produce};

/// io_uring buffer memory per worker executor.
const WORKER_IO_MEMORY: usize = 4 << 20;

/// What a run measured.
pub struct Outcome {
    /// Every interval, and the logs and summary made of them.
    pub run: Run,
    /// Verify mode: one verdict per reader.
    pub verdicts: Vec<Verdict>,
}

/// A worker thread on its own glommio executor, pinned to `core` if given.
fn worker<T: Send + 'static>(
    name: String,
    core: Option<core_affinity::CoreId>,
    work: impl FnOnce() -> T + Send + 'static,
) -> JoinHandle<T> {
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            if let Some(core) = core {
                core_affinity::set_for_current(core);
            }
            work()
        })
        .expect("spawn a worker thread")
}

fn executor() -> glommio::LocalExecutor {
    glommio::LocalExecutorBuilder::default()
        .io_memory(WORKER_IO_MEMORY)
        .make()
        .expect("a glommio executor (is `ulimit -l` high enough?)")
}

/// The topic's partition count, creating it if it does not exist; and
/// each partition's end offset now.
fn prepare_topic(options: &Options) -> Result<(i32, Vec<(i32, i64)>), String> {
    let options = options.clone();
    executor().run(async move {
        let cluster = options.cluster("loadgen-admin")?;
        match cluster
            .create_topic(&options.topic, options.partitions, -1, &[])
            .await
        {
            Ok(()) => {}
            // Already there is fine (TOPIC_ALREADY_EXISTS).
            Err(ClientError::Refused(36, _)) | Err(ClientError::Broker(36)) => {}
            Err(e) => return Err(format!("creating {}: {e}", options.topic)),
        }
        let info = cluster
            .topic_info(&options.topic, false)
            .await
            .map_err(|e| e.to_string())?;
        let partitions: Vec<i32> = (0..info.leaders.len() as i32).collect();
        let ends = list_offsets(&cluster, &options.topic, &partitions, StartAt::Latest)
            .await
            .map_err(|e| e.to_string())?;
        Ok((partitions.len() as i32, ends.into_iter().collect()))
    })
}

/// The producers (of `producers`) that thread `thread` of `threads` runs:
/// every `threads`-th one, so each producer has exactly one thread.
fn producers_of_thread(producers: usize, threads: usize, thread: usize) -> Vec<u16> {
    (0..producers)
        .filter(|p| p % threads == thread)
        .map(|p| p as u16)
        .collect()
}

/// Runs the producers `which` on this thread's executor, side by side.
async fn produce_all(
    options: Options,
    which: Vec<u16>,
    begin: Instant,
    reports: mpsc::Sender<Interval>,
    verify: bool,
) -> Result<Vec<produce::Produced>, String> {
    let keys = produce::Keys::new(options.keys);
    let running: Vec<_> = which
        .into_iter()
        .map(|p| {
            let who = (p, keys.clone());
            let work = produce::run(options.clone(), who, begin, reports.clone(), verify);
            glommio::spawn_local(work)
        })
        .collect();
    futures::future::join_all(running)
        .await
        .into_iter()
        .collect()
}

/// Runs the producers and consumers `options` asks for; writes the logs
/// and summary if `--out` was given. Verify mode fails on any lost or
/// reordered message.
pub fn run_load(options: Options) -> Result<Outcome, String> {
    let produces = options.mode != Mode::Consume;
    let consumes = options.mode != Mode::Produce;
    let verify = options.mode == Mode::Verify;
    let (partitions, ends) = prepare_topic(&options)?;
    let cores = if options.pin {
        core_affinity::get_core_ids().unwrap_or_default()
    } else {
        vec![]
    };
    let core = |i: usize| (!cores.is_empty()).then(|| cores[i % cores.len()]);
    println!(
        "loadgen {:?}: topic {} ({partitions} partitions), {} producers, {} consumers x {} readers, {} B messages, rate {}, acks {}, {}s + {}s warm-up",
        options.mode,
        options.topic,
        if produces { options.producers } else { 0 },
        if consumes { options.consumers } else { 0 },
        options.groups,
        options.message_bytes,
        options.rate.map_or("max".to_string(), |r| format!("{r}/s")),
        options.acks,
        options.duration.as_secs_f64(),
        options.warmup.as_secs_f64(),
    );
    if produces && options.rate.is_some() {
        let bytes = prefault::bytes_for(options.producers, options.max_in_flight_bytes);
        prefault::touch(bytes);
    }
    let (reports, received) = mpsc::channel::<Interval>();
    // Everyone starts together, a moment from now, and reports each second.
    let begin = Instant::now() + Duration::from_millis(300);
    let producers_done = Arc::new(AtomicBool::new(false));
    let mut consumers: Vec<JoinHandle<Result<(usize, Tally), String>>> = Vec::new();
    if consumes {
        let start = match (options.mode, options.from_earliest) {
            (Mode::Consume, true) => consume::From::Each(StartAt::Earliest),
            (Mode::Consume, false) => consume::From::Each(StartAt::Latest),
            // What the producers are about to send, and nothing older.
            _ => consume::From::Offsets(ends.iter().copied().collect()),
        };
        for group in 0..options.groups {
            for c in 0..options.consumers {
                let mine: Vec<i32> = (0..partitions)
                    .filter(|p| *p as usize % options.consumers == c)
                    .collect();
                if mine.is_empty() {
                    continue;
                }
                let (options, reports, done, start) = (
                    options.clone(),
                    reports.clone(),
                    producers_done.clone(),
                    start.clone(),
                );
                let index = group * options.consumers + c;
                consumers.push(worker(
                    format!("consumer-{index}"),
                    core(index + 1),
                    move || {
                        executor()
                            .run(consume::run(
                                options, index, mine, start, begin, reports, done, verify,
                            ))
                            .map(|tally| (group, tally))
                    },
                ));
            }
        }
    }
    let mut producers = Vec::new();
    if produces {
        let threads = options.producer_threads.clamp(1, options.producers);
        for thread in 0..threads {
            let mine = producers_of_thread(options.producers, threads, thread);
            let (options, reports) = (options.clone(), reports.clone());
            producers.push(worker(
                format!("producer-{thread}"),
                core(thread),
                move || executor().run(produce_all(options, mine, begin, reports, verify)),
            ));
        }
    }
    drop(reports);
    // With --messages the run lasts as long as it takes: measure it all.
    let measured = if options.messages.is_some() {
        Duration::from_secs(u64::MAX / 4)
    } else {
        options.duration
    };
    let mut run = Run::new(options.warmup, measured, options.message_bytes);
    let mut tick = 1u64;
    let mut producers_left = producers.len();
    let mut produced = Vec::new();
    loop {
        let at = begin + Duration::from_secs(tick) + Duration::from_millis(100);
        let mut interval = Interval::default();
        let mut disconnected = false;
        loop {
            let now = Instant::now();
            if now >= at {
                break;
            }
            match received.recv_timeout(at - now) {
                Ok(report) => interval.merge(&report),
                Err(mpsc::RecvTimeoutError::Timeout) => break,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    disconnected = true;
                    break;
                }
            }
        }
        // Every interval is a second but the last of a run that ended on
        // its own (--messages): that one lasts until the workers finished
        // (up to the 100 ms of grace above), or a count read in 1.4 s
        // would be measured over 2.
        let start = Duration::from_secs(tick - 1);
        let length = match disconnected {
            true => begin.elapsed().saturating_sub(start),
            false => Duration::from_secs(1),
        };
        run.add(start, length, interval);
        tick += 1;
        // Producers finished: consumers drain, then the channel closes.
        if producers_left > 0 && producers.iter().all(|p| p.is_finished()) {
            for handle in producers.drain(..) {
                produced.extend(handle.join().map_err(|_| "a producer panicked")??);
            }
            producers_left = 0;
            producers_done.store(true, Ordering::Release);
        }
        if disconnected {
            break;
        }
    }
    let mut tallies: Vec<Tally> = vec![Tally::default(); options.groups];
    for handle in consumers {
        let (group, tally) = handle.join().map_err(|_| "a consumer panicked")??;
        tallies[group].merge(tally);
    }
    let (total, span) = run.measured();
    let cpu = run.measured_cpu().unwrap_or_default().as_secs_f64();
    println!(
        "summary over {:.1}s: produced {:.0} msg/s ({:.1} MB/s), consumed {:.0} msg/s ({:.1} MB/s), errors {}, loadgen CPU {:.2} s ({:.2} cores)",
        span.as_secs_f64(),
        total.produced as f64 / span.as_secs_f64().max(1e-9),
        total.produced_bytes as f64 / span.as_secs_f64().max(1e-9) / 1e6,
        total.consumed as f64 / span.as_secs_f64().max(1e-9),
        total.consumed_bytes as f64 / span.as_secs_f64().max(1e-9) / 1e6,
        total.errors,
        cpu,
        cpu / span.as_secs_f64().max(1e-9),
    );
    let mut extra = vec![
        ("partitions", partitions.to_string()),
        (
            "producers",
            if produces { options.producers } else { 0 }.to_string(),
        ),
        (
            "consumers",
            if consumes { options.consumers } else { 0 }.to_string(),
        ),
        ("readers", options.groups.to_string()),
        ("acks", options.acks.to_string()),
        (
            "target_rate",
            options.rate.map_or("null".into(), |r| r.to_string()),
        ),
    ];
    let mut failed = false;
    let mut verdicts = Vec::new();
    if verify {
        let acked: Vec<(u16, Vec<u64>)> = produced
            .iter()
            .map(|p| (p.producer, p.acked.clone()))
            .collect();
        for (group, tally) in tallies.iter().enumerate() {
            let verdict = tally.verdict(&acked);
            println!(
                "verify reader {group}: {} acknowledged messages checked: {} lost, {} duplicated, {} out of order",
                verdict.checked, verdict.lost, verdict.duplicated, verdict.out_of_order
            );
            // Idempotent producers (acks=all) never write a retry twice.
            let exactly_once = options.idempotence && options.acks == -1;
            failed |= verdict.lost > 0
                || verdict.out_of_order > 0
                || (exactly_once && verdict.duplicated > 0);
            verdicts.push(verdict);
            extra.push(("verify_checked", verdict.checked.to_string()));
            extra.push(("verify_lost", verdict.lost.to_string()));
            extra.push(("verify_duplicated", verdict.duplicated.to_string()));
            extra.push(("verify_out_of_order", verdict.out_of_order.to_string()));
        }
    }
    if let Some(dir) = &options.out {
        run.write_logs(dir, &options.name)
            .map_err(|e| format!("writing logs: {e}"))?;
        let mode = format!("{:?}", options.mode);
        let json = run.summary_json(&options.name, &mode, &extra);
        std::fs::write(dir.join(format!("{}.json", options.name)), json)
            .map_err(|e| format!("writing the summary: {e}"))?;
    }
    if failed {
        return Err("verification failed".into());
    }
    Ok(Outcome { run, verdicts })
}

#[cfg(test)]
mod tests {
    use super::producers_of_thread;

    #[test]
    fn each_producer_runs_on_exactly_one_thread() {
        let split: Vec<Vec<u16>> = (0..3).map(|t| producers_of_thread(7, 3, t)).collect();
        assert_eq!(split, vec![vec![0, 3, 6], vec![1, 4], vec![2, 5]]);
        assert_eq!(producers_of_thread(1000, 2, 1).len(), 500);
        assert_eq!(producers_of_thread(4, 4, 2), vec![2]);
    }
}
