//! An in-memory file system for tests: it enforces the direct-I/O alignment
//! rules, can fail writes and syncs on demand, and can simulate a crash,
//! which keeps only what was fdatasync'd.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::Bytes;

use super::{AlignedBuf, DirectFile, FileSystem, BLOCK_BYTES};

#[derive(Default, Debug)]
struct Contents {
    /// What a reader sees now.
    live: Vec<u8>,
    /// What survives a crash: the live bytes as of the last fdatasync.
    durable: Vec<u8>,
    /// Byte ranges of the writes in flight.
    writing: Vec<(u64, u64)>,
    /// The next fdatasync of this file fails (its writes are kept live).
    fail_next_sync: bool,
    /// The next write to this file fails, after writing its bytes (as a
    /// failed write may have).
    fail_next_write: bool,
}

#[derive(Default, Debug)]
struct State {
    files: BTreeMap<PathBuf, Rc<RefCell<Contents>>>,
    fail_io: bool,
    /// fdatasyncs alone fail (writes succeed).
    fail_syncs: bool,
    /// The next read is held in flight (after taking its bytes) until
    /// released: see [`MemFs::hold_next_read`].
    read_hold: Hold,
    /// The next fdatasync is held in flight (before it makes anything
    /// durable) until released: see [`MemFs::hold_next_sync`].
    sync_hold: Hold,
    writes: u64,
    syncs: u64,
    reads: u64,
}

/// One kind of operation a test holds in flight, as a slow device would.
#[derive(Default, Debug)]
struct Hold {
    /// The next one is held.
    next: bool,
    /// One is held now.
    held: bool,
    /// The held one may answer.
    released: bool,
}

/// An in-memory file system shared by clones.
#[derive(Clone, Default, Debug)]
pub struct MemFs {
    state: Rc<RefCell<State>>,
}

/// A file of a [`MemFs`].
#[derive(Debug)]
pub struct MemFile {
    contents: Rc<RefCell<Contents>>,
    fs: MemFs,
    /// False when opened with `open_existing`, which opens for reading
    /// only (as the DMA adapter does): writes then fail as they would.
    writable: bool,
}

impl AlignedBuf for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
    fn truncate_to(&mut self, len: usize) {
        self.truncate(len);
    }
}

impl MemFs {
    /// A new, empty file system.
    pub fn new() -> MemFs {
        MemFs::default()
    }

    /// Makes every later write and fdatasync fail with EIO (or succeed again).
    pub fn set_fail_io(&self, fail: bool) {
        self.state.borrow_mut().fail_io = fail;
    }

    /// Makes the next write to the file at `path` fail with EIO, though
    /// its bytes are written (live, not durable), as a failed write's may be.
    pub fn fail_next_write_of(&self, path: &Path) {
        if let Some(contents) = self.state.borrow().files.get(path) {
            contents.borrow_mut().fail_next_write = true;
        }
    }

    /// Makes the next fdatasync of the file at `path` fail with EIO.
    pub fn fail_next_sync_of(&self, path: &Path) {
        if let Some(contents) = self.state.borrow().files.get(path) {
            contents.borrow_mut().fail_next_sync = true;
        }
    }

    /// Makes every later fdatasync and sync of the file system fail with
    /// EIO while writes succeed (or succeed again).
    pub fn set_fail_syncs(&self, fail: bool) {
        self.state.borrow_mut().fail_syncs = fail;
    }

    fn check_sync_fault(&self) -> io::Result<()> {
        self.check_fault()?;
        if self.state.borrow().fail_syncs {
            return Err(io::Error::from_raw_os_error(libc_eio()));
        }
        Ok(())
    }

    /// Holds the next read in flight, as a slow device would: it takes its
    /// bytes at once and answers only after [`MemFs::release_read`], so a
    /// test can run other work (truncation, compaction) meanwhile.
    pub fn hold_next_read(&self) {
        self.state.borrow_mut().read_hold.next = true;
    }

    /// Whether a read is being held.
    pub fn read_held(&self) -> bool {
        self.state.borrow().read_hold.held
    }

