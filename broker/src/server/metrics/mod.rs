//! The broker's metrics, served at `GET /metrics` in Prometheus's text
//! format.
//!
//! Each shard counts into its own [`ShardMetrics`] (atomics no other core
//! writes, so counting costs an uncontended add); a scrape sums every
//! shard's, and reads the rest where it lives at that moment: storage
//! counters from each shard's open logs, consumer lag from the groups its
//! coordinators have loaded and the high watermarks of the partitions it leads,
//! under-replicated partitions from the metadata, disk use from the file
//! system.

mod follower;
mod lag;
mod share;
mod tiered;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use super::connection::admission::Admission;
use super::shard::Shard;
use crate::cluster::Cluster;
use crate::coordinator::offsets_partition::GroupGauges;
use crate::coordinator::Coordinator;
use crate::counters::{HistogramTotal, Registry, ShardMetrics, API_KEYS, LATENCY_BUCKETS_SECONDS};
use crate::partition::role::Role;

/// What one shard reports at a scrape.
#[derive(Debug, Default)]
struct ShardReport {
    storage: storage::LogStats,
    /// The shard's syncs: plain fdatasyncs, and file-system rounds.
    syncs: storage::io::sync_rounds::SyncCounts,
    /// Bytes the shard's batch caches hold, and their shared limit.
    cache: (usize, usize),
    /// (topic, partition) -> (log start, high watermark) of partitions led here.
    ends: BTreeMap<(String, i32), (i64, i64)>,
    /// (topic, partition) -> (last stable offset, open transactions) of
    /// partitions led here.
    stability: BTreeMap<(String, i32), (i64, usize)>,
    /// (group, topic, partition) -> committed offset, of groups coordinated here.
    committed: BTreeMap<(String, String, i32), i64>,
    /// (group, topic, partition) assigned to a member of a group
    /// coordinated here, committed or not.
    assigned: BTreeSet<(String, String, i32)>,
    /// group -> its type, rebalances and members, of groups coordinated here.
    groups: BTreeMap<String, GroupGauges>,
    /// Share groups' share-partitions of partitions led here.
    share: share::ShareReport,
}

async fn report(coordinator: Rc<Coordinator>) -> ShardReport {
    let mut out = ShardReport {
        syncs: storage::io::dma::shard_sync_counts(),
        ..ShardReport::default()
    };
    let partitions = &coordinator.partitions;
    let names: BTreeMap<control::TopicId, String> = partitions
        .cluster
        .view
        .borrow()
        .metadata
        .topics
        .values()
        .map(|t| (t.id, t.name.clone()))
        .collect();
    let share = partitions.table.cache_share();
    out.cache = (share.used(), share.limit());
    out.share = share::report(partitions, &names);
    for (key, partition) in partitions.table.open_partitions() {
        add_stats(&mut out.storage, &partition.log.stats());
        let leads = matches!(&*partition.role.borrow(), Role::Leader(_));
        if let (true, Some(name)) = (leads, names.get(&key.topic)) {
            let log = &partition.log;
            out.ends.insert(
                (name.clone(), key.index as i32),
                (log.log_start().0, log.high_watermark().0),
            );
            out.stability.insert(
                (name.clone(), key.index as i32),
                (log.last_stable_offset().0, log.open_transactions()),
            );
        }
    }
    for partition in coordinator.loaded_current() {
        for group in partition.groups_for_metrics(&names) {
            for ((topic, index), offset) in group.committed {
                out.committed
                    .insert((group.id.clone(), topic, index), offset);
            }
            for (topic, index) in group.assigned {
                out.assigned.insert((group.id.clone(), topic, index));
            }
            out.groups.insert(group.id, group.gauges);
        }
    }
    out
}

fn add_stats(total: &mut storage::LogStats, stats: &storage::LogStats) {
    total.flushes += stats.flushes;
    total.flushed_bytes += stats.flushed_bytes;
    total.appended_batches += stats.appended_batches;
    total.fdatasyncs += stats.fdatasyncs;
    total.journaled_flushes += stats.journaled_flushes;
    total.journaled_write_nanos += stats.journaled_write_nanos;
    total.journaled_wait_nanos += stats.journaled_wait_nanos;
    total.fdatasync_nanos += stats.fdatasync_nanos;
    for (sum, count) in total.flush_buckets.iter_mut().zip(&stats.flush_buckets) {
        *sum += count;
    }
    total.flush_nanos += stats.flush_nanos;
    total.cache_reads += stats.cache_reads;
    total.disk_reads += stats.disk_reads;
    total.prefetch_reads += stats.prefetch_reads;
    total.prefetch_hits += stats.prefetch_hits;
}

