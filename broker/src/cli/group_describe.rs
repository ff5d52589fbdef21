//! `broker group describe`: a group of either protocol as its coordinator
//! holds it (type, state, members and what they own) and every partition
//! it committed or was assigned, with Kafka's lag (log end minus the
//! committed offset) and the records retention deleted before the group
//! read them shown apart. Gathered once into a `GroupReport`, printed as a
//! table or as JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use client::cluster::Cluster;
use client::connection::ClientError;
use client::consumer::{list_offsets, StartAt};
use client::consumer_groups::{ConsumerGroupDescription, TopicPartitions};
use client::groups::{GroupDescription, MemberDescription};
use kafka_protocol::ResponseError;

use crate::groups::consumer_protocol::assigned_partitions;
use crate::groups::lag::PartitionLag;

/// A group as `group describe --format json` prints it. Fields a group's
/// protocol does not have are left out.
#[derive(Serialize)]
pub struct GroupReport {
    group: String,
    /// "classic" or "consumer".
    #[serde(rename = "type")]
    group_type: &'static str,
    state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    protocol_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    protocol: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    epoch: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    assignment_epoch: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    assignor: Option<String>,
    members: Vec<Member>,
    partitions: Vec<LagRow>,
}

/// A member and the partitions it owns.
#[derive(Serialize)]
struct Member {
    member_id: String,
    client_id: String,
    client_host: String,
    instance_id: Option<String>,
    /// A consumer group member's epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    member_epoch: Option<i32>,
    /// A classic member (JoinGroup) inside a consumer group.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    classic: bool,
    assigned: TopicPartitions,
    /// What the assignor gave it, while it differs from `assigned`.
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<TopicPartitions>,
}

/// A partition the group committed or was assigned.
#[derive(Serialize)]
struct LagRow {
    topic: String,
    partition: i32,
    committed: Option<i64>,
    log_start: i64,
    log_end: i64,
    /// Log end minus committed (none without a commit, as Kafka's tool).
    lag: Option<i64>,
    /// Records past the committed offset that retention deleted unread.
    lost_to_retention: i64,
    /// Committed minus log start (negative once retention passed it).
    retention_margin: Option<i64>,
    member: Option<String>,
}

/// A group as its coordinator describes it, of either type.
pub(super) enum Described {
    /// A consumer group (KIP-848), by ConsumerGroupDescribe.
    Consumer(ConsumerGroupDescription),
    /// A classic group (or none: "Dead"), by DescribeGroups.
    Classic(GroupDescription),
}

/// Whether ConsumerGroupDescribe's error says to ask DescribeGroups: the
/// group is not a consumer group (or the broker predates them).
fn not_a_consumer_group(e: &ClientError) -> bool {
    match e {
        ClientError::Broker(code) => *code == ResponseError::GroupIdNotFound.code(),
        ClientError::Unsupported(_) => true,
        _ => false,
    }
}

/// Asks ConsumerGroupDescribe first, then DescribeGroups for a group that
/// is not a consumer group.
pub(super) async fn describe_either(
    cluster: &Cluster,
    group: &str,
) -> Result<Described, ClientError> {
    match cluster.describe_consumer_group(group).await {
        Ok(consumer) => Ok(Described::Consumer(consumer)),
        Err(e) if not_a_consumer_group(&e) => {
            Ok(Described::Classic(cluster.describe_group(group).await?))
        }
        Err(e) => Err(e),
    }
}

/// Each partition's (log start, log end) for the given topic's partitions.
pub(super) async fn bounds_of(
    cluster: &Cluster,
    topic: &str,
    partitions: &[i32],
) -> Result<BTreeMap<i32, (i64, i64)>, ClientError> {
    let starts = list_offsets(cluster, topic, partitions, StartAt::Earliest).await?;
    let ends = list_offsets(cluster, topic, partitions, StartAt::Latest).await?;
    Ok(starts
        .into_iter()
        .map(|(p, start)| (p, (start, ends.get(&p).copied().unwrap_or(start))))
        .collect())
}

/// Gathers `group`'s report: GROUP_ID_NOT_FOUND for a group with neither
/// members nor commits.
pub(super) async fn report(cluster: &Cluster, group: &str) -> Result<GroupReport, ClientError> {
    let committed = cluster.committed_offsets(group, None).await?;
    let mut report = match describe_either(cluster, group).await? {
        Described::Consumer(consumer) => consumer_report(group, consumer),
        Described::Classic(description) => {
            if description.state == "Dead" && committed.is_empty() {
                return Err(ClientError::Broker(ResponseError::GroupIdNotFound.code()));
            }
            classic_report(group, description)
        }
    };
    let owners: BTreeMap<(String, i32), String> = (report.members.iter())
        .flat_map(|m| {
            (m.assigned.iter()).flat_map(move |(topic, partitions)| {
                (partitions.iter()).map(move |p| ((topic.clone(), *p), m.member_id.clone()))
            })
        })
        .collect();
    let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in committed.keys().chain(owners.keys()) {
        let partitions = by_topic.entry(topic.clone()).or_default();
        if !partitions.contains(partition) {
            partitions.push(*partition);
        }
    }
    for (topic, mut partitions) in by_topic {
        partitions.sort_unstable();
        let bounds = bounds_of(cluster, &topic, &partitions).await?;
        for partition in partitions {
            let key = (topic.clone(), partition);
            let (log_start, log_end) = bounds.get(&partition).copied().unwrap_or((0, 0));
            let lag = PartitionLag {
                committed: committed.get(&key).copied(),
                log_start,
                log_end,
            };
            report.partitions.push(LagRow {
                topic: topic.clone(),
                partition,
                committed: lag.committed,
                log_start,
                log_end,
                lag: lag.committed.map(|_| lag.lag()),
                lost_to_retention: lag.lost_to_retention(),
                retention_margin: lag.retention_margin(),
                member: owners.get(&key).cloned(),
            });
        }
    }
    Ok(report)
}

