//! The operator's subcommands, talking the Kafka protocol to a running
//! broker (like `rpk` or `kafka-topics.sh`):
//!
//! ```text
//! broker topic create NAME [--partitions N] [--replication-factor R] [--config KEY=VALUE]...
//! broker topic list
//! broker topic describe NAME
//! broker topic alter NAME [--config KEY=VALUE]... [--delete-config KEY]...
//! broker topic delete NAME
//! broker cluster status
//! ```
//! Every subcommand takes `--brokers HOST:PORT` (default 127.0.0.1:9092,
//! or `BROKER_BROKERS`).

use std::fmt::Write as _;

use client::cluster::{resolve, Cluster};
use client::connection::ClientError;

/// The usage text.
pub const USAGE: &str = "usage:
  broker [serve] [--config FILE] [--data-dir DIR] [--kafka-listen HOST:PORT] [--advertised-listener HOST:PORT]
                 [--http-listen HOST:PORT] [--node-id N] [--shards N]
  broker topic create NAME [--partitions N] [--replication-factor R] [--config KEY=VALUE]... [--brokers HOST:PORT]
  broker topic list [--brokers HOST:PORT]
  broker topic describe NAME [--brokers HOST:PORT]
  broker topic alter NAME [--config KEY=VALUE]... [--delete-config KEY]... [--brokers HOST:PORT]
  broker topic delete NAME [--brokers HOST:PORT]
  broker cluster status [--brokers HOST:PORT]";

/// A parsed admin command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `topic create`.
    Create {
        /// Topic name.
        name: String,
        /// Partitions (-1: the broker's default).
        partitions: i32,
        /// Replication factor (-1: the broker's default).
        replication_factor: i16,
        /// Config overrides.
        configs: Vec<(String, String)>,
    },
    /// `topic list`.
    List,
    /// `topic describe`.
    Describe(String),
    /// `topic alter`.
    Alter {
        /// Topic name.
        name: String,
        /// Keys to set (Some) or reset (None).
        changes: Vec<(String, Option<String>)>,
    },
    /// `topic delete`.
    Delete(String),
    /// `cluster status`.
    ClusterStatus,
}

/// Parses `args` (after `broker`): the command and the bootstrap address.
pub fn parse(args: &[String]) -> Result<(Command, String), String> {
    let mut brokers = std::env::var("BROKER_BROKERS").unwrap_or_else(|_| "127.0.0.1:9092".into());
    let mut positional = Vec::new();
    let mut partitions = -1;
    let mut replication_factor = -1;
    let mut sets = Vec::new();
    let mut resets = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--brokers" => brokers = value()?,
            "--partitions" => {
                partitions = value()?
                    .parse()
                    .map_err(|_| "--partitions needs a number")?
            }
            "--replication-factor" => {
                replication_factor = value()?
                    .parse()
                    .map_err(|_| "--replication-factor needs a number")?
            }
            "--config" => {
                let pair = value()?;
                let (k, v) = pair
                    .split_once('=')
                    .ok_or(format!("--config {pair}: expected KEY=VALUE"))?;
                sets.push((k.to_string(), v.to_string()));
            }
            "--delete-config" => resets.push(value()?),
            flag if flag.starts_with("--") => return Err(format!("unknown flag {flag}")),
            word => positional.push(word.to_string()),
        }
    }
    let words: Vec<&str> = positional.iter().map(|s| s.as_str()).collect();
    let command = match words.as_slice() {
        ["topic", "create", name] => Command::Create {
            name: name.to_string(),
            partitions,
            replication_factor,
            configs: sets,
        },
        ["topic", "list"] => Command::List,
        ["topic", "describe", name] => Command::Describe(name.to_string()),
        ["topic", "alter", name] if !sets.is_empty() || !resets.is_empty() => Command::Alter {
            name: name.to_string(),
            changes: sets
                .into_iter()
                .map(|(k, v)| (k, Some(v)))
                .chain(resets.into_iter().map(|k| (k, None)))
                .collect(),
        },
        ["topic", "delete", name] => Command::Delete(name.to_string()),
        ["cluster", "status"] => Command::ClusterStatus,
        _ => return Err(USAGE.to_string()),
    };
    Ok((command, brokers))
}