/// The whole /metrics page, rendered on shard 0: one function per family.
pub async fn render(shard: &Rc<Shard>) -> String {
    let reports: Vec<ShardReport> = shard
        .coordinator
        .on_every_shard(|coordinator| Box::pin(report(coordinator)))
        .await
        .into_iter()
        .flatten()
        .collect();
    let all = &shard.metrics_registry;
    let cluster = &shard.cluster;
    let mut page = Page::default();
    // The design's metrics (seed section 15).
    produce_latency(&mut page, all);
    produce_copies(&mut page, all);
    let ends = led_partitions(&reports);
    let committed = reports.iter().flat_map(|r| &r.committed);
    let assigned = reports.iter().flat_map(|r| &r.assigned);
    let lags = lag::of_groups(cluster, committed, assigned, &ends).await;
    lag::render(&mut page, &lags);
    partitions_led(&mut page, cluster, &ends);
    replication(&mut page, cluster, all);
    follower::render(&mut page, all);
    if let Some(pct) = disk_used_pct(&cluster.config.data_dir) {
        page.gauge(
            "broker_disk_used_pct",
            "used space of the file system holding the data directory, in percent",
            pct,
        );
    }
    rebalances(&mut page, &reports, all);
    share::render(&mut page, reports.iter().map(|r| &r.share));
    let by_state = shard
        .txn_coordinator
        .on_every_shard(|c| Box::pin(async move { c.ids_by_state() }))
        .await;
    transactions(&mut page, &reports, by_state.into_iter().flatten(), all);
    health(&mut page, &super::health::check(shard).await);
    controller(&mut page, cluster);
    requests(&mut page, all);
    admission(&mut page, &shard.admission);
    fetches(&mut page, all);
    storage_counters(&mut page, &reports);
    tiered::render(&mut page, all);
    page.text
}

/// Sums a counter over every shard.
fn sum(all: &Registry, f: impl Fn(&ShardMetrics) -> u64) -> u64 {
    all.iter().map(|m| f(m)).sum()
}

fn produce_latency(page: &mut Page, all: &Registry) {
    let mut produce = [
        HistogramTotal::default(),
        HistogramTotal::default(),
        HistogramTotal::default(),
    ];
    for m in all.iter() {
        for (total, h) in produce.iter_mut().zip(&m.produce_latency) {
            h.add_to(total);
        }
    }
    page.header(
        "produce_latency_seconds",
        "histogram",
        "produce requests from arrival to answer, by acks",
    );
    for (acks, total) in ["0", "1", "all"].iter().zip(&produce) {
        let labels = format!("acks=\"{acks}\"");
        page.histogram("produce_latency_seconds", &labels, total);
    }
}

/// (topic, partition) -> (log start, high watermark) of every partition led here.
type Ends = BTreeMap<(String, i32), (i64, i64)>;

fn led_partitions(reports: &[ShardReport]) -> Ends {
    reports
        .iter()
        .flat_map(|r| r.ends.iter().map(|(k, v)| (k.clone(), *v)))
        .collect()
}

