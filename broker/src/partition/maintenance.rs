//! Retention and compaction in the background, on each shard for the
//! partitions it owns and this broker leads.
//!
//! Every `retention_check_interval_ms` the shard walks its partitions
//! (opening those not yet open, so a restarted broker cleans up too) and,
//! by the topic's current `cleanup.policy`, deletes whole sealed segments
//! past `retention.ms` / `retention.bytes` and compacts compacted topics.
//! It also forgets idempotent producers silent for longer than
//! `producer_id_expiration_ms` (on the broker's clock), in every
//! replica it holds. The work runs in a task queue with few shares and
//! latency not important, so produce and fetch traffic go first.

use std::rc::Rc;
use std::time::Duration;

use control::{CleanupPolicy, Topic};
use glommio::{Latency, Shares};
use storage::{CompactionPolicy, RetentionPolicy};

use super::served::ServedPartition;
use super::tiered::{self, upload, Tiering};
use super::Partitions;
use crate::cluster::routing::{PartitionKey, Replica};

/// The maintenance queue's shares (request handling has the default 1000).
const BACKGROUND_SHARES: usize = 100;

/// Runs for as long as the shard does.
pub async fn run(partitions: Rc<Partitions>) {
    let config = &partitions.cluster.config;
    let interval = Duration::from_millis(config.retention_check_interval_ms.max(10));
    let queue = glommio::executor().create_task_queue(
        Shares::Static(BACKGROUND_SHARES),
        Latency::NotImportant,
        "maintenance",
    );
    loop {
        glommio::timer::sleep(interval).await;
        let mut upload_lag = 0;
        let led = partitions.cluster.led_here();
        keep_snapshots_of_followers(&partitions, &led);
        for Replica { key, topic, .. } in led {
            let partitions = partitions.clone();
            match glommio::spawn_local_into(
                async move { maintain(&partitions, key, &topic).await },
                queue,
            ) {
                Ok(task) => upload_lag += task.await,
                Err(e) => tracing::error!(error = %e, "cannot schedule maintenance"),
            }
        }
        let lag = &partitions.metrics.tiered.upload_lag_bytes;
        lag.store(upload_lag, std::sync::atomic::Ordering::Relaxed);
        expire_producers(&partitions);
    }
}

/// Replicas not led here keep the producer snapshots their topic's
/// default says (a tiered topic's all: they may lead next and upload
/// them); a leader's tiered pass keeps only those not uploaded yet.
fn keep_snapshots_of_followers(partitions: &Partitions, led: &[Replica]) {
    for replica in partitions.cluster.replicas_here() {
        if led.iter().any(|led| led.key == replica.key) {
            continue;
        }
        if let Some(partition) = partitions.table.get_open(replica.key) {
            tiered::keep_snapshots_by_default(&partition.log, &replica.topic);
        }
    }
}

/// Forgets producers silent past `producer_id_expiration_ms` in every
/// replica open on this shard (leaders and followers alike).
fn expire_producers(partitions: &Partitions) {
    let expiration = partitions.cluster.config.producer_id_expiration_ms as i64;
    let now = storage::TimestampMs(crate::runtime::clock::wall_ms());
    for (key, partition) in partitions.table.open_partitions() {
        let expired = partition.log.expire_producers(now, expiration);
        if expired > 0 {
            tracing::debug!(
                partition = key.index,
                expired,
                "expired idempotent producers"
            );
        }
    }
}

/// The retention settings of a topic's config (negative: unlimited).
pub fn retention_policy(topic: &Topic) -> RetentionPolicy {
    let config = &topic.config;
    RetentionPolicy {
        retention_ms: (config.retention_ms >= 0).then_some(config.retention_ms),
        retention_bytes: (config.retention_bytes >= 0).then_some(config.retention_bytes as u64),
        deletable_through: None,
    }
}

/// Compacts, applies retention or, for a tiered topic, uploads and
/// applies local and total retention. Returns the bytes of sealed
/// segments a tiered partition has not uploaded yet.
async fn maintain(partitions: &Partitions, key: PartitionKey, topic: &Topic) -> u64 {
    let Ok(led) = partitions.open_led(key).await else {
        return 0;
    };
    if let Some(tiering) = &led.tiering {
        return tiered_pass(partitions, tiering, &led).await;
    }
    let log = &led.partition.log;
    tiered::keep_snapshots_by_default(log, topic);
    let policy = topic.config.cleanup_policy;
    if matches!(
        policy,
        CleanupPolicy::Compact | CleanupPolicy::CompactDelete
    ) {
        let compaction = CompactionPolicy {
            delete_retention_ms: topic.config.delete_retention_ms,
        };
        match log.compact(compaction).await {
            Ok(stats) => {
                tracing::debug!(topic = %topic.name, partition = key.index, ?stats, "compacted")
            }
            Err(e) => {
                tracing::error!(topic = %topic.name, partition = key.index, error = %e, "compaction failed")
            }
        }
    }
    if matches!(policy, CleanupPolicy::Delete | CleanupPolicy::CompactDelete) {
        match log.apply_retention(retention_policy(topic)).await {
            Ok(0) => {}
            Ok(deleted) => {
                tracing::info!(topic = %topic.name, partition = key.index, deleted, "retention deleted segments")
            }
            Err(e) => {
                tracing::error!(topic = %topic.name, partition = key.index, error = %e, "retention failed")
            }
        }
    }
    0
}

/// A tiered partition's pass (`tiered::upload`); its upload lag.
async fn tiered_pass(partitions: &Partitions, tiering: &Tiering, led: &ServedPartition) -> u64 {
    let topic = &led.topic.name;
    match upload::pass(partitions, tiering, led).await {
        Ok(done) => {
            if done.uploaded + done.deleted_locally + done.deleted_remotely > 0 {
                tracing::info!(%topic, partition = led.index, ?done, "tiered storage pass");
            }
            done.lag_bytes
        }
        Err(e) => {
            let errors = &tiering.metrics.tiered.upload_errors;
            errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(%topic, partition = led.index, error = %e, "tiered storage pass failed; retried next pass, nothing deleted that is not uploaded");
            let manifest = led.partition.remote.current(led.epoch).unwrap_or_default();
            upload::lag_bytes(&led.partition.log.sealed_segments(), &manifest)
        }
    }
}
