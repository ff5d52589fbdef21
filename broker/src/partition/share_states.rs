//! The share-partitions of a shard (`crate::share::partition`): one per
//! share group reading each partition the shard leads, kept in memory on
//! the partition's shard, and the work ShareFetch and ShareAcknowledge do
//! on them there: acquiring records (reading the log first, so only
//! offsets of batches it read are handed out, within the request's
//! bytes), acknowledging, giving a member's records back, and ending
//! expired locks (a tick of the shard).
//!
//! Durable through the group coordinators ([`SharePersister`], installed
//! by the shard): a share-partition is read when its leader first needs
//! it in a leadership (or, never written, starts at the high watermark,
//! `share.auto.offset.reset` latest, and is written so before anything is
//! handed out); every acknowledgement is written before it is answered,
//! and records archived by expired locks or members leaving soon after.
//! Writes of one share-partition go one at a time, each with everything
//! changed up to then (later changes ride on the next write).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use storage::batch::split_stored;
use storage::{LeaderEpoch, Offset};

use super::read::Bound;
use super::served::ServedPartition;
use super::table::{OpenPartition, BATCH_BYTES_CAP};
use crate::cluster::routing::PartitionKey;
use crate::cluster::Cluster;
use crate::groups::share_state::{ShareStateKey, ShareStateValue, StoredState};
use crate::kafka::Code;
use crate::runtime::clock::monotonic_ms;
use crate::runtime::sharded::LocalFuture;
use crate::share::aborted::{aborted_ranges, split_acquired};
use crate::share::partition::{
    Ack, AckError, Acquired, Archived, ArchivedRecord, InFlightCounts, Limits, SharePartition,
};

/// A group's share-partition of one partition.
type StateKey = (String, PartitionKey);

/// What a member asks a share-partition for.
#[derive(Debug, Clone, Copy)]
pub struct Wanted {
    /// The most records.
    pub max_records: usize,
    /// The most bytes of batches (at least one batch is read).
    pub max_bytes: usize,
    /// How long the records stay with the member (None: the group's
    /// `share.record.lock.duration.ms`).
    pub lock_ms: Option<i64>,
    /// Check the share-partition in memory against the coordinator's
    /// state epoch first if it was last checked longer ago than this
    /// (0: now, a partition a share session just took: an
    /// administrator's reset while the group was empty is what its new
    /// members get; None: not at all).
    pub recheck_after_ms: Option<i64>,
}

/// Records handed out: the offsets acquired and the whole batches that
/// hold them (records outside the acquired ranges are the client's to
/// drop).
#[derive(Debug, Clone, Default)]
pub struct ShareRead {
    /// The offsets, in runs with their delivery counts.
    pub acquired: Vec<Acquired>,
    /// The batches covering them, in offset order.
    pub chunks: Vec<Bytes>,
    /// Their bytes.
    pub bytes: usize,
    /// What the member may read up to, and which bound that is (the high
    /// watermark, or reading committed the last stable offset), when
    /// read: a long poll waits for it to move.
    pub readable: (Bound, Offset),
    /// The share-partition's wakes when read (a long poll waits for them
    /// to move too).
    pub wakes: u64,
}

/// One acknowledgement: a range and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acknowledgement {
    /// The first offset.
    pub first: i64,
    /// The last offset.
    pub last: i64,
    /// How.
    pub ack: Ack,
}

/// Where share-partitions' durable state is kept: the group
/// coordinators (`crate::coordinator::share_persister`).
pub trait SharePersister {
    /// The state of `key` for a leader at `leader_epoch`; older leaders
    /// are fenced from then on.
    fn read(&self, key: ShareStateKey, leader_epoch: i32)
        -> LocalFuture<Result<StoredState, Code>>;
    /// Writes `key`'s state (at the state epoch read); Ok once durable.
    fn write(&self, key: ShareStateKey, value: ShareStateValue) -> LocalFuture<Result<(), Code>>;
}

/// Where archived records go when their group has a dead-letter topic
/// (`share.dlq.topic`; `crate::server::dead_letters`, installed by the
/// shard).
pub trait DeadLetterSink {
    /// Appends the archived records to their dead-letter topic; Ok once
    /// durable there, with how many were appended (a record that can
    /// never be is left out, logged).
    fn send(&self, letters: DeadLetters) -> LocalFuture<Result<u64, Code>>;
}

