//! A shard's journal file: group commit of entries, checkpoints, and the
//! start of a new incarnation after replay.
//!
//! Appenders add their entry to the round being gathered, then wait. The
//! first waiter to find the commit lock free commits: it takes the round,
//! places it, writes it, fdatasyncs the journal and publishes the
//! outcome; entries added meanwhile form the next round. An entry the
//! journal cannot take (no room, too large, or the journal failed) is
//! refused and its log flushes directly, as it would without a journal.
//! After any failed or cancelled write or sync the journal refuses
//! everything until the shard restarts: replay stops at the first missing
//! entry, so nothing written after a gap could count.

use std::cell::{Cell, RefCell};
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::Bytes;

use super::entry::{self, EntryTarget, MAX_ENTRY_BYTES};
use super::header::{Checkpoint, HEADER_REGION_BYTES};
use super::round::Round;
use super::scan::Scanned;
use super::writer::JournalWriter;
use crate::io::{align_up, AlignedBuf, DirectFile, FileSystem, BLOCK_BYTES};
use crate::io_lock::IoLock;

/// What became of an appended entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Journaled {
    /// Durable in the journal under this sequence number.
    Durable(u64),
    /// Not taken: the log must make the data durable in its segment.
    Refused,
}

/// What became of one round, shared by its appenders.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum RoundOutcome {
    #[default]
    Pending,
    /// Durable; the sequence number of its first entry.
    Durable(u64),
    Refused,
}

type Outcome = Rc<Cell<RoundOutcome>>;

struct State {
    writer: JournalWriter,
    gathering: Round,
    /// Set when the gathering round's commit ends: its first sequence
    /// number, or None if it was refused.
    gathering_outcome: Outcome,
    failed: Option<String>,
    /// After the failure, every entry placed was retired.
    retired_after_failure: bool,
    /// A sync failed (a round's, a checkpoint's or a header's): a later
    /// sync may report success for writes that never reached the disk
    /// (the kernel reports a write-back error once), so nothing is retired
    /// on the strength of one until a restart replays the journal.
    sync_failed: bool,
}

/// A journal file opened for appends.
pub struct Journal<FS: FileSystem> {
    fs: FS,
    path: PathBuf,
    file: FS::File,
    state: RefCell<State>,
    commit_lock: IoLock,
    /// One checkpoint at a time; callers that find one running wait for it.
    checkpoint_lock: IoLock,
    round_most_bytes: usize,
}

/// What a journal file held, read for replay.
pub struct JournalImage {
    /// Its current header.
    pub header: Checkpoint,
    /// The whole file.
    pub bytes: Bytes,
}

impl<FS: FileSystem> Journal<FS> {
    /// Makes a new, empty journal of `journal_bytes` at `path`, replacing
    /// whatever the file held, durably.
    pub async fn create(
        fs: &FS,
        path: &Path,
        journal_bytes: u64,
        round_most_bytes: usize,
    ) -> io::Result<Journal<FS>> {
        assert!(journal_bytes > HEADER_REGION_BYTES && journal_bytes == align_up(journal_bytes));
        let file = fs.open(path).await?;
        // Cut first: stale entries of an old file must read as zeros.
        file.truncate(0).await?;
        file.pre_allocate(journal_bytes).await?;
        let header = Checkpoint {
            counter: 0,
            incarnation: super::random_id(0),
            sequence: 0,
            position: HEADER_REGION_BYTES,
            journal_bytes,
        };
        write_header(fs, &file, &header).await?;
        if let Some(dir) = path.parent() {
            fs.sync_dir(dir).await?;
        }
        Ok(Journal::new(fs, path, file, header, round_most_bytes))
    }

