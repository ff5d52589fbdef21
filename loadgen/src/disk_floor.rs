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

/// Files reserve ahead as much as they hold, from this...
const PREALLOCATE_MIN_BYTES: u64 = 1 << 20;
/// ...up to this, as the broker's segments do: 10,000 files reserving
/// the most at once would ask for 320 GiB.
const PREALLOCATE_MOST_BYTES: u64 = 32 << 20;

/// The most threads the writers share: the broker has a shard per core,
/// and a thread per file stops starting long before 10,000 files.
fn threads_for(writers: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    writers.clamp(1, cores)
}

/// A file is started over past this size (the disk's space stays bounded).
const FILE_BYTES: u64 = 1 << 30;

/// The load to apply.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Messages per second over all writers.
    pub messages_per_s: f64,
    /// Bytes per message.
    pub message_bytes: usize,
    /// Files written at once, each by a future of its own, on at most a
    /// thread per core.
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
    let threads = threads_for(writers);
    let handles: Vec<_> = (0..threads)
        .map(|thread| {
            let paths: Vec<PathBuf> = (thread..writers)
                .step_by(threads)
                .map(|i| dir.join(format!("loadgen-disk-floor-{}-{i}.bin", std::process::id())))
                .collect();
            std::thread::spawn(move || write_all(paths, writers, load))
        })
        .collect();
    let mut floor = Floor::empty();
    for handle in handles {
        let one = handle
            .join()
            .map_err(|_| std::io::Error::other("a disk writer panicked"))??;
        floor.add(&one)?;
    }
    Ok(floor)
}

impl Floor {
    fn empty() -> Floor {
        Floor {
            message_latency: latency_histogram(),
            flush_latency: latency_histogram(),
            flushes: 0,
        }
    }

    fn add(&mut self, other_floor: &Floor) -> std::io::Result<()> {
        self.message_latency
            .add(&other_floor.message_latency)
            .map_err(other)?;
        self.flush_latency
            .add(&other_floor.flush_latency)
            .map_err(other)?;
        self.flushes += other_floor.flushes;
        Ok(())
    }
}

/// One thread's writers, each a future of its own, run together on the
/// thread's executor. Their files are removed once all of them are done
/// (written or failed; not if one panics): a removal is a blocking call
/// that would delay the writers still measuring on the thread.
fn write_all(paths: Vec<PathBuf>, writers: usize, load: Load) -> std::io::Result<Floor> {
    let rate = load.messages_per_s / writers as f64;
    glommio::LocalExecutorBuilder::default()
        .io_memory(4 << 20)
        .make()
        .map_err(other)?
        .run(async move {
            let writers = paths
                .iter()
                .map(|path| write_at_rate(path, rate, load.message_bytes, load.duration));
            let results = futures::future::join_all(writers).await;
            for path in &paths {
                let _ = std::fs::remove_file(path);
            }
            let mut floor = Floor::empty();
            for one in results {
                floor.add(&one?)?;
            }
            Ok(floor)
        })
}

fn other(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// One writer: group commit of `rate` messages per second for `duration`.
/// Message `k` arrives at `k / rate`; every message that arrives within
/// `duration` is flushed and counted, the last ones after it if need be.
async fn write_at_rate(
    path: &Path,
    rate: f64,
    message_bytes: usize,
    duration: Duration,
) -> std::io::Result<Floor> {
    let messages = (duration.as_secs_f64() * rate).ceil() as u64;
    let mut file = ScratchFile::create(path).await?;
    let mut floor = Floor::empty();
    let (mut taken, started) = (0u64, Instant::now());
    while taken < messages {
        let now = started.elapsed().as_secs_f64();
        let arrived = ((now * rate) as u64 + 1).min(messages);
        if arrived == taken {
            let next = Duration::from_secs_f64(taken as f64 / rate);
            glommio::timer::sleep(next.saturating_sub(started.elapsed())).await;
            continue;
        }
        let bytes = (arrived - taken) * message_bytes as u64;
        let (flush, done) = file.flush(bytes, started).await?;
        record(&mut floor.flush_latency, flush.as_micros() as u64);
        floor.flushes += 1;
        for message in taken..arrived {
            let arrival = Duration::from_secs_f64(message as f64 / rate);
            record(
                &mut floor.message_latency,
                (done - arrival).as_micros() as u64,
            );
        }
        taken = arrived;
    }
    file.file.close().await.map_err(other)?;
    Ok(floor)
}

/// A file appended to as the broker appends to a segment.
struct ScratchFile {
    file: DmaFile,
    position: u64,
    allocated: u64,
}

impl ScratchFile {
    async fn create(path: &Path) -> std::io::Result<ScratchFile> {
        let file = DmaFile::create(path).await.map_err(other)?;
        Ok(ScratchFile {
            file,
            position: 0,
            allocated: 0,
        })
    }

    /// Writes `bytes` (padded to whole blocks) and fdatasyncs them: the
    /// write and fdatasync's time, and when they ended since `started`.
    async fn flush(
        &mut self,
        bytes: u64,
        started: Instant,
    ) -> std::io::Result<(Duration, Duration)> {
        let bytes = bytes.div_ceil(BLOCK) * BLOCK;
        if self.position + bytes > FILE_BYTES {
            self.position = 0;
        }
        if self.position + bytes > self.allocated {
            let end = self.position + bytes;
            let step = end.clamp(PREALLOCATE_MIN_BYTES, PREALLOCATE_MOST_BYTES);
            self.allocated = (end + step).min(FILE_BYTES);
            self.file
                .pre_allocate(self.allocated, false)
                .await
                .map_err(other)?;
        }
        let flush_started = Instant::now();
        let mut buffer = self.file.alloc_dma_buffer(bytes as usize);
        buffer.as_bytes_mut().fill(7);
        self.file
            .write_at(buffer, self.position)
            .await
            .map_err(other)?;
        self.file.fdatasync().await.map_err(other)?;
        self.position += bytes;
        let now = Instant::now();
        Ok((now - flush_started, now - started))
    }
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
        // 10,000 messages arrived within the half second (5,000 per
        // writer): each is counted once, however long a flush stalled.
        assert_eq!(messages.len(), 10_000);
        assert_eq!(flushes.len(), floor.flushes);
        // A message waits for the whole flush that covers it.
        assert!(messages.min() >= flushes.min());
        assert!(messages.max() >= flushes.max());
    }

    #[test]
    fn many_writers_share_a_thread_per_core_and_each_counts_its_messages() {
        assert_eq!(threads_for(1), 1);
        let cores = std::thread::available_parallelism().unwrap().get();
        assert_eq!(threads_for(10_000), cores, "a thread per core, no more");
        let dir = std::env::temp_dir().join(format!("disk-floor-many-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let load = Load {
            messages_per_s: 20_000.0,
            message_bytes: 100,
            writers: 201,
            duration: Duration::from_millis(500),
        };
        let floor = measure(&dir, load).unwrap();
        let left = std::fs::read_dir(&dir).unwrap().count();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(left, 0, "every writer's scratch file is removed");
        // Each of the 201 writers gets 20,000 / 201 messages a second:
        // ceil(0.5 s of them) = 50 each, all counted however the writers
        // were spread over the threads.
        assert_eq!(floor.message_latency.len(), 201 * 50);
        assert!(floor.flushes >= 201, "every writer flushed");
    }
}
