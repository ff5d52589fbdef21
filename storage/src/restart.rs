//! Starting a log over at a later offset: a follower whose leader no
//! longer holds, locally, the offsets it would fetch next (they are only
//! in tiered storage's remote log) drops everything it has and goes on
//! from the leader's local log start, as Kafka's followers do
//! (KIP-405's "truncate fully and start at").

use crate::epochs::EpochCache;
use crate::error::{Result, StorageError};
use crate::files::{self, LEADER_EPOCHS_FILE, LOG_START_FILE};
use crate::io::FileSystem;
use crate::log::Log;
use crate::producers::ProducerState;
use crate::segment::Segment;
use crate::types::Offset;

impl<FS: FileSystem> Log<FS> {
    /// Drops every segment and starts the log, empty, at `offset` (past
    /// the log end), with the producer state of `producer_snapshot` (the
    /// leader's snapshot at `offset`, from the remote log: transactions
    /// open across `offset` stay known, as KIP-405's followers rebuild
    /// them; producers with no batch at or past `offset` are dropped, as
    /// the leader's own local retention drops them). Crash-safe: the segments go
    /// oldest first, then the snapshot is written, then the new log
    /// start, so a crash leaves a suffix of the old log (its start the
    /// first remaining segment's; a snapshot past its end is dropped at
    /// open), the old log emptied at its old start, or the new empty log
    /// with its snapshot: each a log a later call starts over again,
    /// never a log start past the log end.
    pub async fn restart_at(&self, offset: Offset, producer_snapshot: Option<&[u8]>) -> Result<()> {
        let _io = self.io_lock.lock().await;
        self.flush_for_rewrite().await?;
        let log_end = self.log_end();
        if offset <= log_end {
            return Err(StorageError::InvalidArgument(format!(
                "cannot restart at {offset}, at or below the log end {log_end}"
            )));
        }
        let producers = producer_snapshot.and_then(|bytes| self.snapshot_at(offset, bytes));
        let critical = self.critical("a restart of the log");
        let bases: Vec<Offset> = self
            .state
            .borrow()
            .segments
            .iter()
            .map(|s| s.base)
            .collect();
        for base in bases {
            self.remove_segment_files(base).await?;
        }
        if let Some(bytes) = producer_snapshot.filter(|_| producers.is_some()) {
            self.snapshot_producers_as_given(offset, bytes)
                .await
                .map_err(|e| self.fail("writing the leader's producer snapshot", e))?;
        }
        let checkpoint = files::encode_log_start(offset);
        files::write_atomic(&self.fs, &self.dir, LOG_START_FILE, &checkpoint)
            .await
            .map_err(|e| self.fail("writing log start offset", e))?;
        files::write_atomic(
            &self.fs,
            &self.dir,
            LEADER_EPOCHS_FILE,
            &EpochCache::new().encode(),
        )
        .await
        .map_err(|e| self.fail("writing the leader epoch checkpoint", e))?;
        {
            let mut st = self.st();
            let chunk = self.config.write_chunk_bytes;
            st.segments = vec![Segment::new_active(offset, &self.fs, chunk)];
            st.log_start = offset;
            st.log_end = offset;
            st.flushed = offset;
            st.taken = offset;
            st.high_watermark = offset;
            st.epochs = EpochCache::new();
            st.epochs_checkpointed = EpochCache::new();
            st.producers = producers.unwrap_or_default();
            st.producers.seen_at((self.clock)());
            st.producer_snapshot_due.clear();
            st.txn_indexes.clear();
            st.cache.clear();
            st.rewritten();
        }
        critical.finish();
        self.clamp_producers_to_start().await
    }

    /// The producer state a snapshot given for `offset` holds, if it is
    /// whole and taken there (else the log starts with none: logged).
    fn snapshot_at(&self, offset: Offset, bytes: &[u8]) -> Option<ProducerState> {
        match ProducerState::decode(bytes) {
            Some((at, state)) if at == offset => Some(state),
            _ => {
                tracing::warn!(dir = %self.dir.display(), %offset, "the leader's producer snapshot is damaged or not at the new start: starting without producer state");
                None
            }
        }
    }
}
