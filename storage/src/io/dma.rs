//! The production adapter: glommio DMA files (O_DIRECT through io_uring).

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::os::unix::io::{AsRawFd, BorrowedFd};
use std::path::Path;
use std::rc::Rc;

use bytes::Bytes;
use glommio::io::{DmaBuffer, DmaFile, OpenOptions};

use super::home_bound::{self, HomeBound};
use super::sync_rounds::{SyncCounts, SyncOps, SyncRounds};
use super::{AlignedBuf, DirectFile, FileSystem};

/// Plain fdatasyncs a shard keeps in flight on one file system before
/// further syncs wait for a round (one syncfs and one fdatasync: see
/// [`super::sync_rounds`]). A partition's own flushes keep at most two in
/// flight, so a few partitions never reach it.
const PLAIN_FDATASYNCS_MOST: usize = 16;

/// Reads this long or longer are handed out in glommio's buffer (see
/// [`home_bound`]); shorter ones are copied out of it, so as not to keep
/// a whole aligned buffer for a few bytes.
const SHARED_READ_MIN: usize = 64 << 10;

/// Files under a real directory, opened with O_DIRECT. Must be used on a
/// glommio executor.
#[derive(Clone, Copy, Debug, Default)]
pub struct DmaFs;

/// A glommio DMA file.
#[derive(Debug)]
pub struct DmaSegmentFile {
    file: DmaFile,
    /// This shard's syncs on the file's file system.
    syncs: Rc<SyncRounds>,
}

thread_local! {
    /// Each file system's (by device) syncs on this shard.
    static SYNC_ROUNDS: RefCell<HashMap<u64, Rc<SyncRounds>>> = RefCell::default();
}

/// The syncs of this shard's files on `file`'s file system (by the device
/// glommio read when it opened the file: no stat here, which could find
/// the file already removed or renamed).
fn sync_rounds_for(file: &DmaFile) -> Rc<SyncRounds> {
    let device = (u64::from(file.dev_major()) << 32) | u64::from(file.dev_minor());
    SYNC_ROUNDS.with(|all| {
        let mut all = all.borrow_mut();
        let rounds = all.entry(device);
        rounds
            .or_insert_with(|| Rc::new(SyncRounds::new(PLAIN_FDATASYNCS_MOST)))
            .clone()
    })
}

/// What this shard's syncs did so far, over all its file systems.
pub fn shard_sync_counts() -> SyncCounts {
    SYNC_ROUNDS.with(|all| {
        let mut total = SyncCounts::default();
        for rounds in all.borrow().values() {
            let counts = rounds.counts();
            total.plain += counts.plain;
            total.rounds += counts.rounds;
            total.in_rounds += counts.in_rounds;
        }
        total
    })
}

/// Syncs of glommio's DMA files.
struct DmaSyncs;

impl SyncOps for DmaSyncs {
    type File = DmaFile;

    async fn fdatasync(&self, file: &DmaFile) -> io::Result<()> {
        file.fdatasync().await.map_err(to_io)
    }

    async fn sync_file_system(&self, file: &DmaFile) -> io::Result<()> {
        // syncfs has no io_uring operation: it runs on the executor's
        // blocking thread, on a descriptor of its own (the file may be
        // closed meanwhile if this sync is cancelled), closed when the
        // closure is dropped, run or not.
        // SAFETY: the file's descriptor is open while `file` is borrowed.
        let borrowed = unsafe { BorrowedFd::borrow_raw(file.as_raw_fd()) };
        let own = borrowed.try_clone_to_owned()?;
        let synced = glommio::executor().spawn_blocking(move || {
            // SAFETY: syncfs reads nothing but the descriptor, open until
            // `own` is dropped after it.
            let result = unsafe { libc::syncfs(own.as_raw_fd()) };
            (result == 0)
                .then_some(())
                .ok_or_else(io::Error::last_os_error)
        });
        synced.await?;
        file.fdatasync().await.map_err(to_io)
    }
}

impl AlignedBuf for DmaBuffer {
    fn bytes(&self) -> &[u8] {
        self.as_bytes()
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.as_bytes_mut()
    }
    fn truncate_to(&mut self, len: usize) {
        self.trim_to_size(len);
    }
}

fn to_io(err: glommio::GlommioError<()>) -> io::Error {
    // glommio's conversion keeps the OS error (ENOSPC, EIO) where there is one.
    io::Error::from(err)
}

impl DirectFile for DmaSegmentFile {
    type Buf = DmaBuffer;

