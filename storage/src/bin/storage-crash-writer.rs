//! Test helper for the kill -9 crash test: opens (recovering) the log in
//! the given directory and appends forever from several tasks, printing
//! `ack <base> <last> <crc32c>` for each batch once `wait_flushed` says it
//! is durable. The test kills it at a random moment and checks every
//! printed batch survived.

use std::io::Write;
use std::rc::Rc;

use storage::batch::{build, RecordSpec};
use storage::io::dma::DmaFs;
use storage::{LeaderEpoch, Log, LogConfig, TimestampMs};

const APPENDERS: usize = 8;

fn main() {
    let dir = std::env::args()
        .nth(1)
        .expect("usage: storage-crash-writer DIR");
    glommio::LocalExecutorBuilder::default()
        .io_memory(2 << 20)
        .make()
        .expect("glommio executor")
        .run(async move {
            let config = LogConfig {
                segment_bytes: 256 * 1024,
                max_batch_bytes: 64 * 1024,
                index_interval_bytes: 4096,
                ..LogConfig::default()
            };
            let log = Log::open(DmaFs, &dir, config).await.expect("open log");
            println!("ready {}", log.log_end());
            let tasks: Vec<_> = (0..APPENDERS)
                .map(|task| glommio::spawn_local(append_forever(log.clone(), task as u64)))
                .collect();
            for t in tasks {
                t.await;
            }
        });
}

async fn append_forever(log: Rc<Log<DmaFs>>, task: u64) {
    for seq in 0u64.. {
        let records: Vec<RecordSpec> = (0..1 + (seq % 5))
            .map(|i| RecordSpec {
                timestamp_delta: i as i64,
                key: Some(format!("t{task}").into_bytes()),
                value: Some(vec![
                    (seq ^ task) as u8;
                    100 + ((seq * 37 + task) % 3000) as usize
                ]),
            })
            .collect();
        let batch = build(TimestampMs(seq as i64), &records);
        let info = log.append(batch, LeaderEpoch(1)).await.expect("append");
        log.wait_flushed(info.last_offset.plus(1))
            .await
            .expect("flush");
        let stored = log
            .read(info.base_offset, 1, info.last_offset.plus(1))
            .await
            .expect("read back")
            .to_bytes();
        let crc = crc32c::crc32c(&stored);
        let mut out = std::io::stdout().lock();
        writeln!(out, "ack {} {} {crc}", info.base_offset, info.last_offset).expect("stdout");
        out.flush().expect("stdout");
    }
}