    /// Reads the journal at `path` whole for replay. None if neither header
    /// copy is valid: its creation never finished (nothing was appended
    /// before its header was durable), or both copies were damaged, which
    /// this cannot tell apart.
    pub async fn read(fs: &FS, path: &Path) -> io::Result<Option<JournalImage>> {
        let file = fs.open_existing(path).await?;
        let size = file.size().await?;
        let bytes = file.read_at(0, size as usize).await?;
        let Some(header) = bytes
            .get(..HEADER_REGION_BYTES as usize)
            .and_then(Checkpoint::read)
        else {
            return Ok(None);
        };
        let bounded = header.journal_bytes == align_up(header.journal_bytes)
            && header.journal_bytes > HEADER_REGION_BYTES
            && (HEADER_REGION_BYTES..=header.journal_bytes).contains(&header.position);
        if !bounded {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "journal {} has a header out of bounds: {header:?}",
                    path.display()
                ),
            ));
        }
        if header.journal_bytes != size {
            // Something else cut or grew the file: its entries cannot be
            // trusted to be where the header says, nor dropped.
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "journal {} is {size} bytes, its header says {}",
                    path.display(),
                    header.journal_bytes
                ),
            ));
        }
        Ok(Some(JournalImage { header, bytes }))
    }

    /// Opens the journal after its entries (`scanned` from `image`) were
    /// written into their segments and those were synced: a header of the
    /// next incarnation, whose checkpoint is past them, is made durable
    /// before any new round, so none of them counts again.
    pub async fn resume(
        fs: &FS,
        path: &Path,
        image: &JournalImage,
        scanned: &Scanned<'_>,
        round_most_bytes: usize,
    ) -> io::Result<Journal<FS>> {
        let file = fs.open(path).await?;
        let old = image.header;
        let header = Checkpoint {
            counter: old.counter + 1,
            incarnation: super::random_id(old.incarnation),
            sequence: scanned.next_sequence,
            position: align_up(scanned.end),
            journal_bytes: old.journal_bytes,
        };
        write_header(fs, &file, &header).await?;
        Ok(Journal::new(fs, path, file, header, round_most_bytes))
    }

    fn new(
        fs: &FS,
        path: &Path,
        file: FS::File,
        header: Checkpoint,
        round_most_bytes: usize,
    ) -> Journal<FS> {
        Journal {
            fs: fs.clone(),
            path: path.to_path_buf(),
            file,
            state: RefCell::new(State {
                writer: JournalWriter::new(header),
                gathering: Round::new(),
                gathering_outcome: Outcome::default(),
                failed: None,
                retired_after_failure: false,
                sync_failed: false,
            }),
            commit_lock: IoLock::default(),
            checkpoint_lock: IoLock::default(),
            round_most_bytes: round_most_bytes.clamp(BLOCK_BYTES, MAX_ENTRY_BYTES),
        }
    }

    /// Makes `data` durable as an entry for `target`, in a round shared
    /// with the entries appended beside it. The caller's write of the same
    /// data to its segment must have completed: a checkpoint makes the
    /// acknowledged entries durable in their segments with one sync of the
    /// file system, which covers only writes completed before it.
    pub async fn append(&self, target: EntryTarget, data: Bytes) -> Journaled {
        let entry_bytes = entry::encoded_len(data.len());
        if entry_bytes > self.round_most_bytes {
            return Journaled::Refused;
        }
        let mut data = Some(data);
        let (outcome, index) = loop {
            {
                let mut st = self.state.borrow_mut();
                if st.failed.is_some() {
                    return Journaled::Refused;
                }
                if st.gathering.encoded_bytes() + entry_bytes <= self.round_most_bytes {
                    let index = st.gathering.len() as u64;
                    st.gathering.push(target, data.take().expect("pushed once"));
                    break (st.gathering_outcome.clone(), index);
                }
            }
            // The round is full: wait for a commit to take it.
            self.commit_or_wait().await;
        };
        loop {
            match outcome.get() {
                RoundOutcome::Pending => self.commit_or_wait().await,
                RoundOutcome::Durable(first) => return Journaled::Durable(first + index),
                RoundOutcome::Refused => return Journaled::Refused,
            }
        }
    }

    async fn commit_or_wait(&self) {
        match self.commit_lock.try_lock() {
            Some(_commit) => self.commit().await,
            None => self.commit_lock.progress().await,
        }
    }

    /// Takes the gathering round and makes it durable (the commit lock held).
    async fn commit(&self) {
        let (round, outcome) = {
            let mut st = self.state.borrow_mut();
            let round = std::mem::take(&mut st.gathering);
            (round, std::mem::take(&mut st.gathering_outcome))
        };
        if round.is_empty() {
            return;
        }
        let placed = {
            let mut st = self.state.borrow_mut();
            // After a failure nothing is placed: a round after a missing one
            // would be acknowledged where replay never reaches it.
            let placement = match st.failed {
                Some(_) => None,
                None => st
                    .writer
                    .place(round.padded_bytes() as u64, &round.entry_offsets()),
            };
            placement.map(|p| (p, st.writer.incarnation()))
        };
        let Some((placement, incarnation)) = placed else {
            outcome.set(RoundOutcome::Refused);
            return;
        };
        let buf = round.encode(incarnation, &placement, |n| self.fs.alloc(n));
        let guard = FailOnDrop {
            journal: self,
            outcome: Some(&outcome),
            armed: true,
        };
        let written = self.file.write_at(buf, placement.position).await;
        if let Err(e) = written {
            return guard.fail("writing a round", e);
        }
        let ticket = {
            let mut st = self.state.borrow_mut();
            st.writer.write_completed(placement.first_sequence);
            st.writer.sync_started()
        };
        if let Err(e) = self.file.fdatasync().await {
            self.state.borrow_mut().sync_failed = true;
            return guard.fail("syncing a round", e);
        }
        let acknowledged = self.state.borrow_mut().writer.sync_completed(ticket);
        if acknowledged < placement.first_sequence + round.len() as u64 {
            // An earlier round is not durable: one commit runs at a time,
            // so this is a bug, and the journal must stop.
            let error = io::Error::other(format!("acknowledged only to {acknowledged}"));
            return guard.fail("a round synced behind a gap", error);
        }
        guard.disarm();
        outcome.set(RoundOutcome::Durable(placement.first_sequence));
    }

    /// Moves the checkpoint to at least `needed` (at most to the first
    /// entry not yet acknowledged), so no entry before it is replayed and
    /// its space can be written again: one sync of the file system makes
    /// every acknowledged entry durable in its segment, then the header
    /// records the new checkpoint. Callers arriving while a checkpoint runs
    /// wait for it and run another only if it fell short of their need.
    pub async fn retire_before(&self, needed: u64) -> io::Result<()> {
        loop {
            if let Some(reason) = self.failed() {
                return Err(io::Error::other(reason));
            }
            if self.checkpoint_sequence() >= needed.min(self.acknowledged_end()) {
                return Ok(());
            }
            match self.checkpoint_lock.try_lock() {
                Some(_one_at_a_time) => self.checkpoint_acknowledged().await?,
                None => self.checkpoint_lock.progress().await,
            }
        }
    }

    /// After a failure, retires every entry ever placed, acknowledged or
    /// not: a round whose write failed or was cancelled may still have
    /// reached the disk, and must not replay over files a log changes
    /// later. One sync of the file system makes their segment writes
    /// durable (each completed before its entry was placed), then a header
    /// moves the checkpoint past them all. Nothing is placed after a
    /// failure, so once done it stays done. Refused for good once any sync
    /// failed (see `sync_failed`): the logs then keep their files as they
    /// are until a restart replays the journal.
    pub async fn retire_after_failure(&self) -> io::Result<()> {
        loop {
            let (retired, sync_failed) = {
                let st = self.state.borrow();
                (st.retired_after_failure, st.sync_failed)
            };
            if retired {
                return Ok(());
            }
            if sync_failed {
                return Err(io::Error::other(
                    "a journal sync failed: its entries stay until a restart replays them",
                ));
            }
            let Some(_one_at_a_time) = self.checkpoint_lock.try_lock() else {
                self.checkpoint_lock.progress().await;
                continue;
            };
            let retired = self.write_retiring_headers().await;
            let mut st = self.state.borrow_mut();
            match retired {
                Ok(()) => st.retired_after_failure = true,
                Err(_) => st.sync_failed = true,
            }
            return retired;
        }
    }

    /// A sync of the file system, then the header past every entry placed,
    /// written twice with growing counters: a header write cancelled by
    /// the failure may still land in the first one's slot, and must not be
    /// the one with the largest counter.
    async fn write_retiring_headers(&self) -> io::Result<()> {
        self.file.sync_file_system().await?;
        let first = self
            .state
            .borrow_mut()
            .writer
            .checkpoint_everything_placed();
        write_header(&self.fs, &self.file, &first).await?;
        let second = first.advanced(first.sequence, first.position);
        write_header(&self.fs, &self.file, &second).await?;
        self.state.borrow_mut().writer.header_written();
        Ok(())
    }

    /// Whether more than half of the data region is held by entries not
    /// yet retired: time for a checkpoint, before appends are refused.
    pub fn wants_checkpoint(&self) -> bool {
        let st = self.state.borrow();
        let data_bytes = st.writer.header().journal_bytes - HEADER_REGION_BYTES;
        st.writer.live_bytes() > data_bytes / 2
    }

    async fn checkpoint_acknowledged(&self) -> io::Result<()> {
        let needed = self.acknowledged_end();
        if let Err(e) = self.file.sync_file_system().await {
            self.state.borrow_mut().sync_failed = true;
            self.fail(format!("syncing the segments for a checkpoint: {e}"));
            return Err(e);
        }
        self.checkpoint(needed).await.map(drop)
    }

    /// Moves the checkpoint once every entry before `needed` is durable in
    /// its segment, so their space can be written again. Returns whether a
    /// header was written.
    async fn checkpoint(&self, needed: u64) -> io::Result<bool> {
        let header = {
            let mut st = self.state.borrow_mut();
            if let Some(reason) = &st.failed {
                return Err(io::Error::other(reason.clone()));
            }
            st.writer.checkpoint(needed)
        };
        let Some(header) = header else {
            return Ok(false);
        };
        let guard = FailOnDrop {
            journal: self,
            outcome: None,
            armed: true,
        };
        if let Err(e) = write_header(&self.fs, &self.file, &header).await {
            let error = io::Error::new(e.kind(), e.to_string());
            self.state.borrow_mut().sync_failed = true;
            guard.fail("writing the journal header", e);
            return Err(error);
        }
        guard.disarm();
        self.state.borrow_mut().writer.header_written();
        Ok(true)
    }

    /// Every entry before this sequence number was acknowledged.
    pub fn acknowledged_end(&self) -> u64 {
        self.state.borrow().writer.acknowledged_end()
    }

    /// The checkpoint of the last durable header.
    pub fn checkpoint_sequence(&self) -> u64 {
        self.state.borrow().writer.header().sequence
    }

    /// Why the journal refuses everything, if it does.
    pub fn failed(&self) -> Option<String> {
        self.state.borrow().failed.clone()
    }

    /// Refuses everything from now on, and wakes every waiter to see it.
    fn fail(&self, reason: String) {
        // try_borrow_mut: this may run while unwinding from a panic.
        if let Ok(mut st) = self.state.try_borrow_mut() {
            if st.failed.is_none() {
                let path = self.path.display();
                tracing::error!(journal = %path, %reason, "journal failed; logs flush directly");
                st.failed = Some(reason);
            }
        }
        self.commit_lock.notify();
        self.checkpoint_lock.notify();
    }
}