    async fn write_at(&self, buf: DmaBuffer, pos: u64) -> io::Result<()> {
        let len = buf.len();
        let written = self.file.write_at(buf, pos).await.map_err(to_io)?;
        if written != len {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short direct write: {written} of {len} bytes at {pos}"),
            ));
        }
        Ok(())
    }

    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        home_bound::free_returned();
        let result = self.file.read_at(pos, len).await.map_err(to_io)?;
        if result.len() < SHARED_READ_MIN {
            return Ok(Bytes::copy_from_slice(&result));
        }
        // SAFETY: a ReadResult's bytes are its buffer's, which does not
        // move with it and is not written once the read completed (these
        // files have no deduplicating read scheduler); moving it does not
        // touch its reference counts.
        Ok(Bytes::from_owner(unsafe { HomeBound::new(result) }))
    }

    async fn fdatasync(&self) -> io::Result<()> {
        self.syncs.sync(&DmaSyncs, &self.file).await
    }

    async fn sync_file_system(&self) -> io::Result<()> {
        DmaSyncs.sync_file_system(&self.file).await
    }

    async fn pre_allocate(&self, len: u64) -> io::Result<()> {
        // keep_size = false: see the trait's note.
        self.file.pre_allocate(len, false).await.map_err(to_io)
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        self.file.truncate(len).await.map_err(to_io)
    }

    async fn size(&self) -> io::Result<u64> {
        self.file.file_size().await.map_err(to_io)
    }
}

thread_local! {
    /// Devices whose polled-I/O probe this thread has primed.
    static PRIMED_DEVICES: std::cell::RefCell<std::collections::HashSet<u64>> = Default::default();
}

/// Name of the one-block file used to prime glommio's polled-I/O probe.
const PROBE_FILE: &str = ".io-probe";

impl DmaFs {
    /// glommio decides once per device whether it supports polled I/O, by
    /// reading the first block of the first DMA file opened there. On an
    /// empty file that read returns 0 bytes, which glommio takes as support;
    /// on a device without it, every later read then fails with EOPNOTSUPP.
    /// Opening a file that has a block of data first makes the probe real.
    async fn prime_probe(dir: &Path) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let device = std::fs::metadata(dir)?.dev();
        if PRIMED_DEVICES.with(|p| p.borrow().contains(&device)) {
            return Ok(());
        }
        let path = dir.join(PROBE_FILE);
        std::fs::write(&path, vec![0u8; 4096])?;
        let file = dma_open(OpenOptions::new().read(true), &path).await?;
        file.close().await.map_err(to_io)?;
        std::fs::remove_file(&path)?;
        PRIMED_DEVICES.with(|p| p.borrow_mut().insert(device));
        Ok(())
    }
}

/// Opens `path` as a DMA file; a panic of the runtime's open (its
/// directory went away meanwhile: see [`super::caught_open`]) is an error.
async fn dma_open(options: &OpenOptions, path: &Path) -> io::Result<DmaFile> {
    match super::caught_open::catch_panic(options.dma_open(path)).await {
        Ok(opened) => opened.map_err(to_io),
        Err(panic) => {
            tracing::warn!(path = %path.display(), panic, "the I/O runtime's open panicked: the file's directory was likely removed meanwhile");
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("opening {}: {panic}", path.display()),
            ))
        }
    }
}

impl FileSystem for DmaFs {
    type File = DmaSegmentFile;

    async fn prepare(&self, dir: &Path) -> io::Result<()> {
        Self::prime_probe(dir).await
    }

    fn alloc(&self, len: usize) -> DmaBuffer {
        // From the executor's registered pool when it has room, else the
        // heap. Not zeroed: writers fill or zero every byte they write.
        glommio::allocate_dma_buffer(len)
    }

    async fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    async fn open(&self, path: &Path) -> io::Result<DmaSegmentFile> {
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true);
        let file = dma_open(&options, path).await?;
        let syncs = sync_rounds_for(&file);
        Ok(DmaSegmentFile { file, syncs })
    }

    async fn open_existing(&self, path: &Path) -> io::Result<DmaSegmentFile> {
        let file = dma_open(OpenOptions::new().read(true), path).await?;
        let syncs = sync_rounds_for(&file);
        Ok(DmaSegmentFile { file, syncs })
    }

    async fn remove(&self, path: &Path) -> io::Result<()> {
        glommio::io::remove(path).await.map_err(to_io)
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        glommio::io::rename(from, to).await.map_err(to_io)
    }

    async fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let dir = glommio::io::Directory::open(dir).await.map_err(to_io)?;
        dir.sync().await.map_err(to_io)?;
        dir.close().await.map_err(to_io)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }
}
