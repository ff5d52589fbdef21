//! The open-file limit as operators meet it: a broker started from a shell
//! whose soft limit is low (1,024 is common) raises it to the hard limit,
//! says so, and serves more partitions than the soft limit would allow.

mod support;

use std::os::unix::process::CommandExt;
use std::sync::Mutex;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};

/// What librdkafka reported for each record: acknowledged, or its error.
#[derive(Default)]
struct Reports(Mutex<Vec<Result<(), String>>>);

impl rdkafka::ClientContext for Reports {}

impl ProducerContext for Reports {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let report = result.as_ref().map(|_| ()).map_err(|(e, _)| e.to_string());
        self.0.lock().unwrap().push(report);
    }
}

/// The soft and hard limits on open files of `/proc/PID/limits` (its
/// "Max open files" line: the soft limit, then the hard one).
fn open_file_limits(pid: u32) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("a Max open files line");
    let field = |n: usize| line.split_whitespace().nth(n).unwrap().parse().unwrap();
    (field(3), field(4))
}

#[test]
fn a_broker_started_under_a_low_open_file_limit_serves_more_partitions_than_it() {
    // 256 against 400 partitions, each with a segment file open once
    // written.
    const SOFT: u64 = 256;
    const PARTITIONS: i32 = 400;
    let data = tempfile::tempdir().unwrap();
    let broker = support::start_broker_adjusted(
        data.path(),
        &["--kafka-listen", "127.0.0.1:0"],
        &[],
        |command| {
            // SAFETY: the closure makes two system calls (getrlimit and
            // setrlimit, each a single syscall wrapper) and allocates nothing.
            unsafe {
                command.pre_exec(|| {
                    let mut limit = libc::rlimit {
                        rlim_cur: 0,
                        rlim_max: 0,
                    };
                    if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    limit.rlim_cur = SOFT;
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        },
    );
    let (soft, hard) = open_file_limits(broker.pid());
    println!("the broker's open-file limits: {soft} / {hard} (started with {SOFT})");
    assert!(soft > SOFT, "the soft limit stayed at {soft}");
    assert_eq!(soft, hard, "raised to the hard limit");
    assert_eq!(broker.logged("raised the open-file limit").len(), 1);
    let bootstrap = broker.bootstrap();
    support::cli(
        &bootstrap,
        &[
            "topic",
            "create",
            "many",
            "--partitions",
            &PARTITIONS.to_string(),
        ],
    );
    let producer: BaseProducer<Reports> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("acks", "all")
        .set("message.timeout.ms", "30000")
        .create_with_context(Reports::default())
        .unwrap();
    for partition in 0..PARTITIONS {
        let value = format!("p{partition}");
        producer
            .send(
                BaseRecord::<(), _>::to("many")
                    .partition(partition)
                    .payload(&value),
            )
            .map_err(|(e, _)| e)
            .unwrap();
        producer.poll(Duration::ZERO);
    }
    let _ = producer.flush(Duration::from_secs(60));
    let reports = producer.context().0.lock().unwrap().clone();
    let refused: Vec<&String> = reports.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        refused.is_empty(),
        "{} of {PARTITIONS} refused, the first: {:?}",
        refused.len(),
        refused.first()
    );
    assert_eq!(reports.len(), PARTITIONS as usize, "every record reported");
    drop(producer);
    assert!(broker.terminate().success());
}
