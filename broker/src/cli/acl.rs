//! `broker acl ...`: create, list and delete ACLs, as `kafka-acls.sh` and
//! `rpk acl` do.
//!
//! ```text
//! broker acl create (--allow P | --deny P)... --operation OP... RESOURCE [--host IP] [--prefixed]
//! broker acl list [--principal P] [RESOURCE [--prefixed]]
//! broker acl delete [--allow P | --deny P | --principal P]... [--operation OP]... [RESOURCE [--prefixed]]
//! RESOURCE: --topic NAME | --group NAME | --cluster | --transactional-id NAME
//! ```

use std::fmt::Write as _;

use clap::{ArgGroup, Args, Subcommand};

use client::acls::{Acl, AclPattern};
use client::cluster::Cluster;
use client::connection::ClientError;
use control::model::acls::{Operation, PatternType, Permission, ResourceType, CLUSTER_NAME};

use super::output::{json_document, Format};

/// An `acl` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AclCommand {
    /// `acl create`.
    Create(Vec<Acl>),
    /// `acl list`.
    List(AclPattern),
    /// `acl delete`: every ACL each pattern selects.
    Delete(Vec<AclPattern>),
}

/// A `broker acl` command line.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum AclArgs {
    /// Creates an ACL for every principal and operation given, on one
    /// resource.
    #[command(after_help = "Example:\n  \
        broker acl create --allow User:alice --operation Read --operation Describe --topic orders")]
    Create(AclFlagArgs),
    /// Lists the ACLs that match (all when no flag is given).
    #[command(after_help = "Example:\n  broker acl list --principal User:alice")]
    List(AclFlagArgs),
    /// Deletes every ACL that matches.
    #[command(after_help = "Example:\n  \
        broker acl delete --allow User:alice --topic orders --prefixed")]
    Delete(AclFlagArgs),
}

/// The flags of the `acl` commands, as `kafka-acls.sh` names them.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
#[command(group(ArgGroup::new("resource").args(["topic", "group", "cluster", "transactional_id"])))]
pub struct AclFlagArgs {
    /// Allows this principal, as `User:NAME` (repeatable).
    #[arg(long, value_name = "PRINCIPAL")]
    pub allow: Vec<String>,
    /// Denies this principal, as `User:NAME` (repeatable).
    #[arg(long, value_name = "PRINCIPAL")]
    pub deny: Vec<String>,
    /// Matches this principal with either permission (list, delete).
    #[arg(long, value_name = "PRINCIPAL")]
    pub principal: Option<String>,
    /// Read, Write, Create, Delete, Alter, Describe, ClusterAction,
    /// DescribeConfigs, AlterConfigs, IdempotentWrite or All (repeatable).
    #[arg(long, value_name = "OPERATION")]
    pub operation: Vec<String>,
    /// The client address the ACL applies to (default: any).
    #[arg(long, value_name = "IP")]
    pub host: Option<String>,
    /// The resource: a topic.
    #[arg(long, value_name = "NAME")]
    pub topic: Option<String>,
    /// The resource: a consumer group.
    #[arg(long, value_name = "NAME")]
    pub group: Option<String>,
    /// The resource: the cluster.
    #[arg(long)]
    pub cluster: bool,
    /// The resource: a transactional id.
    #[arg(long, value_name = "NAME")]
    pub transactional_id: Option<String>,
    /// The resource name is a prefix (else a literal name).
    #[arg(long)]
    pub prefixed: bool,
}

impl AclArgs {
    /// The command the line names.
    pub fn command(self) -> Result<AclCommand, String> {
        match self {
            AclArgs::Create(flags) => create(&flags.into()),
            AclArgs::List(flags) => {
                let mut patterns = patterns(&flags.into())?;
                if patterns.len() != 1 {
                    return Err(
                        "acl list takes --principal, not --allow/--deny or several operations"
                            .into(),
                    );
                }
                Ok(AclCommand::List(patterns.remove(0)))
            }
            AclArgs::Delete(flags) => Ok(AclCommand::Delete(patterns(&flags.into())?)),
        }
    }
}

