//! `broker cluster ...`: the cluster as its brokers report it, brokers
//! cordoned (no new replicas) and uncordoned, its partitions' leaders
//! elected (back to their preferred replicas, or unclean to any live
//! replica), and the metadata quorum's voters changed.

use std::fmt::Write as _;

use clap::Subcommand;
use client::admin::Election;
use client::cluster::Cluster;
use client::connection::ClientError;
use kafka_protocol::ResponseError;

use super::output::{json_document, Format};

/// A `broker cluster` command.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum ClusterCommand {
    /// The cluster id, the active controller, every live broker, and the
    /// metadata quorum: its leader, term, voters and observers.
    #[command(after_help = "Example:\n  broker cluster status --brokers 10.0.0.1:9092")]
    Status,
    /// Makes an observer of the metadata quorum (a broker outside
    /// controller_quorum_voters, which joins as one by itself) a voter,
    /// once it has caught up with the metadata log (KIP-853's AddRaftVoter).
    #[command(after_help = "Example:\n  broker cluster add-voter 4")]
    AddVoter {
        /// The node's id.
        node: i32,
    },
    /// Makes a voter of the metadata quorum an observer: it keeps following
    /// the metadata log and serving as a broker; the active controller
    /// hands its leadership over first if it is the one (KIP-853's
    /// RemoveRaftVoter). An observer named stays one.
    #[command(after_help = "Example:\n  broker cluster remove-voter 1")]
    RemoveVoter {
        /// The node's id.
        node: i32,
    },
    /// Cordons a broker (Kafka's KIP-1066): no new replicas (new topics,
    /// added partitions) are placed on it; what it holds stays.
    #[command(after_help = "Example:\n  broker cluster cordon 3")]
    Cordon {
        /// The broker's id.
        broker: i32,
    },
    /// Takes a broker out of service: cordons it, then moves every replica
    /// it holds to the least loaded live, uncordoned broker that keeps
    /// the partition's racks (partition reassignment). Stop it once the
    /// moves finish (--wait).
    #[command(after_help = "Example:\n  broker cluster decommission 3 --wait")]
    Decommission {
        /// The broker's id.
        broker: i32,
        /// Waits (at most 10 minutes) until the moves have finished.
        #[arg(long)]
        wait: bool,
    },
    /// Lifts a broker's cordon: new replicas may go to it again.
    #[command(after_help = "Example:\n  broker cluster uncordon 3")]
    Uncordon {
        /// The broker's id.
        broker: i32,
    },
    /// Gives partitions back to their preferred replica (the first in
    /// their replica list) where it is live and in sync: every partition,
    /// a topic's, or some of a topic's. With --unclean, gives partitions
    /// without a leader one instead: a live in-sync replica, else any live
    /// replica (its log may lack acknowledged records: they are lost).
    #[command(after_help = "Examples:\n  broker cluster elect-leaders\n  \
                            broker cluster elect-leaders --topic orders --partition 0 --partition 3\n  \
                            broker cluster elect-leaders --unclean --topic orders --partition 2")]
    ElectLeaders {
        /// Partitions without a leader get any live replica (needs --topic,
        /// or --all for every partition of the cluster).
        #[arg(long)]
        unclean: bool,
        /// With --unclean: every partition without a leader, cluster-wide.
        #[arg(long, requires = "unclean", conflicts_with = "topic")]
        all: bool,
        /// Only this topic's partitions.
        #[arg(long)]
        topic: Option<String>,
        /// Only these partitions of the topic (repeatable; needs --topic).
        #[arg(long, requires = "topic")]
        partition: Vec<i32>,
    },
}

/// Whether the command prints JSON under `--format json`.
pub fn prints_json(command: &ClusterCommand) -> bool {
    matches!(command, ClusterCommand::Status)
}

/// `cluster status` as JSON.
async fn status_json(cluster: &Cluster) -> Result<String, ClientError> {
    use serde_json::json;
    let description = cluster.describe_cluster().await?;
    let mut brokers = Vec::new();
    for broker in description.brokers {
        let cordoned = cluster.broker_cordoned(broker.id).await.unwrap_or(false);
        brokers.push(json!({"id": broker.id, "address": broker.address, "cordoned": cordoned}));
    }
    let quorum = cluster.describe_quorum().await?;
    let ids =
        |members: &[client::quorum::QuorumMember]| members.iter().map(|m| m.id).collect::<Vec<_>>();
    Ok(json_document(&json!({
        "cluster_id": description.cluster_id,
        "controller_id": description.controller_id,
        "brokers": brokers,
        "quorum": {
            "leader": quorum.leader,
            "term": quorum.term,
            "committed": quorum.high_watermark,
            "voters": ids(&quorum.voters),
            "observers": ids(&quorum.observers),
        },
    })))
}

