//! The share-partitions' durable state on the group coordinator (the
//! share coordinator of this broker: `crate::groups::share_state`): a
//! partition's leader reads it when it starts leading and writes it after
//! each change that must survive a failover, appended with acks=all and
//! answered once durable. Leaders older than the newest that read or
//! wrote are fenced.

use std::time::Instant;

use super::consumer_groups::replay;
use super::offsets_partition::OffsetsPartition;
use crate::groups::records::{Key, Value};
use crate::groups::share_state::{ShareStateKey, ShareStateValue};
use crate::kafka::Code;
use crate::share::partition::PersistedState;

impl OffsetsPartition {
    /// A leader at `leader_epoch` reads `key`'s state (None: never
    /// written).
    pub fn read_share_state(
        &self,
        key: &ShareStateKey,
        leader_epoch: i32,
    ) -> Result<Option<PersistedState>, Code> {
        let mut groups = self.groups.borrow_mut();
        groups.share_states.read(key, leader_epoch)
    }

    /// A leader writes `key`'s state; answered once it is durable.
    pub async fn write_share_state(
        &self,
        key: ShareStateKey,
        value: ShareStateValue,
    ) -> Result<(), Code> {
        let (_, outcome) = self
            .append_then(
                |groups| match groups.share_states.may_write(&key, value.leader_epoch) {
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
