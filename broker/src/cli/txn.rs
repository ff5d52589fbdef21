//! `broker txn ...`: list and describe transactions, find the hanging ones
//! and abort them, as `kafka-transactions.sh` does. A transaction hangs
//! when a partition still holds it open (no COMMIT or ABORT marker) long
//! after its coordinator should have ended it: read_committed consumers
//! stop at its first offset (the last stable offset) until someone writes
//! the marker, which is what `txn abort` does.
//!
//! ```text
//! broker txn list [--state STATE[,STATE...]] [--producer-id ID]...
//! broker txn describe TRANSACTIONAL_ID...
//! broker txn find-hanging --topic T [--max-age-ms MS]
//! broker txn abort --topic T --partition P --start-offset OFFSET
//! broker txn abort --topic T --partition P --producer-id ID [--producer-epoch E] [--coordinator-epoch C]
//! ```

use std::fmt::Write as _;

use clap::{ArgGroup, Args, Subcommand};

use client::cluster::Cluster;
use client::connection::ClientError;
use client::transactions::{named_error, PartitionProducer, TransactionDescription};
use kafka_protocol::ResponseError;

use super::output::{json_document, Format};

/// Kafka's transaction.max.timeout.ms default (15 minutes): no transaction
/// may stay open longer, so one silent for longer hangs.
pub const DEFAULT_MAX_AGE_MS: i64 = 15 * 60 * 1000;

/// The states `txn list --state` may name: Kafka's, as coordinators list
/// them (Dead ids are not listed).
pub const STATES: [&str; 6] = [
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
];

/// A `broker txn` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnCommand {
    /// `txn list`.
    List {
        /// Only these states (Kafka's names; empty: any).
        states: Vec<String>,
        /// Only these producer ids (empty: any).
        producer_ids: Vec<i64>,
    },
    /// `txn describe ID...`.
    Describe(Vec<String>),
    /// `txn abort`.
    Abort(AbortTarget),
    /// `txn find-hanging`.
    FindHanging {
        /// The topic whose partitions are looked at.
        topic: String,
        /// How long a transaction may have been silent before it hangs.
        max_age_ms: i64,
    },
}

/// The transaction `txn abort` ends, in one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbortTarget {
    /// The partition's topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Whose transaction.
    pub producer: ProducerChoice,
    /// The producer's epoch (None: the partition leader's).
    pub producer_epoch: Option<i16>,
    /// The coordinator epoch the marker carries (None: the partition
    /// leader's, 0 if no coordinator has written a marker yet).
    pub coordinator_epoch: Option<i32>,
}

/// How `txn abort` names the producer whose transaction it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProducerChoice {
    /// By its id.
    Id(i64),
    /// The producer whose open transaction starts at this offset (as
    /// `txn find-hanging` prints it).
    StartOffset(i64),
}

/// A `broker txn` command line.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum TxnArgs {
    /// Lists the transactions of every broker's coordinator: id,
    /// coordinator, producer id and state.
    #[command(after_help = "Examples:\n  \
        broker txn list\n  \
        broker txn list --state Ongoing,PrepareCommit --producer-id 4000")]
    List {
        /// Only transactions in these states: Empty, Ongoing,
        /// PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort
        /// (comma-separated or repeated).
        #[arg(long = "state", value_name = "STATE", value_delimiter = ',')]
        states: Vec<String>,
        /// Only this producer id's transaction (repeatable).
        #[arg(long = "producer-id", value_name = "ID")]
        producer_ids: Vec<i64>,
    },
    /// Each transactional id's transaction at its coordinator: state,
    /// timeout, start time, producer id and epoch, partitions.
    #[command(after_help = "Example:\n  broker txn describe payments-1 payments-2")]
    Describe {
        /// The transactional ids.
        #[arg(required = true, value_name = "TRANSACTIONAL_ID")]
        ids: Vec<String>,
    },
    /// Ends a hanging transaction in one partition by writing its ABORT
    /// marker at the partition's leader (needs CLUSTER_ACTION on the
    /// cluster, as coordinators have).
    #[command(after_help = "Examples:\n  \
        broker txn abort --topic orders --partition 3 --start-offset 1200\n  \
        broker txn abort --topic orders --partition 3 --producer-id 4000 \
        --producer-epoch 2 --coordinator-epoch 0")]
    Abort(AbortArgs),
    /// Prints the transactions open in a topic's partitions and silent for
    /// longer than any transaction may last: the ones to abort.
    #[command(
        after_help = "Example:\n  broker txn find-hanging --topic orders --max-age-ms 3600000"
    )]
    FindHanging {
        /// The topic.
        #[arg(long, value_name = "TOPIC")]
        topic: String,
        /// How long an open transaction's producer may have been silent
        /// before it counts as hanging (default: 15 minutes, Kafka's
        /// transaction.max.timeout.ms).
        #[arg(long, value_name = "MS", default_value_t = DEFAULT_MAX_AGE_MS)]
        max_age_ms: i64,
    },
}