/// Runs a command against the broker at `brokers`; returns what to print.
pub fn run(command: Command, brokers: &str) -> Result<String, String> {
    let address = resolve(brokers).map_err(|e| format!("{brokers}: {e}"))?;
    glommio::LocalExecutorBuilder::default()
        .io_memory(256 << 10)
        .make()
        .map_err(|e| format!("cannot start an executor: {e}"))?
        .run(async move {
            let cluster = Cluster::new(address, "broker-admin");
            execute(&cluster, command).await.map_err(|e| e.to_string())
        })
}

async fn execute(cluster: &Cluster, command: Command) -> Result<String, ClientError> {
    let mut out = String::new();
    match command {
        Command::Create {
            name,
            partitions,
            replication_factor,
            configs,
        } => {
            let configs: Vec<(&str, &str)> = configs
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            cluster
                .create_topic(&name, partitions, replication_factor, &configs)
                .await?;
            let partitions = cluster.topic(&name).map_or(0, |t| t.leaders.len());
            let _ = writeln!(out, "created topic {name} with {partitions} partitions");
        }
        Command::List => {
            let _ = writeln!(out, "{:<40} {:>10}", "TOPIC", "PARTITIONS");
            for topic in cluster.list_topics().await? {
                let _ = writeln!(out, "{:<40} {:>10}", topic.name, topic.leaders.len());
            }
        }
        Command::Describe(name) => {
            cluster.refresh(Some(&[name.as_str()]), false).await?;
            let topic = cluster.topic(&name).ok_or(ClientError::Broker(
                kafka_protocol::ResponseError::UnknownTopicOrPartition.code(),
            ))?;
            let _ = writeln!(
                out,
                "topic {} id {} partitions {}",
                topic.name,
                topic.id,
                topic.leaders.len()
            );
            for (index, leader) in topic.leaders.iter().enumerate() {
                let _ = writeln!(out, "  partition {index} leader {leader}");
            }
            let _ = writeln!(out, "configs:");
            for entry in cluster.describe_configs(&name).await? {
                let origin = if entry.is_default { "default" } else { "set" };
                let _ = writeln!(
                    out,
                    "  {} = {} ({origin})",
                    entry.name,
                    entry.value.unwrap_or_default()
                );
            }
        }
        Command::Alter { name, changes } => {
            let changes: Vec<(&str, Option<&str>)> = changes
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_deref()))
                .collect();
            cluster.alter_configs(&name, &changes).await?;
            let _ = writeln!(out, "altered topic {name}");
        }
        Command::Delete(name) => {
            cluster.delete_topic(&name).await?;
            let _ = writeln!(out, "deleted topic {name}");
        }
        Command::ClusterStatus => {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn commands_and_flags_parse_and_mistakes_are_refused() {
        let (command, brokers) = parse(&args(
            "topic create orders --partitions 8 --config retention.ms=1000 --brokers h:1",
        ))
        .unwrap();
        assert_eq!(brokers, "h:1");
        assert_eq!(
            command,
            Command::Create {
                name: "orders".into(),
                partitions: 8,
                replication_factor: -1,
                configs: vec![("retention.ms".into(), "1000".into())],
            }
        );
        let (command, _) =
            parse(&args("topic alter orders --config a=1 --delete-config b")).unwrap();
        assert_eq!(
            command,
            Command::Alter {
                name: "orders".into(),
                changes: vec![("a".into(), Some("1".into())), ("b".into(), None)],
            }
        );
        assert_eq!(
            parse(&args("cluster status")).unwrap().0,
            Command::ClusterStatus
        );
        assert!(
            parse(&args("topic alter orders")).is_err(),
            "alter needs a change"
        );
        assert!(parse(&args("topic create")).is_err());
        assert!(parse(&args("topic create x --partitions many")).is_err());
        assert!(parse(&args("topic create x --config novalue")).is_err());
        assert!(parse(&args("topic list --bogus 1")).is_err());
    }
}
