//! The operator's subcommands, talking the Kafka protocol to a running
//! broker (like `rpk` or `kafka-topics.sh`):
//!
//! ```text
//! broker topic create NAME [--partitions N] [--replication-factor R] [--config KEY=VALUE]...
//! broker topic list
//! broker topic describe NAME
//! broker topic describe-producers NAME
//! broker topic alter NAME [--config KEY=VALUE]... [--delete-config KEY]...
//! broker topic delete NAME
//! broker cluster status
//! broker group list
//! broker group describe NAME
//! broker group reset-offsets NAME (--topic T... | --all-topics)
//!     (--to-earliest | --to-latest | --to-datetime ISO | --to-offset N | --shift-by N) [--dry-run]
//! broker group delete NAME
//! broker user create NAME [--password P] [--mechanism M]... [--iterations N]
//! broker user delete NAME [--mechanism M]...
//! broker user list
//! broker acl create|list|delete ...   (see acl_cli)
//! broker quota set|remove|list ...    (see quota_cli)
//! ```
//! Every subcommand takes `--brokers HOST:PORT` (default 127.0.0.1:9092,
//! or `BROKER_BROKERS`), and for brokers whose Kafka port speaks TLS
//! `--ssl-ca-location FILE` (the CA the brokers' certificates chain to),
//! with `--ssl-certificate-location FILE --ssl-key-location FILE` when
//! they require a client certificate; for SASL ports `--sasl-mechanism M
//! --sasl-username U` with the password in `--sasl-password P` or
//! `BROKER_SASL_PASSWORD` (kept out of the process list).

use std::fmt::Write as _;

use std::path::PathBuf;

use client::cluster::{resolve, Cluster};
use client::connection::ClientError;
use client::security::{SaslLogin, SaslMechanism, Security};
use client::tls::ClientTls;

use control::acls::Permission;

use crate::acl_cli::{self, AclCommand, AclFlags};
use crate::group_cli::{self, parse_datetime, GroupCommand, ResetTo};
use crate::quota_cli::{self, QuotaCommand, QuotaFlags};
use crate::user_cli::{self, mechanisms_or_both, UserCommand};

/// The usage text.
pub const USAGE: &str = "usage:
  broker [serve] [--config FILE] [--data-dir DIR] [--kafka-listen HOST:PORT] [--advertised-listener HOST:PORT]
                 [--http-listen HOST:PORT] [--node-id N] [--shards N]
  broker topic create NAME [--partitions N] [--replication-factor R] [--config KEY=VALUE]... [--brokers HOST:PORT]
  broker topic list [--brokers HOST:PORT]
  broker topic describe NAME [--brokers HOST:PORT]
  broker topic describe-producers NAME [--brokers HOST:PORT]   (idempotent producers per partition)
  broker topic alter NAME [--config KEY=VALUE]... [--delete-config KEY]... [--brokers HOST:PORT]
  broker topic delete NAME [--brokers HOST:PORT]
  broker cluster status [--brokers HOST:PORT]
  broker dump-log PARTITION_DIR      (a stopped partition's batches: base last epoch records bytes crc32c)
  broker dump-metadata METADATA_DIR  (a stopped broker's metadata: snapshot, hard state, log entries)
  broker group list [--brokers HOST:PORT]
  broker group describe NAME [--brokers HOST:PORT]
  broker group reset-offsets NAME (--topic T... | --all-topics)
         (--to-earliest | --to-latest | --to-datetime YYYY-MM-DDTHH:MM:SS[.fff][Z|+HH:MM] | --to-offset N | --shift-by N)
         [--dry-run | --execute] [--brokers HOST:PORT]
  broker group delete NAME [--brokers HOST:PORT]
  broker user create NAME [--password P] [--mechanism SCRAM-SHA-256|SCRAM-SHA-512]... [--iterations N]
         (the password from BROKER_USER_PASSWORD if not given; both mechanisms unless named)
  broker user delete NAME [--mechanism M]...
  broker user list
  broker acl create (--allow P | --deny P)... --operation OP... RESOURCE [--host IP] [--prefixed]
  broker acl list [--principal P] [RESOURCE [--prefixed]]
  broker acl delete [--allow P | --deny P | --principal P]... [--operation OP]... [RESOURCE [--prefixed]]
         RESOURCE: --topic NAME | --group NAME | --cluster | --transactional-id NAME;
         P: User:name; OP: Read, Write, Create, Delete, Alter, Describe, ClusterAction,
         DescribeConfigs, AlterConfigs, IdempotentWrite, All
  broker quota set ENTITY [--producer-byte-rate N] [--consumer-byte-rate N] [--request-percentage N]
  broker quota remove ENTITY [--key producer_byte_rate|consumer_byte_rate|request_percentage]...
  broker quota list
         ENTITY: [--user NAME | --user-default] [--client-id ID | --client-default]
Over TLS, every admin command also takes --ssl-ca-location FILE
  [--ssl-certificate-location FILE --ssl-key-location FILE]
With SASL: --sasl-mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512 --sasl-username U
  [--sasl-password P] (else BROKER_SASL_PASSWORD)";

/// A parsed admin command.
#[derive(Debug, Clone, PartialEq)]
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
    /// `topic describe-producers`.
    DescribeProducers(String),
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
    /// `group ...`.
    Group(GroupCommand),
    /// `user ...`.
    User(UserCommand),
    /// `acl ...`.
    Acl(AclCommand),
    /// `quota ...`.
    Quota(QuotaCommand),
}

/// Where the admin commands go, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The bootstrap broker, `host:port`.
    pub brokers: String,
    /// Over TLS: the CA file, and this client's certificate and key files
    /// if the brokers ask for one.
    pub tls: Option<(PathBuf, Option<(PathBuf, PathBuf)>)>,
    /// A SASL login, for brokers that ask for one.
    pub sasl: Option<SaslLogin>,
}

