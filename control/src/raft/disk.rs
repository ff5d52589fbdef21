//! A metadata node's durable state in one directory: the Raft log and
//! hard state in an append-only file of checksummed records, and the last
//! snapshot in a file replaced atomically.
//!
//! `raft.log` records: `[len u32][crc32c u32][kind u8][payload]`, kind 1 an
//! entry (protobuf), kind 2 a hard state (protobuf), kind 3 a group: what
//! one `persist` wrote, as `[kind u8][len u32][payload]` items with no
//! checksum of their own. An entry at index i replaces every entry at i or
//! above. On open a torn or corrupt tail is cut at the last whole record.
//!
//! Why groups: a write that was never synced can land out of order (a
//! later page durable, an earlier one not). Were a persist's records
//! checksummed one by one, a crash could leave a damaged record followed
//! by a whole one from the same write, which reads as damage in the
//! middle of the log (refused) though it is only a torn tail. A group
//! checks out whole or not at all, and holds nothing that checks out on
//! its own.
//!
//! Snapshots come two ways, and differ in what happens to the log:
//! - taken by this node of its own applied state (compaction): the entries
//!   after it stay;
//! - received from the leader because this node's log diverged from (or
//!   fell behind) the leader's: every entry goes, as raft-rs's own storage
//!   does, since entries after a point where the logs differ belong to a
//!   history the quorum did not keep.
//!
//! Either way `snapshot` is replaced first (temporary file, fsync, rename,
//! directory fsync), then the log is rewritten. A crash between the two
//! leaves the new snapshot beside the old log, which opening resolves: the
//! entries at or below the snapshot's index are dropped, and the ones above
//! are kept only if the log agrees with the snapshot at its index (same
//! term) or starts right after it. So whatever the crash point, the log a
//! node reopens is one raft-rs could have produced.
//!
//! The I/O is blocking std I/O with fsync: metadata writes are small and
//! rare next to the data path; the service runs it on glommio's blocking
//! pool.

use std::io;
use std::path::PathBuf;

use protobuf::Message as _;
use raft::eraftpb::{Entry, HardState, Snapshot};

use crate::raft::files::{DirFiles, MetaFiles};
use crate::raft::node::{Persist, Recovered};

const LOG_FILE: &str = "raft.log";
const SNAPSHOT_FILE: &str = "snapshot";
const KIND_ENTRY: u8 = 1;
const KIND_HARD_STATE: u8 = 2;
const KIND_GROUP: u8 = 3;
/// The largest record accepted when reading (a bound before allocating).
pub const RECORD_BYTES_MAX: usize = 64 << 20;

/// The durable state of one metadata node.
pub struct FileRaftDisk<F: MetaFiles = DirFiles> {
    files: F,
    /// What the files hold, mirrored for rewriting the log.
    state: Recovered,
}

/// What reading a metadata directory found, before anything is changed.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The state to start from.
    pub recovered: Recovered,
    /// Bytes of `raft.log` that hold whole, valid records.
    pub log_valid_bytes: usize,
    /// Bytes of `raft.log` in all.
    pub log_bytes: usize,
    /// Entries after the snapshot dropped because the log disagreed with
    /// the snapshot at its index (a crash while a received snapshot was
    /// being installed).
    pub dropped_divergent: usize,
    /// The log disagreed with the snapshot at its index: the file still
    /// holds that history, and must be rewritten before anything is
    /// appended to it.
    pub log_disagrees: bool,
}

impl FileRaftDisk<DirFiles> {
    /// Opens (or creates) the directory and recovers what it holds.
    pub fn open(dir: impl Into<PathBuf>) -> io::Result<FileRaftDisk<DirFiles>> {
        FileRaftDisk::open_files(DirFiles::open(dir)?)
    }
}

impl<F: MetaFiles> FileRaftDisk<F> {
    /// Recovers what `files` hold, cutting a torn log tail.
    pub fn open_files(mut files: F) -> io::Result<FileRaftDisk<F>> {
        let loaded = load(&mut files)?;
        if loaded.log_valid_bytes < loaded.log_bytes {
            tracing::warn!(
                dir = %files.describe(),
                valid = loaded.log_valid_bytes,
                len = loaded.log_bytes,
                "cutting a torn raft log tail"
            );
            files.truncate(LOG_FILE, loaded.log_valid_bytes as u64)?;
            files.sync(LOG_FILE)?;
        }
        let mut disk = FileRaftDisk {
            files,
            state: loaded.recovered,
        };
        if loaded.log_disagrees {
            tracing::warn!(
                dir = %disk.files.describe(),
                dropped = loaded.dropped_divergent,
                "rewriting a log that disagrees with the snapshot (an install was interrupted)"
            );
            // Settled in memory only, the file would still disagree at the
            // next open, which would then drop everything appended since.
            disk.rewrite_log()?;
        }
        Ok(disk)
    }