/// `txn abort`: the partition, and its producer by id (epochs given or
/// looked up) or by its transaction's start offset.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
#[command(group(ArgGroup::new("producer").required(true).args(["producer_id", "start_offset"])))]
pub struct AbortArgs {
    /// The partition's topic.
    #[arg(long, value_name = "TOPIC")]
    pub topic: String,
    /// The partition.
    #[arg(long, value_name = "PARTITION")]
    pub partition: i32,
    /// The producer whose transaction is aborted.
    #[arg(long, value_name = "ID")]
    pub producer_id: Option<i64>,
    /// Its epoch (default: the partition leader's, from DescribeProducers).
    #[arg(long, value_name = "EPOCH", conflicts_with = "start_offset")]
    pub producer_epoch: Option<i16>,
    /// The coordinator epoch (default: the partition leader's, from
    /// DescribeProducers).
    #[arg(long, value_name = "EPOCH", conflicts_with = "start_offset")]
    pub coordinator_epoch: Option<i32>,
    /// Or: the producer whose open transaction starts at this offset.
    #[arg(long, value_name = "OFFSET")]
    pub start_offset: Option<i64>,
}

impl TxnArgs {
    /// The command the line names.
    pub fn command(self) -> Result<TxnCommand, String> {
        match self {
            TxnArgs::List {
                states,
                producer_ids,
            } => Ok(TxnCommand::List {
                states: states
                    .iter()
                    .map(String::as_str)
                    .map(state_name)
                    .collect::<Result<_, _>>()?,
                producer_ids,
            }),
            TxnArgs::Describe { ids } => Ok(TxnCommand::Describe(ids)),
            TxnArgs::Abort(abort) => Ok(TxnCommand::Abort(abort.target())),
            TxnArgs::FindHanging { topic, max_age_ms } => {
                Ok(TxnCommand::FindHanging { topic, max_age_ms })
            }
        }
    }
}

impl AbortArgs {
    /// The transaction the flags name (clap has made sure one of
    /// --producer-id and --start-offset is given).
    fn target(self) -> AbortTarget {
        let producer = match (self.producer_id, self.start_offset) {
            (Some(id), _) => ProducerChoice::Id(id),
            (None, offset) => ProducerChoice::StartOffset(offset.unwrap_or_default()),
        };
        AbortTarget {
            topic: self.topic,
            partition: self.partition,
            producer,
            producer_epoch: self.producer_epoch,
            coordinator_epoch: self.coordinator_epoch,
        }
    }
}

/// A state as Kafka names it, whatever its case (the coordinators compare
/// names exactly).
fn state_name(given: &str) -> Result<String, String> {
    STATES
        .iter()
        .find(|s| s.eq_ignore_ascii_case(given.trim()))
        .map(|s| s.to_string())
        .ok_or_else(|| format!("--state {given}: one of {}", STATES.join(", ")))
}