/// Transactions: each led partition's last stable offset and open
/// transactions (a stuck LSO holds every read_committed consumer), the
/// coordinators' ids by state, and completed transactions by outcome.
fn transactions(
    page: &mut Page,
    reports: &[ShardReport],
    by_state: impl Iterator<Item = BTreeMap<&'static str, usize>>,
    all: &Registry,
) {
    page.header(
        "partition_last_stable_offset",
        "gauge",
        "the last stable offset of each partition this broker leads (read_committed consumers read below it)",
    );
    page.header(
        "partition_open_transactions",
        "gauge",
        "transactions open on each partition this broker leads",
    );
    for report in reports {
        for ((topic, partition), (lso, open)) in &report.stability {
            let labels = format!("topic=\"{}\",partition=\"{partition}\"", escape(topic));
            page.sample("partition_last_stable_offset", &labels, *lso as f64);
            page.sample("partition_open_transactions", &labels, *open as f64);
        }
    }
    let mut states: BTreeMap<&'static str, usize> = BTreeMap::new();
    for shard in by_state {
        for (state, count) in shard {
            *states.entry(state).or_insert(0) += count;
        }
    }
    page.header(
        "transactional_ids",
        "gauge",
        "transactional ids this broker coordinates, by the state of their transaction",
    );
    for (state, count) in states {
        page.sample(
            "transactional_ids",
            &format!("state=\"{state}\""),
            count as f64,
        );
    }
    page.header(
        "transactions_completed_total",
        "counter",
        "transactions this broker's coordinator completed, by outcome",
    );
    let committed = sum(all, |m| m.transactions_committed.load(Ordering::Relaxed));
    let aborted = sum(all, |m| m.transactions_aborted.load(Ordering::Relaxed));
    page.sample(
        "transactions_completed_total",
        "outcome=\"commit\"",
        committed as f64,
    );
    page.sample(
        "transactions_completed_total",
        "outcome=\"abort\"",
        aborted as f64,
    );
}

fn partitions_led(page: &mut Page, cluster: &Cluster, ends: &Ends) {
    page.header(
        "partition_high_watermark",
        "gauge",
        "the high watermark of each partition this broker leads (its rate is the ingest rate)",
    );
    for ((topic, partition), (_, high_watermark)) in ends {
        let labels = format!("topic=\"{}\",partition=\"{partition}\"", escape(topic));
        page.sample("partition_high_watermark", &labels, *high_watermark as f64);
    }
    page.header(
        "topic_retention_seconds",
        "gauge",
        "retention.ms of each topic this broker leads a partition of, in seconds (none: unlimited)",
    );
    let led_topics: BTreeSet<&String> = ends.keys().map(|(t, _)| t).collect();
    let view = cluster.view.borrow();
    for topic in view.metadata.topics.values() {
        if led_topics.contains(&topic.name) && topic.config.retention_ms >= 0 {
            page.sample(
                "topic_retention_seconds",
                &format!("topic=\"{}\"", escape(&topic.name)),
                topic.config.retention_ms as f64 / 1000.0,
            );
        }
    }
}

fn replication(page: &mut Page, cluster: &Cluster, all: &Registry) {
    let under_replicated = {
        let view = cluster.view.borrow();
        let metadata = &view.metadata;
        // A move's replicas still being added are left out of both sides
        // (Kafka leaves them out of the replicas only): the partition is
        // no less replicated than before the move began, and an original
        // replica fallen out of sync still shows.
        let expected = |topic: control::TopicId, index: usize, p: &control::Partition| {
            let key = (topic, control::PartitionId(index as i32));
            let adding = metadata
                .reassignments
                .get(&key)
                .map_or(0, |m| m.adding().len());
            let in_sync_adding = metadata.reassignments.get(&key).map_or(0, |m| {
                m.adding().iter().filter(|b| p.isr.contains(b)).count()
            });
            (p.replicas.len() - adding, p.isr.len() - in_sync_adding)
        };
        (metadata.topics.values())
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .enumerate()
                    .map(move |(i, p)| (t.id, i, p))
            })
            .filter(|(_, _, p)| p.leader == Some(cluster.me))
            .filter(|(topic, i, p)| {
                let (replicas, isr) = expected(*topic, *i, p);
                isr < replicas
            })
            .count()
    };
    page.gauge(
        "under_replicated_partitions",
        "partitions this broker leads with fewer in-sync replicas than replicas (a move's replicas still being added left out)",
        under_replicated as f64,
    );
    page.counter(
        "isr_shrinks_total",
        "ISR shrinks of partitions this broker leads",
        sum(all, |m| m.isr_shrinks.load(Ordering::Relaxed)),
    );
    page.counter(
        "isr_expands_total",
        "ISR expansions of partitions this broker leads",
        sum(all, |m| m.isr_expands.load(Ordering::Relaxed)),
    );
    page.counter(
        "unclean_leader_elections_total",
        "leaders elected from outside the ISR, cluster-wide",
        cluster.view.borrow().metadata.unclean_leader_elections,
    );
    page.gauge(
        "preferred_leader_imbalance_partitions",
        "partitions led by other than their preferred (first) replica, cluster-wide",
        off_preferred(&cluster.view.borrow().metadata) as f64,
    );
}