/// The flags of a command line, before the command is known.
struct Flags {
    brokers: String,
    ssl_ca: Option<PathBuf>,
    ssl_certificate: Option<PathBuf>,
    ssl_key: Option<PathBuf>,
    partitions: i32,
    replication_factor: i16,
    sets: Vec<(String, String)>,
    resets: Vec<String>,
    group_topics: Vec<String>,
    all_topics: bool,
    reset_to: Vec<ResetTo>,
    dry_run: bool,
    sasl_mechanism: Option<String>,
    sasl_username: Option<String>,
    sasl_password: Option<String>,
    password: Option<String>,
    mechanisms: Vec<String>,
    iterations: u32,
    acl: AclFlags,
    quota: QuotaFlags,
}

/// Parses `args` (after `broker`): the command and the bootstrap address.
pub fn parse(args: &[String]) -> Result<(Command, String), String> {
    parse_target(args).map(|(command, target)| (command, target.brokers))
}

/// Parses `args` (after `broker`): the command and where it goes.
pub fn parse_target(args: &[String]) -> Result<(Command, Target), String> {
    let (flags, positional) = parse_flags(args)?;
    let words: Vec<&str> = positional.iter().map(|s| s.as_str()).collect();
    let tls = match (
        flags.ssl_ca.clone(),
        flags.ssl_certificate.clone(),
        flags.ssl_key.clone(),
    ) {
        (None, None, None) => None,
        (Some(ca), None, None) => Some((ca, None)),
        (Some(ca), Some(certificate), Some(key)) => Some((ca, Some((certificate, key)))),
        (None, _, _) => return Err("a client certificate needs --ssl-ca-location too".into()),
        _ => return Err("--ssl-certificate-location and --ssl-key-location go together".into()),
    };
    let target = Target {
        brokers: flags.brokers.clone(),
        tls,
        sasl: sasl_login(&flags)?,
    };
    Ok((command_of(&words, flags)?, target))
}

