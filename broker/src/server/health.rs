//! Whether this broker serves, and if not, why. A broker that is up but
//! serves nothing is worse than one that is down (supervisors restart the
//! latter), so it says so: `/health` answers 503 with the reasons, `/metrics`
//! carries them as gauges, and a watchdog logs a WARN per reason every few
//! seconds for as long as it lasts.
//!
//! Checked on shard 0 (which holds the broker's life with the controller)
//! against its copy of the metadata.

use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use control::{BrokerId, Metadata};

use super::shard::Shard;
use crate::cluster::lease::lease_valid;
use crate::cluster::quorum::BrokerLife;
use crate::cluster::Cluster;
use crate::partition::dirs::stray_topic_dirs;
use crate::partition::Partitions;
use crate::runtime::clock::monotonic_ms;

/// How often the watchdog looks, and logs what is wrong.
const WATCH_EVERY: Duration = Duration::from_secs(5);

/// What a health check found.
#[derive(Debug, Default, Clone)]
pub struct Health {
    /// Why the broker does not serve as it should (empty: healthy).
    pub problems: Vec<String>,
    /// Partition logs that failed a write (a full disk, an I/O error):
    /// they take no more writes until the broker restarts; reads go on.
    pub failed_logs: Vec<String>,
    /// Topic directories whose topic the metadata does not know (kept).
    pub unknown_topic_dirs: Vec<String>,
    /// Partitions this broker holds a replica of, per its metadata.
    pub replicas: usize,
    /// Since the active controller last acknowledged a heartbeat.
    pub heartbeat_age_ms: Option<u64>,
}

impl Health {
    /// Whether nothing is wrong.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks the broker now (every shard's logs, this shard's metadata).
pub async fn check(shard: &Rc<Shard>) -> Health {
    let failed_logs: Vec<String> = shard
        .partitions
        .on_every_shard(|partitions| Box::pin(async move { failed_logs_of(&partitions) }))
        .await
        .into_iter()
        .flat_map(Result::unwrap_or_default)
        .collect();
    let mut health = check_metadata(&shard.cluster);
    if let Some(first) = failed_logs.first() {
        health.problems.push(format!(
            "{} partition logs failed and take no writes (first: {first}); free space or \
             repair the disk, then restart the broker",
            failed_logs.len()
        ));
    }
    health.failed_logs = failed_logs;
    health
}

/// The open logs of this shard that failed, with why.
fn failed_logs_of(partitions: &Partitions) -> Vec<String> {
    partitions
        .table
        .open_partitions()
        .into_iter()
        .filter_map(|(_, p)| {
            let reason = p.log.failure()?;
            Some(format!("{}: {reason}", p.log.dir().display()))
        })
        .collect()
}

/// What shard 0's metadata and the broker's life say.
fn check_metadata(cluster: &Cluster) -> Health {
    let view = cluster.view.borrow();
    let root = cluster.partitions_root();
    let mut health = Health {
        unknown_topic_dirs: stray_topic_dirs(&root, &view.metadata).unknown,
        replicas: replicas_of(&view.metadata, cluster.me),
        heartbeat_age_ms: cluster
            .life
            .last_heartbeat_ms
            .get()
            .map(|at| monotonic_ms().saturating_sub(at)),
        ..Health::default()
    };
    health.problems = problems(
        &cluster.life,
        &health,
        &root,
        cluster.config.broker_session_timeout_ms,
    );
    health
}

fn problems(life: &BrokerLife, health: &Health, root: &Path, session_ms: u64) -> Vec<String> {
    let mut problems = Vec::new();
    let error = life.controller_error.borrow().clone();
    let because = error
        .map(|e| format!(" (last error: {e})"))
        .unwrap_or_default();
    if !life.live.get() {
        problems.push(format!(
            "starting: not yet registered and unfenced by the active controller{because}"
        ));
    } else if !lease_valid() {
        let age = health
            .heartbeat_age_ms
            .map_or("ever".to_string(), |ms| format!("{ms} ms"));
        problems.push(format!(
            "no heartbeat acknowledged by the active controller for {age} (session {session_ms} ms): \
             leading nothing until one is{because}"
        ));
    }
    let dirs = topic_dirs(root);
    if dirs > 0 && health.replicas == 0 && life.live.get() {
        problems.push(format!(
            "holds partition data ({dirs} topic directories under {}) but the metadata gives it \
             no partition to lead or follow",
            root.display()
        ));
    }
    problems
}

/// Partitions with a replica on `broker`.
fn replicas_of(metadata: &Metadata, broker: BrokerId) -> usize {
    metadata
        .topics
        .values()
        .flat_map(|t| &t.partitions)
        .filter(|p| p.replicas.contains(&broker))
        .count()
}

fn topic_dirs(root: &Path) -> usize {
    std::fs::read_dir(root).map_or(0, |entries| {
        entries.flatten().filter(|e| e.path().is_dir()).count()
    })
}

/// Logs what is wrong every [`WATCH_EVERY`], for as long as it is.
pub async fn watchdog(shard: Rc<Shard>) {
    let mut was_ok = true;
    let mut unknown_reported = Vec::new();
    let mut round = 0u64;
    loop {
        round += 1;
        glommio::timer::sleep(WATCH_EVERY).await;
        if shard.cluster.life.shutting_down.get() {
            return;
        }
        let health = check(&shard).await;
        for problem in &health.problems {
            tracing::warn!(problem = %problem, "the broker is not serving as it should");
        }
        // Unknown directories are news when they change, and a reminder
        // every minute.
        let remind = round.is_multiple_of(12) || health.unknown_topic_dirs != unknown_reported;
        if !health.unknown_topic_dirs.is_empty() && remind {
            unknown_reported = health.unknown_topic_dirs.clone();
            tracing::warn!(
                dir = %shard.cluster.partitions_root().display(),
                unknown = ?health.unknown_topic_dirs,
                "partition data of topics the metadata does not know: kept, not served \
                 (remove it by hand if those topics are gone for good)"
            );
        }
        if health.ok() && !was_ok {
            tracing::info!("the broker serves again");
        }
        was_ok = health.ok();
    }
}