/// Partitions with a leader other than their first replica (Kafka's
/// PreferredReplicaImbalanceCount): what the next rebalance moves back.
fn off_preferred(metadata: &control::Metadata) -> usize {
    metadata
        .topics
        .values()
        .flat_map(|t| &t.partitions)
        .filter(|p| p.leader.is_some() && p.leader != p.replicas.first().copied())
        .count()
}

/// Groups coordinated here, by type: rebalances, members, and the time
/// consumer groups' assignors took.
fn rebalances(page: &mut Page, reports: &[ShardReport], all: &Registry) {
    page.header(
        "rebalances_total",
        "counter",
        "rebalances a group went through, for groups coordinated here: a classic group's generation, a consumer group's epoch (each change of members or subscribed topics)",
    );
    let groups = || reports.iter().flat_map(|r| &r.groups);
    let labels = |group: &str, gauges: &GroupGauges| {
        format!("group=\"{}\",type=\"{}\"", escape(group), gauges.group_type)
    };
    for (group, gauges) in groups() {
        let value = gauges.rebalances.max(0) as f64;
        page.sample("rebalances_total", &labels(group, gauges), value);
    }
    page.header(
        "group_members",
        "gauge",
        "members of each group coordinated here",
    );
    for (group, gauges) in groups() {
        let value = gauges.members as f64;
        page.sample("group_members", &labels(group, gauges), value);
    }
    page.header(
        "consumer_group_assignment_seconds",
        "histogram",
        "time the server-side assignor took to compute a consumer group's new target assignment, here",
    );
    let mut total = HistogramTotal::default();
    for shard in all.iter() {
        shard.consumer_group_assignment.add_to(&mut total);
    }
    page.histogram("consumer_group_assignment_seconds", "", &total);
}

/// Health (server::health): what /health answers, as numbers.
fn health(page: &mut Page, health: &super::health::Health) {
    page.gauge(
        "broker_healthy",
        "1 if the broker serves as it should, 0 if /health names a problem",
        if health.ok() { 1.0 } else { 0.0 },
    );
    page.gauge(
        "broker_partition_replicas",
        "partitions the metadata gives this broker a replica of",
        health.replicas as f64,
    );
    page.gauge(
        "log_failed_partitions",
        "partition logs that failed a write (a full disk, an I/O error) and take no more writes",
        health.failed_logs.len() as f64,
    );
    page.gauge(
        "partition_dirs_unknown_topic",
        "topic directories kept on disk whose topic the metadata does not know",
        health.unknown_topic_dirs.len() as f64,
    );
    if let Some(age) = health.heartbeat_age_ms {
        page.gauge(
            "controller_heartbeat_age_seconds",
            "since the active controller last acknowledged this broker's heartbeat",
            age as f64 / 1000.0,
        );
    }
}

fn controller(page: &mut Page, cluster: &Cluster) {
    if let Some(service) = cluster.controller_here() {
        quorum(page, service);
    }
}

/// The /metrics page of a controller-only node: its place in the
/// metadata quorum.
pub fn render_controller_only(service: &control::service::MetadataService) -> String {
    let mut page = Page::default();
    quorum(&mut page, service);
    let status = service.quorum_status();
    page.gauge(
        "metadata_term",
        "the metadata quorum's current term (its leader epoch)",
        status.term as f64,
    );
    page.gauge(
        "metadata_committed_index",
        "the metadata log's commit index as this node knows it",
        status.committed as f64,
    );
    page.gauge(
        "metadata_voters",
        "voters of the metadata quorum",
        status.members.voters.len() as f64,
    );
    page.gauge(
        "metadata_observers",
        "observers of the metadata quorum: members that follow its log without a vote",
        status.members.learners.len() as f64,
    );
    page.text
}

/// This node's view of the metadata quorum.
fn quorum(page: &mut Page, service: &control::service::MetadataService) {
    let view = service.view();
    page.gauge(
        "metadata_leader_id",
        "the metadata quorum's leader (the active controller) as this node knows it, -1 if none",
        view.leader.map_or(-1.0, |l| l as f64),
    );
    page.gauge(
        "metadata_applied_index",
        "the last metadata log index this node applied",
        view.applied as f64,
    );
}

