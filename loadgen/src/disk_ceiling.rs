//! The most one partition's durable appends can write on a disk: the
//! ceiling under a one-producer, one-partition acks=all run.
//!
//! A broker makes one partition's appends durable flush by flush: each
//! flush writes what arrived (in direct writes of at most 1 MiB, issued
//! together) and fdatasyncs the segment, and the segment grows into
//! space reserved ahead by fallocate. So one partition's rate is bounded
//! by how fast this disk completes such write-then-sync cycles, which
//! depends on the bytes per cycle (a sync costs about the same whatever
//! it covers) and, on some disks, on whether the blocks were written
//! before: a first write into reserved (unwritten) space also converts it
//! to written, and a thinly provisioned virtual disk allocates behind it.
//! This measures both, with no broker and no network: cycles into new
//! files reserved as the broker reserves a segment's space ("new blocks",
//! what a fresh broker's segments meet), and cycles over a file written
//! once before ("written blocks", what reusing old segments' space would
//! meet). "New" is new to the file system: it may hand out blocks freed
//! by files removed earlier, which a thinly provisioned disk has
//! allocated already unless the removal discarded them (a `discard`
//! mount does).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use glommio::io::{DmaBuffer, DmaFile};

/// Direct writes are at most this long, as the broker's.
const WRITE_CHUNK: u64 = 1 << 20;

/// New files grow in steps of this, the broker's largest step (its
/// segments start with 1 MiB steps and double up to it).
const PREALLOCATE_BYTES: u64 = 32 << 20;

/// Where the cycles go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocks {
    /// New files reserved ahead by fallocate, one after another (the one
    /// before the last removed, so the space used stays bounded).
    New,
    /// One file written once before the measure, overwritten in turns.
    Written,
}

/// One measure's shape.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Bytes each cycle writes before its fdatasync (whole 4 KiB blocks).
    pub flush_bytes: u64,
    /// A file's size: a new one is started (or the written one wraps) here.
    pub file_bytes: u64,
    /// Where the cycles go.
    pub blocks: Blocks,
    /// How long.
    pub duration: Duration,
    /// Stop after this many cycles, if sooner.
    pub most_flushes: u64,
}

/// What one measure saw.
#[derive(Debug, Clone, Copy)]
pub struct Ceiling {
    /// Bytes made durable per second.
    pub bytes_per_s: f64,
    /// Cycles (write then fdatasync) run.
    pub flushes: u64,
    /// Mean time of a cycle's writes and of its fdatasync.
    pub mean_write: Duration,
    pub mean_sync: Duration,
    /// Files the cycles went into (more than one once a file filled).
    pub files: u64,
}

/// Runs write-then-fdatasync cycles of `shape` under `dir` for its
/// duration; its files are removed after.
pub fn measure(dir: &Path, shape: Shape) -> std::io::Result<Ceiling> {
    let dir = dir.to_path_buf();
    // Room for a flush's buffers (and the written file's 16 MiB steps).
    let io_memory = (shape.flush_bytes.max(16 * WRITE_CHUNK) as usize).next_power_of_two() * 2;
    glommio::LocalExecutorBuilder::default()
        .io_memory(io_memory)
        .make()
        .map_err(other)?
        .run(async move {
            let mut files = Files::new(dir, shape);
            let measured = cycles(&mut files, shape).await;
            let removed = files.remove_all().await;
            let ceiling = measured?;
            removed?;
            Ok(ceiling)
        })
}

