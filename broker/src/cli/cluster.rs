//! `broker cluster ...`: the cluster as its brokers report it.

use std::fmt::Write as _;

use clap::Subcommand;
use client::cluster::Cluster;
use client::connection::ClientError;

/// A `broker cluster` command.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum ClusterCommand {
    /// The cluster id, the active controller and every live broker.
    #[command(after_help = "Example:\n  broker cluster status --brokers 10.0.0.1:9092")]
    Status,
}

/// Runs a cluster command; what to print.
pub async fn execute(cluster: &Cluster, command: ClusterCommand) -> Result<String, ClientError> {
    let mut out = String::new();
    match command {
        ClusterCommand::Status => {
            let description = cluster.describe_cluster().await?;
            let _ = writeln!(
                out,
                "cluster {} controller {}",
                description.cluster_id, description.controller_id
            );
            for broker in description.brokers {
                let _ = writeln!(out, "  broker {} at {}", broker.id, broker.address);
            }
        }
    }
    Ok(out)
}