/// The client connection limits and what they refused.
fn admission(page: &mut Page, admission: &Admission) {
    let (total, per_ip) = admission.limits();
    page.gauge(
        "connections_max",
        "client connections the broker keeps at most",
        total as f64,
    );
    page.gauge(
        "connections_max_per_ip",
        "client connections from one address at most",
        per_ip as f64,
    );
    page.counter(
        "connections_refused_total",
        "client connections closed at once for a limit",
        admission.refused.load(Ordering::Relaxed),
    );
}

/// Requests, bytes and connections.
fn requests(page: &mut Page, all: &Registry) {
    page.header("requests_total", "counter", "requests by Kafka API");
    let mut errors = Vec::new();
    for key in 0..API_KEYS {
        let count = sum(all, |m| m.requests_of(key));
        let failed = sum(all, |m| m.request_errors_of(key));
        if count == 0 && failed == 0 {
            continue;
        }
        let api = api_name(key as i16);
        page.sample("requests_total", &format!("api=\"{api}\""), count as f64);
        errors.push((api, failed));
    }
    page.header(
        "request_errors_total",
        "counter",
        "requests that closed their connection or answered a partition with an error, by API",
    );
    for (api, failed) in errors {
        let labels = format!("api=\"{api}\"");
        page.sample("request_errors_total", &labels, failed as f64);
    }
    page.counter(
        "bytes_in_total",
        "request bytes read",
        sum(all, |m| m.bytes_in.load(Ordering::Relaxed)),
    );
    page.counter(
        "bytes_out_total",
        "response bytes written",
        sum(all, |m| m.bytes_out.load(Ordering::Relaxed)),
    );
    let connections: i64 = all
        .iter()
        .map(|m| m.connections.load(Ordering::Relaxed))
        .sum();
    page.gauge("connections", "open client connections", connections as f64);
    page.counter(
        "connections_moved_total",
        "client connections moved to the shard owning the partitions they read and write",
        sum(all, |m| m.connections_moved.load(Ordering::Relaxed)),
    );
    page.counter(
        "tls_handshake_failures_total",
        "connections to a TLS port (Kafka or HTTP) closed because their handshake failed or took too long",
        sum(all, |m| m.tls_handshake_failures.load(Ordering::Relaxed)),
    );
    page.counter(
        "sasl_authentications_total",
        "SASL authentications that succeeded, re-authentications included",
        sum(all, |m| m.sasl_authentications.load(Ordering::Relaxed)),
    );
    page.counter(
        "sasl_authentication_failures_total",
        "SASL authentications that failed: wrong password, unknown user, malformed or out-of-order exchanges (each closes its connection)",
        sum(all, |m| m.sasl_authentication_failures.load(Ordering::Relaxed)),
    );
    page.counter(
        "http_authentication_failures_total",
        "HTTP API requests refused for missing or wrong Basic credentials (401)",
        sum(all, |m| {
            m.http_authentication_failures.load(Ordering::Relaxed)
        }),
    );
    page.counter(
        "throttled_requests_total",
        "requests answered with a throttle time: their client was over its produce or fetch byte-rate quota, and its connection is muted for that long",
        sum(all, |m| m.throttled_requests.load(Ordering::Relaxed)),
    );
    let throttled_ms = sum(all, |m| m.throttle_ms.load(Ordering::Relaxed));
    page.header(
        "throttle_time_seconds_total",
        "counter",
        "throttle time handed out to clients over their quotas",
    );
    page.sample("throttle_time_seconds_total", "", throttled_ms as f64 / 1e3);
}

/// Whether produced batches went to the log in the memory their request
/// was read into (large requests, `kafka::record_sets`) or were copied.
fn produce_copies(page: &mut Page, all: &Registry) {
    page.counter(
        "produce_record_bytes_in_place_total",
        "bytes of valid produced batches handed to the log in the memory their request was read into",
        sum(all, |m| m.produced_bytes_in_place.load(Ordering::Relaxed)),
    );
    page.counter(
        "produce_record_bytes_copied_total",
        "bytes of valid produced batches copied on their way to the log",
        sum(all, |m| m.produced_bytes_copied.load(Ordering::Relaxed)),
    );
}

