//! Append benchmark: the partition log's durable append throughput and
//! latency beside the raw O_DIRECT write bandwidth of the same disk,
//! measured in the same run.
//!
//! ```text
//! cargo run --release -p storage --example append_bench -- [--dir DIR] [--seconds N]
//! ```
//!
//! Workloads (one glommio shard, producers appending concurrently, each
//! waiting for its batch to be fdatasync'd before sending the next):
//! - 100 B records, 100 per batch, 32 producers
//! - 1 KiB records, 16 per batch, 32 producers
//! - 1 MiB groups: 1 KiB records, 64 per batch (66 KB), 32 producers, so
//!   each group commit writes about 1 MiB (the table prints the measured
//!   mean group size)
//!
//! Latency is append-to-durable per batch (HdrHistogram, microseconds).

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use futures::future::join_all;
use glommio::io::{DmaFile, OpenOptions};
use hdrhistogram::Histogram;
use storage::batch::{build, RecordSpec};
use storage::io::dma::DmaFs;
use storage::{LeaderEpoch, Log, LogConfig, TimestampMs};

const RAW_BLOCK_BYTES: usize = 1 << 20;
const RAW_QUEUE_DEPTHS: [usize; 3] = [1, 4, 16];

struct Workload {
    name: &'static str,
    record_bytes: usize,
    records_per_batch: usize,
    producers: usize,
}

const WORKLOADS: [Workload; 3] = [
    Workload {
        name: "100 B records",
        record_bytes: 100,
        records_per_batch: 100,
        producers: 32,
    },
    Workload {
        name: "1 KiB records",
        record_bytes: 1024,
        records_per_batch: 16,
        producers: 32,
    },
    Workload {
        name: "1 MiB groups",
        record_bytes: 1024,
        records_per_batch: 64,
        producers: 32,
    },
];

struct Args {
    dir: PathBuf,
    seconds: u64,
    producers: Option<usize>,
    /// Skip the raw-disk reference (profiling the log alone).
    no_raw: bool,
    /// Run only the workloads whose name contains this.
    only: Option<String>,
}

fn parse_args() -> Args {
    let mut args = Args {
        dir: PathBuf::from("bench-data"),
        seconds: 5,
        producers: None,
        no_raw: false,
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--dir" => args.dir = PathBuf::from(it.next().expect("--dir DIR")),
            "--seconds" => {
                args.seconds = it.next().expect("--seconds N").parse().expect("a number")
            }
            "--no-raw" => args.no_raw = true,
            "--only" => args.only = Some(it.next().expect("--only NAME")),
            "--producers" => {
                args.producers = Some(it.next().expect("--producers N").parse().expect("a number"))
            }
            other => {
                panic!("unknown argument {other}; usage: append_bench [--dir DIR] [--seconds N] [--producers N] [--only NAME] [--no-raw]")
            }
        }
    }
    args
}

fn main() {
    let args = parse_args();
    std::fs::create_dir_all(&args.dir).expect("create bench dir");
    glommio::LocalExecutorBuilder::default()
        .io_memory(4 << 20)
        .make()
        .expect("glommio executor (raise `ulimit -l` if it asks for locked memory)")
        .run(run(args));
}

async fn run(args: Args) {
    let duration = Duration::from_secs(args.seconds);
    println!(
        "append_bench: dir {}, {} s per measurement, one shard",
        args.dir.display(),
        args.seconds
    );
    let (raw_limit, raw_synced) = if args.no_raw {
        (f64::NAN, f64::NAN)
    } else {
        raw_references(&args.dir, duration).await
    };
    println!();
    println!(
        "{:<14} {:>9} {:>12} {:>9} {:>9} {:>9} {:>11} {:>9} {:>13}",
        "workload",
        "MB/s",
        "msgs/s",
        "p50 us",
        "p99 us",
        "p999 us",
        "group KiB",
        "of raw",
        "of raw+sync"
    );
    let selected = WORKLOADS.iter().filter(|w| {
        args.only
            .as_ref()
            .is_none_or(|o| w.name.contains(o.as_str()))
    });
    for workload in selected {
        let producers = args.producers.unwrap_or(workload.producers);
        let result = run_log(&args.dir, workload, producers, duration).await;
        let mbps = result.bytes as f64 / result.elapsed.as_secs_f64();
        println!(
            "{:<14} {:>9.0} {:>12.0} {:>9} {:>9} {:>9} {:>11.0} {:>8.0}% {:>12.0}%",
            workload.name,
            mbps / 1e6,
            result.messages as f64 / result.elapsed.as_secs_f64(),
            result.latency.value_at_quantile(0.50),
            result.latency.value_at_quantile(0.99),
            result.latency.value_at_quantile(0.999),
            result.group_bytes / 1024.0,
            100.0 * mbps / raw_limit,
            100.0 * mbps / raw_synced,
        );
    }
    let _ = std::fs::remove_dir_all(&args.dir);
}