/// Whether a producer's transaction open in a partition hangs: its
/// producer has been silent longer than `max_age_ms`, past which its
/// coordinator would have aborted it and written the marker.
pub fn is_hanging(producer: &PartitionProducer, now_ms: i64, max_age_ms: i64) -> bool {
    producer.current_txn_start_offset >= 0
        && producer.last_timestamp < now_ms.saturating_sub(max_age_ms)
}

/// Whether the command prints JSON under `--format json`.
pub fn prints_json(command: &TxnCommand) -> bool {
    matches!(command, TxnCommand::List { .. } | TxnCommand::Describe(_))
}

/// Runs a txn command; what to print. A broker's error code is named as
/// Kafka names it (TRANSACTIONAL_ID_NOT_FOUND).
pub async fn execute(
    cluster: &Cluster,
    command: TxnCommand,
    format: Format,
) -> Result<String, ClientError> {
    if format == Format::Json {
        return execute_json(cluster, command).await.map_err(by_name);
    }
    let mut out = String::new();
    let done = match command {
        TxnCommand::List {
            states,
            producer_ids,
        } => list(cluster, &states, &producer_ids, &mut out).await,
        TxnCommand::Describe(ids) => describe(cluster, &ids, &mut out).await,
        TxnCommand::Abort(target) => abort(cluster, &target, &mut out).await,
        TxnCommand::FindHanging { topic, max_age_ms } => {
            find_hanging(cluster, &topic, max_age_ms, &mut out).await
        }
    };
    done.map(|()| out).map_err(by_name)
}

/// `txn list` and `txn describe` as JSON (an id that could not be
/// described carries its `error`).
async fn execute_json(cluster: &Cluster, command: TxnCommand) -> Result<String, ClientError> {
    use serde_json::{json, Value};
    let rows: Vec<Value> = match command {
        TxnCommand::List {
            states,
            producer_ids,
        } => (cluster
            .list_transactions(&states, &producer_ids)
            .await?
            .iter())
        .map(|t| {
            json!({
                "transactional_id": t.transactional_id,
                "coordinator": t.coordinator,
                "producer_id": t.producer_id,
                "state": t.state,
            })
        })
        .collect(),
        TxnCommand::Describe(ids) => (cluster.describe_transactions(&ids).await.into_iter())
            .map(|(id, described)| match described {
                Ok(d) => json!({
                    "transactional_id": d.transactional_id,
                    "coordinator": d.coordinator,
                    "producer_id": d.producer_id,
                    "producer_epoch": d.producer_epoch,
                    "state": d.state,
                    "timeout_ms": d.timeout_ms,
                    "start_time_ms": (d.start_time_ms >= 0).then_some(d.start_time_ms),
                    "partitions": (d.partitions.iter())
                        .map(|(topic, partition)| json!({"topic": topic, "partition": partition}))
                        .collect::<Vec<_>>(),
                }),
                Err(e) => {
                    // named_error's message starts with Kafka's name.
                    let said = match by_name(e) {
                        ClientError::Refused(_, said) => said,
                        other => other.to_string(),
                    };
                    json!({"transactional_id": id, "error": said})
                }
            })
            .collect(),
        _ => unreachable!("only list and describe print JSON (prints_json)"),
    };
    Ok(json_document(&rows))
}

/// An error code with its name (some calls answer only the code).
fn by_name(error: ClientError) -> ClientError {
    match error {
        ClientError::Broker(code) => named_error(code, None),
        other => other,
    }
}

/// Milliseconds since the epoch, now.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `txn list`: one table of every broker's transactions.
async fn list(
    cluster: &Cluster,
    states: &[String],
    producer_ids: &[i64],
    out: &mut String,
) -> Result<(), ClientError> {
    let listed = cluster.list_transactions(states, producer_ids).await?;
    let _ = writeln!(
        out,
        "{:<40} {:>11} {:>12}  STATE",
        "TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID"
    );
    for t in listed {
        let _ = writeln!(
            out,
            "{:<40} {:>11} {:>12}  {}",
            t.transactional_id, t.coordinator, t.producer_id, t.state
        );
    }
    Ok(())
}

