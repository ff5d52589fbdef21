//! Access control lists as Kafka's: who (a principal such as `User:alice`,
//! from a host or any) may or may not do what (an operation) to which
//! resources (a topic, group, the cluster or a transactional id, named
//! literally or by prefix). Stored in the metadata, so every broker
//! decides alike once a change commits. The codes are Kafka's wire codes
//! (CreateAcls, DescribeAcls, DeleteAcls).

use rkyv::{Archive, Deserialize, Serialize};

use crate::model::error::MetadataError;

/// ACLs the cluster holds at most.
pub const ACLS_MAX: usize = 100_000;
/// The cluster resource's only name.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The literal name that matches every resource of its type.
pub const WILDCARD: &str = "*";

macro_rules! coded_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $code:expr),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[rkyv(derive(Debug, PartialEq, Eq, PartialOrd, Ord))]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            /// Every value.
            pub const ALL_VALUES: &'static [$name] = &[$($name::$variant),+];

            /// Kafka's code.
            pub fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code),+
                }
            }

            /// The value of a Kafka code.
            pub fn from_code(code: i8) -> Option<$name> {
                Self::ALL_VALUES.iter().copied().find(|v| v.code() == code)
            }
        }
    };
}

coded_enum!(
    /// What kind of thing an ACL is about.
    ResourceType {
        /// A topic.
        Topic = 2,
        /// A consumer group.
        Group = 3,
        /// The cluster (admin operations).
        Cluster = 4,
        /// A transactional id.
        TransactionalId = 5,
    }
);

coded_enum!(
    /// How an ACL's resource name matches.
    PatternType {
        /// The name exactly (or every resource, for `*`).
        Literal = 3,
        /// Every name starting with it.
        Prefixed = 4,
    }
);

coded_enum!(
    /// What an ACL allows or denies.
    Operation {
        /// Every operation.
        All = 2,
        /// Consume; join a group.
        Read = 3,
        /// Produce.
        Write = 4,
        /// Create topics.
        Create = 5,
        /// Delete topics, records, groups.
        Delete = 6,
        /// Add partitions; change ACLs and users (cluster).
        Alter = 7,
        /// See that it exists (metadata, offsets, groups).
        Describe = 8,
        /// Broker-to-broker calls (replica fetches).
        ClusterAction = 9,
        /// Read configurations.
        DescribeConfigs = 10,
        /// Change configurations.
        AlterConfigs = 11,
        /// Idempotent producing (cluster).
        IdempotentWrite = 12,
    }
);

coded_enum!(
    /// Allow or deny. A deny wins over any allow.
    Permission {
        /// Deny.
        Deny = 2,
        /// Allow.
        Allow = 3,
    }
);

impl Operation {
    /// Whether an ACL for `self` also grants `wanted`: ALL grants
    /// everything; READ, WRITE, DELETE and ALTER grant DESCRIBE;
    /// ALTER_CONFIGS grants DESCRIBE_CONFIGS (Kafka's implications, for
    /// allows only: a deny denies only what it names, or everything for
    /// ALL).
    pub fn grants(self, wanted: Operation) -> bool {
        use Operation::*;
        self == wanted
            || self == All
            || (wanted == Describe && matches!(self, Read | Write | Delete | Alter))
            || (wanted == DescribeConfigs && self == AlterConfigs)
    }

    /// Whether `self` means anything for `resource` (Kafka refuses, for
    /// example, WRITE on a group).
    pub fn applies_to(self, resource: ResourceType) -> bool {
        use Operation::*;
        match resource {
            ResourceType::Topic => matches!(
                self,
                All | Read
                    | Write
                    | Create
                    | Delete
                    | Alter
                    | Describe
                    | DescribeConfigs
                    | AlterConfigs
            ),
            ResourceType::Group => matches!(self, All | Read | Delete | Describe),
            ResourceType::Cluster => matches!(
                self,
                All | Create
                    | Alter
                    | Describe
                    | ClusterAction
                    | DescribeConfigs
                    | AlterConfigs
                    | IdempotentWrite
            ),
            ResourceType::TransactionalId => matches!(self, All | Write | Describe),
        }
    }
}