/// Prints the raw-disk references and returns the physical limit (the best
/// sequential O_DIRECT bandwidth over the queue depths tried) and the
/// bandwidth of 1 MiB writes each followed by an fdatasync.
async fn raw_references(dir: &Path, duration: Duration) -> (f64, f64) {
    let mut best: f64 = 0.0;
    for depth in RAW_QUEUE_DEPTHS {
        let bandwidth = raw_bandwidth(dir, duration, depth, false).await;
        println!(
            "raw O_DIRECT sequential write, 1 MiB blocks, queue depth {depth:>2}: {:>6.0} MB/s",
            bandwidth / 1e6
        );
        best = best.max(bandwidth);
    }
    let synced = raw_bandwidth(dir, duration, 1, true).await;
    println!(
        "raw O_DIRECT 1 MiB write + fdatasync, one at a time:      {:>6.0} MB/s",
        synced / 1e6
    );
    println!(
        "physical limit used below (best raw):                     {:>6.0} MB/s",
        best / 1e6
    );
    (best, synced)
}

/// Sequential 1 MiB direct writes to a preallocated file for `duration`,
/// keeping `depth` writes in flight; with `sync_each` (depth 1 only), an
/// fdatasync after every write.
async fn raw_bandwidth(dir: &Path, duration: Duration, depth: usize, sync_each: bool) -> f64 {
    let path = dir.join("raw.bin");
    let _ = std::fs::remove_file(&path);
    let file: DmaFile = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .dma_open(&path)
        .await
        .expect("raw file");
    let span: u64 = 4 << 30;
    file.pre_allocate(span, false).await.expect("preallocate");
    let file = Rc::new(file);
    let next = Rc::new(Cell::new(0u64));
    let start = Instant::now();
    let writers = (0..depth).map(|_| {
        let (file, next) = (file.clone(), next.clone());
        async move {
            while start.elapsed() < duration {
                let position = next.get();
                next.set(position + RAW_BLOCK_BYTES as u64);
                let mut buf = file.alloc_dma_buffer(RAW_BLOCK_BYTES);
                buf.as_bytes_mut().fill((position >> 20) as u8);
                let written = file
                    .write_at(buf, position % span)
                    .await
                    .expect("raw write");
                assert_eq!(written, RAW_BLOCK_BYTES);
                if sync_each {
                    file.fdatasync().await.expect("fdatasync");
                }
            }
        }
    });
    join_all(writers).await;
    file.fdatasync().await.expect("fdatasync");
    let elapsed = start.elapsed();
    std::fs::remove_file(&path).expect("remove raw file");
    next.get() as f64 / elapsed.as_secs_f64()
}

struct LogResult {
    bytes: u64,
    messages: u64,
    elapsed: Duration,
    latency: Histogram<u64>,
    group_bytes: f64,
}

async fn run_log(
    dir: &Path,
    workload: &Workload,
    producers: usize,
    duration: Duration,
) -> LogResult {
    let log_dir = dir.join("log");
    let _ = std::fs::remove_dir_all(&log_dir);
    let config = LogConfig {
        max_pending_bytes: 64 << 20,
        ..LogConfig::default()
    };
    let log = Log::open(DmaFs, &log_dir, config).await.expect("open log");
    let template = batch_template(workload);
    let latency = Rc::new(RefCell::new(
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap(),
    ));
    let bytes = Rc::new(Cell::new(0u64));
    let messages = Rc::new(Cell::new(0u64));
    let stats_before = log.stats();
    let start = Instant::now();
    let producers = (0..producers).map(|_| {
        let (log, template) = (log.clone(), template.clone());
        let (latency, bytes, messages) = (latency.clone(), bytes.clone(), messages.clone());
        let records = workload.records_per_batch as u64;
        glommio::spawn_local(async move {
            while start.elapsed() < duration {
                let sent = Instant::now();
                let info = log
                    .append(template.clone(), LeaderEpoch(0))
                    .await
                    .expect("append");
                log.wait_flushed(info.last_offset.plus(1))
                    .await
                    .expect("flush");
                let micros = sent.elapsed().as_micros() as u64;
                latency
                    .borrow_mut()
                    .record(micros.max(1))
                    .expect("latency in range");
                bytes.set(bytes.get() + template.len() as u64);
                messages.set(messages.get() + records);
            }
        })
    });
    join_all(producers).await;
    let elapsed = start.elapsed();
    let stats = log.stats();
    let flushes = (stats.flushes - stats_before.flushes).max(1);
    let group_bytes = (stats.flushed_bytes - stats_before.flushed_bytes) as f64 / flushes as f64;
    drop(log);
    let _ = std::fs::remove_dir_all(&log_dir);
    let latency = latency.borrow().clone();
    LogResult {
        bytes: bytes.get(),
        messages: messages.get(),
        elapsed,
        latency,
        group_bytes,
    }
}

/// One producer batch of the workload (cloned per append, as a network
/// buffer would arrive).
fn batch_template(workload: &Workload) -> BytesMut {
    let records: Vec<RecordSpec> = (0..workload.records_per_batch)
        .map(|i| RecordSpec {
            timestamp_delta: i as i64,
            key: None,
            value: Some(vec![(i % 251) as u8; workload.record_bytes]),
        })
        .collect();
    build(TimestampMs(1_700_000_000_000), &records)
}