/// Archived records of one share-partition bound for a dead-letter topic.
pub struct DeadLetters {
    /// The dead-letter topic.
    pub topic: String,
    /// The share group.
    pub group: String,
    /// The partition they were archived from.
    pub source: PartitionKey,
    /// Its log, to read them from.
    pub partition: Rc<OpenPartition>,
    /// The records: offset, deliveries, why.
    pub records: Vec<ArchivedRecord>,
}

/// A share-partition in memory, with what its durability needs.
struct Slot {
    state: SharePartition,
    /// The partition it hands out (its log holds the records).
    partition: Rc<OpenPartition>,
    /// The group's dead-letter topic, if it has one.
    dead_letter_topic: Option<String>,
    /// Records archived since the last write, for the dead-letter topic:
    /// sent there before the write that makes their archiving durable
    /// (so a failure leaves them to be archived, and sent, again).
    dead: Vec<ArchivedRecord>,
    /// The leader epoch it was read in (another: another leadership,
    /// read it again).
    epoch: LeaderEpoch,
    /// The state epoch it was read at (written at: an administrator's
    /// change since fences its writes, and it is read again).
    state_epoch: i32,
    /// When it was last checked against the coordinator's state epoch.
    checked_ms: i64,
    /// Durable changes made so far.
    changes: u64,
    /// Moves whenever records may have become available to acquire (a
    /// release, an expiry, the start advancing): a waiting fetch that saw
    /// another value tries again.
    wakes: u64,
    /// Held while writing; the changes written so far.
    written: Rc<futures::lock::Mutex<u64>>,
}

/// What a shard's share-partitions did since it started (/metrics).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ShareCounts {
    /// Records handed out.
    pub acquired: u64,
    /// Of those, handed out before.
    pub redelivered: u64,
    /// Records accepted.
    pub accepted: u64,
    /// Records released.
    pub released: u64,
    /// Records rejected (archived).
    pub rejected: u64,
    /// Records archived at the delivery limit.
    pub archived_at_limit: u64,
    /// Archived records appended to a dead-letter topic.
    pub dead_lettered: u64,
}

/// The share-partitions of one shard.
#[derive(Default)]
pub struct ShareStates {
    slots: RefCell<HashMap<StateKey, Slot>>,
    counts: std::cell::Cell<ShareCounts>,
    /// Reading a state is one at a time per share-partition, so none is
    /// read twice (and one unreachable coordinator holds up only its own).
    loading: RefCell<HashMap<StateKey, Rc<futures::lock::Mutex<()>>>>,
    /// Where the states are kept (installed by the shard).
    pub persister: RefCell<Option<Rc<dyn SharePersister>>>,
    /// Where archived records go (installed by the shard).
    pub dead_letters: RefCell<Option<Rc<dyn DeadLetterSink>>>,
}

