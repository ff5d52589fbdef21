//! `broker quota ...`: set, remove and list client quotas, as
//! `kafka-configs.sh --entity-type users|clients` and `rpk cluster quotas`.
//!
//! ```text
//! broker quota set ENTITY [--producer-byte-rate N] [--consumer-byte-rate N] [--request-percentage N]
//! broker quota remove ENTITY [--key producer_byte_rate|consumer_byte_rate|request_percentage]...
//! broker quota list
//! ENTITY: [--user NAME | --user-default] [--client-id ID | --client-default]
//! ```

use std::fmt::Write as _;

use clap::{ArgGroup, Args, Subcommand};

use client::cluster::Cluster;
use client::connection::ClientError;
use client::quotas::Entity;

use super::output::{json_document, Format};

/// A `quota` command.
#[derive(Debug, Clone, PartialEq)]
pub enum QuotaCommand {
    /// Set or remove quotas of an entity.
    Alter(Entity, Vec<(String, Option<f64>)>),
    /// `quota list`.
    List,
}

/// A `broker quota` command line.
#[derive(Subcommand, Debug, Clone, PartialEq)]
pub enum QuotaArgs {
    /// Sets an entity's quotas.
    #[command(after_help = "Example:\n  \
        broker quota set --user alice --client-id billing --producer-byte-rate 1048576")]
    Set {
        /// Whose quotas.
        #[command(flatten)]
        entity: EntityArgs,
        /// Bytes per second the entity may produce, per broker.
        #[arg(long, value_name = "BYTES")]
        producer_byte_rate: Option<f64>,
        /// Bytes per second the entity may fetch, per broker.
        #[arg(long, value_name = "BYTES")]
        consumer_byte_rate: Option<f64>,
        /// Percent of one shard's time the entity's requests may take.
        #[arg(long, value_name = "PERCENT")]
        request_percentage: Option<f64>,
    },
    /// Removes an entity's quotas (those named, or all).
    #[command(
        after_help = "Example:\n  broker quota remove --user-default --key producer_byte_rate"
    )]
    Remove {
        /// Whose quotas.
        #[command(flatten)]
        entity: EntityArgs,
        /// producer_byte_rate, consumer_byte_rate or request_percentage
        /// (repeatable; default: all).
        #[arg(long = "key", value_name = "KEY")]
        keys: Vec<String>,
    },
    /// Lists every entity's quotas.
    #[command(after_help = "Example:\n  broker quota list")]
    List,
}

/// The entity a quota is for: a user, a client id, or both (each may be
/// the default of its kind).
#[derive(Args, Debug, Clone, PartialEq, Eq)]
#[command(
    group(ArgGroup::new("user_entity").args(["user", "user_default"])),
    group(ArgGroup::new("client_entity").args(["client_id", "client_default"])),
)]
pub struct EntityArgs {
    /// The user.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// Every user without quotas of its own.
    #[arg(long)]
    pub user_default: bool,
    /// The client id.
    #[arg(long, value_name = "ID")]
    pub client_id: Option<String>,
    /// Every client id without quotas of its own.
    #[arg(long)]
    pub client_default: bool,
}

impl EntityArgs {
    fn entity(&self) -> Entity {
        let user = (self.user.is_some() || self.user_default).then(|| self.user.clone());
        let client =
            (self.client_id.is_some() || self.client_default).then(|| self.client_id.clone());
        let user = user.map(|name| ("user".to_string(), name));
        let client = client.map(|id| ("client-id".to_string(), id));
        user.into_iter().chain(client).collect()
    }
}

