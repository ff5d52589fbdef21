//! The `broker` binary's command line (clap): `broker serve` (also
//! `broker` alone) runs the broker; the admin subcommands talk the Kafka
//! protocol to a running one, as `rpk` or Kafka's scripts do; `dump-log`
//! and `dump-metadata` read a stopped broker's files; `completion` prints
//! a shell's completion script. One file per command family; every
//! subcommand answers `--help` with its flags and an example.

pub mod acl;
pub mod cluster;
pub mod dump_log;
pub mod dump_metadata;
pub mod failure;
pub mod group;
pub mod group_describe;
pub mod move_plan;
pub mod output;
pub mod quota;
pub mod reassign;
pub mod share_group;
pub mod target;
pub mod topic;
pub mod topic_io;
pub mod txn;
pub mod user;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::config::CommandLine;
use output::Format;
use target::TargetArgs;

/// The examples under `broker --help`.
const EXAMPLES: &str = "Examples:
  broker                                  # serve with embedded defaults (data in ./data, Kafka on :9092)
  broker serve --data-dir /var/lib/broker --kafka-listen 0.0.0.0:9092
  broker topic create orders --partitions 8
  broker group describe billing --brokers 10.0.0.1:9092
  broker txn find-hanging --topic orders
  broker completion bash > /etc/bash_completion.d/broker";

/// A thread-per-core commit log that speaks the Kafka protocol.
#[derive(Parser, Debug)]
#[command(
    name = "broker",
    version,
    after_help = EXAMPLES,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// `broker` alone serves: its flags are `broker serve`'s.
    #[command(flatten)]
    pub serve: CommandLine,
}

