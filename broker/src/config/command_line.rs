//! The settings `broker serve` takes as flags: the few an operator sets
//! per process (which file, which node, where its data and ports are).
//! Every other setting comes from the TOML file or a `BROKER_*` variable;
//! a flag given wins over both (figment merges it last).

use std::path::PathBuf;

use clap::{Args, Parser};
use serde::Serialize;

use super::ConfigError;

/// Settings given on the command line; unset ones leave the lower layers be.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CommandLine {
    /// The TOML settings file (else BROKER_CONFIG, else none).
    #[arg(long = "config", value_name = "FILE")]
    #[serde(skip)]
    pub config_file: Option<PathBuf>,
    /// This broker's id in the cluster (node_id).
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<i32>,
    /// Where the logs and the metadata live (data_dir; default ./data).
    #[arg(long, value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    /// The Kafka listener's address (kafka_listen; default 0.0.0.0:9092).
    #[arg(long, value_name = "HOST:PORT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kafka_listen: Option<String>,
    /// The address clients are told to connect to (advertised_listener).
    #[arg(long, value_name = "HOST:PORT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advertised_listener: Option<String>,
    /// The HTTP API's address (http_listen; default 0.0.0.0:8080).
    #[arg(long, value_name = "HOST:PORT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_listen: Option<String>,
    /// Shards, one per core (shards; default: every core).
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<usize>,
}

/// `broker serve`'s flags alone, for [`CommandLine::parse`].
#[derive(Parser)]
#[command(name = "broker serve")]
struct ServeFlags {
    #[command(flatten)]
    line: CommandLine,
}

impl CommandLine {
    /// Parses `--flag value` pairs (the arguments after the subcommand).
    pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<CommandLine, ConfigError> {
        let args = std::iter::once("broker serve".to_string()).chain(args);
        ServeFlags::try_parse_from(args)
            .map(|flags| flags.line)
            .map_err(|e| ConfigError::Usage(e.to_string()))
    }
}