    /// What the disk held at open, as updated since.
    pub fn recovered(&self) -> Recovered {
        self.state.clone()
    }

    /// The files underneath (a simulation crashes them).
    pub fn files(&mut self) -> &mut F {
        &mut self.files
    }

    /// Makes a [`Persist`] durable: a received snapshot first, then
    /// entries and hard state, then a snapshot this node took.
    pub fn persist(&mut self, persist: &Persist) -> io::Result<()> {
        if let Some(snapshot) = &persist.received_snapshot {
            self.install_received(snapshot)?;
        }
        let mut items = Vec::new();
        for entry in &persist.entries {
            items.push((KIND_ENTRY, entry.write_to_bytes().map_err(invalid)?));
        }
        if let Some(hard_state) = &persist.hard_state {
            items.push((
                KIND_HARD_STATE,
                hard_state.write_to_bytes().map_err(invalid)?,
            ));
        }
        if !items.is_empty() {
            let group = encode_group(&items);
            if group.len() > RECORD_BYTES_MAX {
                return Err(invalid(format!(
                    "{} bytes of metadata in one write, more than the {RECORD_BYTES_MAX} a record may hold",
                    group.len()
                )));
            }
            let mut record = Vec::with_capacity(group.len() + 9);
            frame(&mut record, KIND_GROUP, &group);
            self.files.append(LOG_FILE, &record)?;
            self.files.sync(LOG_FILE)?;
            apply_entries(&mut self.state, &persist.entries);
            if let Some(hard_state) = &persist.hard_state {
                self.state.hard_state = hard_state.clone();
            }
        }
        if let Some(snapshot) = &persist.taken_snapshot {
            self.compact(snapshot)?;
        }
        Ok(())
    }

    /// Makes a snapshot of this node's own applied state durable and drops
    /// the log entries it covers.
    pub fn compact(&mut self, snapshot: &Snapshot) -> io::Result<()> {
        let index = snapshot.get_metadata().index;
        self.write_snapshot(snapshot)?;
        self.state.entries.retain(|e| e.index > index);
        // A snapshot holds committed state only.
        self.state.hard_state.commit = self.state.hard_state.commit.max(index);
        self.rewrite_log()
    }

    /// Makes a snapshot received from the leader durable; the whole log
    /// goes (see the module's comment).
    fn install_received(&mut self, snapshot: &Snapshot) -> io::Result<()> {
        self.write_snapshot(snapshot)?;
        self.state.entries.clear();
        let index = snapshot.get_metadata().index;
        self.state.hard_state.commit = self.state.hard_state.commit.max(index);
        self.rewrite_log()
    }

    fn write_snapshot(&mut self, snapshot: &Snapshot) -> io::Result<()> {
        let payload = snapshot.write_to_bytes().map_err(invalid)?;
        self.files
            .replace(SNAPSHOT_FILE, &frame_snapshot(&payload))?;
        self.state.snapshot = Some(snapshot.clone());
        Ok(())
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
        self.files.replace(LOG_FILE, &bytes)
    }
}

/// Reads what `files` hold without changing anything: the snapshot, the
/// valid prefix of the log, and the entries that belong after the snapshot.
pub fn load(files: &mut impl MetaFiles) -> io::Result<Loaded> {
    let mut state = Recovered::default();
    if let Some(bytes) = files.read(SNAPSHOT_FILE)? {
        let damaged = |what: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}/{SNAPSHOT_FILE} is damaged: {what}", files.describe()),
            )
        };
        let payload = unframe_snapshot(&bytes).ok_or_else(|| damaged("checksum mismatch"))?;
        let snapshot = Snapshot::parse_from_bytes(payload).map_err(|e| damaged(&e.to_string()))?;
        state.snapshot = Some(snapshot);
    }
    let bytes = files.read(LOG_FILE)?.unwrap_or_default();
    let valid = replay(&bytes, &mut state);
    if let Some(whole) = whole_record_after(&bytes, valid) {
        // Not a torn tail (a crash tears only what was never synced, at
        // the end): cutting here would drop records that were durable.
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}/{LOG_FILE} is damaged at byte {valid}: the record there does not check out, \
                 yet a whole record follows at byte {whole}",
                files.describe()
            ),
        ));
    }
    let (dropped_divergent, log_disagrees) = settle_after_snapshot(&mut state);
    Ok(Loaded {
        recovered: state,
        log_valid_bytes: valid,
        log_bytes: bytes.len(),
        dropped_divergent,
        log_disagrees,
    })
}