/// Runs a cluster command; what to print.
pub async fn execute(
    cluster: &Cluster,
    command: ClusterCommand,
    format: Format,
) -> Result<String, ClientError> {
    let mut out = String::new();
    match command {
        ClusterCommand::Status if format == Format::Json => return status_json(cluster).await,
        ClusterCommand::Status => {
            let description = cluster.describe_cluster().await?;
            let _ = writeln!(
                out,
                "cluster {} controller {}",
                description.cluster_id, description.controller_id
            );
            for broker in description.brokers {
                // A caller who may not describe broker configs sees no mark.
                let cordoned = match cluster.broker_cordoned(broker.id).await {
                    Ok(true) => " (cordoned: no new replicas)",
                    Ok(false) | Err(_) => "",
                };
                let _ = writeln!(
                    out,
                    "  broker {} at {}{cordoned}",
                    broker.id, broker.address
                );
            }
            let quorum = cluster.describe_quorum().await?;
            let ids = |members: &[client::quorum::QuorumMember]| {
                members.iter().map(|m| m.id).collect::<Vec<_>>()
            };
            let _ = writeln!(
                out,
                "metadata quorum leader {} term {} committed {} voters {:?} observers {:?}",
                quorum.leader,
                quorum.term,
                quorum.high_watermark,
                ids(&quorum.voters),
                ids(&quorum.observers)
            );
        }
        ClusterCommand::AddVoter { node } => {
            cluster.add_raft_voter(node).await?;
            let _ = writeln!(out, "node {node} is a voter of the metadata quorum");
        }
        ClusterCommand::RemoveVoter { node } => {
            cluster.remove_raft_voter(node).await?;
            let _ = writeln!(
                out,
                "node {node} no longer votes in the metadata quorum: it is an observer"
            );
        }
        ClusterCommand::Cordon { broker } => {
            cluster.set_broker_cordoned(broker, true).await?;
            let _ = writeln!(out, "broker {broker} cordoned: no new replicas go to it");
        }
        ClusterCommand::Decommission { broker, wait } => {
            return super::reassign::decommission(cluster, broker, wait).await;
        }
        ClusterCommand::Uncordon { broker } => {
            cluster.set_broker_cordoned(broker, false).await?;
            let _ = writeln!(out, "broker {broker} uncordoned");
        }
        ClusterCommand::ElectLeaders {
            unclean,
            all,
            topic,
            partition,
        } => {
            if unclean && !all && topic.is_none() {
                // Unclean elections lose what the ISR held: never for the
                // whole cluster by default.
                return Err(ClientError::Refused(
                    ResponseError::InvalidRequest.code(),
                    "--unclean needs --topic (and --partition) or --all".into(),
                ));
            }
            return elect_leaders(cluster, unclean, topic, partition).await;
        }
    }
    Ok(out)
}

/// Elects, and prints a line per partition; a refusal of any partition
/// (other than "nothing to do") fails the command with every line in its
/// message.
async fn elect_leaders(
    cluster: &Cluster,
    unclean: bool,
    topic: Option<String>,
    partitions: Vec<i32>,
) -> Result<String, ClientError> {
    let named = match topic {
        None => None,
        Some(topic) => {
            let ids = if partitions.is_empty() {
                cluster.refresh(Some(&[topic.as_str()]), false).await?;
                let count = cluster.partition_count(&topic).ok_or_else(|| {
                    ClientError::Refused(
                        ResponseError::UnknownTopicOrPartition.code(),
                        format!("no topic {topic}"),
                    )
                })?;
                (0..count as i32).collect()
            } else {
                partitions
            };
            Some(vec![(topic, ids)])
        }
    };
    let elections = cluster.elect_leaders(unclean, named.as_deref()).await?;
    let mut out = String::new();
    let mut failed = None;
    for election in &elections {
        let _ = writeln!(out, "{}", election_line(election));
        let not_needed = election.error_code == ResponseError::ElectionNotNeeded.code();
        if election.error_code != 0 && !not_needed {
            failed.get_or_insert(election.error_code);
        }
    }
    if elections.is_empty() {
        out.push_str(if unclean {
            "every partition has a leader\n"
        } else {
            "every partition is led by its preferred replica\n"
        });
    }
    match failed {
        Some(code) => Err(ClientError::Refused(code, out.trim_end().to_string())),
        None => Ok(out),
    }
}

fn election_line(election: &Election) -> String {
    let what = match election.error_code {
        0 => "elected".to_string(),
        code => {
            let name = client::transactions::error_name(code);
            match &election.message {
                Some(why) => format!("not elected: {why} ({name})"),
                None => format!("not elected ({name})"),
            }
        }
    };
    format!(
        "{} partition {}: {what}",
        election.topic, election.partition
    )
}