impl ShareStates {
    /// Acquires records of `led` for `member` of `group` and reads the
    /// batches holding them (reading committed: below the last stable
    /// offset, and an aborted transaction's records are archived, never
    /// handed out).
    pub async fn acquire(
        &self,
        cluster: &Cluster,
        led: &ServedPartition,
        (group, member): (&str, &str),
        wanted: Wanted,
    ) -> Result<ShareRead, Code> {
        let limits = limits(cluster, group);
        let settings = cluster.share_group_settings(group);
        self.load(cluster, led, group, wanted.recheck_after_ms)
            .await?;
        let key = (group.to_string(), led.key());
        let log = &led.partition.log;
        let readable = match settings.read_committed {
            true => (Bound::LastStable, led.last_stable_offset()),
            false => (Bound::HighWatermark, log.high_watermark()),
        };
        let seen = self.with_current(&key, led.epoch, |slot| {
            slot.state.set_limits(limits);
            slot.dead_letter_topic = settings.dead_letter_topic;
            slot.state.log_start_moved(log.log_start().0);
            let archived = slot.state.expire_locks(monotonic_ms() as i64);
            let changed = self.archived(slot, archived);
            let full = slot.state.window_full();
            (slot.state.next_to_acquire(), full, slot.wakes, changed)
        });
        let Some((from, full, wakes, changed)) = seen else {
            return Err(ResponseError::NotLeaderOrFollower.code());
        };
        if let Some(changes) = changed {
            self.persist(&key, led.epoch, changes).await?;
        }
        let nothing = ShareRead {
            readable,
            wakes,
            ..ShareRead::default()
        };
        if full || from >= readable.1 .0 || wanted.max_records == 0 {
            return Ok(nothing);
        }
        let read = led.read(from, wanted.max_bytes, readable.0).await?;
        let mut batches = Vec::new();
        for chunk in &read.chunks {
            // Each chunk holds whole batches: split, not joined.
            let split = split_stored(chunk, BATCH_BYTES_CAP);
            batches.extend(split.map_err(|_| ResponseError::CorruptMessage.code())?);
        }
        let Some(below) = batches.last().map(|(header, _)| header.next_offset().0) else {
            return Ok(nothing);
        };
        let aborted = (read.aborted.as_deref())
            .map(|aborted| aborted_ranges(batches.iter().map(|(header, _)| header), aborted));
        // Taken after the read: what other fetches did meanwhile counts.
        let acquired = self.with_current(&key, led.epoch, |slot| {
            let now = monotonic_ms() as i64;
            let lock_ms = wanted.lock_ms.unwrap_or(limits.lock_ms);
            let range = (from, below);
            let taken =
                (slot.state).acquire_locked(member, wanted.max_records, range, (now, lock_ms));
            let (kept, left_out) = split_acquired(taken, aborted.as_deref().unwrap_or_default());
            for range in left_out {
                // (Just acquired by `member`: held.)
                let _ = slot.state.acknowledge(member, range, Ack::Gap, now);
            }
            kept
        });
        let acquired = acquired.unwrap_or_default();
        self.count(|c| {
            for run in &acquired {
                let records = (run.last - run.first + 1) as u64;
                c.acquired += records;
                c.redelivered += records * (run.delivery_count > 1) as u64;
            }
        });
        let chunks: Vec<Bytes> = batches
            .into_iter()
            .filter(|(header, _)| {
                let (first, last) = (header.base_offset.0, header.last_offset().0);
                acquired.iter().any(|a| a.first <= last && first <= a.last)
            })
            .map(|(_, bytes)| bytes)
            .collect();
        Ok(ShareRead {
            bytes: chunks.iter().map(Bytes::len).sum(),
            acquired,
            chunks,
            readable,
            wakes,
        })
    }

    /// `member` of `group` acknowledges `acks` on partition `led`, in
    /// order; the first refusal stops it (Kafka answers one error per
    /// partition). Answered once what changed is durable. Records coming
    /// back wake the partition's waiting fetches.
    pub async fn acknowledge(
        &self,
        led: &ServedPartition,
        (group, member): (&str, &str),
        acks: &[Acknowledgement],
    ) -> Result<(), Code> {
        let key = (group.to_string(), led.key());
        let applied = self.with_current(&key, led.epoch, |slot| {
            // All or nothing: every range is checked before any applies.
            let held =
                (acks.iter()).try_for_each(|a| slot.state.check_held(member, (a.first, a.last)));
            if let Err(e) = held {
                return Err(match e {
                    AckError::NotHeld(_) => ResponseError::InvalidRecordState.code(),
                    AckError::BadRange => ResponseError::InvalidRequest.code(),
                });
            }
            let now = monotonic_ms() as i64;
            let mut counts = self.counts.get();
            let mut archived = Vec::new();
            for a in acks {
                let done = (slot.state).acknowledge(member, (a.first, a.last), a.ack, now);
                debug_assert!(done.is_ok(), "checked above");
                let records = (a.last - a.first + 1) as u64;
                match a.ack {
                    Ack::Accept => counts.accepted += records,
                    Ack::Release => counts.released += records,
                    Ack::Reject => counts.rejected += records,
                    Ack::Gap | Ack::Renew => {}
                }
                counts.archived_at_limit += done.as_deref().map_or(0, at_limit);
                archived.extend(done.unwrap_or_default());
            }
            self.counts.set(counts);
            slot.dead.extend(archived);
            let durable = acks.iter().any(|a| a.ack != Ack::Renew);
            slot.changes += durable as u64;
            slot.wakes += durable as u64;
            Ok(durable.then_some(slot.changes))
        });
        // Nothing was read here in this leadership: nothing is held.
        let durable = applied.ok_or(ResponseError::InvalidRecordState.code())??;
        if let Some(changes) = durable {
            // The window may have opened, or records come back.
            led.partition.notify_arrival();
            self.persist(&key, led.epoch, changes).await?;
        }
        Ok(())
    }

