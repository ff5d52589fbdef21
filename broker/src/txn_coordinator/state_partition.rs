//! The transactional ids of one `__transaction_state` partition, loaded on
//! the shard owning it while this broker leads it: each change the rules
//! decide ([`crate::transactions::store`]) is appended to the partition
//! with acks=all before it takes effect or is answered, and a decided
//! transaction's markers are sent before it completes.
//!
//! The coordinator epoch is the partition's leader epoch at load: a leader
//! refuses markers from an older one, so a deposed coordinator still
//! sending cannot overwrite the newer one's outcome.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use storage::batch::{self, RecordSpec, ValidBatch};
use storage::{LeaderEpoch, TimestampMs};

use super::markers::{self, Abandoned};
use crate::cluster::peers::PeerConnections;
use crate::cluster::routing::PartitionKey;
use crate::coordinator::offsets_partition::coordinator_code;
use crate::kafka::Code;
use crate::partition::append::Acks;
use crate::partition::markers::MarkerToWrite;
use crate::partition::table::BATCH_BYTES_CAP;
use crate::partition::Partitions;
use crate::runtime::clock::wall_ms;
use crate::transactions::metadata::TxnState;
use crate::transactions::records;
use crate::transactions::store::{Step, Then, TxnStore};

/// How long a state write waits for the in-sync replicas.
const REPLICATION_WAIT_MAX: Duration = Duration::from_secs(10);
/// The pause before writing a transaction's completion again.
const COMPLETE_RETRY_PAUSE: Duration = Duration::from_millis(200);

/// The ids of one `__transaction_state` partition.
pub struct StatePartition {
    partitions: Rc<Partitions>,
    peers: Rc<PeerConnections>,
    key: PartitionKey,
    epoch: LeaderEpoch,
    /// The ids' metadata and the rules over them.
    pub store: RefCell<TxnStore>,
    /// A producer id taken in advance, for the next id that needs one
    /// (the rules are synchronous; allocating one is not).
    spare_producer_id: Cell<Option<i64>>,
    /// Held while appending, so records reach the log in decision order.
    append: futures::lock::Mutex<()>,
    /// Replaced by a newer load (or dropped): it must write nothing more,
    /// even in the same leader epoch.
    retired: Cell<bool>,
}

impl StatePartition {
    /// Partition `key`'s ids, loaded in leader epoch `epoch`.
    pub fn new(
        partitions: Rc<Partitions>,
        peers: Rc<PeerConnections>,
        key: PartitionKey,
        epoch: LeaderEpoch,
        store: TxnStore,
    ) -> StatePartition {
        StatePartition {
            partitions,
            peers,
            key,
            epoch,
            store: RefCell::new(store),
            spare_producer_id: Cell::new(None),
            append: futures::lock::Mutex::new(()),
            retired: Cell::new(false),
        }
    }

    /// The leader epoch it was loaded in.
    pub fn epoch(&self) -> LeaderEpoch {
        self.epoch
    }

    /// The coordinator epoch its markers carry.
    pub fn coordinator_epoch(&self) -> i32 {
        self.epoch.0
    }

    /// Whether the metadata still names this broker leader of the
    /// partition in the epoch it was loaded in, and no newer load replaced
    /// it. (A lapse of the lease does not count: appends wait it out or
    /// fail and are retried, the state stays this load's.)
    pub fn still_current(&self) -> bool {
        if self.retired.get() {
            return false;
        }
        let view = self.partitions.cluster.view.borrow();
        let me = self.partitions.cluster.me;
        view.metadata
            .topics
            .get(&self.key.topic)
            .and_then(|t| t.partitions.get(self.key.index as usize))
            .is_some_and(|p| {
                p.leader == Some(me)
                    && crate::partition::epoch::from_metadata(p.leader_epoch) == self.epoch
            })
    }

    /// Replaced by a newer load, or dropped: writes nothing more.
    pub fn retire(&self) {
        self.retired.set(true);
    }

    /// Makes sure a producer id is at hand for [`StatePartition::take_producer_id`].
    pub async fn reserve_producer_id(&self) -> Result<(), Code> {
        if self.spare_producer_id.get().is_none() {
            let id = self.partitions.cluster.next_producer_id().await?;
            self.spare_producer_id.set(Some(id));
        }
        Ok(())
    }