impl QuotaArgs {
    /// The command the line names.
    pub fn command(self) -> Result<QuotaCommand, String> {
        match self {
            QuotaArgs::List => Ok(QuotaCommand::List),
            QuotaArgs::Set {
                entity,
                producer_byte_rate,
                consumer_byte_rate,
                request_percentage,
            } => {
                let rates = [
                    ("producer_byte_rate", producer_byte_rate),
                    ("consumer_byte_rate", consumer_byte_rate),
                    ("request_percentage", request_percentage),
                ];
                let flags = QuotaFlags {
                    entity: entity.entity(),
                    rates: rates
                        .into_iter()
                        .filter_map(|(key, rate)| Some((key.to_string(), rate?)))
                        .collect(),
                    keys: Vec::new(),
                };
                alter(flags, false)
            }
            QuotaArgs::Remove { entity, keys } => {
                let flags = QuotaFlags {
                    entity: entity.entity(),
                    rates: Vec::new(),
                    keys,
                };
                alter(flags, true)
            }
        }
    }
}

/// The quota flags of a command line.
#[derive(Debug, Default)]
pub struct QuotaFlags {
    /// The entity's parts, in the order given.
    pub entity: Entity,
    /// (key, bytes per second) to set.
    pub rates: Vec<(String, f64)>,
    /// Keys to remove.
    pub keys: Vec<String>,
}

/// `quota set` or `quota remove`.
pub fn alter(flags: QuotaFlags, remove: bool) -> Result<QuotaCommand, String> {
    if flags.entity.is_empty() {
        return Err(
            "a quota is for --user NAME, --user-default, --client-id ID or --client-default".into(),
        );
    }
    let changes: Vec<(String, Option<f64>)> = if remove {
        let keys = match flags.keys.is_empty() {
            true => control::model::quotas::QUOTA_KEYS
                .iter()
                .map(|key| key.to_string())
                .collect(),
            false => flags.keys,
        };
        keys.into_iter().map(|k| (k, None)).collect()
    } else {
        flags.rates.into_iter().map(|(k, v)| (k, Some(v))).collect()
    };
    if changes.is_empty() {
        return Err(
            "quota set needs --producer-byte-rate, --consumer-byte-rate or --request-percentage"
                .into(),
        );
    }
    Ok(QuotaCommand::Alter(flags.entity, changes))
}

/// Whether the command prints JSON under `--format json`.
pub fn prints_json(command: &QuotaCommand) -> bool {
    matches!(command, QuotaCommand::List)
}

/// Runs a quota command; what to print.
pub async fn execute(
    cluster: &Cluster,
    command: QuotaCommand,
    format: Format,
) -> Result<String, ClientError> {
    let mut out = String::new();
    match command {
        QuotaCommand::List if format == Format::Json => {
            let listed: Vec<serde_json::Value> = (cluster.describe_quotas().await?.iter())
                .map(|quotas| {
                    let entity: serde_json::Map<String, serde_json::Value> = (quotas.entity.iter())
                        .map(|(kind, name)| (kind.clone(), serde_json::json!(name)))
                        .collect();
                    let values: serde_json::Map<String, serde_json::Value> = (quotas.values.iter())
                        .map(|(key, value)| (key.clone(), serde_json::json!(value)))
                        .collect();
                    serde_json::json!({"entity": entity, "quotas": values})
                })
                .collect();
            return Ok(json_document(&listed));
        }
        QuotaCommand::Alter(entity, changes) => {
            cluster.alter_quotas(&entity, &changes).await?;
            let _ = writeln!(out, "altered quotas of {}", describe(&entity));
        }
        QuotaCommand::List => {
            let _ = writeln!(out, "{:<40} QUOTAS", "ENTITY");
            for quotas in cluster.describe_quotas().await? {
                let values: Vec<String> = quotas
                    .values
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                let _ = writeln!(out, "{:<40} {}", describe(&quotas.entity), values.join(" "));
            }
        }
    }
    Ok(out)
}

fn describe(entity: &Entity) -> String {
    let parts: Vec<String> = entity
        .iter()
        .map(|(kind, name)| format!("{kind}={}", name.as_deref().unwrap_or("<default>")))
        .collect();
    parts.join(",")
}
