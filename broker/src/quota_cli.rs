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

use client::cluster::Cluster;
use client::connection::ClientError;
use client::quotas::Entity;

/// A `quota` command.
#[derive(Debug, Clone, PartialEq)]
pub enum QuotaCommand {
    /// Set or remove quotas of an entity.
    Alter(Entity, Vec<(String, Option<f64>)>),
    /// `quota list`.
    List,
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
            true => control::quotas::QUOTA_KEYS
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

/// Runs a quota command; what to print.
pub async fn execute(cluster: &Cluster, command: QuotaCommand) -> Result<String, ClientError> {
    let mut out = String::new();
    match command {
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