    /// The reserved producer id (-1 if none was: the caller reserves one
    /// right before, with nothing able to run in between).
    pub fn take_producer_id(&self) -> i64 {
        self.spare_producer_id.take().unwrap_or(-1)
    }

    /// Makes `step` durable and acts on it: the answer to give (Ok, or a
    /// code) once its metadata is in the log; markers it decided are sent
    /// in the background.
    pub async fn run(self: &Rc<Self>, step: Step) -> Result<(), Code> {
        self.write(&step).await?;
        match step.then {
            Then::Answer | Then::Done => Ok(()),
            Then::FenceThenRetry => {
                self.complete_in_background(step);
                Err(ResponseError::ConcurrentTransactions.code())
            }
            Then::AnswerThenMarkers | Then::Markers => {
                self.complete_in_background(step);
                Ok(())
            }
        }
    }

    /// Sends the markers a written step decided, then completes its
    /// transaction (as a task of this shard: no client waits for it).
    pub fn complete_in_background(self: &Rc<Self>, step: Step) {
        let this = self.clone();
        glommio::spawn_local(async move { this.complete(step).await }).detach();
    }

    async fn complete(self: Rc<Self>, step: Step) {
        let commit = match step.next.state {
            TxnState::PrepareCommit => true,
            TxnState::PrepareAbort => false,
            _ => return,
        };
        let marker = MarkerToWrite {
            producer_id: step.next.producer_id,
            epoch: step.next.producer_epoch,
            commit,
            coordinator_epoch: self.coordinator_epoch(),
        };
        let sent = markers::write_all(
            &self.partitions,
            &self.peers,
            marker,
            &step.next.partitions,
            || self.still_current(),
        )
        .await;
        match sent {
            Ok(()) => {}
            Err(Abandoned::NotCoordinator) => return,
            Err(Abandoned::Fenced) => return,
        }
        // Complete* is retried while this load is current: until it is
        // written, the id answers CONCURRENT_TRANSACTIONS.
        while self.still_current() {
            let completed = self.store.borrow_mut().markers_written(&step.id, wall_ms());
            let Some(completed) = completed else {
                return;
            };
            match self.write(&completed).await {
                Ok(()) => {
                    let metrics = &self.partitions.metrics;
                    let counter = match commit {
                        true => &metrics.transactions_committed,
                        false => &metrics.transactions_aborted,
                    };
                    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
                Err(code) => {
                    tracing::warn!(id = %step.id, code, "cannot record a completed transaction yet");
                    glommio::timer::sleep(COMPLETE_RETRY_PAUSE).await;
                }
            }
        }
    }

    /// Appends `step`'s record and installs it once durable (or leaves the
    /// id as it was if the write fails).
    async fn write(&self, step: &Step) -> Result<(), Code> {
        let written = self.append_record(step).await;
        let mut store = self.store.borrow_mut();
        match written {
            Ok(()) => store.written(step),
            Err(_) => store.write_failed(&step.id),
        }
        written
    }

    async fn append_record(&self, step: &Step) -> Result<(), Code> {
        let _in_order = self.append.lock().await;
        let led = self
            .partitions
            .open_led(self.key)
            .await
            .map_err(coordinator_code)?;
        if led.epoch != self.epoch || self.retired.get() {
            return Err(ResponseError::NotCoordinator.code());
        }
        // An expired id's record is a tombstone: compaction removes it.
        let level = self.partitions.cluster.config.transaction_version;
        let value =
            (step.next.state != TxnState::Dead).then(|| records::value_for(&step.next, level));
        let spec = RecordSpec {
            timestamp_delta: 0,
            key: Some(records::key(&step.id)),
            value,
        };
        let built = batch::build(TimestampMs(wall_ms()), &[spec]);
        let batch = ValidBatch::new(built, BATCH_BYTES_CAP)
            .map_err(|_| ResponseError::RecordListTooLarge.code())?;
        led.append(
            &self.partitions,
            vec![batch],
            Acks::All,
            REPLICATION_WAIT_MAX,
        )
        .await
        .map_err(|code| {
            tracing::warn!(code, "a __transaction_state append failed");
            coordinator_code(code)
        })?;
        Ok(())
    }
}