fn other(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

async fn cycles(files: &mut Files, shape: Shape) -> std::io::Result<Ceiling> {
    let flush_bytes = shape.flush_bytes.div_ceil(4096).max(1) * 4096;
    files.prepare().await?;
    let (mut writing, mut syncing) = (Duration::ZERO, Duration::ZERO);
    let (mut flushes, started) = (0u64, Instant::now());
    while started.elapsed() < shape.duration && flushes < shape.most_flushes {
        let (file, position) = files.place(flush_bytes).await?;
        // Filled before the clock starts, as a broker's buffers are.
        let chunks = chunks(file, position, flush_bytes);
        let write_started = Instant::now();
        write_all(file, chunks).await?;
        let sync_started = Instant::now();
        file.fdatasync().await.map_err(other)?;
        writing += sync_started - write_started;
        syncing += sync_started.elapsed();
        flushes += 1;
    }
    let seconds = started.elapsed().as_secs_f64();
    let per_flush = |total: Duration| total / flushes.max(1) as u32;
    Ok(Ceiling {
        bytes_per_s: (flushes * flush_bytes) as f64 / seconds,
        flushes,
        mean_write: per_flush(writing),
        mean_sync: per_flush(syncing),
        files: files.made,
    })
}

/// `bytes` to write at `position`, in filled chunks of at most
/// [`WRITE_CHUNK`], each with its position.
fn chunks(file: &DmaFile, position: u64, bytes: u64) -> Vec<(DmaBuffer, u64)> {
    (0..bytes.div_ceil(WRITE_CHUNK))
        .map(|i| {
            let offset = i * WRITE_CHUNK;
            let mut buffer = file.alloc_dma_buffer(WRITE_CHUNK.min(bytes - offset) as usize);
            buffer.as_bytes_mut().fill(7);
            (buffer, position + offset)
        })
        .collect()
}

/// Writes `chunks`, all in flight at once.
async fn write_all(file: &DmaFile, chunks: Vec<(DmaBuffer, u64)>) -> std::io::Result<()> {
    let writes = chunks.into_iter().map(|(buffer, position)| {
        let len = buffer.len();
        async move {
            let written = file.write_at(buffer, position).await.map_err(other)?;
            if written != len {
                let short = format!("short direct write: {written} of {len} bytes at {position}");
                return Err(std::io::Error::new(std::io::ErrorKind::WriteZero, short));
            }
            Ok(())
        }
    });
    for written in futures::future::join_all(writes).await {
        written?;
    }
    Ok(())
}

/// The files the cycles go into, and where the next cycle writes.
struct Files {
    dir: PathBuf,
    shape: Shape,
    /// The file written now, and the one before it (kept until the next
    /// one is made, as a broker keeps its older segments).
    current: Option<DmaFile>,
    previous: Option<DmaFile>,
    position: u64,
    allocated: u64,
    made: u64,
    /// Removals of full files, off the measured thread (a removal takes a
    /// while, and a broker does not remove segments as it appends).
    removals: Vec<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl Files {
    fn new(dir: PathBuf, shape: Shape) -> Files {
        Files {
            dir,
            shape,
            current: None,
            previous: None,
            position: 0,
            allocated: 0,
            made: 0,
            removals: Vec::new(),
        }
    }

    fn path(&self, n: u64) -> PathBuf {
        self.dir.join(format!(
            "loadgen-disk-ceiling-{}-{n}.bin",
            std::process::id()
        ))
    }

    /// For written blocks: the one file, written whole and synced before
    /// the measure starts.
    async fn prepare(&mut self) -> std::io::Result<()> {
        if self.shape.blocks == Blocks::New {
            return Ok(());
        }
        let file = self.make().await?;
        let mut position = 0;
        while position < self.shape.file_bytes {
            let bytes = (16 * WRITE_CHUNK).min(self.shape.file_bytes - position);
            write_all(&file, chunks(&file, position, bytes)).await?;
            position += bytes;
        }
        file.fdatasync().await.map_err(other)?;
        self.allocated = self.shape.file_bytes;
        self.current = Some(file);
        Ok(())
    }

    /// The file and position the next `bytes` go to: a new file (or, for
    /// written blocks, the start of the one) when they do not fit.
    async fn place(&mut self, bytes: u64) -> std::io::Result<(&DmaFile, u64)> {
        let fits = self.position + bytes <= self.shape.file_bytes.max(bytes);
        if self.current.is_none() || !fits {
            self.position = 0;
            if self.shape.blocks == Blocks::New {
                self.start_new_file().await?;
            }
        }
        if self.position + bytes > self.allocated {
            let step = PREALLOCATE_BYTES.min(self.shape.file_bytes);
            self.allocated = (self.position + bytes + step).min(self.shape.file_bytes.max(bytes));
            let file = self.current.as_ref().expect("a file is open");
            file.pre_allocate(self.allocated, false)
                .await
                .map_err(other)?;
        }
        let position = self.position;
        self.position += bytes;
        Ok((self.current.as_ref().expect("a file is open"), position))
    }

    async fn start_new_file(&mut self) -> std::io::Result<()> {
        if let Some(old) = self.previous.take() {
            old.close().await.map_err(other)?;
            let path = self.path(self.made - 2);
            self.removals
                .push(std::thread::spawn(move || std::fs::remove_file(path)));
        }
        self.previous = self.current.take();
        self.current = Some(self.make().await?);
        self.allocated = 0;
        Ok(())
    }

    async fn make(&mut self) -> std::io::Result<DmaFile> {
        let file = DmaFile::create(self.path(self.made)).await.map_err(other)?;
        self.made += 1;
        Ok(file)
    }

    /// Closes and removes every file made (each tried, whatever failed
    /// before it); the first failure.
    async fn remove_all(&mut self) -> std::io::Result<()> {
        let mut first_failure = None;
        for file in [self.previous.take(), self.current.take()]
            .into_iter()
            .flatten()
        {
            if let Err(e) = file.close().await {
                first_failure.get_or_insert(other(e));
            }
        }
        let removed_here: Vec<_> = (self.made.saturating_sub(2)..self.made)
            .map(|n| match std::fs::remove_file(self.path(n)) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                result => result,
            })
            .collect();
        let removed_before = self.removals.drain(..).map(|removal| {
            removal
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("a removal panicked")))
        });
        for result in removed_here.into_iter().chain(removed_before) {
            if let Err(e) = result {
                first_failure.get_or_insert(e);
            }
        }
        first_failure.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn shape(blocks: Blocks) -> Shape {
        Shape {
            // Two chunks per flush, the second short: both write paths.
            flush_bytes: WRITE_CHUNK + 8192,
            // Three flushes per file: the runs cross the file's end.
            file_bytes: 3 * (WRITE_CHUNK + 8192) + 4096,
            blocks,
            // Ten cycles, however slow the disk: past three files.
            duration: Duration::from_secs(60),
            most_flushes: 10,
        }
    }

    #[test]
    fn new_blocks_go_into_new_files_and_none_is_left() {
        let dir = scratch_dir("disk-ceiling-new");
        let ceiling = measure(&dir, shape(Blocks::New)).unwrap();
        let left = std::fs::read_dir(&dir).unwrap().count();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(left, 0, "every file made is removed");
        assert_eq!(ceiling.flushes, 10);
        // Three flushes fit a file, so each file but the last took three.
        assert_eq!(ceiling.files, 4);
        assert!(ceiling.bytes_per_s > 0.0);
        assert!(ceiling.mean_sync > Duration::ZERO);
    }

    #[test]
    fn written_blocks_wrap_in_one_file_and_none_is_left() {
        let dir = scratch_dir("disk-ceiling-written");
        let ceiling = measure(&dir, shape(Blocks::Written)).unwrap();
        let left = std::fs::read_dir(&dir).unwrap().count();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(left, 0, "the file is removed");
        assert_eq!(ceiling.flushes, 10);
        assert_eq!(ceiling.files, 1);
    }

    #[test]
    fn a_flush_is_written_in_chunks_of_at_most_a_mebibyte() {
        let dir = scratch_dir("disk-ceiling-chunks");
        let path = dir.join("f");
        let (layout, size) = glommio::LocalExecutorBuilder::default()
            .make()
            .unwrap()
            .run(async move {
                let file = DmaFile::create(&path).await.unwrap();
                let chunks = chunks(&file, 4096, 2 * WRITE_CHUNK + 4096);
                let layout: Vec<(usize, u64)> =
                    chunks.iter().map(|(b, at)| (b.len(), *at)).collect();
                write_all(&file, chunks).await.unwrap();
                let size = file.file_size().await.unwrap();
                file.close().await.unwrap();
                (layout, size)
            });
        let _ = std::fs::remove_dir_all(&dir);
        let mib = WRITE_CHUNK as usize;
        assert_eq!(
            layout,
            [
                (mib, 4096),
                (mib, 4096 + WRITE_CHUNK),
                (4096, 4096 + 2 * WRITE_CHUNK)
            ]
        );
        assert_eq!(size, 4096 + 2 * WRITE_CHUNK + 4096);
    }
}
