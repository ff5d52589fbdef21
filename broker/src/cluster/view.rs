//! A shard's copy of the committed metadata, kept by following the
//! metadata service's stream of changes (shard 0's local stream, or a
//! shared channel from it): no state is shared between shards.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use control::service::Change;
use control::{Metadata, MetadataRecord, Topic, TopicId};
use glommio::channels::local_channel::LocalReceiver;
use glommio::channels::shared_channel::ConnectedReceiver;

/// Changes a shard may fall behind before it must resubscribe.
pub const CHANGES_QUEUED_MAX: usize = 4096;

/// A shard's view of the cluster.
#[derive(Debug, Default)]
pub struct ShardMetadata {
    /// The committed metadata as of the last change applied.
    pub metadata: Metadata,
    /// The metadata log index it is as of (None until the first state).
    pub applied_index: Option<u64>,
    /// The active controller (this broker, for a one-voter quorum).
    pub controller_id: i32,
    /// Topics as of this metadata, shared by the callers that keep one
    /// (a request's partitions, a tick's replicas): copied once per topic
    /// and change, not once per partition (a 10,000-partition topic's
    /// list copied for each of its partitions was 10^8 copies).
    shared_topics: RefCell<HashMap<TopicId, Rc<Topic>>>,
}

impl ShardMetadata {
    /// Topic `id`, shared (None if the metadata has no such topic).
    pub fn shared_topic(&self, id: TopicId) -> Option<Rc<Topic>> {
        if let Some(topic) = self.shared_topics.borrow().get(&id) {
            return Some(topic.clone());
        }
        let topic = Rc::new(self.metadata.topic(id).ok()?.clone());
        self.shared_topics.borrow_mut().insert(id, topic.clone());
        Some(topic)
    }
}

/// Shared by the tasks of one shard.
pub type View = Rc<RefCell<ShardMetadata>>;

/// Follows the first shard's local change stream (it starts with the
/// whole state, as a shared one does).
pub async fn follow_local(
    changes: LocalReceiver<Change>,
    view: View,
    on_change: impl Fn(Option<&MetadataRecord>),
) {
    while let Some(change) = changes.recv().await {
        apply(&view, change, &on_change);
    }
    tracing::warn!("the metadata change stream ended on this shard");
}

/// Follows a change stream from another shard (it starts with the state).
pub async fn follow_shared(
    changes: ConnectedReceiver<Change>,
    view: View,
    on_change: impl Fn(Option<&MetadataRecord>),
) {
    while let Some(change) = changes.recv().await {
        apply(&view, change, &on_change);
    }
    tracing::warn!("the metadata change stream ended on this shard");
}

/// Applies a change to the shard's copy; `on_change` hears of it (with
/// the record, or None when the whole state was replaced) if it applied.
fn apply(view: &View, change: Change, on_change: &impl Fn(Option<&MetadataRecord>)) {
    let record = change.record.clone().filter(|_| change.metadata.is_none());
    let applied = {
        let mut shard = view.borrow_mut();
        let shard = &mut *shard;
        let applied = control::raft::changes::apply_change(
            &mut shard.metadata,
            &mut shard.applied_index,
            change,
        );
        if applied {
            shard.shared_topics.get_mut().clear();
        }
        applied
    };
    if applied {
        on_change(record.as_ref());
    }
}