    /// `member` of `group` acknowledges single records, each named by
    /// its offset and the delivery it was handed out in (the HTTP API's
    /// receipts: a receipt of an earlier delivery no longer counts); each
    /// one's outcome, answered once what changed is durable.
    pub async fn acknowledge_each(
        &self,
        led: &ServedPartition,
        (group, member): (&str, &str),
        receipts: &[(i64, u16)],
        ack: Ack,
    ) -> Vec<Result<(), Code>> {
        let key = (group.to_string(), led.key());
        let not_held = ResponseError::InvalidRecordState.code();
        let applied = self.with_current(&key, led.epoch, |slot| {
            let now = monotonic_ms() as i64;
            let mut at_the_limit = 0;
            let each: Vec<Result<(), Code>> = (receipts.iter())
                .map(|&(offset, delivery)| {
                    let current = slot.state.get(offset).map(|r| r.delivery_count);
                    if current != Some(delivery) {
                        return Err(not_held);
                    }
                    let done = slot.state.acknowledge(member, (offset, offset), ack, now);
                    at_the_limit += done.as_deref().map_or(0, at_limit);
                    done.map(|archived| slot.dead.extend(archived))
                        .map_err(|_| not_held)
                })
                .collect();
            self.count(|c| c.archived_at_limit += at_the_limit);
            let done = each.iter().filter(|r| r.is_ok()).count() as u64;
            self.count(|c| match ack {
                Ack::Accept => c.accepted += done,
                Ack::Release => c.released += done,
                Ack::Reject => c.rejected += done,
                Ack::Gap | Ack::Renew => {}
            });
            let durable = ack != Ack::Renew && done > 0;
            slot.changes += durable as u64;
            slot.wakes += durable as u64;
            (each, durable.then_some(slot.changes))
        });
        let Some((mut each, durable)) = applied else {
            return vec![Err(not_held); receipts.len()];
        };
        if let Some(changes) = durable {
            led.partition.notify_arrival();
            if let Err(code) = self.persist(&key, led.epoch, changes).await {
                each.iter_mut()
                    .filter(|r| r.is_ok())
                    .for_each(|r| *r = Err(code));
            }
        }
        each
    }

    /// `member` of `group` left partition `led` (its session closed or
    /// was replaced, its connection closed): what it held comes back.
    pub async fn release_member(&self, led: &ServedPartition, (group, member): (&str, &str)) {
        let key = (group.to_string(), led.key());
        let archived = self.with_current(&key, led.epoch, |slot| {
            let archived = slot.state.release_member(member);
            slot.wakes += 1;
            self.archived(slot, archived)
        });
        led.partition.notify_arrival();
        if let Some(Some(changes)) = archived {
            if let Err(code) = self.persist(&key, led.epoch, changes).await {
                tracing::warn!(code, "cannot write a share-partition's archived records");
            }
        }
    }

    /// Ends the locks expired by now on every share-partition of the
    /// shard; `wake` is called for each partition where records came
    /// back. Returns the share-partitions that archived records (to be
    /// written) with their changes.
    fn expire_locks(
        &self,
        mut wake: impl FnMut(PartitionKey),
    ) -> Vec<(StateKey, LeaderEpoch, u64)> {
        let now = monotonic_ms() as i64;
        let mut slots = self.slots.borrow_mut();
        let mut to_write = Vec::new();
        for (key, slot) in slots.iter_mut() {
            let (before, start) = (slot.state.next_to_acquire(), slot.state.start());
            let archived = slot.state.expire_locks(now);
            if let Some(changes) = self.archived(slot, archived) {
                to_write.push((key.clone(), slot.epoch, changes));
            }
            if slot.state.next_to_acquire() < before || slot.state.start() > start {
                slot.wakes += 1;
                wake(key.1);
            }
        }
        to_write
    }