/// The SASL login the flags describe, if any.
fn sasl_login(flags: &Flags) -> Result<Option<SaslLogin>, String> {
    let (Some(mechanism), Some(user)) = (&flags.sasl_mechanism, &flags.sasl_username) else {
        if flags.sasl_mechanism.is_some() || flags.sasl_username.is_some() {
            return Err("--sasl-mechanism and --sasl-username go together".into());
        }
        return Ok(None);
    };
    let mechanism = SaslMechanism::from_name(mechanism).ok_or_else(|| {
        format!("--sasl-mechanism {mechanism}: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
    })?;
    let password = flags
        .sasl_password
        .clone()
        .or_else(|| std::env::var("BROKER_SASL_PASSWORD").ok())
        .ok_or("SASL needs --sasl-password or BROKER_SASL_PASSWORD")?;
    Ok(Some(SaslLogin {
        mechanism,
        user: user.clone(),
        password,
    }))
}

/// The flags, and the words that are not flags, in order.
fn parse_flags(args: &[String]) -> Result<(Flags, Vec<String>), String> {
    let mut flags = Flags {
        brokers: std::env::var("BROKER_BROKERS").unwrap_or_else(|_| "127.0.0.1:9092".into()),
        ssl_ca: None,
        ssl_certificate: None,
        ssl_key: None,
        partitions: -1,
        replication_factor: -1,
        sets: Vec::new(),
        resets: Vec::new(),
        group_topics: Vec::new(),
        all_topics: false,
        reset_to: Vec::new(),
        dry_run: false,
        sasl_mechanism: None,
        sasl_username: None,
        sasl_password: None,
        password: None,
        mechanisms: Vec::new(),
        iterations: crate::user_cli::ITERATIONS_DEFAULT,
        acl: AclFlags::default(),
        quota: QuotaFlags::default(),
    };
    let mut positional = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{arg} needs a value"));
        let number = |flag: &str, value: String| -> Result<i64, String> {
            value.parse().map_err(|_| format!("{flag} needs a number"))
        };
        match arg.as_str() {
            "--brokers" => flags.brokers = value()?,
            "--ssl-ca-location" => flags.ssl_ca = Some(value()?.into()),
            "--ssl-certificate-location" => flags.ssl_certificate = Some(value()?.into()),
            "--ssl-key-location" => flags.ssl_key = Some(value()?.into()),
            "--partitions" => {
                flags.partitions = value()?
                    .parse()
                    .map_err(|_| "--partitions needs a number")?
            }
            "--replication-factor" => {
                flags.replication_factor = value()?
                    .parse()
                    .map_err(|_| "--replication-factor needs a number")?
            }
            "--config" => {
                let pair = value()?;
                let (k, v) = pair
                    .split_once('=')
                    .ok_or(format!("--config {pair}: expected KEY=VALUE"))?;
                flags.sets.push((k.to_string(), v.to_string()));
            }
            "--delete-config" => flags.resets.push(value()?),
            "--topic" => {
                let topic = value()?;
                flags.acl.resource = acl_cli::resource(arg, Some(topic.clone()));
                flags.group_topics.push(topic);
            }
            "--group" | "--transactional-id" => {
                flags.acl.resource = acl_cli::resource(arg, Some(value()?))
            }
            "--cluster" => flags.acl.resource = acl_cli::resource(arg, None),
            "--allow" => flags.acl.principals.push((Permission::Allow, value()?)),
            "--deny" => flags.acl.principals.push((Permission::Deny, value()?)),
            "--principal" => flags.acl.any_principal = Some(value()?),
            "--operation" => flags.acl.operations.push(value()?),
            "--host" => flags.acl.host = Some(value()?),
            "--prefixed" => flags.acl.prefixed = true,
            "--user" => flags.quota.entity.push(("user".into(), Some(value()?))),
            "--user-default" => flags.quota.entity.push(("user".into(), None)),
            "--client-id" => flags
                .quota
                .entity
                .push(("client-id".into(), Some(value()?))),
            "--client-default" => flags.quota.entity.push(("client-id".into(), None)),
            "--producer-byte-rate" | "--consumer-byte-rate" | "--request-percentage" => {
                let key = arg.trim_start_matches("--").replace('-', "_");
                let rate = number(arg, value()?)? as f64;
                flags.quota.rates.push((key, rate));
            }
            "--key" => flags.quota.keys.push(value()?),
            "--all-topics" => flags.all_topics = true,
            "--to-earliest" => flags.reset_to.push(ResetTo::Earliest),
            "--to-latest" => flags.reset_to.push(ResetTo::Latest),
            "--to-datetime" => flags
                .reset_to
                .push(ResetTo::Datetime(parse_datetime(&value()?)?)),
            "--to-offset" => flags.reset_to.push(ResetTo::Offset(number(arg, value()?)?)),
            "--shift-by" => flags
                .reset_to
                .push(ResetTo::ShiftBy(number(arg, value()?)?)),
            "--dry-run" => flags.dry_run = true,
            "--sasl-mechanism" => flags.sasl_mechanism = Some(value()?),
            "--sasl-username" => flags.sasl_username = Some(value()?),
            "--sasl-password" => flags.sasl_password = Some(value()?),
            "--password" => flags.password = Some(value()?),
            "--mechanism" => flags.mechanisms.push(value()?),
            "--iterations" => {
                flags.iterations = value()?
                    .parse()
                    .map_err(|_| "--iterations needs a number")?
            }
            // Kafka's tool only applies a reset with --execute; here
            // applying is the default, and the flag is accepted.
            "--execute" => {}
            flag if flag.starts_with("--") => return Err(format!("unknown flag {flag}")),
            word => positional.push(word.to_string()),
        }
    }
    Ok((flags, positional))
}

