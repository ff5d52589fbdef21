//! `broker share-group ...`: list, describe, reset the start offsets of
//! and delete share groups (KIP-932), as Kafka's `kafka-share-groups.sh`
//! does.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use clap::Subcommand;

use client::cluster::Cluster;
use client::connection::ClientError;
use kafka_protocol::ResponseError;

use super::group::{reset_targets, ResetArgs};
use super::group_describe::bounds_of;
use super::output::{json_document, Format};
use serde_json::{json, Value};

/// A `broker share-group` command line.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum ShareGroupArgs {
    /// Lists the share groups.
    #[command(after_help = "Example:\n  broker share-group list")]
    List,
    /// A share group's state, epochs and members with their partitions
    /// (several members may share a partition), and each partition's
    /// start offset (below it everything is acknowledged or archived).
    #[command(after_help = "Example:\n  broker share-group describe workers")]
    Describe {
        /// The group.
        name: String,
    },
    /// Moves a share group's start offsets: its next members get the
    /// records from there (the group must have no members).
    #[command(after_help = "Examples:\n  \
        broker share-group reset-offsets workers --topic jobs --to-earliest --execute\n  \
        broker share-group reset-offsets workers --all-topics --to-datetime 2026-11-30T08:00:00Z --dry-run")]
    ResetOffsets(ResetArgs),
    /// Forgets a share group's start offsets of topics: its next members
    /// start as its `share.auto.offset.reset` says (the group must have
    /// no members).
    #[command(after_help = "Example:\n  broker share-group delete-offsets workers --topic jobs")]
    DeleteOffsets {
        /// The group.
        name: String,
        /// A topic (repeatable).
        #[arg(long = "topic", value_name = "TOPIC", required = true)]
        topics: Vec<String>,
    },
    /// Deletes a share group (it must have no members).
    #[command(after_help = "Example:\n  broker share-group delete workers")]
    Delete {
        /// The group.
        name: String,
    },
}

/// The share group a command is about, for its errors.
pub fn subject(command: &ShareGroupArgs) -> Option<String> {
    match command {
        ShareGroupArgs::Describe { name }
        | ShareGroupArgs::DeleteOffsets { name, .. }
        | ShareGroupArgs::Delete { name } => Some(format!("share group '{name}'")),
        ShareGroupArgs::ResetOffsets(args) => Some(format!("share group '{}'", args.name)),
        ShareGroupArgs::List => None,
    }
}

/// Whether the command prints JSON under `--format json`.
pub fn prints_json(command: &ShareGroupArgs) -> bool {
    matches!(
        command,
        ShareGroupArgs::List | ShareGroupArgs::Describe { .. }
    )
}

/// Runs a `broker share-group` command; what it prints.
pub async fn execute(
    cluster: &Cluster,
    command: ShareGroupArgs,
    format: Format,
) -> Result<String, ClientError> {
    let mut out = String::new();
    match command {
        ShareGroupArgs::List => {
            let groups = cluster.list_groups().await?;
            let shares = groups.iter().filter(|g| g.group_type == "share");
            if format == Format::Json {
                let listed: Vec<Value> = shares
                    .map(|g| json!({"group": g.group, "state": g.state}))
                    .collect();
                return Ok(json_document(&listed));
            }
            let _ = writeln!(out, "{:<40} STATE", "GROUP");
            for g in shares {
                let _ = writeln!(out, "{:<40} {}", g.group, g.state);
            }
        }
        ShareGroupArgs::Describe { name } if format == Format::Json => {
            let d = cluster.describe_share_group(&name).await?;
            let members: Vec<Value> = (d.members.iter())
                .map(|m| {
                    json!({
                        "member_id": m.member_id,
                        "member_epoch": m.member_epoch,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "subscribed_topics": m.subscribed_topics,
                        "assigned": m.assigned,
                    })
                })
                .collect();
            let partitions: Vec<Value> = (start_offsets(cluster, &name).await?.into_iter())
                .map(|(topic, partition, start, end)| {
                    json!({"topic": topic, "partition": partition, "start": start, "end": end})
                })
                .collect();
            return Ok(json_document(&json!({
                "group": name,
                "state": d.state,
                "epoch": d.epoch,
                "assignment_epoch": d.assignment_epoch,
                "assignor": d.assignor,
                "members": members,
                "partitions": partitions,
            })));
        }
        ShareGroupArgs::Describe { name } => {
            let described = cluster.describe_share_group(&name).await?;
            let _ = writeln!(
                out,
                "share group {name}: {}, epoch {}, assignment epoch {}, assignor {}",
                described.state, described.epoch, described.assignment_epoch, described.assignor
            );
            for m in &described.members {
                let _ = writeln!(
                    out,
                    "  member {} (epoch {}, client {}, host {}) subscribed to {}",
                    m.member_id,
                    m.member_epoch,
                    m.client_id,
                    m.client_host,
                    m.subscribed_topics.join(",")
                );
                for (topic, partitions) in &m.assigned {
                    let _ = writeln!(out, "    {topic}: {partitions:?}");
                }
            }
            write_start_offsets(cluster, &name, &mut out).await?;
        }
        ShareGroupArgs::ResetOffsets(reset) => {
            let to = reset.target();
            let (name, topics, dry_run) = (reset.name, reset.topics, reset.dry_run);
            reset_offsets(cluster, &name, (topics, to), dry_run, &mut out).await?;
        }
        ShareGroupArgs::DeleteOffsets { name, topics } => {
            cluster.delete_share_group_offsets(&name, &topics).await?;
            let _ = writeln!(
                out,
                "deleted the start offsets of share group {name} on {}",
                topics.join(",")
            );
        }
        ShareGroupArgs::Delete { name } => {
            // A share group only (`broker group delete` deletes the others).
            cluster.describe_share_group(&name).await?;
            cluster.delete_group(&name).await?;
            let _ = writeln!(out, "deleted share group {name}");
        }
    }
    Ok(out)
}

