//! Share groups' metrics: per share-partition (group, topic, partition)
//! the records held by members, in flight, and the lag (records below the
//! high watermark not yet acknowledged or archived), from the
//! share-partitions each shard keeps for the partitions this broker
//! leads; and what they did since the broker started, summed over shards.

use std::collections::BTreeMap;

use super::{escape, Page};
use crate::partition::share_states::ShareCounts;
use crate::partition::Partitions;

/// A share-partition's gauges: acquired, in flight, lag.
type Gauges = (usize, usize, i64);

/// A gauge family: name, help, its value of a share-partition's gauges.
type GaugeFamily = (&'static str, &'static str, fn(&Gauges) -> f64);

/// One shard's share-partitions at a scrape.
#[derive(Debug, Default)]
pub struct ShareReport {
    /// What they did.
    counts: ShareCounts,
    /// (group, topic, partition) -> its gauges.
    partitions: BTreeMap<(String, String, i32), Gauges>,
}

/// The shard's share-partitions, their topics named by `names`.
pub fn report(partitions: &Partitions, names: &BTreeMap<control::TopicId, String>) -> ShareReport {
    let mut out = ShareReport {
        counts: partitions.share_states.counts(),
        ..ShareReport::default()
    };
    for (group, key, start, counts) in partitions.share_states.gauges() {
        let (Some(name), Some(open)) = (names.get(&key.topic), partitions.table.get_open(key))
        else {
            continue;
        };
        let high_watermark = open.log.high_watermark().0;
        let lag = (high_watermark - start - counts.done as i64).max(0);
        let in_flight = counts.available + counts.acquired;
        let at = (group, name.clone(), key.index as i32);
        out.partitions.insert(at, (counts.acquired, in_flight, lag));
    }
    out
}

/// The share groups' families.
pub fn render<'r>(page: &mut Page, reports: impl Iterator<Item = &'r ShareReport> + Clone) {
    let total = |f: fn(&ShareCounts) -> u64| reports.clone().map(|r| f(&r.counts)).sum::<u64>();
    let counters: [(&str, &str, u64); 5] = [
        (
            "share_records_acquired_total",
            "records share group members acquired (each delivery counts)",
            total(|c| c.acquired),
        ),
        (
            "share_records_redelivered_total",
            "records share group members acquired that had been delivered before",
            total(|c| c.redelivered),
        ),
        (
            "share_records_accepted_total",
            "records share group members accepted",
            total(|c| c.accepted),
        ),
        (
            "share_records_released_total",
            "records share group members released for another delivery",
            total(|c| c.released),
        ),
        (
            "share_records_dead_lettered_total",
            "archived records appended to their group's dead-letter topic (share.dlq.topic)",
            total(|c| c.dead_lettered),
        ),
    ];
    for (name, help, value) in counters {
        page.counter(name, help, value);
    }
    let archived = "share_records_archived_total";
    page.header(
        archived,
        "counter",
        "records archived (never handed out again): rejected by a member, or back after their last allowed delivery",
    );
    page.sample(
        archived,
        "reason=\"rejected\"",
        total(|c| c.rejected) as f64,
    );
    let at_limit = total(|c| c.archived_at_limit) as f64;
    page.sample(archived, "reason=\"delivery_limit\"", at_limit);
    let gauges: [GaugeFamily; 3] = [
        (
            "share_group_records_acquired",
            "records of the partition held by share group members now",
            |g| g.0 as f64,
        ),
        (
            "share_group_records_in_flight",
            "records of the partition handed out or to be handed out again, not yet acknowledged",
            |g| g.1 as f64,
        ),
        (
            "share_group_lag_messages",
            "records below the high watermark the share group has not acknowledged or archived",
            |g| g.2 as f64,
        ),
    ];
    for (name, help, value) in gauges {
        page.header(name, "gauge", help);
        for ((group, topic, partition), gauge) in reports.clone().flat_map(|r| &r.partitions) {
            let labels = format!(
                "group=\"{}\",topic=\"{}\",partition=\"{partition}\"",
                escape(group),
                escape(topic)
            );
            page.sample(name, &labels, value(gauge));
        }
    }
}