/// The command the words name, with its flags.
fn command_of(words: &[&str], flags: Flags) -> Result<Command, String> {
    let command = match words {
        ["topic", "create", name] => Command::Create {
            name: name.to_string(),
            partitions: flags.partitions,
            replication_factor: flags.replication_factor,
            configs: flags.sets,
        },
        ["topic", "list"] => Command::List,
        ["topic", "describe", name] => Command::Describe(name.to_string()),
        ["topic", "describe-producers", name] => Command::DescribeProducers(name.to_string()),
        ["topic", "alter", name] if !flags.sets.is_empty() || !flags.resets.is_empty() => {
            Command::Alter {
                name: name.to_string(),
                changes: flags
                    .sets
                    .into_iter()
                    .map(|(k, v)| (k, Some(v)))
                    .chain(flags.resets.into_iter().map(|k| (k, None)))
                    .collect(),
            }
        }
        ["topic", "delete", name] => Command::Delete(name.to_string()),
        ["cluster", "status"] => Command::ClusterStatus,
        ["group", "list"] => Command::Group(GroupCommand::List),
        ["group", "describe", name] => Command::Group(GroupCommand::Describe(name.to_string())),
        ["group", "delete", name] => Command::Group(GroupCommand::Delete(name.to_string())),
        ["group", "reset-offsets", name] => Command::Group(reset_command(name, flags)?),
        ["user", "create", name] => {
            let password = flags
                .password
                .or_else(|| std::env::var("BROKER_USER_PASSWORD").ok())
                .filter(|p| !p.is_empty())
                .ok_or("user create needs --password or BROKER_USER_PASSWORD")?;
            Command::User(UserCommand::Create {
                name: name.to_string(),
                password,
                mechanisms: mechanisms_or_both(&flags.mechanisms)?,
                iterations: flags.iterations,
            })
        }
        ["user", "delete", name] => {
            let mechanisms = match flags.mechanisms.is_empty() {
                true => Vec::new(),
                false => mechanisms_or_both(&flags.mechanisms)?,
            };
            Command::User(UserCommand::Delete {
                name: name.to_string(),
                mechanisms,
            })
        }
        ["user", "list"] => Command::User(UserCommand::List),
        ["acl", "create"] => Command::Acl(acl_cli::create(&flags.acl)?),
        ["acl", "list"] => {
            let mut patterns = acl_cli::patterns(&flags.acl)?;
            if patterns.len() != 1 {
                return Err(
                    "acl list takes --principal, not --allow/--deny or several operations".into(),
                );
            }
            Command::Acl(AclCommand::List(patterns.remove(0)))
        }
        ["acl", "delete"] => Command::Acl(AclCommand::Delete(acl_cli::patterns(&flags.acl)?)),
        ["quota", "set"] => Command::Quota(quota_cli::alter(flags.quota, false)?),
        ["quota", "remove"] => Command::Quota(quota_cli::alter(flags.quota, true)?),
        ["quota", "list"] => Command::Quota(QuotaCommand::List),
        _ => return Err(USAGE.to_string()),
    };
    Ok(command)
}

/// `group reset-offsets`: exactly one target, and topics or all of them.
fn reset_command(group: &str, flags: Flags) -> Result<GroupCommand, String> {
    let [to] = flags.reset_to.as_slice() else {
        return Err(
            "reset-offsets needs exactly one of --to-earliest, --to-latest, \
                    --to-datetime, --to-offset, --shift-by"
                .to_string(),
        );
    };
    if flags.group_topics.is_empty() != flags.all_topics {
        return Err("reset-offsets needs --topic T (one or more) or --all-topics".into());
    }
    Ok(GroupCommand::Reset {
        group: group.to_string(),
        topics: flags.group_topics,
        to: *to,
        dry_run: flags.dry_run,
    })
}

