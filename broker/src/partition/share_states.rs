//! The share-partitions of a shard (`crate::share::partition`): one per
//! share group reading each partition the shard leads, kept in memory on
//! the partition's shard, and the work ShareFetch and ShareAcknowledge do
//! on them there: acquiring records (reading the log first, so only
//! offsets of batches it read are handed out, within the request's
//! bytes), acknowledging, giving a member's records back, and ending
//! expired locks (a tick of the shard).
//!
//! A share-partition starts at the high watermark when a group first
//! reads the partition here (`share.auto.offset.reset` latest, Kafka's
//! default). It is not yet durable: a new leader starts afresh (see
//! docs/queues.md, "The plan").

use std::cell::RefCell;
use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use storage::batch::split_stored;
use storage::Offset;

use super::read::Bound;
use super::served::ServedPartition;
use super::table::BATCH_BYTES_CAP;
use crate::cluster::routing::PartitionKey;
use crate::config::BrokerConfig;
use crate::kafka::Code;
use crate::runtime::clock::monotonic_ms;
use crate::share::partition::{Ack, AckError, Acquired, Limits, SharePartition};

/// A group's share-partition of one partition.
type StateKey = (String, PartitionKey);

/// What a member asks a share-partition for.
#[derive(Debug, Clone, Copy)]
pub struct Wanted {
    /// The most records.
    pub max_records: usize,
    /// The most bytes of batches (at least one batch is read).
    pub max_bytes: usize,
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
    /// The high watermark when read (a long poll waits for it to move).
    pub high_watermark: Offset,
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

/// The share-partitions of one shard.
#[derive(Default)]
pub struct ShareStates {
    states: RefCell<HashMap<StateKey, SharePartition>>,
}

impl ShareStates {
    /// Acquires records of `led` for `member` of `group` and reads the
    /// batches holding them.
    pub async fn acquire(
        &self,
        led: &ServedPartition,
        (group, member): (&str, &str),
        wanted: Wanted,
        config: &BrokerConfig,
    ) -> Result<ShareRead, Code> {
        let key = (group.to_string(), led.key());
        let log = &led.partition.log;
        let high_watermark = log.high_watermark();
        let from = {
            let mut states = self.states.borrow_mut();
            let state = states
                .entry(key.clone())
                .or_insert_with(|| SharePartition::new(high_watermark.0, limits(config)));
            state.log_start_moved(log.log_start().0);
            state.expire_locks(monotonic_ms() as i64);
            state.next_to_acquire()
        };
        let nothing = ShareRead {
            high_watermark,
            ..ShareRead::default()
        };
        if from >= high_watermark.0 || wanted.max_records == 0 {
            return Ok(nothing);
        }
        let read = led
            .read(from, wanted.max_bytes, Bound::HighWatermark)
            .await?;
        let batches = split_stored(&read.joined(), BATCH_BYTES_CAP)
            .map_err(|_| ResponseError::CorruptMessage.code())?;
        let Some(below) = batches.last().map(|(header, _)| header.next_offset().0) else {
            return Ok(nothing);
        };
        // Taken after the read: what other fetches did meanwhile counts.
        let acquired = {
            let mut states = self.states.borrow_mut();
            let Some(state) = states.get_mut(&key) else {
                return Ok(nothing);
            };
            let now = monotonic_ms() as i64;
            state.acquire_within(member, wanted.max_records, (from, below), now)
        };
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
            high_watermark,
        })
    }

    /// `member` of `group` acknowledges `acks` on partition `key`, in
    /// order; the first refusal stops it (Kafka answers one error per
    /// partition). Records coming back wake the partition's waiting
    /// fetches.
    pub fn acknowledge(
        &self,
        led: &ServedPartition,
        (group, member): (&str, &str),
        acks: &[Acknowledgement],
    ) -> Result<(), Code> {
        let key = (group.to_string(), led.key());
        let mut states = self.states.borrow_mut();
        let Some(state) = states.get_mut(&key) else {
            // Nothing was handed out here (a new leader): nothing is held.
            return Err(ResponseError::InvalidRecordState.code());
        };
        let now = monotonic_ms() as i64;
        let mut back = false;
        let mut outcome = Ok(());
        for a in acks {
            let done = state.acknowledge(member, (a.first, a.last), a.ack, now);
            back |= a.ack == Ack::Release && done.is_ok();
            if let Err(e) = done {
                outcome = Err(match e {
                    AckError::NotHeld(_) => ResponseError::InvalidRecordState.code(),
                    AckError::BadRange => ResponseError::InvalidRequest.code(),
                });
                break;
            }
        }
        drop(states);
        if back {
            led.partition.notify_arrival();
        }
        outcome
    }

    /// `member` of `group` left partition `key` (its session closed or
    /// was replaced, its connection closed): what it held comes back.
    pub fn release_member(&self, led: &ServedPartition, (group, member): (&str, &str)) {
        let key = (group.to_string(), led.key());
        let mut states = self.states.borrow_mut();
        if let Some(state) = states.get_mut(&key) {
            state.release_member(member);
            drop(states);
            led.partition.notify_arrival();
        }
    }

    /// Ends the locks expired by now on every share-partition of the
    /// shard; `wake` is called for each partition where records came back.
    pub fn expire_locks(&self, mut wake: impl FnMut(PartitionKey)) {
        let now = monotonic_ms() as i64;
        let mut states = self.states.borrow_mut();
        for ((_, key), state) in states.iter_mut() {
            let before = state.next_to_acquire();
            state.expire_locks(now);
            if state.next_to_acquire() < before {
                wake(*key);
            }
        }
    }

    /// Drops the share-partitions of partitions this shard no longer
    /// leads (`leads` says which it does).
    pub fn retain_led(&self, leads: impl Fn(PartitionKey) -> bool) {
        self.states.borrow_mut().retain(|(_, key), _| leads(*key));
    }

    /// The share-partition of `group` on `key`, for a look (tests,
    /// metrics).
    pub fn with<T>(
        &self,
        group: &str,
        key: PartitionKey,
        look: impl FnOnce(&SharePartition) -> T,
    ) -> Option<T> {
        let states = self.states.borrow();
        states.get(&(group.to_string(), key)).map(look)
    }
}

/// The share-partitions' limits from the broker's settings.
fn limits(config: &BrokerConfig) -> Limits {
    Limits {
        lock_ms: config.group_share_record_lock_duration_ms as i64,
        delivery_limit: config.group_share_delivery_count_limit,
        max_in_flight: config.group_share_partition_max_record_locks as i64,
    }
}

/// How often expired locks end.
const TICK: std::time::Duration = std::time::Duration::from_millis(100);

/// Ends expired locks on the shard's share-partitions every tick (waking
/// the fetches waiting on their partitions), and once a second drops the
/// share-partitions of partitions this broker no longer leads.
pub async fn tick(partitions: std::rc::Rc<super::Partitions>) {
    for round in 1u64.. {
        glommio::timer::sleep(TICK).await;
        partitions.share_states.expire_locks(|key| {
            if let Some(partition) = partitions.table.get_open(key) {
                partition.notify_arrival();
            }
        });
        if round % 10 == 0 {
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
