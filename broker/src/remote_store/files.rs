//! Local files to objects, on the store's thread: a sealed segment is read
//! off the shards (blocking reads on the runtime's blocking pool), in
//! chunks, so no segment is held whole in memory; files larger than a
//! chunk go up as multipart uploads. Uploads are paced to the broker's
//! upload bandwidth.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload, WriteMultipart};

use super::RemoteError;

/// The bytes read (and uploaded as one part) at a time.
pub const CHUNK_BYTES: usize = 8 << 20;

/// Parts of one multipart upload in flight at once.
const PARTS_IN_FLIGHT: usize = 2;

/// Paces uploads to a byte rate (0: unlimited), shared by all of them.
pub struct Pacer {
    bytes_per_second: u64,
    next_free: Mutex<Instant>,
}

impl Pacer {
    /// At most `bytes_per_second` (0: no limit).
    pub fn new(bytes_per_second: u64) -> Pacer {
        Pacer {
            bytes_per_second,
            next_free: Mutex::new(Instant::now()),
        }
    }

    /// Waits until `bytes` more may go.
    pub async fn take(&self, bytes: usize) {
        if self.bytes_per_second == 0 {
            return;
        }
        let cost = Duration::from_secs_f64(bytes as f64 / self.bytes_per_second as f64);
        let start = {
            let mut next = self.next_free.lock().expect("pacer");
            let start = (*next).max(Instant::now());
            *next = start + cost;
            start
        };
        tokio::time::sleep_until(start.into()).await;
    }
}

/// Reads `len` bytes of `path` from `at`, off the runtime's threads.
async fn read_chunk(path: PathBuf, at: u64, len: usize) -> Result<Bytes, RemoteError> {
    let read = tokio::task::spawn_blocking(move || -> std::io::Result<Bytes> {
        let mut file = std::fs::File::open(&path)?;
        file.seek(SeekFrom::Start(at))?;
        let mut buf = vec![0; len];
        file.read_exact(&mut buf)?;
        Ok(Bytes::from(buf))
    });
    match read.await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => Err(RemoteError::Local(e.to_string())),
        Err(e) => Err(RemoteError::Local(e.to_string())),
    }
}

/// The chunks of the file's first `len` bytes: (offset, length).
fn chunks(len: u64) -> impl Iterator<Item = (u64, usize)> {
    (0..len)
        .step_by(CHUNK_BYTES)
        .map(move |at| (at, (len - at).min(CHUNK_BYTES as u64) as usize))
}

/// The CRC-32C of the file's first `len` bytes.
pub async fn checksum(path: PathBuf, len: u64) -> Result<u32, RemoteError> {
    let mut crc = 0;
    for (at, n) in chunks(len) {
        let chunk = read_chunk(path.clone(), at, n).await?;
        crc = crc32c::crc32c_append(crc, &chunk);
    }
    Ok(crc)
}

/// Writes the file's first `len` bytes as `key`; refused if they no longer
/// have the CRC-32C `crc` (the file changed since it was named).
pub async fn put_file(
    store: &dyn ObjectStore,
    pacer: &Pacer,
    key: &str,
    (path, len, crc): (PathBuf, u64, u32),
) -> Result<(), RemoteError> {
    let location = ObjectPath::from(key);
    let mut seen = 0;
    if len <= CHUNK_BYTES as u64 {
        let bytes = read_chunk(path, 0, len as usize).await?;
        seen = crc32c::crc32c_append(seen, &bytes);
        check_crc(key, seen, crc)?;
        pacer.take(bytes.len()).await;
        store.put(&location, PutPayload::from(bytes)).await?;
        return Ok(());
    }
    let upload = store.put_multipart(&location).await?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, CHUNK_BYTES);
    for (at, n) in chunks(len) {
        let bytes = match read_chunk(path.clone(), at, n).await {
            Ok(bytes) => bytes,
            Err(e) => {
                let _ = writer.abort().await;
                return Err(e);
            }
        };
        seen = crc32c::crc32c_append(seen, &bytes);
        pacer.take(bytes.len()).await;
        writer.wait_for_capacity(PARTS_IN_FLIGHT).await?;
        writer.put(bytes);
    }
    if let Err(e) = check_crc(key, seen, crc) {
        let _ = writer.abort().await;
        return Err(e);
    }
    writer.finish().await?;
    Ok(())
}

fn check_crc(key: &str, seen: u32, expected: u32) -> Result<(), RemoteError> {
    if seen == expected {
        return Ok(());
    }
    Err(RemoteError::Local(format!(
        "{key}: the file's CRC-32C is {seen:08x} now, {expected:08x} when named (changed underneath)"
    )))
}