/// `txn describe`: a row per id described, then a line per id that could
/// not be. Fails (exit 1) only when none could be: one unknown id among
/// several does not hide the others.
async fn describe(cluster: &Cluster, ids: &[String], out: &mut String) -> Result<(), ClientError> {
    let now = now_ms();
    let _ = writeln!(
        out,
        "{:<30} {:>11} {:>12} {:>5} {:<14} {:>10} {:>14} {:>11}  PARTITIONS",
        "TRANSACTIONAL-ID",
        "COORDINATOR",
        "PRODUCER-ID",
        "EPOCH",
        "STATE",
        "TIMEOUT-MS",
        "START-TIME-MS",
        "DURATION-MS"
    );
    let mut failures = Vec::new();
    for (id, described) in cluster.describe_transactions(ids).await {
        match described {
            Ok(d) => write_description(out, &d, now),
            Err(e) => failures.push((id, by_name(e))),
        }
    }
    if !failures.is_empty() && failures.len() == ids.len() {
        return Err(all_failed(failures));
    }
    for (id, error) in failures {
        // named_error's message starts with Kafka's name for the error.
        let said = match error {
            ClientError::Refused(_, said) => said,
            other => other.to_string(),
        };
        let _ = writeln!(out, "{id}: {said}");
    }
    Ok(())
}

/// One `txn describe` row, with how long the open transaction has run.
fn write_description(out: &mut String, d: &TransactionDescription, now: i64) {
    // -1: no transaction open.
    let (start, duration) = match d.start_time_ms {
        start if start >= 0 => (start.to_string(), (now - start).to_string()),
        _ => ("-".to_string(), "-".to_string()),
    };
    let partitions = match d.partitions.is_empty() {
        true => "-".to_string(),
        false => d
            .partitions
            .iter()
            .map(|(topic, p)| format!("{topic}-{p}"))
            .collect::<Vec<_>>()
            .join(","),
    };
    let _ = writeln!(
        out,
        "{:<30} {:>11} {:>12} {:>5} {:<14} {:>10} {:>14} {:>11}  {}",
        d.transactional_id,
        d.coordinator,
        d.producer_id,
        d.producer_epoch,
        d.state,
        d.timeout_ms,
        start,
        duration,
        partitions
    );
}

/// The error of a `txn describe` none of whose ids could be described:
/// each id with why.
fn all_failed(mut failures: Vec<(String, ClientError)>) -> ClientError {
    if failures.len() == 1 {
        let (id, error) = failures.remove(0);
        return match error {
            ClientError::Refused(code, why) => ClientError::Refused(code, format!("{id}: {why}")),
            other => other,
        };
    }
    let code = failures
        .iter()
        .find_map(|(_, e)| match e {
            ClientError::Refused(code, _) | ClientError::Broker(code) => Some(*code),
            _ => None,
        })
        .unwrap_or(ResponseError::UnknownServerError.code());
    let why: Vec<String> = failures
        .iter()
        .map(|(id, e)| match e {
            ClientError::Refused(_, why) => format!("{id}: {why}"),
            other => format!("{id}: {other}"),
        })
        .collect();
    ClientError::Refused(code, why.join("; "))
}

/// `txn abort`: the marker's epochs (given, or the leader's), then the
/// ABORT marker at the partition's leader.
async fn abort(
    cluster: &Cluster,
    target: &AbortTarget,
    out: &mut String,
) -> Result<(), ClientError> {
    let (producer_id, producer_epoch, coordinator_epoch) = marker_for(cluster, target).await?;
    let leader = cluster
        .write_abort_marker(
            &target.topic,
            target.partition,
            producer_id,
            producer_epoch,
            coordinator_epoch,
        )
        .await?;
    let _ = writeln!(
        out,
        "wrote an ABORT marker to {}-{} at leader {leader}: producer {producer_id} \
         epoch {producer_epoch}, coordinator epoch {coordinator_epoch}",
        target.topic, target.partition
    );
    Ok(())
}