    /// Lets the held read answer.
    pub fn release_read(&self) {
        self.state.borrow_mut().read_hold.released = true;
    }

    /// Holds the next fdatasync in flight until [`MemFs::release_sync`],
    /// before it makes anything durable, so a test can run other work
    /// (retention, a deletion) while a flush syncs.
    pub fn hold_next_sync(&self) {
        self.state.borrow_mut().sync_hold.next = true;
    }

    /// Whether an fdatasync is being held.
    pub fn sync_held(&self) -> bool {
        self.state.borrow().sync_hold.held
    }

    /// Lets the held fdatasync go on.
    pub fn release_sync(&self) {
        self.state.borrow_mut().sync_hold.released = true;
    }

    /// Waits while the operation `hold` picks is held, if it is the one
    /// to hold.
    async fn wait_if_held(&self, hold: fn(&mut State) -> &mut Hold) {
        if !std::mem::take(&mut hold(&mut self.state.borrow_mut()).next) {
            return;
        }
        hold(&mut self.state.borrow_mut()).held = true;
        while !hold(&mut self.state.borrow_mut()).released {
            yield_once().await;
        }
        *hold(&mut self.state.borrow_mut()) = Hold::default();
    }

    /// Forgets everything not fdatasync'd, as a power loss would.
    pub fn crash(&self) {
        for contents in self.state.borrow().files.values() {
            let mut c = contents.borrow_mut();
            c.live = c.durable.clone();
        }
    }

    /// The live bytes of a file, for tests that inspect or damage files.
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.state.borrow();
        state.files.get(path).map(|c| c.borrow().live.clone())
    }

    /// Replaces a file's bytes (live and durable), for corruption tests.
    pub fn set_contents(&self, path: &Path, bytes: Vec<u8>) {
        let mut state = self.state.borrow_mut();
        let contents = state.files.entry(path.to_path_buf()).or_default();
        let mut c = contents.borrow_mut();
        c.live = bytes.clone();
        c.durable = bytes;
    }

    /// Reads issued so far.
    pub fn read_count(&self) -> u64 {
        self.state.borrow().reads
    }

    /// Writes and fdatasyncs issued so far.
    pub fn io_counts(&self) -> (u64, u64) {
        let state = self.state.borrow();
        (state.writes, state.syncs)
    }

    fn check_fault(&self) -> io::Result<()> {
        if self.state.borrow().fail_io {
            return Err(io::Error::from_raw_os_error(libc_eio()));
        }
        Ok(())
    }
}

impl MemFile {
    fn check_writable(&self) -> io::Result<()> {
        if !self.writable {
            // EBADF, as a write to a descriptor opened for reading.
            return Err(io::Error::from_raw_os_error(9));
        }
        Ok(())
    }
}

const fn libc_eio() -> i32 {
    5 // EIO on Linux
}

/// Lets other tasks run, as a device's latency would: appends that arrive
/// while a flush is in flight are what group commit batches. Tests use it
/// to let the other futures of a `join!` run.
pub async fn yield_once() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await
}

/// A write's range while it is in flight (also when its future is dropped).
struct InFlight<'a> {
    contents: &'a RefCell<Contents>,
    range: (u64, u64),
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let range = self.range;
        self.contents.borrow_mut().writing.retain(|r| *r != range);
    }
}

impl DirectFile for MemFile {
    type Buf = Vec<u8>;