/// A subcommand.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Runs the broker (settings from the flags, BROKER_* variables and
    /// the TOML file, in that order of precedence: docs/configuration.md).
    #[command(after_help = "Example:\n  \
        broker serve --config /etc/broker.toml --node-id 1 --data-dir /var/lib/broker")]
    Serve(CommandLine),
    /// Topics: create, list, describe, alter, delete.
    Topic {
        /// The subcommand.
        #[command(subcommand)]
        command: topic::TopicCommand,
        /// Where the command goes.
        #[command(flatten)]
        target: TargetArgs,
    },
    /// The cluster's brokers and controller.
    Cluster {
        /// The subcommand.
        #[command(subcommand)]
        command: cluster::ClusterCommand,
        /// Where the command goes.
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Consumer groups: list, describe, reset offsets, delete.
    Group {
        /// The subcommand.
        #[command(subcommand)]
        command: group::GroupArgs,
        /// Where the command goes.
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Share groups (queues): list, describe, delete.
    ShareGroup {
        /// The subcommand.
        #[command(subcommand)]
        command: share_group::ShareGroupArgs,
        /// Where the command goes.
        #[command(flatten)]
        target: TargetArgs,
    },
    /// SASL/SCRAM users: create, delete, list.
    User {
        /// The subcommand.
        #[command(subcommand)]
        command: user::UserArgs,
        /// Where the command goes.
        #[command(flatten)]
        target: TargetArgs,
    },
    /// ACLs: create, list, delete.
    Acl {
        /// The subcommand.
        #[command(subcommand)]
        command: acl::AclArgs,
        /// Where the command goes.
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Client quotas: set, remove, list.
    Quota {
        /// The subcommand.
        #[command(subcommand)]
        command: quota::QuotaArgs,
        /// Where the command goes.
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Transactions: list, describe, find hanging ones, abort one.
    Txn {
        /// The subcommand.
        #[command(subcommand)]
        command: txn::TxnArgs,
        /// Where the command goes.
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Prints a stopped partition's batches: base, last, epoch, records,
    /// bytes, CRC.
    #[command(after_help = "Example:\n  broker dump-log data/partitions/orders.<topic id>/0")]
    DumpLog {
        /// The partition's directory.
        partition_dir: PathBuf,
    },
    /// Prints a stopped broker's metadata: snapshot, hard state, log
    /// entries.
    #[command(after_help = "Example:\n  broker dump-metadata data/metadata")]
    DumpMetadata {
        /// The broker's metadata directory.
        metadata_dir: PathBuf,
    },
    /// Prints the completion script of a shell.
    #[command(after_help = "Example:\n  broker completion bash > /etc/bash_completion.d/broker")]
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// What a command line asks for, once parsed.
pub enum Action {
    /// Run the broker with these flags.
    Serve(CommandLine),
    /// Run an admin or offline command; what it prints, or its failure.
    Print(Result<String, failure::Failure>),
}

impl Cli {
    /// The action of a parsed command line. Admin commands run here (they
    /// connect to the brokers and wait for the answers).
    pub fn action(self) -> Action {
        let command = match self.command {
            None => return Action::Serve(self.serve),
            Some(Command::Serve(line)) => return Action::Serve(line),
            Some(command) => command,
        };
        Action::Print(run(command))
    }
}

/// Runs a command other than `serve`; what to print.
fn run(command: Command) -> Result<String, failure::Failure> {
    match command {
        Command::Serve(_) => unreachable!("serve is not run here"),
        Command::Topic { command, target } => {
            let (json, subject) = (topic::prints_json(&command), topic::subject(&command));
            admin(target, json, subject, move |c, format| async move {
                topic::execute(&c, command, format).await
            })
        }
        Command::Cluster { command, target } => {
            let json = cluster::prints_json(&command);
            admin(target, json, None, move |c, format| async move {
                cluster::execute(&c, command, format).await
            })
        }
        Command::Group { command, target } => {
            let command = command.command();
            let (json, subject) = (group::prints_json(&command), group::subject(&command));
            admin(target, json, subject, move |c, format| async move {
                group::execute(&c, command, format).await
            })
        }
        Command::ShareGroup { command, target } => {
            let json = share_group::prints_json(&command);
            let subject = share_group::subject(&command);
            admin(target, json, subject, move |c, format| async move {
                share_group::execute(&c, command, format).await
            })
        }
        Command::User { command, target } => {
            let command = command.command().map_err(failure::usage)?;
            let json = user::prints_json(&command);
            admin(target, json, None, move |c, format| async move {
                user::execute(&c, command, format).await
            })
        }
        Command::Acl { command, target } => {
            let command = command.command().map_err(failure::usage)?;
            let json = acl::prints_json(&command);
            admin(target, json, None, move |c, format| async move {
                acl::execute(&c, command, format).await
            })
        }
        Command::Quota { command, target } => {
            let command = command.command().map_err(failure::usage)?;
            let json = quota::prints_json(&command);
            admin(target, json, None, move |c, format| async move {
                quota::execute(&c, command, format).await
            })
        }
        Command::Txn { command, target } => {
            let command = command.command().map_err(failure::usage)?;
            let json = txn::prints_json(&command);
            admin(target, json, None, move |c, format| async move {
                txn::execute(&c, command, format).await
            })
        }
        Command::DumpLog { partition_dir } => Ok(dump_log::run(partition_dir)?),
        Command::DumpMetadata { metadata_dir } => Ok(dump_metadata::run(metadata_dir)?),
        Command::Completion { shell } => {
            let mut script = Vec::new();
            let mut cli = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cli, "broker", &mut script);
            Ok(String::from_utf8(script).map_err(|e| e.to_string())?)
        }
    }
}

/// Runs an admin command at `target` (about `subject`, for its errors):
/// `--format json` is refused for a command that prints text only
/// (`json_form` false), else `work` runs with the cluster and the format.
fn admin<F, Fut>(
    target: TargetArgs,
    json_form: bool,
    subject: Option<String>,
    work: F,
) -> Result<String, failure::Failure>
where
    F: FnOnce(std::rc::Rc<client::cluster::Cluster>, Format) -> Fut + 'static,
    Fut: std::future::Future<Output = Result<String, client::connection::ClientError>>,
{
    let format = target.format;
    if format == Format::Json && !json_form {
        return Err(failure::usage(output::no_json()));
    }
    let target = target.target().map_err(failure::usage)?;
    target.run(subject, move |cluster| work(cluster, format))
}

#[cfg(test)]
mod tests;
