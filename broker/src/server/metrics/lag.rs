//! Consumer lag for /metrics: every partition a group coordinated here
//! committed or is assigned, wherever it is led (the ends of partitions
//! led elsewhere asked of their leaders), as Kafka defines the lag (from
//! a commit), the part retention deleted, and the logs of partitions never
//! committed apart.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::{escape, Ends, Page};
use crate::cluster::remote_watermarks::of_led_elsewhere;
use crate::cluster::Cluster;
use crate::groups::lag::PartitionLag;

/// (group, topic, partition).
pub(super) type GroupPartition = (String, String, i32);

/// How long a scrape waits for other brokers' watermarks.
const REMOTE_WATERMARKS_WAIT: Duration = Duration::from_secs(2);

/// The lag of every partition the groups coordinated here committed or
/// were assigned, wherever it is led: the log ends of partitions led
/// elsewhere asked of their leaders.
pub(super) async fn of_groups<'a>(
    cluster: &Cluster,
    committed: impl Iterator<Item = (&'a GroupPartition, &'a i64)>,
    assigned: impl Iterator<Item = &'a GroupPartition>,
    ends: &Ends,
) -> BTreeMap<GroupPartition, PartitionLag> {
    let committed: BTreeMap<&GroupPartition, i64> = committed.map(|(k, v)| (k, *v)).collect();
    let keys: BTreeSet<&GroupPartition> = committed.keys().copied().chain(assigned).collect();
    let elsewhere: BTreeSet<(String, i32)> = (keys.iter())
        .map(|(_, topic, partition)| (topic.clone(), *partition))
        .filter(|key| !ends.contains_key(key))
        .collect();
    let remote = match elsewhere.is_empty() {
        true => Ends::new(),
        false => of_led_elsewhere(cluster, elsewhere, REMOTE_WATERMARKS_WAIT).await,
    };
    (keys.into_iter())
        .filter_map(|key| {
            let (group, topic, partition) = key;
            let at = (topic.clone(), *partition);
            let (log_start, log_end) = ends.get(&at).or_else(|| remote.get(&at))?;
            let lag = PartitionLag {
                committed: committed.get(key).copied(),
                log_start: *log_start,
                log_end: *log_end,
            };
            Some(((group.clone(), topic.clone(), *partition), lag))
        })
        .collect()
}

/// The lag families: consumer_lag_messages and consumer_lag_lost_messages
/// for committed partitions, consumer_uncommitted_log_messages for the rest.
pub(super) fn render(page: &mut Page, lags: &BTreeMap<GroupPartition, PartitionLag>) {
    let labels = |(group, topic, partition): &GroupPartition| {
        format!(
            "group=\"{}\",topic=\"{}\",partition=\"{partition}\"",
            escape(group),
            escape(topic)
        )
    };
    // Kafka's lag is defined from a commit: a partition assigned but never
    // committed is shown apart (its whole log would page as lag).
    let committed = || lags.iter().filter(|(_, lag)| lag.committed.is_some());
    page.header(
        "consumer_lag_messages",
        "gauge",
        "records between a group's committed offset and the partition's end, for groups coordinated here, wherever the partition is led",
    );
    for (key, lag) in committed() {
        page.sample("consumer_lag_messages", &labels(key), lag.lag() as f64);
    }
    page.header(
        "consumer_lag_lost_messages",
        "gauge",
        "the part of a group's lag that retention deleted before the group read it",
    );
    for (key, lag) in committed() {
        let lost = lag.lost_to_retention() as f64;
        page.sample("consumer_lag_lost_messages", &labels(key), lost);
    }
    page.header(
        "consumer_uncommitted_log_messages",
        "gauge",
        "records in a partition a member of a group coordinated here is assigned but the group never committed (from the log start: what reading from the earliest offset takes)",
    );
    for (key, lag) in lags.iter().filter(|(_, lag)| lag.committed.is_none()) {
        let whole = lag.lag() as f64;
        page.sample("consumer_uncommitted_log_messages", &labels(key), whole);
    }
}
