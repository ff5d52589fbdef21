//! The production adapter: glommio DMA files (O_DIRECT through io_uring).

use std::io;
use std::path::Path;

use bytes::Bytes;
use glommio::io::{DmaBuffer, DmaFile, OpenOptions};

use super::home_bound::{self, HomeBound};
use super::{AlignedBuf, DirectFile, FileSystem};

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
        self.file.fdatasync().await.map_err(to_io)
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
        let file = OpenOptions::new()
            .read(true)
            .dma_open(&path)
            .await
            .map_err(to_io)?;
        file.close().await.map_err(to_io)?;
        std::fs::remove_file(&path)?;
        PRIMED_DEVICES.with(|p| p.borrow_mut().insert(device));
        Ok(())
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
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .dma_open(path)
            .await
            .map_err(to_io)?;
        Ok(DmaSegmentFile { file })
    }

    async fn open_existing(&self, path: &Path) -> io::Result<DmaSegmentFile> {
        let file = OpenOptions::new()
            .read(true)
            .dma_open(path)
            .await
            .map_err(to_io)?;
        Ok(DmaSegmentFile { file })
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