    /// The wakes of `group`'s share-partition of `key` (what a waiting
    /// fetch compares with what it saw).
    pub fn wakes(&self, group: &str, key: PartitionKey) -> Option<u64> {
        let slots = self.slots.borrow();
        slots.get(&(group.to_string(), key)).map(|s| s.wakes)
    }

    /// What the shard's share-partitions did so far.
    pub fn counts(&self) -> ShareCounts {
        self.counts.get()
    }

    /// Each share-partition: its group, partition, start offset and
    /// in-flight counts.
    pub fn gauges(&self) -> Vec<(String, PartitionKey, i64, InFlightCounts)> {
        let slots = self.slots.borrow();
        let each = slots.iter().map(|((group, key), slot)| {
            (group.clone(), *key, slot.state.start(), slot.state.counts())
        });
        each.collect()
    }

    /// Notes records `slot` archived (counted, kept for the dead-letter
    /// topic): the changes to write, if any.
    fn archived(&self, slot: &mut Slot, archived: Vec<ArchivedRecord>) -> Option<u64> {
        if archived.is_empty() {
            return None;
        }
        self.count(|c| c.archived_at_limit += at_limit(&archived));
        slot.dead.extend(archived);
        slot.changes += 1;
        Some(slot.changes)
    }

    fn count(&self, change: impl FnOnce(&mut ShareCounts)) {
        let mut counts = self.counts.get();
        change(&mut counts);
        self.counts.set(counts);
    }

    /// Whether the shard holds no share-partition.
    pub fn is_empty(&self) -> bool {
        self.slots.borrow().is_empty()
    }

    /// Drops the share-partitions of partitions this shard no longer
    /// leads (`leads` says which it does).
    pub fn retain_led(&self, leads: impl Fn(PartitionKey) -> bool) {
        self.slots.borrow_mut().retain(|(_, key), _| leads(*key));
    }

    /// The share-partition of `group` on `key`, for a look (tests,
    /// metrics).
    pub fn with<T>(
        &self,
        group: &str,
        key: PartitionKey,
        look: impl FnOnce(&SharePartition) -> T,
    ) -> Option<T> {
        let slots = self.slots.borrow();
        slots.get(&(group.to_string(), key)).map(|s| look(&s.state))
    }

    /// Runs `change` on `key`'s share-partition if it was read in
    /// leadership `epoch`.
    fn with_current<T>(
        &self,
        key: &StateKey,
        epoch: LeaderEpoch,
        change: impl FnOnce(&mut Slot) -> T,
    ) -> Option<T> {
        let mut slots = self.slots.borrow_mut();
        slots.get_mut(key).filter(|s| s.epoch == epoch).map(change)
    }