/// The producer id, producer epoch and coordinator epoch an ABORT marker
/// carries: as given, or looked up at the partition's leader
/// (DescribeProducers), as `kafka-transactions.sh abort` does.
async fn marker_for(
    cluster: &Cluster,
    target: &AbortTarget,
) -> Result<(i64, i16, i32), ClientError> {
    if let (ProducerChoice::Id(id), Some(epoch), Some(coordinator_epoch)) = (
        target.producer,
        target.producer_epoch,
        target.coordinator_epoch,
    ) {
        return Ok((id, epoch, coordinator_epoch));
    }
    let producers = cluster
        .partition_producers(&target.topic, target.partition)
        .await?;
    let found = producers
        .into_iter()
        .find(|p| match target.producer {
            ProducerChoice::Id(id) => p.producer_id == id,
            ProducerChoice::StartOffset(offset) => p.current_txn_start_offset == offset,
        })
        .ok_or_else(|| not_found(target))?;
    if found.current_txn_start_offset < 0 {
        // Nothing to end: a marker now could cut a transaction that opens
        // meanwhile.
        return Err(ClientError::Protocol(format!(
            "producer {} has no open transaction in {}-{}",
            found.producer_id, target.topic, target.partition
        )));
    }
    let producer_epoch = match target.producer_epoch {
        Some(epoch) => epoch,
        None => i16::try_from(found.producer_epoch).map_err(|_| {
            ClientError::Protocol(format!(
                "producer epoch {} out of range",
                found.producer_epoch
            ))
        })?,
    };
    // -1: no coordinator has written a marker for it yet; the first
    // coordinator epoch is 0.
    let coordinator_epoch = target
        .coordinator_epoch
        .unwrap_or(found.coordinator_epoch.max(0));
    Ok((found.producer_id, producer_epoch, coordinator_epoch))
}

/// The error when the leader does not know the producer `txn abort` names.
fn not_found(target: &AbortTarget) -> ClientError {
    let partition = format!("{}-{}", target.topic, target.partition);
    match target.producer {
        ProducerChoice::Id(id) => named_error(
            ResponseError::UnknownProducerId.code(),
            Some(
                format!(
                    "{partition} has no state for producer {id}: \
                     give --producer-epoch and --coordinator-epoch"
                )
                .as_str(),
            ),
        ),
        ProducerChoice::StartOffset(offset) => named_error(
            ResponseError::InvalidTxnState.code(),
            Some(
                format!(
                    "no transaction open in {partition} starts at offset {offset} \
                     (txn find-hanging --topic {} lists those that do)",
                    target.topic
                )
                .as_str(),
            ),
        ),
    }
}

/// `txn find-hanging`: each partition's open transactions whose producer
/// has been silent longer than `max_age_ms`.
async fn find_hanging(
    cluster: &Cluster,
    topic: &str,
    max_age_ms: i64,
    out: &mut String,
) -> Result<(), ClientError> {
    let now = now_ms();
    let open = cluster.open_transactions(topic).await?;
    let _ = writeln!(
        out,
        "{:<30} {:>9} {:>12} {:>5} {:>17} {:>12} {:>14}",
        "TOPIC",
        "PARTITION",
        "PRODUCER-ID",
        "EPOCH",
        "COORDINATOR-EPOCH",
        "START-OFFSET",
        "LAST-TIMESTAMP"
    );
    let hanging = open
        .iter()
        .filter(|t| is_hanging(&t.producer, now, max_age_ms));
    for t in hanging {
        let p = &t.producer;
        let _ = writeln!(
            out,
            "{:<30} {:>9} {:>12} {:>5} {:>17} {:>12} {:>14}",
            t.topic,
            t.partition,
            p.producer_id,
            p.producer_epoch,
            p.coordinator_epoch,
            p.current_txn_start_offset,
            p.last_timestamp
        );
    }
    Ok(())
}
