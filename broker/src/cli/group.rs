//! `broker group ...`: list, describe (members, committed offsets, lag),
//! reset offsets (replay) and delete consumer groups, as
//! `kafka-consumer-groups.sh` does.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use clap::{ArgGroup, Args, Subcommand};

use client::cluster::Cluster;
use client::connection::ClientError;
use client::consumer::{list_offsets, StartAt};
use kafka_protocol::ResponseError;
use serde::Serialize;

use super::group_describe::bounds_of;
use super::output::{json_document, Format};

/// Where `group reset-offsets` moves a group's committed offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTo {
    /// Each partition's earliest offset.
    Earliest,
    /// Each partition's end: skip everything not yet read.
    Latest,
    /// The first offset with a timestamp at or after this (ms since the epoch).
    Datetime(i64),
    /// This offset (clamped to what the partition holds).
    Offset(i64),
    /// The committed offset moved by this many (clamped).
    ShiftBy(i64),
}

/// A `broker group` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupCommand {
    /// `group list`.
    List,
    /// `group describe NAME`.
    Describe(String),
    /// `group reset-offsets NAME`.
    Reset {
        /// The group.
        group: String,
        /// The topics whose offsets move (empty: every topic with a commit).
        topics: Vec<String>,
        /// Where to.
        to: ResetTo,
        /// Only print the plan.
        dry_run: bool,
    },
    /// `group delete NAME`.
    Delete(String),
}

/// A `broker group` command line.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum GroupArgs {
    /// Lists the consumer groups.
    #[command(after_help = "Example:\n  broker group list")]
    List,
    /// A group's state, members and their partitions, committed offsets
    /// and lag.
    #[command(after_help = "Example:\n  broker group describe billing")]
    Describe {
        /// The group.
        name: String,
    },
    /// Moves a group's committed offsets, to replay or to skip; the group
    /// must have no members.
    #[command(after_help = "Examples:\n  \
        broker group reset-offsets billing --topic orders --to-datetime 2026-11-30T08:00:00Z\n  \
        broker group reset-offsets billing --all-topics --shift-by -100 --dry-run")]
    ResetOffsets(ResetArgs),
    /// Deletes a group and its committed offsets (it must have no members).
    #[command(after_help = "Example:\n  broker group delete billing")]
    Delete {
        /// The group.
        name: String,
    },
}

/// `group reset-offsets`: exactly one target, and topics or all of them.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
#[command(
    group(ArgGroup::new("scope").required(true).args(["topics", "all_topics"])),
    group(ArgGroup::new("target").required(true).args(
        ["to_earliest", "to_latest", "to_datetime", "to_offset", "shift_by"]
    )),
)]
pub struct ResetArgs {
    /// The group.
    pub name: String,
    /// A topic whose offsets move (repeatable).
    #[arg(long = "topic", value_name = "TOPIC")]
    pub topics: Vec<String>,
    /// Every topic the group has committed offsets for.
    #[arg(long)]
    pub all_topics: bool,
    /// To each partition's earliest offset.
    #[arg(long)]
    pub to_earliest: bool,
    /// To each partition's end: skip everything not yet read.
    #[arg(long)]
    pub to_latest: bool,
    /// To the first offset at or after this time (no zone: UTC).
    #[arg(long, value_name = "YYYY-MM-DDTHH:MM:SS[.fff][Z|+HH:MM]", value_parser = parse_datetime)]
    pub to_datetime: Option<i64>,
    /// To this offset (clamped to what each partition holds).
    #[arg(long, value_name = "OFFSET", allow_negative_numbers = true)]
    pub to_offset: Option<i64>,
    /// The committed offset moved by N (negative: back; clamped).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub shift_by: Option<i64>,
    /// Prints the new offsets without committing them (wins over
    /// --execute, as before).
    #[arg(long)]
    pub dry_run: bool,
    /// Commits the new offsets: the default here, accepted because
    /// Kafka's tool requires it.
    #[arg(long)]
    pub execute: bool,
}

impl GroupArgs {
    /// The command the line names.
    pub fn command(self) -> GroupCommand {
        match self {
            GroupArgs::List => GroupCommand::List,
            GroupArgs::Describe { name } => GroupCommand::Describe(name),
            GroupArgs::Delete { name } => GroupCommand::Delete(name),
            GroupArgs::ResetOffsets(reset) => GroupCommand::Reset {
                to: reset.target(),
                group: reset.name,
                topics: reset.topics,
                dry_run: reset.dry_run,
            },
        }
    }
}

