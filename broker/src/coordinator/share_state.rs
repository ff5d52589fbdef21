//! The share-partitions' durable state on the group coordinator (the
//! share coordinator of this broker: `crate::groups::share_state`): a
//! partition's leader reads it when it starts leading and writes it after
//! each change that must survive a failover, appended with acks=all and
//! answered once durable. Leaders older than the newest that read or
//! wrote are fenced. Reads go through the partition's append lock like
//! writes (a read never overtakes a write already checked), and a read
//! by a newer leader stamps its epoch on the stored state durably (as
//! Kafka's share coordinator does), so the fencing outlives a failover of
//! the coordinator.

use std::time::Instant;

use super::consumer_groups::replay;
use super::offsets_partition::OffsetsPartition;
use crate::groups::records::{Key, Value};
use crate::groups::share_state::{ShareStateKey, ShareStateValue, StoredState};
use crate::kafka::Code;
use kafka_protocol::ResponseError;

impl OffsetsPartition {
    /// A leader at `leader_epoch` reads `key`'s state.
    pub async fn read_share_state(
        &self,
        key: &ShareStateKey,
        leader_epoch: i32,
    ) -> Result<StoredState, Code> {
        let (_, read) = self
            .append_then(
                |groups| {
                    // A classic or consumer group has no share-partitions
                    // (a share consumer or the HTTP queue API naming one
                    // is told GROUP_ID_NOT_FOUND, as Kafka answers a
                    // group of another kind).
                    if groups.get(&key.group).is_some_and(|e| e.share.is_none()) {
                        return (Vec::new(), Err(ResponseError::GroupIdNotFound.code()));
                    }
                    let stamp = groups.share_states.stamp(key, leader_epoch);
                    match groups.share_states.read(key, leader_epoch) {
                        Ok(read) => {
                            let stamp = stamp.map(|value| {
                                (Key::ShareState(key.clone()), Some(Value::ShareState(value)))
                            });
                            (stamp.into_iter().collect(), Ok(read))
                        }
                        refused => (Vec::new(), refused),
                    }
                },
                |groups, records| replay(groups, records, Instant::now()),
            )
            .await?;
        read
    }

    /// A leader writes `key`'s state; answered once it is durable.
    pub async fn write_share_state(
        &self,
        key: ShareStateKey,
        value: ShareStateValue,
    ) -> Result<(), Code> {
        let (_, outcome) = self
            .append_then(
                |groups| match groups.share_states.may_write(&key, &value) {
                    Ok(()) => {
                        let record = (Key::ShareState(key.clone()), Some(Value::ShareState(value)));
                        (vec![record], Ok(()))
                    }
                    Err(code) => (Vec::new(), Err(code)),
                },
                |groups, records| replay(groups, records, Instant::now()),
            )
            .await?;
        outcome
    }
}