/// Fails the journal (and refuses the round, if any) when a commit or a
/// header write ends early: by an error, or by its future being dropped
/// between its write and its sync.
struct FailOnDrop<'a, FS: FileSystem> {
    journal: &'a Journal<FS>,
    outcome: Option<&'a Outcome>,
    armed: bool,
}

impl<FS: FileSystem> FailOnDrop<'_, FS> {
    fn fail(mut self, what: &str, error: io::Error) {
        self.mark_failed(format!("{what}: {error}"));
    }

    fn disarm(mut self) {
        self.armed = false;
    }

    fn mark_failed(&mut self, reason: String) {
        self.armed = false;
        if let Some(outcome) = self.outcome {
            outcome.set(RoundOutcome::Refused);
        }
        self.journal.fail(reason);
    }
}

impl<FS: FileSystem> Drop for FailOnDrop<'_, FS> {
    fn drop(&mut self) {
        if self.armed {
            self.mark_failed("a journal write was cancelled before it completed".into());
        }
    }
}

async fn write_header<FS: FileSystem>(
    fs: &FS,
    file: &FS::File,
    header: &Checkpoint,
) -> io::Result<()> {
    let mut block = fs.alloc(BLOCK_BYTES);
    header.encode(block.bytes_mut());
    file.write_at(block, header.copy_position()).await?;
    file.fdatasync().await
}
