//! The log's side of producer state (`producers`): rebuilding it at open
//! from the newest snapshot at or below the log end plus the batch headers
//! after it, writing snapshots (at segment rolls, once the data below them
//! is durable, and at a clean close), rebuilding it after a truncation,
//! clamping it when the log start moves, and expiring silent producers.
//!
//! A snapshot is only ever a shortcut: a damaged or missing one is
//! replaced by replaying more of the log.

use std::ops::ControlFlow;

use crate::batch::BatchHeader;
use crate::error::{Result, StorageError};
use crate::files::{self, parse_snapshot_name, PRODUCER_SNAPSHOT_SUFFIX};
use crate::headers;
use crate::io::DirectFile;
use crate::io::FileSystem;
use crate::log::{record_transactional, Log};
use crate::markers::{self, Marker};
use crate::producers::{ProducerState, PRODUCER_SNAPSHOTS_KEPT};
use crate::types::{Offset, TimestampMs};

impl<FS: FileSystem> Log<FS> {
    /// The idempotent producers' state as of the log end.
    pub fn producers(&self) -> ProducerState {
        self.state.borrow().producers.clone()
    }

    /// Where one producer's transactions on this partition stand (cheap:
    /// [`Log::producers`] copies every producer).
    pub fn txn_status(&self, producer_id: i64) -> crate::producers::TxnStatus {
        self.state.borrow().producers.txn_status(producer_id)
    }

    /// How many transactions are open on this partition.
    pub fn open_transactions(&self) -> usize {
        self.state.borrow().producers.transactions().open().len()
    }

    /// Forgets producers this broker has not seen (appended a batch of,
    /// or rebuilt at open) since `now - expiration_ms`; returns how many.
    pub fn expire_producers(&self, now: TimestampMs, expiration_ms: i64) -> usize {
        self.st().producers.expire(now, expiration_ms)
    }

    /// Rebuilds the producer state up to the log end: the newest snapshot
    /// at or below `floor` (and below every segment whose aborted
    /// transactions are in no file: `Log::unindexed_floor`) that decodes,
    /// then the batches after it; then settles the segments' aborted-
    /// transaction indexes. The caller holds the I/O lock or has the log
    /// to itself (open).
    pub(crate) async fn rebuild_producers(&self, floor: Offset) -> Result<()> {
        let (log_start, log_end) = (self.log_start(), self.log_end());
        let (chosen, passed_over) = self.choose_producer_snapshot(floor).await?;
        let from_scratch = chosen.is_none();
        let (from, mut state) = chosen.unwrap_or((log_start, ProducerState::default()));
        if let Some(newer) = &passed_over {
            // Open at the newer snapshot and from below `from`: open at
            // `from` too, though the replay cannot see their first batch.
            let open_from_below = newer.transactions().open().iter();
            for (&producer_id, &first) in open_from_below.filter(|(_, f)| **f < from) {
                state.transactions_mut().keep_open(producer_id, first);
            }
        }
        self.replay_producers(&mut state, from, log_end).await?;
        if from_scratch && from > Offset(0) {
            // Transactions open from below `from` are unknown to a replay
            // from it: an abort it found may not be stable after more
            // than `from`, so lookups must not stop at it.
            state.transactions_mut().cap_stable_after(from);
        }
        if let Some(newer) = &passed_over {
            // Its aborts were found with everything known (a replay from
            // the start misses those of transactions begun below it).
            let held = newer
                .transactions()
                .aborted_in(Offset(i64::MIN), Offset(i64::MAX));
            for txn in held {
                state.transactions_mut().restore_aborted(txn);
            }
        }
        state.clamp_start(log_start);
        state.seen_at((self.clock)());
        self.st().producers = state;
        self.settle_txn_indexes().await
    }

    /// The snapshot a rebuild starts from (its offset and state): the
    /// newest at or below the floor (see `rebuild_producers`) that decodes;
    /// and the newest that decodes when the floor passes over it (it still
    /// knows what a replay from further down cannot see). Snapshots past
    /// the log end (their data was cut) are removed.
    async fn choose_producer_snapshot(
        &self,
        floor: Offset,
    ) -> Result<(Option<(Offset, ProducerState)>, Option<ProducerState>)> {
        let (log_start, log_end) = (self.log_start(), self.log_end());
        let floor = floor.min(self.unindexed_floor());
        let mut snapshots = self.producer_snapshots()?;
        snapshots.sort_unstable();
        let mut passed_over = None;
        for &offset in snapshots.iter().rev() {
            if offset > log_end {
                self.remove_producer_snapshot(offset).await?;
                continue;
            }
            if offset > floor && passed_over.is_some() {
                continue;
            }
            let Some(loaded) = self.load_producer_snapshot(offset, log_start).await? else {
                continue;
            };
            if offset <= floor {
                return Ok((Some((offset, loaded)), passed_over));
            }
            passed_over = Some(loaded);
        }
        Ok((None, passed_over))
    }