fn consumer_report(group: &str, consumer: ConsumerGroupDescription) -> GroupReport {
    let members = (consumer.members.into_iter())
        .map(|m| Member {
            target: (m.target != m.assigned).then_some(m.target),
            member_id: m.member_id,
            client_id: m.client_id,
            client_host: m.client_host,
            instance_id: m.instance_id,
            member_epoch: Some(m.member_epoch),
            classic: m.classic,
            assigned: m.assigned,
        })
        .collect();
    GroupReport {
        group: group.to_string(),
        group_type: "consumer",
        state: consumer.state,
        protocol_type: None,
        protocol: None,
        epoch: Some(consumer.epoch),
        assignment_epoch: Some(consumer.assignment_epoch),
        assignor: Some(consumer.assignor),
        members,
        partitions: Vec::new(),
    }
}

fn classic_report(group: &str, description: GroupDescription) -> GroupReport {
    let members = (description.members.into_iter())
        .map(|m: MemberDescription| Member {
            assigned: assigned_partitions(&m.assignment)
                .unwrap_or_default()
                .into_iter()
                .collect(),
            member_id: m.member_id,
            client_id: m.client_id,
            client_host: m.client_host,
            instance_id: m.instance_id,
            member_epoch: None,
            classic: false,
            target: None,
        })
        .collect();
    GroupReport {
        group: group.to_string(),
        group_type: "classic",
        state: description.state,
        protocol_type: Some(description.protocol_type),
        protocol: Some(description.protocol),
        epoch: None,
        assignment_epoch: None,
        assignor: None,
        members,
        partitions: Vec::new(),
    }
}

/// The report as a table: a line about the group, a line per member, then
/// a row per partition.
pub(super) fn table(report: &GroupReport) -> String {
    let mut out = String::new();
    let count = report.members.len();
    let (group, state) = (&report.group, &report.state);
    let _ = match report.group_type {
        "consumer" => writeln!(
            out,
            "group {group}: consumer, {state}, {count} members, epoch {}, assignment epoch {}, assignor {}",
            report.epoch.unwrap_or(-1),
            report.assignment_epoch.unwrap_or(-1),
            report.assignor.as_deref().unwrap_or_default()
        ),
        _ => writeln!(
            out,
            "group {group}: classic, {state}, {count} members, protocol {}/{}",
            report.protocol_type.as_deref().unwrap_or_default(),
            report.protocol.as_deref().unwrap_or_default()
        ),
    };
    for m in &report.members {
        let _ = writeln!(out, "  {}", member_line(m));
    }
    let _ = writeln!(
        out,
        "{:<30} {:>9} {:>12} {:>12} {:>12} {:>10} {:>10} {:>16}  MEMBER",
        "TOPIC",
        "PARTITION",
        "COMMITTED",
        "LOG-START",
        "LOG-END",
        "LAG",
        "LOST",
        "RETENTION-MARGIN"
    );
    let show = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
    for row in &report.partitions {
        let _ = writeln!(
            out,
            "{:<30} {:>9} {:>12} {:>12} {:>12} {:>10} {:>10} {:>16}  {}",
            row.topic,
            row.partition,
            show(row.committed),
            row.log_start,
            row.log_end,
            show(row.lag),
            row.lost_to_retention,
            show(row.retention_margin),
            row.member.as_deref().unwrap_or("-")
        );
    }
    out
}

fn member_line(m: &Member) -> String {
    let show = |partitions: &TopicPartitions| {
        let each = partitions.iter().map(|(t, ps)| format!("{t}{ps:?}"));
        each.collect::<Vec<_>>().join(" ")
    };
    let instance = (m.instance_id.as_ref())
        .map(|i| format!(" instance {i}"))
        .unwrap_or_default();
    let (client, host, assigned) = (&m.client_id, &m.client_host, show(&m.assigned));
    match m.member_epoch {
        // A consumer group's member: its epoch, and its target while it
        // differs.
        Some(epoch) => {
            let classic = if m.classic { " (classic)" } else { "" };
            let target = (m.target.as_ref())
                .map(|t| format!(" target {}", show(t)))
                .unwrap_or_default();
            format!(
                "member {}{classic} epoch {epoch} client {client} host {host}{instance} assigned {assigned}{target}",
                m.member_id
            )
        }
        None => format!(
            "member {} client {client} host {host}{instance} assigned {assigned}",
            m.member_id
        ),
    }
}
