//! A metadata node's durable state in one directory: the Raft log and
//! hard state in an append-only file of checksummed records, and the last
//! snapshot in a file replaced atomically.
//!
//! `raft.log` records: `[len u32][crc32c u32][kind u8][payload]`, kind 1 an
//! entry (protobuf), kind 2 a hard state (protobuf). An entry at index i
//! replaces every entry at i or above. On open a torn or corrupt tail is
//! cut at the last whole record. Installing a snapshot writes `snapshot`
//! (temporary file, fsync, rename, directory fsync) and then rewrites the
//! log with only the entries after it.
//!
//! The I/O is blocking std I/O with fsync: metadata writes are small and
//! rare next to the data path. (On the broker's control shard it belongs on
//! glommio's blocking pool; that adapter comes with the broker.)

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use protobuf::Message as _;
use raft::eraftpb::{Entry, HardState, Snapshot};

use crate::node::{Persist, Recovered};

const LOG_FILE: &str = "raft.log";
const SNAPSHOT_FILE: &str = "snapshot";
const KIND_ENTRY: u8 = 1;
const KIND_HARD_STATE: u8 = 2;
/// The largest record accepted when reading (a bound before allocating).
pub const RECORD_BYTES_MAX: usize = 64 << 20;

/// The durable state of one metadata node.
pub struct FileRaftDisk {
    dir: PathBuf,
    log: File,
    /// What the files hold, mirrored for rewriting the log.
    state: Recovered,
}

impl FileRaftDisk {
    /// Opens (or creates) the directory and recovers what it holds.
    pub fn open(dir: impl Into<PathBuf>) -> io::Result<FileRaftDisk> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)?;
        let mut state = Recovered::default();
        if let Some(bytes) = read_if_exists(&dir.join(SNAPSHOT_FILE))? {
            let payload = unframe_snapshot(&bytes).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidData, "snapshot file is damaged")
            })?;
            state.snapshot = Some(Snapshot::parse_from_bytes(payload).map_err(invalid)?);
        }
        let log_path = dir.join(LOG_FILE);
        let bytes = read_if_exists(&log_path)?.unwrap_or_default();
        let valid = replay(&bytes, &mut state);
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)?;
        if valid < bytes.len() {
            tracing::warn!(dir = %dir.display(), valid, len = bytes.len(), "cutting a torn raft log tail");
            log.set_len(valid as u64)?;
            log.sync_all()?;
        }
        sync_dir(&dir)?;
        Ok(FileRaftDisk { dir, log, state })
    }

    /// What the disk held at open, as updated since.
    pub fn recovered(&self) -> Recovered {
        self.state.clone()
    }

    /// Makes a ready's [`Persist`] durable.
    pub fn persist(&mut self, persist: &Persist) -> io::Result<()> {
        if let Some(snapshot) = &persist.snapshot {
            self.install_snapshot(snapshot)?;
        }
        let mut batch = Vec::new();
        for entry in &persist.entries {
            frame(
                &mut batch,
                KIND_ENTRY,
                &entry.write_to_bytes().map_err(invalid)?,
            );
        }
        if let Some(hard_state) = &persist.hard_state {
            frame(
                &mut batch,
                KIND_HARD_STATE,
                &hard_state.write_to_bytes().map_err(invalid)?,
            );
        }
        if batch.is_empty() {
            return Ok(());
        }
        self.log.write_all(&batch)?;
        self.log.sync_data()?;
        apply_entries(&mut self.state, &persist.entries);
        if let Some(hard_state) = &persist.hard_state {
            self.state.hard_state = hard_state.clone();
        }
        Ok(())
    }

    /// Makes a snapshot durable and drops the log entries it covers.
    pub fn install_snapshot(&mut self, snapshot: &Snapshot) -> io::Result<()> {
        let index = snapshot.get_metadata().index;
        let payload = snapshot.write_to_bytes().map_err(invalid)?;
        write_atomic(&self.dir, SNAPSHOT_FILE, &frame_snapshot(&payload))?;
        self.state.snapshot = Some(snapshot.clone());
        self.state.entries.retain(|e| e.index > index);
        self.rewrite_log()
    }

    fn rewrite_log(&mut self) -> io::Result<()> {
        let mut bytes = Vec::new();
        for entry in &self.state.entries {
            frame(
                &mut bytes,
                KIND_ENTRY,
                &entry.write_to_bytes().map_err(invalid)?,
            );
        }
        frame(
            &mut bytes,
            KIND_HARD_STATE,
            &self.state.hard_state.write_to_bytes().map_err(invalid)?,
        );
        write_atomic(&self.dir, LOG_FILE, &bytes)?;
        self.log = OpenOptions::new()
            .append(true)
            .open(self.dir.join(LOG_FILE))?;
        Ok(())
    }
}

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

fn frame(out: &mut Vec<u8>, kind: u8, payload: &[u8]) {
    let mut body = Vec::with_capacity(1 + payload.len());
    body.push(kind);
    body.extend_from_slice(payload);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32c(&body).to_be_bytes());
    out.extend_from_slice(&body);
}

/// Replays log records into `state`; returns the length of the valid prefix.
fn replay(bytes: &[u8], state: &mut Recovered) -> usize {
    let mut at = 0;
    while bytes.len() - at >= 8 {
        let len = u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_be_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes"));
        if len == 0 || len > RECORD_BYTES_MAX || bytes.len() - at - 8 < len {
            break;
        }
        let body = &bytes[at + 8..at + 8 + len];
        if crc32c(body) != crc {
            break;
        }
        let applied = match body[0] {
            KIND_ENTRY => Entry::parse_from_bytes(&body[1..]).map(|entry| {
                let snapshot_index = state
                    .snapshot
                    .as_ref()
                    .map_or(0, |s| s.get_metadata().index);
                if entry.index > snapshot_index {
                    apply_entries(state, std::slice::from_ref(&entry));
                }
            }),
            KIND_HARD_STATE => {
                HardState::parse_from_bytes(&body[1..]).map(|hs| state.hard_state = hs)
            }
            _ => break,
        };
        if applied.is_err() {
            break;
        }
        at += 8 + len;
    }
    at
}

fn apply_entries(state: &mut Recovered, entries: &[Entry]) {
    if let Some(first) = entries.first() {
        state.entries.retain(|e| e.index < first.index);
        state.entries.extend(entries.iter().cloned());
    }
}

fn frame_snapshot(payload: &[u8]) -> Vec<u8> {
    let mut out = crc32c(payload).to_be_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

fn unframe_snapshot(bytes: &[u8]) -> Option<&[u8]> {
    let (crc, payload) = bytes.split_at_checked(4)?;
    (crc32c(payload) == u32::from_be_bytes(crc.try_into().ok()?)).then_some(payload)
}

fn read_if_exists(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match File::open(path) {
        Ok(mut file) => {
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)?;
            Ok(Some(bytes))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut file = File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, dir.join(name))?;
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}