/// One ACL.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[rkyv(derive(Debug, PartialEq, Eq, PartialOrd, Ord))]
pub struct AclBinding {
    /// What kind of resource.
    pub resource_type: ResourceType,
    /// Its name (or prefix; `*` for every one).
    pub resource_name: String,
    /// How the name matches.
    pub pattern: PatternType,
    /// Who: `User:alice`, `User:CN=alice,O=example` (a certificate's
    /// subject), or `User:*` for everyone.
    pub principal: String,
    /// From where: an IP address, or `*`.
    pub host: String,
    /// What.
    pub operation: Operation,
    /// Allowed or denied.
    pub permission: Permission,
}

impl AclBinding {
    /// Whether this ACL is about the resource `name` of `resource_type`.
    pub fn covers(&self, resource_type: ResourceType, name: &str) -> bool {
        self.resource_type == resource_type
            && match self.pattern {
                PatternType::Literal => {
                    self.resource_name == name || self.resource_name == WILDCARD
                }
                PatternType::Prefixed => name.starts_with(&self.resource_name),
            }
    }

    /// Whether this ACL names `principal` connecting from `host`.
    pub fn names(&self, principal: &str, host: &str) -> bool {
        (self.principal == principal || self.principal == "User:*")
            && (self.host == WILDCARD || self.host == host)
    }
}

/// Checks an ACL before it is stored.
pub fn check_acl(acl: &AclBinding) -> Result<(), MetadataError> {
    let invalid = |why: String| Err(MetadataError::InvalidAcl(why));
    let Some((kind, name)) = acl.principal.split_once(':') else {
        return invalid(format!("principal {:?} is not Type:name", acl.principal));
    };
    if kind != "User" || name.is_empty() {
        return invalid(format!(
            "principal {:?}: only User:name principals",
            acl.principal
        ));
    }
    if acl.host != WILDCARD && acl.host.parse::<std::net::IpAddr>().is_err() {
        return invalid(format!("host {:?} is not an IP address or *", acl.host));
    }
    if acl.resource_name.is_empty() || acl.resource_name.len() > 1024 {
        return invalid("a resource name of 1 to 1024 bytes".into());
    }
    if acl.resource_type == ResourceType::Cluster
        && (acl.resource_name != CLUSTER_NAME || acl.pattern != PatternType::Literal)
    {
        return invalid(format!(
            "the cluster resource is named {CLUSTER_NAME} (literal)"
        ));
    }
    if acl.pattern == PatternType::Prefixed && acl.resource_name == WILDCARD {
        return invalid("a prefix of * matches nothing: use the literal *".into());
    }
    if !acl.operation.applies_to(acl.resource_type) {
        return invalid(format!(
            "{:?} does not apply to a {:?}",
            acl.operation, acl.resource_type
        ));
    }
    Ok(())
}

/// A pattern of ACLs (DescribeAcls, DeleteAcls): None matches anything.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct AclFilter {
    /// The resource type.
    pub resource_type: Option<ResourceType>,
    /// The resource name.
    pub resource_name: Option<String>,
    /// How the filter's name matches (see [`NameMatch`]).
    pub pattern: NameMatch,
    /// The principal.
    pub principal: Option<String>,
    /// The host.
    pub host: Option<String>,
    /// The operation.
    pub operation: Option<Operation>,
    /// The permission.
    pub permission: Option<Permission>,
}

/// How a filter's resource name selects ACLs.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub enum NameMatch {
    /// Any pattern type.
    #[default]
    Any,
    /// Exactly this pattern type.
    Exactly(PatternType),
    /// Every ACL that would apply to a resource of this name: literal
    /// equal, the literal wildcard, prefixes of it (Kafka's MATCH).
    Match,
}

