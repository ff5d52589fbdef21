//! `broker topic ...`: create, list, describe, alter and delete topics, as
//! `kafka-topics.sh` and `rpk topic` do, list a topic's idempotent
//! producers, and produce and consume from a shell (`topic_io`).

use std::fmt::Write as _;
use std::rc::Rc;

use clap::{ArgGroup, Subcommand};
use client::cluster::Cluster;
use client::connection::ClientError;
use serde::Serialize;

use super::output::{json_document, Format};
use super::topic_io::{consume, key_value, produce, ConsumeArgs, ProduceArgs};

/// A `broker topic` command.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum TopicCommand {
    /// Creates a topic.
    #[command(after_help = "Example:\n  \
        broker topic create orders --partitions 8 --config retention.ms=86400000")]
    Create {
        /// The topic's name.
        name: String,
        /// Partitions (default, or -1: the broker's num.partitions).
        #[arg(long, allow_negative_numbers = true)]
        partitions: Option<i32>,
        /// Replicas of each partition (default, or -1: the broker's
        /// default.replication.factor).
        #[arg(long, allow_negative_numbers = true)]
        replication_factor: Option<i16>,
        /// A topic setting, as Kafka names it (repeatable).
        #[arg(long = "config", value_name = "KEY=VALUE", value_parser = key_value)]
        configs: Vec<(String, String)>,
    },
    /// Lists the topics and their partition counts.
    #[command(after_help = "Example:\n  broker topic list --brokers 10.0.0.1:9092")]
    List,
    /// A topic's partitions (leader, epoch, replicas, ISR) and settings.
    #[command(after_help = "Example:\n  broker topic describe orders")]
    Describe {
        /// The topic.
        name: String,
    },
    /// Each partition's idempotent producers (id, epoch, last sequence).
    #[command(after_help = "Example:\n  broker topic describe-producers orders")]
    DescribeProducers {
        /// The topic.
        name: String,
    },
    /// Sets or resets topic settings.
    #[command(
        group(ArgGroup::new("change").required(true).multiple(true).args(["configs", "delete_config"])),
        after_help = "Example:\n  \
            broker topic alter orders --config max.message.bytes=2097152 --delete-config retention.ms"
    )]
    Alter {
        /// The topic.
        name: String,
        /// A setting to set (repeatable).
        #[arg(long = "config", value_name = "KEY=VALUE", value_parser = key_value)]
        configs: Vec<(String, String)>,
        /// A setting to reset to the broker's default (repeatable).
        #[arg(long, value_name = "KEY")]
        delete_config: Vec<String>,
    },
    /// Adds partitions to a topic (never removes any). A key's later
    /// records may go to another partition than its earlier ones: key
    /// order holds within each partition only (docs/topics.md).
    #[command(after_help = "Example:\n  broker topic add-partitions orders --num 6")]
    AddPartitions {
        /// The topic.
        name: String,
        /// How many partitions to add.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        num: u32,
    },
    /// Moves partitions to new replicas (Kafka's AlterPartitionReassignments):
    /// the new replicas copy the partition as followers, and once all of
    /// them are in sync the partition is theirs and the replicas left
    /// behind remove their copies. The replication factor stays. With
    /// --cancel, moves under way go back to their original replicas.
    #[command(after_help = "Examples:\n  \
                            broker topic reassign orders --partition 0 --replicas 2,3,4\n  \
                            broker topic reassign orders --partition 0 --replicas 2,3,4 --partition 1 --replicas 4,1,2 --wait\n  \
                            broker topic reassign orders --partition 0 --cancel\n  \
                            broker topic reassign orders --balance --wait")]
    Reassign {
        /// The topic.
        name: String,
        /// A partition to move (repeatable, each with its --replicas).
        #[arg(long, required_unless_present = "balance")]
        partition: Vec<i32>,
        /// Its new replicas, comma-separated broker ids, the first the
        /// preferred leader (repeatable, in --partition's order).
        #[arg(long, conflicts_with = "cancel")]
        replicas: Vec<String>,
        /// Cancels the moves of the partitions named instead.
        #[arg(long)]
        cancel: bool,
        /// Computes the moves instead: the topic's replicas spread evenly
        /// over the live, uncordoned brokers, no partition losing a rack.
        #[arg(long, conflicts_with_all = ["partition", "replicas", "cancel"])]
        balance: bool,
        /// Waits (at most 10 minutes) until the moves have finished.
        #[arg(long)]
        wait: bool,
    },
    /// The partition moves under way: replicas meanwhile, those being
    /// added (catching up) and removed.
    #[command(after_help = "Example:\n  broker topic reassignments")]
    Reassignments,
    /// Deletes a topic and its data.
    #[command(after_help = "Example:\n  broker topic delete orders")]
    Delete {
        /// The topic.
        name: String,
    },
    /// Produces standard input's lines, a record each (acks=all,
    /// idempotent), and prints where each landed.
    Produce(ProduceArgs),
    /// Prints a topic's records: from the start, the end, an offset or a
    /// time; until the end as of now, a count, or with --follow.
    Consume(ConsumeArgs),
}