/// Runs a command against the broker at `target`; returns what to print.
pub fn run(command: Command, target: &Target) -> Result<String, String> {
    let brokers = &target.brokers;
    let address = resolve(brokers).map_err(|e| format!("{brokers}: {e}"))?;
    let sasl = target.sasl.clone();
    let tls = match &target.tls {
        None => None,
        Some((ca, identity)) => {
            let identity = identity.as_ref().map(|(c, k)| (c.as_path(), k.as_path()));
            Some(ClientTls::from_files(ca, identity).map_err(|e| e.to_string())?)
        }
    };
    glommio::LocalExecutorBuilder::default()
        .io_memory(256 << 10)
        .make()
        .map_err(|e| format!("cannot start an executor: {e}"))?
        .run(async move {
            let security = Security { tls, sasl };
            let cluster = Cluster::with_security(address, "broker-admin", security);
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
        Command::Describe(name) => out = describe(cluster, &name).await?,
        Command::DescribeProducers(name) => out = describe_producers(cluster, &name).await?,
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
        Command::Group(command) => out = group_cli::execute(cluster, command).await?,
        Command::User(command) => out = user_cli::execute(cluster, command).await?,
        Command::Acl(command) => out = acl_cli::execute(cluster, command).await?,
        Command::Quota(command) => out = quota_cli::execute(cluster, command).await?,
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

/// `topic describe`: partitions with leader, epoch, replicas and ISR,
/// then every config and whether it is set or the default.
async fn describe(cluster: &Cluster, name: &str) -> Result<String, ClientError> {
    let mut out = String::new();
    cluster.refresh(Some(&[name]), false).await?;
    let topic = cluster.topic(name).ok_or(ClientError::Broker(
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
        let info = topic.partitions.get(index).cloned().unwrap_or_default();
        let _ = writeln!(
            out,
            "  partition {index} leader {leader} epoch {} replicas {:?} isr {:?}",
            info.leader_epoch, info.replicas, info.isr
        );
    }
    let _ = writeln!(out, "configs:");
    for entry in cluster.describe_configs(name).await? {
        let origin = if entry.is_default { "default" } else { "set" };
        let _ = writeln!(
            out,
            "  {} = {} ({origin})",
            entry.name,
            entry.value.unwrap_or_default()
        );
    }
    Ok(out)
}

/// `topic describe-producers`: each partition's idempotent producers.
async fn describe_producers(cluster: &Cluster, name: &str) -> Result<String, ClientError> {
    let mut out = String::new();
    for (partition, producers) in cluster.describe_producers(name).await? {
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
                let _ = writeln!(out, "partition {partition}: error code {code}");
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

    #[test]
    fn group_commands_parse_and_a_reset_needs_one_target_and_a_scope() {
        assert_eq!(
            parse(&args("group describe g")).unwrap().0,
            Command::Group(GroupCommand::Describe("g".into()))
        );
        assert_eq!(
            parse(&args(
                "group reset-offsets g --topic a --topic b --to-datetime 1970-01-01T00:00:01Z --dry-run"
            ))
            .unwrap()
            .0,
            Command::Group(GroupCommand::Reset {
                group: "g".into(),
                topics: vec!["a".into(), "b".into()],
                to: ResetTo::Datetime(1000),
                dry_run: true,
            })
        );
        assert_eq!(
            parse(&args(
                "group reset-offsets g --all-topics --shift-by -5 --execute"
            ))
            .unwrap()
            .0,
            Command::Group(GroupCommand::Reset {
                group: "g".into(),
                topics: vec![],
                to: ResetTo::ShiftBy(-5),
                dry_run: false,
            })
        );
        for bad in [
            "group reset-offsets g --topic a",
            "group reset-offsets g --to-earliest",
            "group reset-offsets g --topic a --all-topics --to-earliest",
            "group reset-offsets g --topic a --to-earliest --to-latest",
            "group reset-offsets g --topic a --to-offset x",
            "group reset-offsets g --topic a --to-datetime soon",
        ] {
            assert!(parse(&args(bad)).is_err(), "{bad}");
        }
    }
}