fn fetches(page: &mut Page, all: &Registry) {
    let mut fetch = HistogramTotal::default();
    for m in all.iter() {
        m.fetch_latency.add_to(&mut fetch);
    }
    page.header(
        "fetch_latency_seconds",
        "histogram",
        "consumer fetches from arrival to answer (long-poll waits included)",
    );
    page.histogram("fetch_latency_seconds", "", &fetch);
    page.counter(
        "follower_consumer_fetches_total",
        "consumer fetches served by this broker as a follower (rack-aware reads)",
        sum(all, |m| m.follower_reads.load(Ordering::Relaxed)),
    );
}

fn storage_counters(page: &mut Page, reports: &[ShardReport]) {
    let mut storage = storage::LogStats::default();
    for r in reports {
        add_stats(&mut storage, &r.storage);
    }
    page.counter(
        "log_flushes_total",
        "flushes of open partition logs (one write burst and fdatasync each)",
        storage.flushes,
    );
    page.counter(
        "log_appended_batches_total",
        "batches appended to open partition logs",
        storage.appended_batches,
    );
    page.gauge(
        "log_group_commit_batches",
        "batches made durable per flush, on average since start (group commit)",
        ratio(storage.appended_batches, storage.flushes),
    );
    page.counter(
        "log_journaled_flushes_total",
        "flushes made durable by the shard's journal (one write and fdatasync shared by a round) instead of a segment sync",
        storage.journaled_flushes,
    );
    page.counter(
        "log_fdatasync_total",
        "segment syncs of flushes (each an fdatasync, or a share of a file-system round)",
        storage.fdatasyncs,
    );
    let syncs = |count: fn(&storage::io::sync_rounds::SyncCounts) -> u64| {
        reports.iter().map(|r| count(&r.syncs)).sum::<u64>()
    };
    page.counter(
        "log_sync_rounds_total",
        "syncs of a whole file system (syncfs, then one fdatasync) run for many segments' syncs at once",
        syncs(|c| c.rounds),
    );
    page.counter(
        "log_syncs_in_rounds_total",
        "segment syncs covered by a file-system round instead of an fdatasync of their own",
        syncs(|c| c.in_rounds),
    );
    for (name, help, nanos) in [
        (
            "log_journaled_write_seconds_total",
            "time journaled flushes spent writing their segment, before their journal entry",
            storage.journaled_write_nanos,
        ),
        (
            "log_journal_wait_seconds_total",
            "time journaled flushes waited for the journal to make their entry durable",
            storage.journaled_wait_nanos,
        ),
    ] {
        page.header(name, "counter", help);
        page.sample(name, "", nanos as f64 / 1e9);
    }
    page.header(
        "log_fdatasync_seconds_total",
        "counter",
        "time spent in those fdatasync calls",
    );
    let seconds = storage.fdatasync_nanos as f64 / 1e9;
    page.sample("log_fdatasync_seconds_total", "", seconds);
    page.header(
        "log_flush_latency_seconds",
        "histogram",
        "flushes that wrote, from their first write to being durable (write stalls included)",
    );
    let buckets = (
        &storage::FLUSH_BUCKET_BOUNDS_SECONDS[..],
        &storage.flush_buckets[..],
    );
    let flushes = storage.flush_buckets.iter().sum();
    page.histogram_of(
        "log_flush_latency_seconds",
        "",
        buckets,
        flushes,
        storage.flush_nanos,
    );
    page.gauge(
        "log_read_cache_hit_ratio",
        "reads served from the in-memory tail rather than the files, since start",
        ratio(
            storage.cache_reads,
            storage.cache_reads + storage.disk_reads,
        ),
    );
    let (used, limit) = reports
        .iter()
        .fold((0, 0), |(u, l), r| (u + r.cache.0, l + r.cache.1));
    page.gauge(
        "log_cache_bytes",
        "memory the partitions' caches hold: their batches, or the whole requests those batches keep alive (log_cache_bytes is their limit)",
        used as f64,
    );
    page.gauge(
        "log_cache_limit_bytes",
        "the memory the caches share beyond each partition's floor",
        limit as f64,
    );
    page.counter(
        "log_prefetch_reads_total",
        "disk reads issued ahead of sequential readers",
        storage.prefetch_reads,
    );
    page.counter(
        "log_prefetch_hits_total",
        "reads whose bytes a read issued ahead of them had fetched",
        storage.prefetch_hits,
    );
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Used space of the file system holding `dir`, in percent.
/// Used space as `df` reports it: blocks reserved for root are neither
/// used nor available to the broker, so they are left out of the whole
/// (used / (used + available)); counting them as free would let the 80%
/// alert fire only when the broker's share is nearly gone.
fn disk_used_pct(dir: &Path) -> Option<f64> {
    let stats = nix::sys::statvfs::statvfs(dir).ok()?;
    used_pct(
        stats.blocks(),
        stats.blocks_free(),
        stats.blocks_available(),
    )
}

fn used_pct(blocks: u64, free: u64, available: u64) -> Option<f64> {
    let used = blocks.saturating_sub(free);
    let whole = used + available;
    (whole > 0).then(|| used as f64 / whole as f64 * 100.0)
}

/// Label values as Prometheus wants them.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn api_name(key: i16) -> String {
    kafka_protocol::messages::ApiKey::try_from(key)
        .map(|k| format!("{k:?}"))
        .unwrap_or_else(|_| format!("key_{key}"))
}