impl ResetArgs {
    /// Where the line moves the offsets.
    pub fn target(&self) -> ResetTo {
        match (self.to_datetime, self.to_offset, self.shift_by) {
            (Some(at), _, _) => ResetTo::Datetime(at),
            (_, Some(offset), _) => ResetTo::Offset(offset),
            (_, _, Some(by)) => ResetTo::ShiftBy(by),
            _ if self.to_earliest => ResetTo::Earliest,
            _ => ResetTo::Latest,
        }
    }
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fff][Z|+HH:MM|-HH:MM]` (no zone: UTC)
/// into milliseconds since the epoch.
pub fn parse_datetime(text: &str) -> Result<i64, String> {
    let bad = || format!("{text}: expected YYYY-MM-DDTHH:MM:SS[.fff][Z|+HH:MM]");
    let (date, rest) = text.split_once('T').ok_or_else(bad)?;
    let mut ymd = date.split('-').map(|p| p.parse::<i64>());
    let (Some(Ok(year)), Some(Ok(month)), Some(Ok(day)), None) =
        (ymd.next(), ymd.next(), ymd.next(), ymd.next())
    else {
        return Err(bad());
    };
    // Split off the zone.
    let (time, offset_minutes) = if let Some(time) = rest.strip_suffix('Z') {
        (time, 0)
    } else if let Some(at) = rest.rfind(['+', '-']) {
        let (time, zone) = rest.split_at(at);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let (h, m) = zone[1..].split_once(':').ok_or_else(bad)?;
        let h: i64 = h.parse().map_err(|_| bad())?;
        let m: i64 = m.parse().map_err(|_| bad())?;
        (time, sign * (h * 60 + m))
    } else {
        (rest, 0)
    };
    let (hms, millis) = match time.split_once('.') {
        Some((hms, fraction)) => {
            let digits: String = fraction.chars().chain("000".chars()).take(3).collect();
            (hms, digits.parse::<i64>().map_err(|_| bad())?)
        }
        None => (time, 0),
    };
    let mut parts = hms.split(':').map(|p| p.parse::<i64>());
    let (Some(Ok(hour)), Some(Ok(minute)), Some(Ok(second)), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let valid = (1..=12).contains(&month)
        && (1..=31).contains(&day)
        && (0..24).contains(&hour)
        && (0..60).contains(&minute)
        && (0..=60).contains(&second);
    if !valid {
        return Err(bad());
    }
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Ok(seconds * 1000 + millis)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The group a command is about (`group 'billing'`), for its errors.
pub fn subject(command: &GroupCommand) -> Option<String> {
    match command {
        GroupCommand::Describe(name)
        | GroupCommand::Delete(name)
        | GroupCommand::Reset { group: name, .. } => Some(format!("group '{name}'")),
        GroupCommand::List => None,
    }
}

/// Whether the command prints JSON under `--format json`.
pub fn prints_json(command: &GroupCommand) -> bool {
    matches!(command, GroupCommand::List | GroupCommand::Describe(_))
}

/// A group as `group list --format json` prints it.
#[derive(Serialize)]
struct Listed {
    group: String,
    #[serde(rename = "type")]
    group_type: String,
    state: String,
    protocol_type: String,
}

/// Runs a group command; returns what to print.
pub async fn execute(
    cluster: &Cluster,
    command: GroupCommand,
    format: Format,
) -> Result<String, ClientError> {
    let mut out = String::new();
    match command {
        GroupCommand::List => {
            let groups: Vec<Listed> = (cluster.list_groups().await?.into_iter())
                .map(|g| Listed {
                    group: g.group,
                    group_type: g.group_type,
                    state: g.state,
                    protocol_type: g.protocol_type,
                })
                .collect();
            if format == Format::Json {
                return Ok(json_document(&groups));
            }
            let _ = writeln!(
                out,
                "{:<40} {:<9} {:<20} PROTOCOL-TYPE",
                "GROUP", "TYPE", "STATE"
            );
            for g in groups {
                let _ = writeln!(
                    out,
                    "{:<40} {:<9} {:<20} {}",
                    g.group, g.group_type, g.state, g.protocol_type
                );
            }
        }
        GroupCommand::Describe(group) => {
            let report = super::group_describe::report(cluster, &group).await?;
            out = match format {
                Format::Json => json_document(&report),
                Format::Table => super::group_describe::table(&report),
            };
        }
        GroupCommand::Reset {
            group,
            topics,
            to,
            dry_run,
        } => reset(cluster, &group, topics, to, dry_run, &mut out).await?,
        GroupCommand::Delete(group) => {
            cluster.delete_group(&group).await?;
            let _ = writeln!(out, "deleted group {group}");
        }
    }
    Ok(out)
}

/// How many members `group` has, of either type.
async fn member_count(cluster: &Cluster, group: &str) -> Result<usize, ClientError> {
    Ok(
        match super::group_describe::describe_either(cluster, group).await? {
            super::group_describe::Described::Consumer(consumer) => consumer.members.len(),
            super::group_describe::Described::Classic(classic) => classic.members.len(),
        },
    )
}

/// `group reset-offsets`: moves an empty group's committed offsets (each
/// clamped to its partition's log), or prints the plan on a dry run.
async fn reset(
    cluster: &Cluster,
    group: &str,
    topics: Vec<String>,
    to: ResetTo,
    dry_run: bool,
    out: &mut String,
) -> Result<(), ClientError> {
    let members = member_count(cluster, group).await?;
    if members > 0 {
        return Err(ClientError::Refused(
            ResponseError::NonEmptyGroup.code(),
            format!(
                "group {group} has {members} active members: offsets can only be reset while it has none",
            ),
        ));
    }
    let committed = cluster.committed_offsets(group, None).await?;
    let topics: Vec<String> = if topics.is_empty() {
        let mut all: Vec<String> = committed.keys().map(|(t, _)| t.clone()).collect();
        all.dedup();
        all
    } else {
        topics
    };
    let mut plan: BTreeMap<(String, i32), i64> = BTreeMap::new();
    for topic in &topics {
        plan.extend(reset_targets(cluster, topic, to, &committed).await?);
    }
    let _ = writeln!(
        out,
        "{:<30} {:>9} {:>12} {:>12}",
        "TOPIC", "PARTITION", "OLD", "NEW"
    );
    for ((topic, p), new) in &plan {
        let old = committed
            .get(&(topic.clone(), *p))
            .map_or("-".to_string(), |o| o.to_string());
        let _ = writeln!(out, "{topic:<30} {p:>9} {old:>12} {new:>12}");
    }
    if dry_run {
        let _ = writeln!(out, "dry run: nothing changed");
    } else {
        cluster.commit_offsets(group, &plan).await?;
        let _ = writeln!(out, "reset {} partitions of group {group}", plan.len());
    }
    Ok(())
}

/// Where a reset moves each partition of `topic`, within its log
/// (`committed`: where each is now, for a shift).
pub(super) async fn reset_targets(
    cluster: &Cluster,
    topic: &str,
    to: ResetTo,
    committed: &BTreeMap<(String, i32), i64>,
) -> Result<Vec<((String, i32), i64)>, ClientError> {
    let info = cluster.topic_info(topic, false).await?;
    let partitions: Vec<i32> = (0..info.leaders.len() as i32).collect();
    let bounds = bounds_of(cluster, topic, &partitions).await?;
    let by_time = match to {
        ResetTo::Datetime(ms) => {
            Some(list_offsets(cluster, topic, &partitions, StartAt::Timestamp(ms)).await?)
        }
        _ => None,
    };
    let mut targets = Vec::new();
    for p in partitions {
        let (start, end) = bounds.get(&p).copied().unwrap_or((0, 0));
        let current = committed.get(&(topic.to_string(), p)).copied();
        let target = match to {
            ResetTo::Earliest => start,
            ResetTo::Latest => end,
            // No record at or after the time: the end.
            ResetTo::Datetime(_) => by_time
                .as_ref()
                .and_then(|m| m.get(&p).copied())
                .filter(|o| *o >= 0)
                .unwrap_or(end),
            ResetTo::Offset(o) => o,
            ResetTo::ShiftBy(n) => current.unwrap_or(start).saturating_add(n),
        };
        targets.push(((topic.to_string(), p), target.clamp(start, end)));
    }
    Ok(targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetimes_parse_to_epoch_millis() {
        assert_eq!(parse_datetime("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(
            parse_datetime("2026-01-01T00:00:42.5Z"),
            Ok(1_767_225_642_500)
        );
        assert_eq!(
            parse_datetime("2026-01-01T00:00:42"),
            Ok(1_767_225_642_000),
            "no zone is UTC"
        );
        assert_eq!(
            parse_datetime("2026-01-01T02:00:42+02:00"),
            Ok(1_767_225_642_000)
        );
        assert_eq!(
            parse_datetime("2025-12-31T23:30:42-00:30"),
            Ok(1_767_225_642_000)
        );
        assert_eq!(parse_datetime("2000-03-01T00:00:00Z"), Ok(951_868_800_000));
        for bad in [
            "2026-01-01",
            "2026-13-01T00:00:00Z",
            "yesterday",
            "2026-01-01T25:00:00",
        ] {
            assert!(parse_datetime(bad).is_err(), "{bad}");
        }
    }
}
