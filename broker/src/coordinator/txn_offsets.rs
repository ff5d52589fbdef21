//! Offsets committed inside a transaction (TxnOffsetCommit, the heart of
//! consume-transform-produce): written to the group's partition as one
//! transactional batch of the producer (its id and epoch, no sequence),
//! after its transaction coordinator confirms the partition is in the
//! producer's transaction (AddOffsetsToTxn put it there; from v5 the
//! coordinator adds it when asked), and held pending
//! until the transaction's marker lands on this partition
//! ([`Coordinator::marker_written`]): applied on COMMIT, dropped on ABORT.

use kafka_protocol::ResponseError;
use storage::batch::{set_flags, stamp_producer, ValidBatch, NO_SEQUENCE, TRANSACTIONAL_FLAG};

use super::offsets_partition::{group_records, OffsetsPartition, REPLICATION_WAIT_MAX};
use super::Coordinator;
use crate::cluster::routing::PartitionKey;
use crate::groups::records::{CommittedOffset, Key, Value};
use crate::kafka::Code;
use crate::partition::append::Acks;
use crate::partition::markers::MarkerListener;
use crate::partition::table::BATCH_BYTES_CAP;
use crate::partition::txn_verify::{verify_producer, TxnWriter};

/// The transactional producer committing.
#[derive(Debug, Clone)]
pub struct TxnProducer {
    /// Its transactional id.
    pub transactional_id: String,
    /// Its producer id.
    pub producer_id: i64,
    /// Its epoch.
    pub epoch: i16,
    /// TxnOffsetCommit v5+ (transaction.version 2): the group's partition
    /// joins the transaction here, with no AddOffsetsToTxn before.
    pub adds_partition: bool,
}

impl OffsetsPartition {
    /// TxnOffsetCommit of already validated partitions: one code for all.
    /// The member is checked when the request names one (v3+); older
    /// requests commit without.
    pub async fn commit_transactional(
        &self,
        group: &str,
        member: (&str, Option<&str>, i32),
        producer: TxnProducer,
        offsets: Vec<(String, i32, CommittedOffset)>,
    ) -> Code {
        let (member_id, instance_id, generation) = member;
        if !member_id.is_empty() || generation >= 0 {
            let allowed = match self.groups.borrow().get(group) {
                // A consumer group's member sends its member epoch.
                Some(entry) => match entry.consumer_group() {
                    Some(consumer) => consumer.may_commit(member_id, generation),
                    None => entry
                        .membership
                        .may_commit(member_id, instance_id, generation),
                },
                None => Err(ResponseError::IllegalGeneration.code()),
            };
            if let Err(code) = allowed {
                return code;
            }
        }
        match self.append_pending(group, &producer, &offsets).await {
            Ok(base) => {
                let mut groups = self.groups.borrow_mut();
                for (i, (topic, partition, committed)) in offsets.into_iter().enumerate() {
                    let slot = (group.to_string(), topic, partition);
                    groups.add_pending_offset(
                        producer.producer_id,
                        slot,
                        base + i as i64,
                        committed,
                    );
                }
                0
            }
            Err(code) => code,
        }
    }

    /// Verifies and appends the producer's offsets batch; its base offset.
    async fn append_pending(
        &self,
        group: &str,
        producer: &TxnProducer,
        offsets: &[(String, i32, CommittedOffset)],
    ) -> Result<i64, Code> {
        let records: Vec<(Key, Option<Value>)> = offsets
            .iter()
            .map(|(topic, partition, committed)| {
                let key = Key::Offset {
                    group: group.to_string(),
                    topic: topic.clone(),
                    partition: *partition,
                };
                (key, Some(Value::Offset(committed.clone())))
            })
            .collect();
        let mut bytes = group_records(&records);
        stamp_producer(
            &mut bytes,
            producer.producer_id,
            producer.epoch,
            NO_SEQUENCE,
        );
        set_flags(&mut bytes, TRANSACTIONAL_FLAG);
        let batch = ValidBatch::from_coordinator(bytes, BATCH_BYTES_CAP)
            .map_err(|_| ResponseError::RecordListTooLarge.code())?;
        let _in_order = self.append.lock().await;
        let led = self.led_now().await?;
        let verifier = self
            .partitions
            .txn_verifier
            .borrow()
            .clone()
            .ok_or(ResponseError::CoordinatorNotAvailable.code())?;
        let writer = TxnWriter {
            transactional_id: &producer.transactional_id,
            adds_partition: producer.adds_partition,
        };
        let guard =
            verify_producer(&led, writer, producer.producer_id, producer.epoch, verifier).await?;
        let appended = led
            .append_guarded(
                &self.partitions,
                vec![batch],
                Acks::All,
                REPLICATION_WAIT_MAX,
                guard,
            )
            .await?;
        Ok(appended.base_offset.0)
    }
}

/// Tells the group coordinator of a marker on its partition.
pub struct GroupMarkers(pub std::rc::Weak<Coordinator>);

impl MarkerListener for GroupMarkers {
    fn marker_written(&self, key: PartitionKey, producer_id: i64, commit: bool) {
        if let Some(coordinator) = self.0.upgrade() {
            coordinator.marker_written(key, producer_id, commit);
        }
    }
}

impl Coordinator {
    /// A transaction marker landed on `__consumer_offsets` partition
    /// `key` (this shard's): the producer's pending offsets there are
    /// applied (COMMIT) or dropped (ABORT), if its groups are loaded (a
    /// later load replays the marker).
    pub fn marker_written(&self, key: PartitionKey, producer_id: i64, commit: bool) {
        if let Some(loaded) = self.loaded_partition(key) {
            loaded
                .groups
                .borrow_mut()
                .end_transaction(producer_id, commit);
        }
    }
}
