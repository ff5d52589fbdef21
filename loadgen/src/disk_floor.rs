//! The disk's own latency under a produce workload's load: the floor
//! under what an acks=all producer can see from a broker on this disk.
//!
//! A short probe of one small write + fdatasync at a time (the
//! disk-baseline's latency line) misses what a longer load meets: on
//! virtual disks, writes that stall for hundreds of milliseconds a few
//! times a minute. This measure runs the workload's shape without a
//! broker: `writers` files (one per partition, as the broker's shards
//! have), each fed messages at a fixed rate and made durable as a broker
//! does, by group commit: whatever arrived since the last flush is written
//! with O_DIRECT (in whole 4 KiB blocks) and fdatasync'd, then the next
//! flush takes what arrived meanwhile. Each message's latency runs from
//! its arrival to the end of the fdatasync that covered it, so a stall
//! delays every message that arrives during it, as it would a broker's.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use glommio::io::DmaFile;
use hdrhistogram::Histogram;

use crate::report::{latency_histogram, record};

/// The block writes are padded to (O_DIRECT alignment).
const BLOCK: u64 = 4096;

/// Files grow in steps of this, as the broker's segments do.
const PREALLOCATE_BYTES: u64 = 32 << 20;

/// A file is started over past this size (the disk's space stays bounded).
const FILE_BYTES: u64 = 1 << 30;

/// The load to apply.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Messages per second over all writers.
    pub messages_per_s: f64,
    /// Bytes per message.
    pub message_bytes: usize,
    /// Files written at once, each with its own thread.
    pub writers: usize,
    /// How long.
    pub duration: Duration,
}

/// What one run measured, in microseconds.
pub struct Floor {
    /// Per message: arrival to the end of the fdatasync that covered it.
    pub message_latency: Histogram<u64>,
    /// Per flush: its write and fdatasync.
    pub flush_latency: Histogram<u64>,
    /// Flushes over all writers.
    pub flushes: u64,
}

/// Runs `load` against scratch files under `dir` (removed after).
pub fn measure(dir: &Path, load: Load) -> std::io::Result<Floor> {
    let writers = load.writers.max(1);
    let rate = load.messages_per_s / writers as f64;
    let handles: Vec<_> = (0..writers)
        .map(|i| {
            let path = dir.join(format!("loadgen-disk-floor-{}-{i}.bin", std::process::id()));
            std::thread::spawn(move || {
                let result = write_at_rate(&path, rate, load.message_bytes, load.duration);
                let _ = std::fs::remove_file(&path);
                result
            })
        })
        .collect();
    let mut floor = Floor {
        message_latency: latency_histogram(),
        flush_latency: latency_histogram(),
        flushes: 0,
    };
    for handle in handles {
        let one = handle
            .join()
            .map_err(|_| std::io::Error::other("a disk writer panicked"))??;
        floor
            .message_latency
            .add(&one.message_latency)
            .map_err(other)?;
        floor.flush_latency.add(&one.flush_latency).map_err(other)?;
        floor.flushes += one.flushes;
    }
    Ok(floor)
}

fn other(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// One writer: group commit of `rate` messages per second for `duration`.
fn write_at_rate(
    path: &PathBuf,
    rate: f64,
    message_bytes: usize,
    duration: Duration,
) -> std::io::Result<Floor> {
    glommio::LocalExecutorBuilder::default()
        .io_memory(4 << 20)
        .make()
        .map_err(other)?
        .run(async move {
            let file = DmaFile::create(path).await.map_err(other)?;
            let mut floor = Floor {
                message_latency: latency_histogram(),
                flush_latency: latency_histogram(),
                flushes: 0,
            };
            let (mut position, mut allocated) = (0u64, 0u64);
            let mut taken = 0u64;
            let started = Instant::now();
            while started.elapsed() < duration {
                let arrived = (started.elapsed().as_secs_f64() * rate) as u64;
                if arrived == taken {
                    let next = Duration::from_secs_f64((taken + 1) as f64 / rate);
                    glommio::timer::sleep(next.saturating_sub(started.elapsed())).await;
                    continue;
                }
                let bytes = ((arrived - taken) * message_bytes as u64).div_ceil(BLOCK) * BLOCK;
                if position + bytes > FILE_BYTES {
                    position = 0;
                }
                if position + bytes > allocated {
                    allocated = (position + bytes + PREALLOCATE_BYTES).min(FILE_BYTES);
                    file.pre_allocate(allocated, false).await.map_err(other)?;
                }
                let flush_started = Instant::now();
                let mut buffer = file.alloc_dma_buffer(bytes as usize);
                buffer.as_bytes_mut().fill(7);
                file.write_at(buffer, position).await.map_err(other)?;
                file.fdatasync().await.map_err(other)?;
                let now = Instant::now();
                let done = now - started;
                record(
                    &mut floor.flush_latency,
                    (now - flush_started).as_micros() as u64,
                );
                floor.flushes += 1;
                position += bytes;
                for message in taken..arrived {
                    let arrival = Duration::from_secs_f64(message as f64 / rate);
                    record(
                        &mut floor.message_latency,
                        (done - arrival).as_micros() as u64,
                    );
                }
                taken = arrived;
            }
            file.close().await.map_err(other)?;
            Ok(floor)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_is_counted_and_waits_at_least_its_flush() {
        let dir = std::env::temp_dir().join(format!("disk-floor-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let load = Load {
            messages_per_s: 20_000.0,
            message_bytes: 100,
            writers: 2,
            duration: Duration::from_millis(500),
        };
        let floor = measure(&dir, load).unwrap();
        let left = std::fs::read_dir(&dir).unwrap().count();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(left, 0, "the scratch files are removed");
        let (messages, flushes) = (&floor.message_latency, &floor.flush_latency);
        // Each writer records every message that arrived before its last
        // flush began: of the 10,000, all but what arrived during that
        // flush (at most the longest flush's, plus a timer's slack).
        let missed = 20_000 * (flushes.max() + 2_000) / 1_000_000;
        assert!(
            (10_000u64.saturating_sub(missed)..=10_000).contains(&messages.len()),
            "{} messages, longest flush {} us",
            messages.len(),
            flushes.max()
        );
        assert_eq!(flushes.len(), floor.flushes);
        assert!(
            floor.flushes >= 2,
            "group commit flushed {} times",
            floor.flushes
        );
        // A message waits for the whole flush that covers it, and more.
        assert!(messages.min() >= flushes.min());
        assert!(messages.max() >= flushes.max());
    }
}
