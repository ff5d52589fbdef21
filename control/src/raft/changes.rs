//! The stream of committed metadata changes that every shard follows, and
//! the copy of the metadata a follower keeps from it. Sans-IO: the
//! service sends these over channels; the simulation checks that a copy
//! fed this way always equals its node's applied metadata.

use crate::model::record::MetadataRecord;
use crate::model::Metadata;
use crate::raft::node::Applied;

/// One committed change, in log order.
#[derive(Debug, Clone)]
pub struct Change {
    /// The log index it brings a follower to.
    pub index: u64,
    /// The record applied at `index`, if this change is one.
    pub record: Option<MetadataRecord>,
    /// The whole state as of `index`: the first change a follower
    /// receives, and whenever a snapshot replaced the state.
    pub metadata: Option<Box<Metadata>>,
}

impl Change {
    /// The whole state as of `index`.
    pub fn state(index: u64, metadata: &Metadata) -> Change {
        Change {
            index,
            record: None,
            metadata: Some(Box::new(metadata.clone())),
        }
    }

    /// The changes for entries a node applied (in order), given the
    /// node's metadata and applied index after them. Where a snapshot
    /// replaced the state, one change carries the whole state as of now:
    /// the records around it are in it already, and applying them again
    /// would add a topic's new partitions twice.
    pub fn for_applied(applied: &[Applied], metadata: &Metadata, index: u64) -> Vec<Change> {
        if applied.iter().any(|a| a.record.is_none()) {
            return vec![Change::state(index, metadata)];
        }
        applied
            .iter()
            .map(|a| Change {
                index: a.index,
                record: a.record.clone(),
                metadata: None,
            })
            .collect()
    }
}

/// A follower's copy of the committed metadata.
#[derive(Debug, Default, Clone)]
pub struct MetadataCopy {
    /// The metadata as of `index`.
    pub metadata: Metadata,
    /// The last log index applied; None until the first state arrives.
    pub index: Option<u64>,
}

impl MetadataCopy {
    /// Applies a change (see [`apply_change`]).
    pub fn apply(&mut self, change: Change) -> bool {
        apply_change(&mut self.metadata, &mut self.index, change)
    }
}

/// Applies a change to a copy of the metadata as of `index`. A record
/// before the first state, or at an index the copy has passed, is ignored
/// (returns false): applying a record twice is not always harmless.
pub fn apply_change(metadata: &mut Metadata, index: &mut Option<u64>, change: Change) -> bool {
    if let Some(state) = change.metadata {
        if index.is_some_and(|i| change.index < i) {
            return false;
        }
        *metadata = *state;
        *index = Some(change.index);
        return true;
    }
    let Some(record) = change.record else {
        return false;
    };
    match *index {
        Some(at) if change.index > at => {
            // Refused records change nothing, as on the quorum.
            let _ = metadata.apply(&record);
            *index = Some(change.index);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::record::BrokerRegistration;
    use crate::model::types::{BrokerId, Incarnation};

    fn register(id: i32) -> MetadataRecord {
        MetadataRecord::RegisterBroker(BrokerRegistration {
            id: BrokerId(id),
            incarnation: Incarnation(1),
            listener: "127.0.0.1:9092".into(),
            rack: None,
            shards: 1,
        })
    }

    fn applied(index: u64, record: Option<MetadataRecord>) -> Applied {
        Applied {
            index,
            record,
            refused: None,
        }
    }

    #[test]
    fn a_copy_starts_from_a_state_and_applies_each_record_once() {
        let mut node = Metadata::default();
        node.apply(&register(1)).unwrap();
        let mut copy = MetadataCopy::default();
        assert!(
            !copy.apply(Change::for_applied(&[applied(1, Some(register(1)))], &node, 1).remove(0))
        );
        assert!(copy.apply(Change::state(1, &node)));
        // The same record again (a subscriber that saw it in the state).
        assert!(
            !copy.apply(Change::for_applied(&[applied(1, Some(register(1)))], &node, 1).remove(0))
        );
        node.apply(&register(2)).unwrap();
        for change in Change::for_applied(&[applied(2, Some(register(2)))], &node, 2) {
            assert!(copy.apply(change));
        }
        assert_eq!(copy.metadata, node);
        assert_eq!(copy.index, Some(2));
    }

    #[test]
    fn a_snapshot_among_records_becomes_one_state_as_of_the_last() {
        let mut node = Metadata::default();
        for id in 1..=3 {
            node.apply(&register(id)).unwrap();
        }
        let batch = [applied(10, None), applied(11, Some(register(3)))];
        let changes = Change::for_applied(&batch, &node, 11);
        assert_eq!(changes.len(), 1);
        let mut copy = MetadataCopy::default();
        assert!(copy.apply(Change::state(5, &Metadata::default())));
        for change in changes {
            copy.apply(change);
        }
        assert_eq!(copy.metadata, node);
        assert_eq!(copy.index, Some(11));
    }
}