    /// Reads `group`'s share-partition of `led` unless it was read in
    /// this leadership (and, when it was last checked longer ago than
    /// `recheck_after_ms`, unless the coordinator's state epoch is still
    /// the one it was read at: an administrator's change replaces it, and
    /// what its members held goes with it); one not initialized starts as
    /// `share.auto.offset.reset` says, written so first.
    async fn load(
        &self,
        cluster: &Cluster,
        led: &ServedPartition,
        group: &str,
        recheck_after_ms: Option<i64>,
    ) -> Result<(), Code> {
        let key = (group.to_string(), led.key());
        let now = monotonic_ms() as i64;
        let due = |slot: &Slot| recheck_after_ms.is_some_and(|age| now - slot.checked_ms >= age);
        let settled = || self.with_current(&key, led.epoch, |slot| !due(slot)) == Some(true);
        if settled() {
            return Ok(());
        }
        let lock = (self.loading.borrow_mut().entry(key.clone()))
            .or_default()
            .clone();
        let _one_at_a_time = lock.lock().await;
        // (The entry goes once nobody waits on it.)
        let _forget = Forget(&self.loading, &key, &lock);
        if settled() {
            return Ok(());
        }
        let persister = self.persister()?;
        let stored = (persister.read(state_key(&key), led.epoch.0).await).map_err(client_code)?;
        let unchanged = self.with_current(&key, led.epoch, |slot| {
            let same = slot.state_epoch == stored.state_epoch;
            slot.checked_ms = now;
            same
        });
        if unchanged == Some(true) {
            return Ok(());
        }
        let limits = limits(cluster, group);
        let mut archived = Vec::new();
        let state = match stored.state {
            Some(stored) => {
                let (state, at_load) = SharePartition::restored(&stored, limits);
                archived = at_load;
                state
            }
            None => {
                let log = &led.partition.log;
                let start = match cluster.share_group_settings(group).from_earliest {
                    true => log.log_start().0,
                    false => log.high_watermark().0,
                };
                let fresh = SharePartition::new(start, limits);
                let value = ShareStateValue {
                    leader_epoch: led.epoch.0,
                    state_epoch: stored.state_epoch,
                    state: Some(fresh.persisted()),
                };
                (persister.write(state_key(&key), value).await).map_err(client_code)?;
                fresh
            }
        };
        let mut slot = Slot {
            state,
            partition: led.partition.clone(),
            dead_letter_topic: cluster.share_group_settings(group).dead_letter_topic,
            dead: Vec::new(),
            epoch: led.epoch,
            state_epoch: stored.state_epoch,
            checked_ms: now,
            changes: 0,
            wakes: 0,
            written: Rc::default(),
        };
        // Records back at load after their last delivery are archived
        // now: written (and sent to the dead-letter topic) first.
        let changed = self.archived(&mut slot, archived);
        self.slots.borrow_mut().insert(key.clone(), slot);
        if let Some(changes) = changed {
            self.persist(&key, led.epoch, changes).await?;
        }
        Ok(())
    }

    /// Writes `key`'s state once it holds change `changes` (unless a
    /// write since already did). A failed write drops the share-partition
    /// from memory: it is read again, as last written (what the failed
    /// write held is redelivered, and its acknowledgement was refused).
    async fn persist(&self, key: &StateKey, epoch: LeaderEpoch, changes: u64) -> Result<(), Code> {
        let gone = ResponseError::NotLeaderOrFollower.code();
        let written = self.with_current(key, epoch, |slot| slot.written.clone());
        let written = written.ok_or(gone)?;
        let outcome = self.write_through(key, epoch, &written, changes).await;
        if outcome.is_err() {
            // Only the share-partition this write was for: one read again
            // meanwhile is newer than what failed.
            let mut slots = self.slots.borrow_mut();
            let same = |s: &Slot| s.epoch == epoch && Rc::ptr_eq(&s.written, &written);
            if slots.get(key).is_some_and(same) {
                slots.remove(key);
            }
        }
        outcome.map_err(client_code)
    }

    /// Writes the share-partition whose writes `written` orders (none if
    /// it was dropped and read again meanwhile: that one does not hold
    /// what this write was for).
    async fn write_through(
        &self,
        key: &StateKey,
        epoch: LeaderEpoch,
        written: &Rc<futures::lock::Mutex<u64>>,
        changes: u64,
    ) -> Result<(), Code> {
        let gone = ResponseError::NotLeaderOrFollower.code();
        let mut done = written.lock().await;
        if *done >= changes {
            return Ok(());
        }
        let same = |slot: &Slot| slot.epoch == epoch && Rc::ptr_eq(&slot.written, written);
        // The dead letters, the state and its changes taken together: what
        // is archived while the letters go out is in neither, and stays
        // for the next write.
        let taken = self.with_same(key, same, |slot| {
            let records = std::mem::take(&mut slot.dead);
            let topic = slot
                .dead_letter_topic
                .clone()
                .filter(|_| !records.is_empty());
            let letters = topic.map(|topic| DeadLetters {
                topic,
                group: key.0.clone(),
                source: key.1,
                partition: slot.partition.clone(),
                records,
            });
            let value = ShareStateValue {
                leader_epoch: epoch.0,
                state_epoch: slot.state_epoch,
                state: Some(slot.state.persisted()),
            };
            (letters, value, slot.changes)
        });
        let (letters, value, now) = taken.ok_or(gone)?;
        if let Some(letters) = letters {
            let sink = self.dead_letters.borrow().clone();
            let sink = sink.ok_or(ResponseError::CoordinatorNotAvailable.code())?;
            let sent = sink.send(letters).await?;
            self.count(|c| c.dead_lettered += sent);
        }
        self.persister()?.write(state_key(key), value).await?;
        *done = now;
        Ok(())
    }