/// Drops the entries a snapshot covers, and those after it when the log
/// disagrees with the snapshot at its index; a snapshot holds only
/// committed state, so the commit is at least its index. Returns how many
/// entries after the snapshot were dropped, and whether the log disagreed.
fn settle_after_snapshot(state: &mut Recovered) -> (usize, bool) {
    let Some(meta) = state.snapshot.as_ref().map(|s| s.get_metadata().clone()) else {
        return (0, false);
    };
    let agrees = match state.entries.iter().find(|e| e.index == meta.index) {
        Some(at) => at.term == meta.term,
        // No entry at the index: the log was rewritten after the snapshot
        // (it starts right after it), or it ends before it.
        None => true,
    };
    state.entries.retain(|e| e.index > meta.index);
    let mut dropped = 0;
    if !agrees {
        dropped = state.entries.len();
        state.entries.clear();
    }
    state.hard_state.commit = state.hard_state.commit.max(meta.index);
    (dropped, !agrees)
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

/// The body (`[kind][payload]`) of the record at `at`, if one checks out
/// there: a plausible length, within the bytes, a matching crc32c.
fn record_at(bytes: &[u8], at: usize) -> Option<&[u8]> {
    let header = bytes.get(at..at + 8)?;
    let len = u32::from_be_bytes(header[..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_be_bytes(header[4..].try_into().expect("4 bytes"));
    if len == 0 || len > RECORD_BYTES_MAX {
        return None;
    }
    let body = bytes.get(at + 8..at + 8 + len)?;
    (crc32c(body) == crc).then_some(body)
}

/// Where a record that checks out starts after the damaged one at `from`,
/// if anywhere: telling damage in the middle of the log from a torn tail.
/// (Damage inside the last record looks like a torn write and is cut as
/// one.)
fn whole_record_after(bytes: &[u8], from: usize) -> Option<usize> {
    (from + 1..bytes.len()).find(|&at| {
        record_at(bytes, at)
            .is_some_and(|body| matches!(body[0], KIND_ENTRY | KIND_HARD_STATE | KIND_GROUP))
    })
}

/// Replays log records into `state`; returns the length of the valid prefix.
fn replay(bytes: &[u8], state: &mut Recovered) -> usize {
    let mut at = 0;
    while let Some(body) = record_at(bytes, at) {
        let items = match body[0] {
            KIND_GROUP => decode_group(&body[1..]),
            kind => Some(vec![(kind, &body[1..])]),
        };
        // A record that checks out yet does not parse is treated as the
        // end (it cannot be applied), whole or not.
        match items.and_then(|items| parse_items(&items)) {
            Some(parsed) => parsed.into_iter().for_each(|item| item.apply(state)),
            None => break,
        }
        at += 8 + body.len();
    }
    at
}

/// One item of the log, parsed.
enum Item {
    Entry(Entry),
    HardState(HardState),
}

impl Item {
    fn apply(self, state: &mut Recovered) {
        match self {
            Item::Entry(entry) => apply_entries(state, std::slice::from_ref(&entry)),
            Item::HardState(hard_state) => state.hard_state = hard_state,
        }
    }
}

/// Every item parsed, or None if one does not (nothing of a group is
/// applied unless all of it is).
fn parse_items(items: &[(u8, &[u8])]) -> Option<Vec<Item>> {
    items
        .iter()
        .map(|&(kind, payload)| match kind {
            KIND_ENTRY => Entry::parse_from_bytes(payload).ok().map(Item::Entry),
            KIND_HARD_STATE => HardState::parse_from_bytes(payload)
                .ok()
                .map(Item::HardState),
            _ => None,
        })
        .collect()
}

fn encode_group(items: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(items.iter().map(|(_, p)| 5 + p.len()).sum());
    for (kind, payload) in items {
        out.push(*kind);
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(payload);
    }
    out
}

/// The items of a group (lengths bounded by the group's bytes).
fn decode_group(mut bytes: &[u8]) -> Option<Vec<(u8, &[u8])>> {
    let mut items = Vec::new();
    while !bytes.is_empty() {
        let (head, rest) = bytes.split_at_checked(5)?;
        let len = u32::from_be_bytes(head[1..5].try_into().ok()?) as usize;
        let (payload, rest) = rest.split_at_checked(len)?;
        items.push((head[0], payload));
        bytes = rest;
    }
    Some(items)
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

fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}