    /// The producer snapshot at `offset`, or None if it is damaged or
    /// below the log start (then removed).
    async fn load_producer_snapshot(
        &self,
        offset: Offset,
        log_start: Offset,
    ) -> Result<Option<ProducerState>> {
        let path = files::segment_path(&self.dir, offset, PRODUCER_SNAPSHOT_SUFFIX);
        let bytes = files::read_whole(&self.fs, &path, true)
            .await
            .map_err(|e| StorageError::io("reading a producer snapshot", e))?;
        match bytes.as_deref().and_then(ProducerState::decode) {
            Some((at, loaded)) if at == offset && offset >= log_start => Ok(Some(loaded)),
            _ => {
                tracing::warn!(dir = %self.dir.display(), %offset, "damaged producer snapshot; replaying the log instead");
                self.remove_producer_snapshot(offset).await?;
                Ok(None)
            }
        }
    }

    /// Records every idempotent batch of `[from, to)` into `state`.
    async fn replay_producers(
        &self,
        state: &mut ProducerState,
        from: Offset,
        to: Offset,
    ) -> Result<()> {
        // (base, file, where to start reading, durable bytes) per segment.
        type Span<F> = (Offset, Option<std::rc::Rc<F>>, u64, u64);
        let segments: Vec<Span<FS::File>> = {
            let st = self.state.borrow();
            st.segments
                .iter()
                .filter(|s| s.next_offset > from && s.base < to)
                .map(|s| {
                    (
                        s.base,
                        s.file.clone(),
                        s.scan_start(from.max(s.base)),
                        s.durable_size,
                    )
                })
                .collect()
        };
        // The log does not say when the broker appended these batches:
        // the rebuilt state counts as seen now (see `seen_at`).
        let now = (self.clock)();
        for (base, file, start, size) in segments {
            let Some(file) = file else { continue };
            // Transactional batches and markers, in order, with where each
            // starts: a marker's kind is in its record, read after the walk.
            let mut transactional: Vec<(BatchHeader, u64)> = Vec::new();
            let replay = |header: &BatchHeader, position: u64| {
                if header.base_offset >= to {
                    return ControlFlow::Break(());
                }
                if header.next_offset() > from {
                    if let Some(producer) = header.producer() {
                        state.record_batch(
                            &producer,
                            header.base_offset,
                            header.max_timestamp,
                            now,
                        );
                    }
                    if header.producer_id >= 0 {
                        transactional.push((*header, position));
                    }
                }
                ControlFlow::Continue(())
            };
            headers::walk(&*file, start, size, self.config.max_batch_bytes, replay)
                .await
                .map_err(|e| StorageError::io(format!("segment {base}: reading headers"), e))?;
            for (header, position) in transactional {
                let marker = match header.is_control() && header.is_transactional() {
                    true => Some(self.read_marker(&*file, &header, position, base).await?),
                    false => None,
                };
                record_transactional(state, &header, header.base_offset, marker, now);
            }
        }
        Ok(())
    }

    /// The marker of the control batch at `position` of segment `base`.
    async fn read_marker(
        &self,
        file: &FS::File,
        header: &BatchHeader,
        position: u64,
        base: Offset,
    ) -> Result<Marker> {
        let bytes = file
            .read_at(position, header.total_bytes)
            .await
            .map_err(|e| StorageError::io(format!("segment {base}: reading a marker"), e))?;
        Ok(markers::parse(&bytes, *header)?)
    }

    /// Writes the snapshots rolls left due, once the data below their
    /// offsets is durable (`durable_to`). A failure costs only replay time
    /// later (and a tiered segment's upload goes without one): logged, not
    /// fatal.
    pub(crate) async fn write_due_producer_snapshot(&self, durable_to: Offset) {
        let due: Vec<_> = {
            let mut st = self.st();
            let ready = st
                .producer_snapshot_due
                .partition_point(|(offset, _)| *offset <= durable_to);
            st.producer_snapshot_due.drain(..ready).collect()
        };
        for (offset, bytes) in due {
            self.write_producer_snapshot(offset, &bytes).await;
        }
    }

    /// Writes the state as of the log end (a clean close).
    pub(crate) async fn snapshot_producers_at_end(&self) {
        let (offset, bytes) = {
            let st = self.state.borrow();
            (st.log_end, st.producers.encode(st.log_end))
        };
        self.write_producer_snapshot(offset, &bytes).await;
    }

    /// Writes the state as of the log end, which must be durable, and
    /// fails if it cannot (what it records is in no other file).
    pub(crate) async fn snapshot_producers_at_end_durably(&self) -> Result<()> {
        let (offset, bytes) = {
            let st = self.state.borrow();
            (st.log_end, st.producers.encode(st.log_end))
        };
        self.write_producer_snapshot_or_fail(offset, &bytes)
            .await
            .map_err(|e| StorageError::io("writing a producer snapshot", e))
    }