    /// Runs `change` on `key`'s share-partition if `same` says it is the
    /// one meant.
    fn with_same<T>(
        &self,
        key: &StateKey,
        same: impl Fn(&Slot) -> bool,
        change: impl FnOnce(&mut Slot) -> T,
    ) -> Option<T> {
        let mut slots = self.slots.borrow_mut();
        slots.get_mut(key).filter(|s| same(s)).map(change)
    }

    fn persister(&self) -> Result<Rc<dyn SharePersister>, Code> {
        let installed = self.persister.borrow().clone();
        installed.ok_or(ResponseError::CoordinatorNotAvailable.code())
    }
}

/// How many of `archived` reached the delivery limit.
fn at_limit(archived: &[ArchivedRecord]) -> u64 {
    let limit = archived.iter().filter(|a| a.why == Archived::DeliveryLimit);
    limit.count() as u64
}

/// Removes a share-partition's loading lock from the table when the last
/// load holding it ends.
struct Forget<'a>(
    &'a RefCell<HashMap<StateKey, Rc<futures::lock::Mutex<()>>>>,
    &'a StateKey,
    &'a Rc<futures::lock::Mutex<()>>,
);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        // Two left (the table's and this load's): no other load holds or
        // waits on it.
        if Rc::strong_count(self.2) <= 2 {
            self.0.borrow_mut().remove(self.1);
        }
    }
}

/// What a client is told of a failure to read or write the state: a
/// fenced leader is no longer the leader, and a state an administrator
/// changed is read again (either way the client asks again, as Kafka
/// answers both).
fn client_code(code: Code) -> Code {
    let fenced = [
        ResponseError::FencedLeaderEpoch.code(),
        ResponseError::FencedStateEpoch.code(),
    ];
    match fenced.contains(&code) {
        true => ResponseError::NotLeaderOrFollower.code(),
        false => code,
    }
}

/// The durable state's key of a share-partition.
fn state_key((group, key): &StateKey) -> ShareStateKey {
    ShareStateKey {
        group: group.clone(),
        topic: key.topic.0,
        partition: key.index as i32,
    }
}

/// `group`'s share-partitions' limits: its settings (its own configs
/// over the broker's).
fn limits(cluster: &Cluster, group: &str) -> Limits {
    let settings = cluster.share_group_settings(group);
    Limits {
        lock_ms: settings.lock_ms as i64,
        delivery_limit: settings.delivery_limit,
        max_in_flight: cluster.config.group_share_partition_max_record_locks as i64,
    }
}

/// How often expired locks end.
const TICK: std::time::Duration = std::time::Duration::from_millis(100);

/// Ends expired locks on the shard's share-partitions every tick (waking
/// the fetches waiting on their partitions, writing what was archived),
/// and once a second drops the share-partitions of partitions this broker
/// no longer leads.
pub async fn tick(partitions: Rc<super::Partitions>) {
    for round in 1u64.. {
        glommio::timer::sleep(TICK).await;
        let to_write = partitions.share_states.expire_locks(|key| {
            if let Some(partition) = partitions.table.get_open(key) {
                partition.notify_arrival();
            }
        });
        for (key, epoch, changes) in to_write {
            let partitions = partitions.clone();
            glommio::spawn_local(async move {
                let written = partitions.share_states.persist(&key, epoch, changes).await;
                if let Err(code) = written {
                    tracing::warn!(code, "cannot write a share-partition's archived records");
                }
            })
            .detach();
        }
        // Listing what the broker leads walks the whole metadata: not
        // when there is nothing to drop (most shards, most of the time).
        if round % 10 == 0 && !partitions.share_states.is_empty() {
            let led: std::collections::HashSet<PartitionKey> = partitions
                .cluster
                .led_here()
                .iter()
                .map(|r| r.key)
                .collect();
            partitions.share_states.retain_led(|key| led.contains(&key));
        }
    }
}
