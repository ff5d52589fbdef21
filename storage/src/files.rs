//! File names of a partition directory and the small files beside the segments.

use std::path::{Path, PathBuf};

use crate::io::{align_up, AlignedBuf, DirectFile, FileSystem};
use crate::types::Offset;

/// Suffix of segment data files.
pub const LOG_SUFFIX: &str = ".log";
/// Suffix of sparse offset indexes.
pub const INDEX_SUFFIX: &str = ".index";
/// Suffix of sparse time indexes.
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";
/// Suffix of aborted-transaction indexes (`txn_index`).
pub const TXN_INDEX_SUFFIX: &str = ".txnindex";
/// Suffix of files being written before an atomic rename.
pub const TMP_SUFFIX: &str = ".tmp";
/// Suffix of a compacted segment before it replaces the original.
pub const CLEANED_SUFFIX: &str = ".cleaned";
/// Present only while the log is closed cleanly.
pub const CLEAN_SHUTDOWN_FILE: &str = "clean-shutdown";
/// The durable log start offset (advanced by retention and DeleteRecords).
pub const LOG_START_FILE: &str = "log-start-offset";
/// The leader epoch checkpoint (`epochs::EpochCache::encode`).
pub const LEADER_EPOCHS_FILE: &str = "leader-epochs";

/// Suffix of producer state snapshots (`<20-digit offset>.snapshot`: the
/// idempotent producers' state as of that offset).
pub const PRODUCER_SNAPSHOT_SUFFIX: &str = ".snapshot";

/// The offset of a producer snapshot file name, if it is one.
pub fn parse_snapshot_name(name: &str) -> Option<Offset> {
    let digits = name.strip_suffix(PRODUCER_SNAPSHOT_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(Offset)
}

/// `<dir>/<20-digit base><suffix>`.
pub fn segment_path(dir: &Path, base: Offset, suffix: &str) -> PathBuf {
    dir.join(format!("{:020}{suffix}", base.0))
}

/// The base offset of a segment data file name, if it is one.
pub fn parse_log_name(name: &str) -> Option<Offset> {
    let digits = name.strip_suffix(LOG_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(Offset)
}

/// Writes a small file whole and atomically: a temporary file, fdatasync,
/// rename over the target, fsync of the directory.
pub async fn write_atomic<FS: FileSystem>(
    fs: &FS,
    dir: &Path,
    name: &str,
    bytes: &[u8],
) -> std::io::Result<()> {
    let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
    let file = fs.open(&tmp).await?;
    file.truncate(0).await?;
    if !bytes.is_empty() {
        let mut buf = fs.alloc(align_up(bytes.len() as u64) as usize);
        buf.bytes_mut()[..bytes.len()].copy_from_slice(bytes);
        buf.bytes_mut()[bytes.len()..].fill(0);
        file.write_at(buf, 0).await?;
        file.truncate(bytes.len() as u64).await?;
    }
    file.fdatasync().await?;
    drop(file);
    fs.rename(&tmp, &dir.join(name)).await?;
    fs.sync_dir(dir).await
}

/// Reads a whole small file, or None if it does not exist.
pub async fn read_whole<FS: FileSystem>(
    fs: &FS,
    path: &Path,
    exists: bool,
) -> std::io::Result<Option<bytes::Bytes>> {
    if !exists {
        return Ok(None);
    }
    let file = fs.open(path).await?;
    let size = file.size().await?;
    Ok(Some(file.read_at(0, size as usize).await?))
}

/// The random id of a log directory attached to a journal (see
/// `LogIdentity::directory`).
pub const JOURNAL_ID_FILE: &str = "journal-id";

/// Encodes a directory's journal id: magic, id, CRC-32C.
pub fn encode_journal_id(id: u64) -> Vec<u8> {
    encode_checked(b"JID1", id.to_be_bytes())
}

/// Decodes a directory's journal id, or None if damaged.
pub fn decode_journal_id(bytes: &[u8]) -> Option<u64> {
    decode_checked(b"JID1", bytes).map(u64::from_be_bytes)
}

/// Encodes the log start offset checkpoint: magic, offset, CRC-32C.
pub fn encode_log_start(offset: Offset) -> Vec<u8> {
    encode_checked(b"LSO1", offset.0.to_be_bytes())
}

/// Decodes the log start offset checkpoint, or None if damaged.
pub fn decode_log_start(bytes: &[u8]) -> Option<Offset> {
    decode_checked(b"LSO1", bytes).map(|value| Offset(i64::from_be_bytes(value)))
}

/// A small file's bytes: a magic, an 8-byte value, a CRC-32C of both.
fn encode_checked(magic: &[u8; 4], value: [u8; 8]) -> Vec<u8> {
    let mut out = magic.to_vec();
    out.extend_from_slice(&value);
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// The value of [`encode_checked`]'s bytes, or None if damaged.
fn decode_checked(magic: &[u8; 4], bytes: &[u8]) -> Option<[u8; 8]> {
    if bytes.len() != 16 || &bytes[..4] != magic {
        return None;
    }
    let crc = u32::from_be_bytes(bytes[12..16].try_into().ok()?);
    if crc32c::crc32c(&bytes[..12]) != crc {
        return None;
    }
    bytes[4..12].try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let path = segment_path(Path::new("/d"), Offset(42), LOG_SUFFIX);
        assert_eq!(path, Path::new("/d/00000000000000000042.log"));
        let name = path.file_name().unwrap().to_str().unwrap();
        assert_eq!(parse_log_name(name), Some(Offset(42)));
        assert_eq!(parse_log_name("42.log"), None);
        assert_eq!(parse_log_name("0000000000000000004x.log"), None);
    }

    #[test]
    fn checkpoint_round_trips_and_detects_damage() {
        let bytes = encode_log_start(Offset(1234));
        assert_eq!(decode_log_start(&bytes), Some(Offset(1234)));
        let mut bad = bytes.clone();
        bad[6] ^= 1;
        assert_eq!(decode_log_start(&bad), None);
    }
}