/// The topic a command is about (`topic 'orders'`), for its errors.
pub fn subject(command: &TopicCommand) -> Option<String> {
    use TopicCommand as C;
    match command {
        C::Create { name, .. }
        | C::Describe { name }
        | C::DescribeProducers { name }
        | C::Alter { name, .. }
        | C::AddPartitions { name, .. }
        | C::Reassign { name, .. }
        | C::Delete { name } => Some(format!("topic '{name}'")),
        C::Produce(ProduceArgs { topic, .. }) => Some(format!("topic '{topic}'")),
        C::Consume(ConsumeArgs {
            topic, partitions, ..
        }) => Some(match partitions.as_slice() {
            [] => format!("topic '{topic}'"),
            [one] => format!("topic '{topic}' partition {one}"),
            many => format!("topic '{topic}' partitions {many:?}"),
        }),
        C::List | C::Reassignments => None,
    }
}

/// Whether the command prints JSON under `--format json`.
pub fn prints_json(command: &TopicCommand) -> bool {
    use TopicCommand as C;
    matches!(
        command,
        C::List
            | C::Describe { .. }
            | C::DescribeProducers { .. }
            | C::Reassignments
            | C::Produce(_)
            | C::Consume(_)
    )
}

/// Runs a topic command; what to print (produce and consume print as
/// they go).
pub async fn execute(
    cluster: &Rc<Cluster>,
    command: TopicCommand,
    format: Format,
) -> Result<String, ClientError> {
    let mut out = String::new();
    match command {
        TopicCommand::List => return list(cluster, format).await,
        TopicCommand::Describe { name } => return describe(cluster, &name, format).await,
        TopicCommand::Produce(args) => return produce(cluster.clone(), args, format).await,
        TopicCommand::Consume(args) => return consume(cluster.clone(), args, format).await,
        _ => {}
    }
    match command {
        TopicCommand::Create {
            name,
            partitions,
            replication_factor,
            configs,
        } => {
            let configs: Vec<(&str, &str)> = configs
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            // -1: the broker's default, as CreateTopics takes it.
            let (partitions, replicas) =
                (partitions.unwrap_or(-1), replication_factor.unwrap_or(-1));
            cluster
                .create_topic(&name, partitions, replicas, &configs)
                .await?;
            let partitions = cluster.topic(&name).map_or(0, |t| t.leaders.len());
            let _ = writeln!(out, "created topic {name} with {partitions} partitions");
        }
        TopicCommand::DescribeProducers { name } => {
            out = describe_producers(cluster, &name, format).await?
        }
        TopicCommand::Alter {
            name,
            configs,
            delete_config,
        } => {
            let changes: Vec<(&str, Option<&str>)> = configs
                .iter()
                .map(|(k, v)| (k.as_str(), Some(v.as_str())))
                .chain(delete_config.iter().map(|k| (k.as_str(), None)))
                .collect();
            cluster.alter_configs(&name, &changes).await?;
            let _ = writeln!(out, "altered topic {name}");
        }
        TopicCommand::AddPartitions { name, num } => {
            cluster.refresh(Some(&[name.as_str()]), false).await?;
            let now = cluster
                .partition_count(&name)
                .ok_or_else(|| ClientError::Refused(3, format!("no topic {name}")))?;
            let total = i32::try_from(now + num as usize).map_err(|_| {
                ClientError::Refused(
                    kafka_protocol::ResponseError::InvalidPartitions.code(),
                    format!("{name} cannot have {now} + {num} partitions"),
                )
            })?;
            cluster.create_partitions(&name, total).await?;
            let _ = writeln!(out, "topic {name} has {total} partitions (was {now})");
        }
        TopicCommand::Reassign {
            name,
            partition,
            replicas,
            cancel,
            balance,
            wait,
        } => {
            if balance {
                return super::reassign::balance(cluster, &name, wait).await;
            }
            let moves = super::reassign::plan(&partition, &replicas, cancel)?;
            return super::reassign::run(cluster, &name, &moves, wait).await;
        }
        TopicCommand::Reassignments => {
            return super::reassign::list(cluster, format == Format::Json).await;
        }
        TopicCommand::Delete { name } => {
            cluster.delete_topic(&name).await?;
            let _ = writeln!(out, "deleted topic {name}");
        }
        TopicCommand::List
        | TopicCommand::Describe { .. }
        | TopicCommand::Produce(_)
        | TopicCommand::Consume(_) => unreachable!("answered above"),
    }
    Ok(out)
}