/// The text being written.
#[derive(Default)]
struct Page {
    text: String,
}

impl Page {
    fn header(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &str, value: f64) {
        if labels.is_empty() {
            let _ = writeln!(self.text, "{name} {value}");
        } else {
            let _ = writeln!(self.text, "{name}{{{labels}}} {value}");
        }
    }

    fn counter(&mut self, name: &str, help: &str, value: u64) {
        self.header(name, "counter", help);
        self.sample(name, "", value as f64);
    }

    fn gauge(&mut self, name: &str, help: &str, value: f64) {
        self.header(name, "gauge", help);
        self.sample(name, "", value);
    }

    fn histogram(&mut self, name: &str, labels: &str, total: &HistogramTotal) {
        let buckets = (&LATENCY_BUCKETS_SECONDS[..], &total.buckets[..]);
        self.histogram_of(name, labels, buckets, total.count, total.sum_nanos);
    }

    /// A histogram of `(bounds, counts)`, the counts per bucket (not
    /// cumulative); `total_count` holds those above every bound too.
    fn histogram_of(
        &mut self,
        name: &str,
        labels: &str,
        (bounds, counts): (&[f64], &[u64]),
        total_count: u64,
        sum_nanos: u64,
    ) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (bound, count) in bounds.iter().zip(counts) {
            cumulative += count;
            let _ = writeln!(
                self.text,
                "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {cumulative}"
            );
        }
        let _ = writeln!(
            self.text,
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {total_count}"
        );
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(self.text, "{name}_sum{braces} {}", sum_nanos as f64 / 1e9);
        let _ = writeln!(self.text, "{name}_count{braces} {total_count}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_use_leaves_the_reserved_blocks_out_as_df_does() {
        // 1000 blocks, 300 free of which 50 are reserved for root.
        let pct = used_pct(1000, 300, 250).unwrap();
        assert!((pct - 73.684).abs() < 0.01, "{pct}");
        assert_eq!(used_pct(0, 0, 0), None);
    }

    #[test]
    fn histograms_are_cumulative_and_count_everything() {
        use std::time::Duration;
        let h = crate::counters::Histogram::default();
        h.observe(Duration::from_micros(300));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60)); // above every bucket: +Inf only
        let mut total = HistogramTotal::default();
        h.add_to(&mut total);
        let mut page = Page::default();
        page.histogram("x_seconds", "acks=\"all\"", &total);
        assert!(page
            .text
            .contains("x_seconds_bucket{acks=\"all\",le=\"0.0005\"} 1\n"));
        assert!(page
            .text
            .contains("x_seconds_bucket{acks=\"all\",le=\"0.005\"} 2\n"));
        assert!(page
            .text
            .contains("x_seconds_bucket{acks=\"all\",le=\"10\"} 2\n"));
        assert!(page
            .text
            .contains("x_seconds_bucket{acks=\"all\",le=\"+Inf\"} 3\n"));
        assert!(page.text.contains("x_seconds_count{acks=\"all\"} 3\n"));
        assert_eq!(api_name(0), "Produce");
        assert_eq!(escape("a\"b"), "a\\\"b");
    }
}
