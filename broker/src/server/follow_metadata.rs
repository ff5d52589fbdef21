//! A shard follows the metadata: each committed change updates its view,
//! drops the partitions of deleted topics (shard 0 also removes their
//! files) and asks the replica roles to be reconciled, one pass at a time.

use std::rc::Rc;

use control::MetadataRecord;

use super::shard::Shard;
use super::start::Changes;
use crate::cluster::view;
use crate::partition::dirs::{reconcile_topic_dirs, remove_topic_dirs};
use crate::runtime::sharded::ShardId;

/// A deleted topic's objects in tiered storage go too: deleted by the
/// live broker with the lowest id (one broker, not every one), in the
/// background. (A topic deleted while that broker was down keeps its
/// objects: docs/tiered-storage.md.)
fn delete_remote_objects(shard: &Rc<Shard>, topic: control::TopicId) {
    let Some(tiering) = shard.partitions.tiering.clone() else {
        return;
    };
    let me = shard.cluster.me;
    let lowest = shard
        .cluster
        .view
        .borrow()
        .metadata
        .live_brokers()
        .map(|b| b.registration.id)
        .min();
    if lowest != Some(me) {
        return;
    }
    glommio::spawn_local(async move {
        match crate::partition::tiered::delete_topic_objects(&tiering, topic).await {
            Ok(0) => {}
            Ok(deleted) => tracing::info!(%topic, deleted, "a deleted topic's objects removed from tiered storage"),
            Err(e) => tracing::warn!(%topic, error = %e, "a deleted topic's objects could not all be removed from tiered storage"),
        }
    })
    .detach();
}

/// Follows the metadata changes into the shard's view and drops the
/// partitions of deleted topics; shard 0 also removes a deleted topic's
/// files (only that topic's: while the log replays at start, the view does
/// not know the topics created later yet).
pub async fn follow_metadata(shard: Rc<Shard>, changes: Changes) {
    // Replica roles follow the metadata, one pass at a time: a change
    // arriving during a pass asks for one more.
    let (wanted, passes) = glommio::channels::local_channel::new_bounded::<()>(1);
    glommio::spawn_local({
        let shard = shard.clone();
        async move {
            while passes.recv().await.is_some() {
                crate::replica::reconcile(&shard.replication).await;
            }
        }
    })
    .detach();
    let on_change = {
        let shard = shard.clone();
        move |record: Option<&MetadataRecord>| {
            let cluster = &shard.cluster;
            let root = cluster.partitions_root();
            shard
                .partitions
                .table
                .forget_deleted(&cluster.view.borrow().metadata);
            if cluster.shard() == ShardId::FIRST {
                match record {
                    Some(MetadataRecord::DeleteTopic { id }) => {
                        remove_topic_dirs(&root, *id);
                        delete_remote_objects(&shard, *id);
                    }
                    // The whole state (at start, or a snapshot from the
                    // leader): deletions it holds may not have been seen.
                    None => {
                        reconcile_topic_dirs(&root, &cluster.view.borrow().metadata);
                    }
                    Some(_) => {}
                }
            }
            let _ = wanted.try_send(());
        }
    };
    match changes {
        Changes::Local(_, local) => {
            view::follow_local(local, shard.cluster.view.clone(), on_change).await
        }
        Changes::Shared(shared) => {
            view::follow_shared(shared, shard.cluster.view.clone(), on_change).await
        }
    }
}