/// Each partition the group initialized: (topic, partition, its start
/// offset, its log's end if known); the records between are not all
/// acknowledged yet.
async fn start_offsets(
    cluster: &Cluster,
    group: &str,
) -> Result<Vec<(String, i32, i64, Option<i64>)>, ClientError> {
    let starts = cluster.share_group_offsets(group).await?;
    let mut topics: Vec<&String> = starts.keys().map(|(t, _)| t).collect();
    topics.dedup();
    let mut rows = Vec::new();
    for topic in topics {
        let partitions: Vec<i32> = (starts.keys())
            .filter(|(t, _)| t == topic)
            .map(|(_, p)| *p)
            .collect();
        let bounds = bounds_of(cluster, topic, &partitions).await?;
        for p in partitions {
            let end = bounds.get(&p).map(|(_, end)| *end);
            rows.push((topic.clone(), p, starts[&(topic.clone(), p)], end));
        }
    }
    Ok(rows)
}

/// The start offsets as a table.
async fn write_start_offsets(
    cluster: &Cluster,
    group: &str,
    out: &mut String,
) -> Result<(), ClientError> {
    let _ = writeln!(
        out,
        "{:<30} {:>9} {:>12} {:>12}",
        "TOPIC", "PARTITION", "START", "END"
    );
    for (topic, p, start, end) in start_offsets(cluster, group).await? {
        let end = end.map_or("-".to_string(), |end| end.to_string());
        let _ = writeln!(out, "{topic:<30} {p:>9} {start:>12} {end:>12}");
    }
    Ok(())
}

/// `share-group reset-offsets`: moves an empty share group's start
/// offsets (each within its partition's log), or prints the plan on a
/// dry run. A shift moves from the stored start offset.
async fn reset_offsets(
    cluster: &Cluster,
    group: &str,
    (topics, to): (Vec<String>, super::group::ResetTo),
    dry_run: bool,
    out: &mut String,
) -> Result<(), ClientError> {
    let members = cluster.describe_share_group(group).await?.members.len();
    if members > 0 {
        return Err(ClientError::Refused(
            ResponseError::NonEmptyGroup.code(),
            format!(
                "share group {group} has {members} members: its offsets can only be reset while it has none",
            ),
        ));
    }
    let starts = cluster.share_group_offsets(group).await?;
    let topics: Vec<String> = match topics.is_empty() {
        true => {
            let mut all: Vec<String> = starts.keys().map(|(t, _)| t.clone()).collect();
            all.dedup();
            all
        }
        false => topics,
    };
    let mut plan = BTreeMap::new();
    for topic in &topics {
        plan.extend(reset_targets(cluster, topic, to, &starts).await?);
    }
    let _ = writeln!(
        out,
        "{:<30} {:>9} {:>12} {:>12}",
        "TOPIC", "PARTITION", "OLD", "NEW"
    );
    for ((topic, p), new) in &plan {
        let old = (starts.get(&(topic.clone(), *p))).map_or("-".to_string(), |o| o.to_string());
        let _ = writeln!(out, "{topic:<30} {p:>9} {old:>12} {new:>12}");
    }
    if dry_run {
        let _ = writeln!(out, "dry run: nothing changed");
    } else {
        cluster.alter_share_group_offsets(group, &plan).await?;
        let _ = writeln!(
            out,
            "reset {} partitions of share group {group}",
            plan.len()
        );
    }
    Ok(())
}
