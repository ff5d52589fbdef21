//! `broker user ...`: create, delete and list the SASL/SCRAM users, as
//! `kafka-configs.sh --alter --add-config SCRAM-SHA-512=[password=...]`
//! and `rpk acl user` do. The password is salted here; the broker only
//! ever sees the salted form.

use std::fmt::Write as _;

use clap::Subcommand;

use client::cluster::Cluster;
use client::connection::ClientError;
use client::scram::Mechanism;

use super::output::{json_document, Format};

/// Iterations of a new credential (Kafka's tools' default).
pub const ITERATIONS_DEFAULT: u32 = 4096;

/// A `broker user` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserCommand {
    /// `user create NAME`: sets the password (for every mechanism given).
    Create {
        /// The user.
        name: String,
        /// The password.
        password: String,
        /// The mechanisms to set it for.
        mechanisms: Vec<Mechanism>,
        /// PBKDF2 iterations.
        iterations: u32,
    },
    /// `user delete NAME`: removes its credentials (those given, or all).
    Delete {
        /// The user.
        name: String,
        /// The mechanisms to remove (empty: every one it has).
        mechanisms: Vec<Mechanism>,
    },
    /// `user list`.
    List,
}

/// A `broker user` command line.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum UserArgs {
    /// Creates a user, or sets its password (salted here: the broker
    /// never sees the password itself).
    #[command(after_help = "Example:\n  \
        BROKER_USER_PASSWORD=s3cret broker user create alice --mechanism SCRAM-SHA-512")]
    Create {
        /// The user.
        name: String,
        /// The password (better in BROKER_USER_PASSWORD: kept out of the
        /// process list).
        #[arg(
            long,
            env = "BROKER_USER_PASSWORD",
            hide_env_values = true,
            allow_hyphen_values = true
        )]
        password: Option<String>,
        /// SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default: both).
        #[arg(long = "mechanism", value_name = "MECHANISM")]
        mechanisms: Vec<String>,
        /// PBKDF2 iterations of the salted password.
        #[arg(long, default_value_t = ITERATIONS_DEFAULT)]
        iterations: u32,
    },
    /// Removes a user's credentials (those of the mechanisms named, or all).
    #[command(after_help = "Example:\n  broker user delete alice")]
    Delete {
        /// The user.
        name: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default: every one).
        #[arg(long = "mechanism", value_name = "MECHANISM")]
        mechanisms: Vec<String>,
    },
    /// Lists the users and their mechanisms.
    #[command(after_help = "Example:\n  broker user list")]
    List,
}

impl UserArgs {
    /// The command the line names.
    pub fn command(self) -> Result<UserCommand, String> {
        Ok(match self {
            UserArgs::Create {
                name,
                password,
                mechanisms,
                iterations,
            } => UserCommand::Create {
                name,
                password: password
                    .filter(|p| !p.is_empty())
                    .ok_or("user create needs --password or BROKER_USER_PASSWORD")?,
                mechanisms: mechanisms_or_both(&mechanisms)?,
                iterations,
            },
            UserArgs::Delete { name, mechanisms } => UserCommand::Delete {
                name,
                mechanisms: match mechanisms.is_empty() {
                    true => Vec::new(),
                    false => mechanisms_or_both(&mechanisms)?,
                },
            },
            UserArgs::List => UserCommand::List,
        })
    }
}

/// The mechanisms named by `--mechanism` flags (both when none is).
pub fn mechanisms_or_both(named: &[String]) -> Result<Vec<Mechanism>, String> {
    if named.is_empty() {
        return Ok(vec![Mechanism::Sha256, Mechanism::Sha512]);
    }
    named
        .iter()
        .map(|n| {
            Mechanism::from_name(n)
                .ok_or_else(|| format!("--mechanism {n}: SCRAM-SHA-256 or SCRAM-SHA-512"))
        })
        .collect()
}

/// Whether the command prints JSON under `--format json`.
pub fn prints_json(command: &UserCommand) -> bool {
    matches!(command, UserCommand::List)
}

/// Runs a user command; what to print.
pub async fn execute(
    cluster: &Cluster,
    command: UserCommand,
    format: Format,
) -> Result<String, ClientError> {
    let mut out = String::new();
    match command {
        UserCommand::Create {
            name,
            password,
            mechanisms,
            iterations,
        } => {
            for mechanism in &mechanisms {
                cluster
                    .set_scram_password(&name, *mechanism, &password, iterations)
                    .await?;
            }
            let names: Vec<&str> = mechanisms.iter().map(|m| m.name()).collect();
            let _ = writeln!(out, "set {} for user {name}", names.join(" and "));
        }
        UserCommand::Delete { name, mechanisms } => {
            let mechanisms = if mechanisms.is_empty() {
                let described = cluster.describe_users(Some(&[name.as_str()])).await?;
                described
                    .iter()
                    .flat_map(|u| u.mechanisms.iter().filter_map(|(m, _)| *m))
                    .collect()
            } else {
                mechanisms
            };
            for mechanism in mechanisms {
                cluster.delete_scram_credential(&name, mechanism).await?;
            }
            let _ = writeln!(out, "deleted user {name}");
        }
        UserCommand::List if format == Format::Json => {
            let users: Vec<serde_json::Value> = (cluster.describe_users(None).await?.iter())
                .map(|user| {
                    let mechanisms: Vec<serde_json::Value> = (user.mechanisms.iter())
                        .map(|(m, iterations)| {
                            let name = m.map_or("unknown", |m| m.name());
                            serde_json::json!({"mechanism": name, "iterations": iterations})
                        })
                        .collect();
                    serde_json::json!({"user": user.user, "mechanisms": mechanisms})
                })
                .collect();
            return Ok(json_document(&users));
        }
        UserCommand::List => {
            let _ = writeln!(out, "{:<40} MECHANISMS", "USER");
            for user in cluster.describe_users(None).await? {
                let mechanisms: Vec<String> = user
                    .mechanisms
                    .iter()
                    .map(|(m, iterations)| {
                        let name = m.map_or("unknown", |m| m.name());
                        format!("{name} ({iterations} iterations)")
                    })
                    .collect();
                let _ = writeln!(out, "{:<40} {}", user.user, mechanisms.join(", "));
            }
        }
    }
    Ok(out)
}