impl AclFilter {
    /// Whether `acl` is selected.
    pub fn selects(&self, acl: &AclBinding) -> bool {
        let equal = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        let name = match (self.pattern, &self.resource_name) {
            (_, None) => true,
            (NameMatch::Match, Some(name)) => match acl.pattern {
                PatternType::Literal => acl.resource_name == *name || acl.resource_name == WILDCARD,
                PatternType::Prefixed => name.starts_with(&acl.resource_name),
            },
            (_, Some(name)) => acl.resource_name == *name,
        };
        let pattern = match self.pattern {
            NameMatch::Exactly(p) => acl.pattern == p,
            _ => true,
        };
        name && pattern
            && self.resource_type.is_none_or(|t| t == acl.resource_type)
            && equal(&self.principal, &acl.principal)
            && equal(&self.host, &acl.host)
            && self.operation.is_none_or(|o| o == acl.operation)
            && self.permission.is_none_or(|p| p == acl.permission)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(
        resource_type: ResourceType,
        name: &str,
        pattern: PatternType,
        op: Operation,
    ) -> AclBinding {
        AclBinding {
            resource_type,
            resource_name: name.into(),
            pattern,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: op,
            permission: Permission::Allow,
        }
    }

    #[test]
    fn names_match_literally_by_wildcard_or_by_prefix() {
        let literal = acl(
            ResourceType::Topic,
            "orders",
            PatternType::Literal,
            Operation::Read,
        );
        assert!(literal.covers(ResourceType::Topic, "orders"));
        assert!(!literal.covers(ResourceType::Topic, "orders-eu"));
        assert!(!literal.covers(ResourceType::Group, "orders"));
        let every = acl(
            ResourceType::Topic,
            "*",
            PatternType::Literal,
            Operation::Read,
        );
        assert!(every.covers(ResourceType::Topic, "anything"));
        let prefixed = acl(
            ResourceType::Topic,
            "orders-",
            PatternType::Prefixed,
            Operation::Read,
        );
        assert!(prefixed.covers(ResourceType::Topic, "orders-eu"));
        assert!(!prefixed.covers(ResourceType::Topic, "orders"));
        assert!(literal.names("User:alice", "10.0.0.1"));
        assert!(!literal.names("User:bob", "10.0.0.1"));
    }

    #[test]
    fn kafkas_implied_operations() {
        assert!(Operation::Read.grants(Operation::Describe));
        assert!(Operation::Write.grants(Operation::Describe));
        assert!(Operation::All.grants(Operation::Write));
        assert!(Operation::AlterConfigs.grants(Operation::DescribeConfigs));
        assert!(!Operation::Describe.grants(Operation::Read));
        assert!(!Operation::Read.grants(Operation::Write));
    }

    #[test]
    fn malformed_acls_are_refused() {
        check_acl(&acl(
            ResourceType::Topic,
            "orders",
            PatternType::Literal,
            Operation::Write,
        ))
        .unwrap();
        let cases = [
            acl(
                ResourceType::Group,
                "g",
                PatternType::Literal,
                Operation::Write,
            ),
            acl(
                ResourceType::Cluster,
                "other",
                PatternType::Literal,
                Operation::Alter,
            ),
            acl(
                ResourceType::Topic,
                "*",
                PatternType::Prefixed,
                Operation::Read,
            ),
            acl(
                ResourceType::Topic,
                "",
                PatternType::Literal,
                Operation::Read,
            ),
            AclBinding {
                principal: "alice".into(),
                ..acl(
                    ResourceType::Topic,
                    "t",
                    PatternType::Literal,
                    Operation::Read,
                )
            },
            AclBinding {
                host: "somewhere".into(),
                ..acl(
                    ResourceType::Topic,
                    "t",
                    PatternType::Literal,
                    Operation::Read,
                )
            },
        ];
        for case in cases {
            assert!(check_acl(&case).is_err(), "{case:?}");
        }
    }

    #[test]
    fn filters_select_by_every_field_and_match_finds_what_applies() {
        let prefixed = acl(
            ResourceType::Topic,
            "orders-",
            PatternType::Prefixed,
            Operation::Read,
        );
        let literal = acl(
            ResourceType::Topic,
            "orders-eu",
            PatternType::Literal,
            Operation::Write,
        );
        let all = AclFilter::default();
        assert!(all.selects(&prefixed) && all.selects(&literal));
        let matching = AclFilter {
            resource_name: Some("orders-eu".into()),
            pattern: NameMatch::Match,
            ..AclFilter::default()
        };
        assert!(matching.selects(&prefixed) && matching.selects(&literal));
        let exact = AclFilter {
            resource_name: Some("orders-eu".into()),
            pattern: NameMatch::Exactly(PatternType::Literal),
            ..AclFilter::default()
        };
        assert!(!exact.selects(&prefixed) && exact.selects(&literal));
        let writes = AclFilter {
            operation: Some(Operation::Write),
            ..AclFilter::default()
        };
        assert!(!writes.selects(&prefixed) && writes.selects(&literal));
    }
}
