//! Who sent a request, and what the ACLs let them do: each handler asks
//! before it touches a topic, group or the cluster, and answers a refusal
//! with Kafka's code (TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED).
//! With `authorizer = "none"` every question is answered yes at once.

use std::net::IpAddr;
use std::rc::Rc;

use control::acls::{Operation, ResourceType, CLUSTER_NAME};
use kafka_protocol::ResponseError;

use crate::authorizer::Authorizer;
use crate::cluster::routing::Route;
use crate::kafka::Code;

/// The sender of a request.
pub struct Caller<'a> {
    authorizer: Option<Rc<Authorizer>>,
    /// `User:name`: the SASL user, else the client certificate's subject,
    /// else `User:ANONYMOUS` (empty when nothing is checked).
    principal: String,
    /// Its IP address, as ACL hosts name it.
    host: String,
    /// "/ip", as DescribeGroups shows a member's host.
    pub group_host: &'a str,
}

impl<'a> Caller<'a> {
    /// A caller checked by `authorizer` (None: nothing is checked);
    /// `principal` is asked only when something is.
    pub fn new(
        authorizer: Option<Rc<Authorizer>>,
        principal: impl FnOnce() -> String,
        ip: Option<IpAddr>,
        group_host: &'a str,
    ) -> Caller<'a> {
        let (principal, host) = match &authorizer {
            Some(_) => (principal(), ip.map(|ip| ip.to_string()).unwrap_or_default()),
            None => (String::new(), String::new()),
        };
        Caller {
            authorizer,
            principal,
            host,
            group_host,
        }
    }

    /// Whether the caller may do `operation` to `name` of `resource`.
    pub fn may(&self, operation: Operation, resource: ResourceType, name: &str) -> bool {
        self.authorizer
            .as_ref()
            .is_none_or(|a| a.allows(&self.principal, &self.host, operation, resource, name))
    }

    /// On a topic.
    pub fn may_topic(&self, operation: Operation, topic: &str) -> bool {
        self.may(operation, ResourceType::Topic, topic)
    }

    /// On a group.
    pub fn may_group(&self, operation: Operation, group: &str) -> bool {
        self.may(operation, ResourceType::Group, group)
    }

    /// On the cluster.
    pub fn may_cluster(&self, operation: Operation) -> bool {
        self.may(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Whether some topic allows `operation` (an idempotent producer needs
    /// IDEMPOTENT_WRITE on the cluster or WRITE on any topic, as Kafka's).
    pub fn may_on_any_topic(&self, operation: Operation) -> bool {
        self.authorizer.as_ref().is_none_or(|a| {
            a.allows_any(&self.principal, &self.host, operation, ResourceType::Topic)
        })
    }

    /// `route` to a partition of `topic`, unless the caller may not do
    /// `operation` to it: then TOPIC_AUTHORIZATION_FAILED, whether or not
    /// the topic exists (an unauthorized caller does not learn that).
    pub fn topic_route(&self, route: Route, operation: Operation, topic: Option<&str>) -> Route {
        match topic {
            Some(topic) if !self.may_topic(operation, topic) => Err(TOPIC_DENIED),
            _ => route,
        }
    }
}

/// TOPIC_AUTHORIZATION_FAILED.
pub const TOPIC_DENIED: Code = ResponseError::TopicAuthorizationFailed.code();
/// GROUP_AUTHORIZATION_FAILED.
pub const GROUP_DENIED: Code = ResponseError::GroupAuthorizationFailed.code();
/// CLUSTER_AUTHORIZATION_FAILED.
pub const CLUSTER_DENIED: Code = ResponseError::ClusterAuthorizationFailed.code();