/// A topic as `topic list --format json` prints it.
#[derive(Serialize)]
struct Listed {
    name: String,
    id: String,
    partitions: usize,
}

/// `topic list`: every topic and its partition count.
async fn list(cluster: &Cluster, format: Format) -> Result<String, ClientError> {
    let topics: Vec<Listed> = (cluster.list_topics().await?.into_iter())
        .map(|t| Listed {
            name: t.name,
            id: t.id.to_string(),
            partitions: t.leaders.len(),
        })
        .collect();
    if format == Format::Json {
        return Ok(json_document(&topics));
    }
    let mut out = format!("{:<40} {:>10}\n", "TOPIC", "PARTITIONS");
    for topic in topics {
        let _ = writeln!(out, "{:<40} {:>10}", topic.name, topic.partitions);
    }
    Ok(out)
}

/// A topic as `topic describe --format json` prints it.
#[derive(Serialize)]
struct Described {
    name: String,
    id: String,
    partitions: Vec<PartitionRow>,
    configs: Vec<ConfigRow>,
}

#[derive(Serialize)]
struct PartitionRow {
    partition: usize,
    leader: i32,
    leader_epoch: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
}

#[derive(Serialize)]
struct ConfigRow {
    name: String,
    value: Option<String>,
    default: bool,
}

/// `topic describe`: partitions with leader, epoch, replicas and ISR,
/// then every config and whether it is set or the default.
async fn describe(cluster: &Cluster, name: &str, format: Format) -> Result<String, ClientError> {
    cluster.refresh(Some(&[name]), false).await?;
    let topic = cluster.topic(name).ok_or(ClientError::Broker(
        kafka_protocol::ResponseError::UnknownTopicOrPartition.code(),
    ))?;
    let partitions = (topic.leaders.iter().enumerate())
        .map(|(index, leader)| {
            let info = topic.partitions.get(index).cloned().unwrap_or_default();
            PartitionRow {
                partition: index,
                leader: *leader,
                leader_epoch: info.leader_epoch,
                replicas: info.replicas,
                isr: info.isr,
            }
        })
        .collect();
    let configs = (cluster.describe_configs(name).await?.into_iter())
        .map(|entry| ConfigRow {
            name: entry.name,
            value: entry.value,
            default: entry.is_default,
        })
        .collect();
    let described = Described {
        name: topic.name.clone(),
        id: topic.id.to_string(),
        partitions,
        configs,
    };
    Ok(match format {
        Format::Json => json_document(&described),
        Format::Table => describe_table(&described),
    })
}

fn describe_table(topic: &Described) -> String {
    let mut out = String::new();
    let count = topic.partitions.len();
    let _ = writeln!(
        out,
        "topic {} id {} partitions {count}",
        topic.name, topic.id
    );
    for p in &topic.partitions {
        let _ = writeln!(
            out,
            "  partition {} leader {} epoch {} replicas {:?} isr {:?}",
            p.partition, p.leader, p.leader_epoch, p.replicas, p.isr
        );
    }
    let _ = writeln!(out, "configs:");
    for entry in &topic.configs {
        let origin = if entry.default { "default" } else { "set" };
        let value = entry.value.as_deref().unwrap_or_default();
        let _ = writeln!(out, "  {} = {value} ({origin})", entry.name);
    }
    out
}

/// `topic describe-producers`: each partition's idempotent producers.
async fn describe_producers(
    cluster: &Cluster,
    name: &str,
    format: Format,
) -> Result<String, ClientError> {
    let described = cluster.describe_producers(name).await?;
    if format == Format::Json {
        use serde_json::json;
        let partitions: Vec<serde_json::Value> = (described.iter())
            .map(|(partition, producers)| match producers {
                Ok(producers) => json!({
                    "partition": partition,
                    "producers": (producers.iter()).map(|p| json!({
                        "producer_id": p.producer_id,
                        "epoch": p.epoch,
                        "last_sequence": p.last_sequence,
                        "last_timestamp": p.last_timestamp,
                    })).collect::<Vec<_>>(),
                }),
                Err(code) => json!({
                    "partition": partition,
                    "error": client::connection::error_name(*code),
                }),
            })
            .collect();
        return Ok(json_document(&partitions));
    }
    let mut out = String::new();
    for (partition, producers) in described {
        match producers {
            Ok(producers) if producers.is_empty() => {
                let _ = writeln!(out, "partition {partition}: no idempotent producers");
            }
            Ok(producers) => {
                for p in producers {
                    let _ = writeln!(
                        out,
                        "partition {partition} producer {} epoch {} last sequence {} last timestamp {}",
                        p.producer_id, p.epoch, p.last_sequence, p.last_timestamp
                    );
                }
            }
            Err(code) => {
                let name = client::connection::error_name(code);
                let _ = writeln!(out, "partition {partition}: {name}");
            }
        }
    }
    Ok(out)
}
