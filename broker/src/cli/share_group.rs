//! `broker share-group ...`: list, describe and delete share groups
//! (KIP-932), as Kafka's `kafka-share-groups.sh` does.

use std::fmt::Write as _;

use clap::Subcommand;

use client::cluster::Cluster;
use client::connection::ClientError;

/// A `broker share-group` command line.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum ShareGroupArgs {
    /// Lists the share groups.
    #[command(after_help = "Example:\n  broker share-group list")]
    List,
    /// A share group's state, epochs and members with their partitions
    /// (several members may share a partition).
    #[command(after_help = "Example:\n  broker share-group describe workers")]
    Describe {
        /// The group.
        name: String,
    },
    /// Deletes a share group (it must have no members).
    #[command(after_help = "Example:\n  broker share-group delete workers")]
    Delete {
        /// The group.
        name: String,
    },
}

/// Runs a `broker share-group` command; what it prints.
pub async fn execute(cluster: &Cluster, command: ShareGroupArgs) -> Result<String, ClientError> {
    let mut out = String::new();
    match command {
        ShareGroupArgs::List => {
            let _ = writeln!(out, "{:<40} STATE", "GROUP");
            let groups = cluster.list_groups().await?;
            for g in groups.iter().filter(|g| g.group_type == "share") {
                let _ = writeln!(out, "{:<40} {}", g.group, g.state);
            }
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
