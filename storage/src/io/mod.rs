//! The thin I/O boundary of the log: direct (O_DIRECT) files and a directory.
//!
//! The log's logic is written against these traits so it can be tested
//! without glommio: [`dma`] implements them on glommio's DMA files (the
//! production path), [`memory`] in memory with crash and fault injection.
//! Futures are `!Send`: everything runs on one shard.

use std::io;
use std::path::Path;

use bytes::Bytes;

pub mod caught_open;
pub mod dma;
pub mod home_bound;
pub mod memory;
pub mod sync_rounds;

/// The alignment of direct writes: offsets and lengths are multiples of it.
pub const BLOCK_BYTES: usize = 4096;

/// Rounds `n` up to a whole number of blocks.
pub fn align_up(n: u64) -> u64 {
    n.div_ceil(BLOCK_BYTES as u64) * BLOCK_BYTES as u64
}

/// Rounds `n` down to a whole number of blocks.
pub fn align_down(n: u64) -> u64 {
    n - n % BLOCK_BYTES as u64
}

/// A buffer whose memory satisfies the direct-I/O alignment.
pub trait AlignedBuf {
    /// The buffer's bytes.
    fn bytes(&self) -> &[u8];
    /// The buffer's bytes, writable.
    fn bytes_mut(&mut self) -> &mut [u8];
    /// Shortens the buffer to `len` bytes (a whole number of blocks).
    fn truncate_to(&mut self, len: usize);
}

/// A file opened for direct I/O.
#[allow(async_fn_in_trait)]
pub trait DirectFile: 'static {
    /// The aligned buffer type writes take.
    type Buf: AlignedBuf;

    /// Writes the whole buffer at `pos` (aligned); a short write is an error.
    async fn write_at(&self, buf: Self::Buf, pos: u64) -> io::Result<()>;
    /// Reads up to `len` bytes at `pos` (any alignment); shorter at end of file.
    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes>;
    /// Makes the written data durable.
    async fn fdatasync(&self) -> io::Result<()>;
    /// Makes durable every write completed so far to any file on this
    /// file's file system (syncfs, then this file's fdatasync).
    async fn sync_file_system(&self) -> io::Result<()>;
    /// Reserves disk space up to `len` bytes. The file's size becomes `len`
    /// if it was smaller, reading as zeros past the data: writes inside the
    /// size need no metadata update, which keeps O_DIRECT writes on the
    /// asynchronous path (a write that extends a file is handed to a kernel
    /// worker). Recovery cuts the zeros; sealing and closing trim them.
    async fn pre_allocate(&self, len: u64) -> io::Result<()>;
    /// Sets the file size.
    async fn truncate(&self, len: u64) -> io::Result<()>;
    /// The file size.
    async fn size(&self) -> io::Result<u64>;
}

/// The directory operations of a partition log.
#[allow(async_fn_in_trait)]
pub trait FileSystem: Clone + 'static {
    /// The file type.
    type File: DirectFile;

    /// An aligned buffer of `len` bytes, `len` a multiple of [`BLOCK_BYTES`].
    /// Its contents are unspecified: a writer fills or zeroes all it writes.
    fn alloc(&self, len: usize) -> <Self::File as DirectFile>::Buf;
    /// Readies the file system under `dir` before the first file is opened.
    async fn prepare(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }
    /// Creates a directory and its parents.
    async fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Opens a file for reading and writing, creating it if missing.
    async fn open(&self, path: &Path) -> io::Result<Self::File>;
    /// Opens an existing file to read it (NotFound if it is missing).
    async fn open_existing(&self, path: &Path) -> io::Result<Self::File>;
    /// Removes a file.
    async fn remove(&self, path: &Path) -> io::Result<()>;
    /// Renames a file, replacing the target.
    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes the directory's entries durable (after create, rename, remove).
    async fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// The names of the files in a directory.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
}