    async fn write_at(&self, buf: Vec<u8>, pos: u64) -> io::Result<()> {
        // Two direct writes of one block in flight at once land in either
        // order on a real disk: the log must never issue them.
        self.check_writable()?;
        let range = (pos, pos + buf.len() as u64);
        {
            let mut c = self.contents.borrow_mut();
            if c.writing.iter().any(|(s, e)| *s < range.1 && range.0 < *e) {
                return Err(io::Error::other(format!(
                    "overlapping direct writes in flight: {range:?} and {:?}",
                    c.writing
                )));
            }
            c.writing.push(range);
        }
        let in_flight = InFlight {
            contents: &self.contents,
            range,
        };
        yield_once().await;
        drop(in_flight);
        self.fs.check_fault()?;
        if !pos.is_multiple_of(BLOCK_BYTES as u64) || !buf.len().is_multiple_of(BLOCK_BYTES) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unaligned direct write: {} bytes at {pos}", buf.len()),
            ));
        }
        self.fs.state.borrow_mut().writes += 1;
        let mut c = self.contents.borrow_mut();
        let end = pos as usize + buf.len();
        if c.live.len() < end {
            c.live.resize(end, 0);
        }
        c.live[pos as usize..end].copy_from_slice(&buf);
        if std::mem::take(&mut c.fail_next_write) {
            return Err(io::Error::from_raw_os_error(libc_eio()));
        }
        Ok(())
    }

    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        let data = {
            let c = self.contents.borrow();
            let start = (pos as usize).min(c.live.len());
            let end = (start + len).min(c.live.len());
            Bytes::copy_from_slice(&c.live[start..end])
        };
        self.fs.state.borrow_mut().reads += 1;
        self.fs.wait_if_held(|s| &mut s.read_hold).await;
        Ok(data)
    }

    async fn fdatasync(&self) -> io::Result<()> {
        yield_once().await;
        self.fs.wait_if_held(|s| &mut s.sync_hold).await;
        self.fs.check_sync_fault()?;
        if std::mem::take(&mut self.contents.borrow_mut().fail_next_sync) {
            return Err(io::Error::from_raw_os_error(libc_eio()));
        }
        self.fs.state.borrow_mut().syncs += 1;
        let mut c = self.contents.borrow_mut();
        c.durable = c.live.clone();
        Ok(())
    }

    async fn sync_file_system(&self) -> io::Result<()> {
        yield_once().await;
        self.fs.check_sync_fault()?;
        let mut state = self.fs.state.borrow_mut();
        state.syncs += 1;
        for contents in state.files.values() {
            let mut c = contents.borrow_mut();
            c.durable = c.live.clone();
        }
        Ok(())
    }

    async fn pre_allocate(&self, len: u64) -> io::Result<()> {
        self.check_writable()?;
        self.fs.check_fault()?;
        // As fallocate without KEEP_SIZE: the file grows, reading as zeros.
        // The zeros count as durable: they are what a crash leaves there.
        let mut c = self.contents.borrow_mut();
        if (c.live.len() as u64) < len {
            c.live.resize(len as usize, 0);
        }
        if (c.durable.len() as u64) < len {
            c.durable.resize(len as usize, 0);
        }
        Ok(())
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        self.check_writable()?;
        self.fs.check_fault()?;
        self.contents.borrow_mut().live.resize(len as usize, 0);
        Ok(())
    }

    async fn size(&self) -> io::Result<u64> {
        Ok(self.contents.borrow().live.len() as u64)
    }
}

impl FileSystem for MemFs {
    type File = MemFile;

    fn alloc(&self, len: usize) -> Vec<u8> {
        assert_eq!(len % BLOCK_BYTES, 0, "direct buffers are whole blocks");
        vec![0; len]
    }

    async fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    async fn open(&self, path: &Path) -> io::Result<MemFile> {
        let contents = self
            .state
            .borrow_mut()
            .files
            .entry(path.to_path_buf())
            .or_default()
            .clone();
        Ok(MemFile {
            contents,
            fs: self.clone(),
            writable: true,
        })
    }

    async fn open_existing(&self, path: &Path) -> io::Result<MemFile> {
        let contents = self.state.borrow().files.get(path).cloned();
        let contents = contents.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        Ok(MemFile {
            contents,
            fs: self.clone(),
            writable: false,
        })
    }

    async fn remove(&self, path: &Path) -> io::Result<()> {
        match self.state.borrow_mut().files.remove(path) {
            Some(_) => Ok(()),
            None => Err(io::Error::from(io::ErrorKind::NotFound)),
        }
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.state.borrow_mut();
        let contents = state
            .files
            .remove(from)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        state.files.insert(to.to_path_buf(), contents);
        Ok(())
    }

    async fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        self.check_fault()
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let state = self.state.borrow();
        Ok(state
            .files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }
}