    /// Writes `bytes`, a snapshot taken at `offset` elsewhere (a leader's),
    /// and fails if it cannot (nothing here could rebuild it).
    pub(crate) async fn snapshot_producers_as_given(
        &self,
        offset: Offset,
        bytes: &[u8],
    ) -> std::io::Result<()> {
        self.write_producer_snapshot_or_fail(offset, bytes).await
    }

    /// Writes a snapshot; a failure costs only replay time later: logged.
    async fn write_producer_snapshot(&self, offset: Offset, bytes: &[u8]) {
        if let Err(e) = self.write_producer_snapshot_or_fail(offset, bytes).await {
            tracing::warn!(dir = %self.dir.display(), %offset, error = %e, "cannot write a producer snapshot");
        }
    }

    async fn write_producer_snapshot_or_fail(
        &self,
        offset: Offset,
        bytes: &[u8],
    ) -> std::io::Result<()> {
        let name = format!("{:020}{PRODUCER_SNAPSHOT_SUFFIX}", offset.0);
        files::write_atomic(&self.fs, &self.dir, &name, bytes).await?;
        if let Err(e) = self.prune_producer_snapshots().await {
            tracing::warn!(dir = %self.dir.display(), error = %e, "cannot prune producer snapshots");
        }
        Ok(())
    }

    /// Keeps the newest [`PRODUCER_SNAPSHOTS_KEPT`] snapshots (older ones
    /// would only shorten a replay after a truncation below all of those)
    /// and every one at or above [`Log::keep_producer_snapshots_from`]'s.
    async fn prune_producer_snapshots(&self) -> Result<()> {
        let mut offsets = self.producer_snapshots()?;
        offsets.sort_unstable();
        let excess = offsets.len().saturating_sub(PRODUCER_SNAPSHOTS_KEPT);
        let kept_from = self.state.borrow().producer_snapshots_kept_from;
        let prunable = offsets[..excess]
            .iter()
            .filter(|offset| kept_from.is_none_or(|from| **offset < from));
        for &offset in prunable {
            self.remove_producer_snapshot(offset).await?;
        }
        Ok(())
    }

    /// Drops snapshots below the log start and the producers whose batches
    /// went with the deleted segments.
    pub(crate) async fn clamp_producers_to_start(&self) -> Result<()> {
        let log_start = self.log_start();
        self.st().producers.clamp_start(log_start);
        let mut kept = false;
        for offset in self.producer_snapshots()? {
            if offset < log_start {
                self.remove_producer_snapshot(offset).await?;
            } else {
                kept = true;
            }
        }
        // A transaction open from below the new start could no longer be
        // rebuilt by replaying from the start, nor the first offset of one
        // aborted in a segment without its index file yet: a snapshot at
        // the log end keeps them, written now if the log end is durable,
        // else by the next flush that makes it so.
        let (end, bytes) = {
            let mut st = self.st();
            let transactions = st.producers.transactions();
            let open = !transactions.open().is_empty();
            let aborted_from_below = transactions.holds_aborts_from_below(log_start);
            if !(open || aborted_from_below) || kept || !st.producer_snapshot_due.is_empty() {
                return Ok(());
            }
            let end = st.log_end;
            let bytes = st.producers.encode(end);
            if st.flushed < end {
                st.producer_snapshot_due.push((end, bytes));
                return Ok(());
            }
            (end, bytes)
        };
        self.write_producer_snapshot(end, &bytes).await;
        Ok(())
    }

    /// Keeps the producer snapshots at or above `offset` from now on,
    /// however many there are (None: only the newest few): tiered storage
    /// uploads them with the segments they end, then moves this up.
    pub fn keep_producer_snapshots_from(&self, offset: Option<Offset>) {
        self.st().producer_snapshots_kept_from = offset;
    }

    /// The bytes of the producer snapshot at `offset`, if there is one.
    pub async fn producer_snapshot(&self, offset: Offset) -> Result<Option<Vec<u8>>> {
        let path = files::segment_path(&self.dir, offset, PRODUCER_SNAPSHOT_SUFFIX);
        let file = match self.fs.open_existing(&path).await {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StorageError::io("opening a producer snapshot", e)),
        };
        let read = async { file.read_at(0, file.size().await? as usize).await };
        match read.await {
            Ok(bytes) => Ok(Some(bytes.to_vec())),
            Err(e) => Err(StorageError::io("reading a producer snapshot", e)),
        }
    }

    fn producer_snapshots(&self) -> Result<Vec<Offset>> {
        let names = self
            .fs
            .list(&self.dir)
            .map_err(|e| StorageError::io("listing producer snapshots", e))?;
        Ok(names
            .iter()
            .filter_map(|n| parse_snapshot_name(n))
            .collect())
    }

    async fn remove_producer_snapshot(&self, offset: Offset) -> Result<()> {
        let path = files::segment_path(&self.dir, offset, PRODUCER_SNAPSHOT_SUFFIX);
        self.fs
            .remove(&path)
            .await
            .map_err(|e| StorageError::io("removing a producer snapshot", e))
    }
}