impl From<AclFlagArgs> for AclFlags {
    fn from(args: AclFlagArgs) -> AclFlags {
        let resource = match (args.topic, args.group, args.transactional_id) {
            (Some(topic), _, _) => Some((ResourceType::Topic, topic)),
            (_, Some(group), _) => Some((ResourceType::Group, group)),
            (_, _, Some(id)) => Some((ResourceType::TransactionalId, id)),
            _ if args.cluster => Some((ResourceType::Cluster, CLUSTER_NAME.to_string())),
            _ => None,
        };
        let allowed = args.allow.into_iter().map(|p| (Permission::Allow, p));
        let denied = args.deny.into_iter().map(|p| (Permission::Deny, p));
        AclFlags {
            principals: allowed.chain(denied).collect(),
            any_principal: args.principal,
            operations: args.operation,
            host: args.host,
            resource,
            prefixed: args.prefixed,
        }
    }
}

/// The ACL flags of a command line.
#[derive(Debug, Default)]
pub struct AclFlags {
    /// (permission, principal) from `--allow P` / `--deny P`.
    pub principals: Vec<(Permission, String)>,
    /// `--principal P` (list and delete, either permission).
    pub any_principal: Option<String>,
    /// `--operation OP`.
    pub operations: Vec<String>,
    /// `--host IP`.
    pub host: Option<String>,
    /// The resource: type and name.
    pub resource: Option<(ResourceType, String)>,
    /// `--prefixed`.
    pub prefixed: bool,
}

const ANY: i8 = 1;

/// An operation by its name (Kafka's: Read, Write, IdempotentWrite... any case).
fn operation(name: &str) -> Result<Operation, String> {
    let wanted = name.replace(['_', '-'], "").to_ascii_lowercase();
    Operation::ALL_VALUES
        .iter()
        .copied()
        .find(|op| format!("{op:?}").to_ascii_lowercase() == wanted)
        .ok_or_else(|| format!("--operation {name}: one of Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All"))
}

fn pattern_code(flags: &AclFlags) -> i8 {
    match flags.prefixed {
        true => PatternType::Prefixed.code(),
        false => PatternType::Literal.code(),
    }
}

/// `acl create`'s ACLs: every principal × every operation on the resource.
pub fn create(flags: &AclFlags) -> Result<AclCommand, String> {
    let (resource_type, name) = flags
        .resource
        .clone()
        .ok_or("acl create needs --topic, --group, --cluster or --transactional-id")?;
    if flags.principals.is_empty() || flags.operations.is_empty() {
        return Err("acl create needs --allow or --deny, and --operation".into());
    }
    let mut acls = Vec::new();
    for (permission, principal) in &flags.principals {
        for op in &flags.operations {
            acls.push(Acl {
                resource_type: resource_type.code(),
                resource_name: name.clone(),
                pattern: pattern_code(flags),
                principal: principal.clone(),
                host: flags.host.clone().unwrap_or_else(|| "*".into()),
                operation: operation(op)?.code(),
                permission: permission.code(),
            });
        }
    }
    Ok(AclCommand::Create(acls))
}

/// The patterns `acl list` or `acl delete` select with.
pub fn patterns(flags: &AclFlags) -> Result<Vec<AclPattern>, String> {
    let base = AclPattern {
        resource_type: flags.resource.as_ref().map_or(ANY, |(t, _)| t.code()),
        resource_name: flags.resource.as_ref().map(|(_, n)| n.clone()),
        pattern: match (&flags.resource, flags.prefixed) {
            (None, _) => ANY,
            (Some(_), _) => pattern_code(flags),
        },
        principal: flags.any_principal.clone(),
        host: flags.host.clone(),
        operation: ANY,
        permission: ANY,
    };
    let operations: Vec<i8> = match flags.operations.is_empty() {
        true => vec![ANY],
        false => flags
            .operations
            .iter()
            .map(|op| operation(op).map(|o| o.code()))
            .collect::<Result<_, _>>()?,
    };
    let principals: Vec<(i8, Option<String>)> = match flags.principals.is_empty() {
        true => vec![(ANY, base.principal.clone())],
        false => flags
            .principals
            .iter()
            .map(|(p, name)| (p.code(), Some(name.clone())))
            .collect(),
    };
    let mut all = Vec::new();
    for (permission, principal) in &principals {
        for op in &operations {
            all.push(AclPattern {
                principal: principal.clone(),
                permission: *permission,
                operation: *op,
                ..base.clone()
            });
        }
    }
    Ok(all)
}

/// An ACL in words: (permission, operation, principal, pattern,
/// resource type, resource name, host).
fn words(acl: &Acl) -> [String; 7] {
    let name = |code: i8, values: &[(i8, String)]| {
        values
            .iter()
            .find(|(c, _)| *c == code)
            .map_or(code.to_string(), |(_, n)| n.clone())
    };
    let types: Vec<(i8, String)> = ResourceType::ALL_VALUES
        .iter()
        .map(|t| (t.code(), format!("{t:?}")))
        .collect();
    let ops: Vec<(i8, String)> = Operation::ALL_VALUES
        .iter()
        .map(|o| (o.code(), format!("{o:?}")))
        .collect();
    let permission = if acl.permission == Permission::Deny.code() {
        "DENY"
    } else {
        "ALLOW"
    };
    let pattern = if acl.pattern == PatternType::Prefixed.code() {
        "prefixed"
    } else {
        "literal"
    };
    [
        permission.to_string(),
        name(acl.operation, &ops),
        acl.principal.clone(),
        pattern.to_string(),
        name(acl.resource_type, &types),
        acl.resource_name.clone(),
        acl.host.clone(),
    ]
}

fn describe(acl: &Acl) -> String {
    let [permission, operation, principal, pattern, resource_type, resource_name, host] =
        words(acl);
    let resource = format!("{resource_type}:{resource_name}");
    format!("{permission:<8} {operation:<16} {principal:<30} {pattern:<9} {resource:<24} {host}")
}

fn json_of(acl: &Acl) -> serde_json::Value {
    let [permission, operation, principal, pattern, resource_type, resource_name, host] =
        words(acl);
    serde_json::json!({
        "permission": permission,
        "operation": operation,
        "principal": principal,
        "pattern": pattern,
        "resource_type": resource_type,
        "resource_name": resource_name,
        "host": host,
    })
}

/// Whether the command prints JSON under `--format json`.
pub fn prints_json(command: &AclCommand) -> bool {
    matches!(command, AclCommand::List(_))
}

/// Runs an ACL command; what to print.
pub async fn execute(
    cluster: &Cluster,
    command: AclCommand,
    format: Format,
) -> Result<String, ClientError> {
    let mut out = String::new();
    match command {
        AclCommand::List(pattern) if format == Format::Json => {
            let acls = cluster.describe_acls(&pattern).await?;
            let listed: Vec<serde_json::Value> = acls.iter().map(json_of).collect();
            return Ok(json_document(&listed));
        }
        AclCommand::Create(acls) => {
            cluster.create_acls(&acls).await?;
            let _ = writeln!(out, "created {} ACLs", acls.len());
        }
        AclCommand::List(pattern) => {
            let _ = writeln!(
                out,
                "{:<8} {:<16} {:<30} {:<9} {:<24} HOST",
                "PERM", "OPERATION", "PRINCIPAL", "PATTERN", "RESOURCE"
            );
            for acl in cluster.describe_acls(&pattern).await? {
                let _ = writeln!(out, "{}", describe(&acl));
            }
        }
        AclCommand::Delete(patterns) => {
            let mut deleted = 0;
            for pattern in &patterns {
                deleted += cluster.delete_acls(pattern).await?;
            }
            let _ = writeln!(out, "deleted {deleted} ACLs");
        }
    }
    Ok(out)
}
