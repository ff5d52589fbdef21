//! The ACL checks of the HTTP API: each endpoint asks what its Kafka
//! counterpart asks (producing WRITE on the topic, a group's calls READ on
//! the group and READ on each topic joined, polled or committed to; the
//! topic list shows what the caller may describe), as the
//! logged-in user (`User:name`, `User:ANONYMOUS` without a login). A
//! refusal is 403 with Kafka's code.

use control::model::acls::{Operation, ResourceType, CLUSTER_NAME};
use kafka_protocol::ResponseError;

use super::{HttpRequest, HttpResponse};
use crate::security::authorizer::Authorizer;

/// What the request at `segments` needs, by resource: None when it may go
/// on, else the refusal.
pub fn check(
    authorizer: &Authorizer,
    principal: &str,
    host: &str,
    request: &HttpRequest,
    segments: &[&str],
) -> Option<HttpResponse> {
    let may = |op, resource, name: &str| authorizer.allows(principal, host, op, resource, name);
    let topic = |op, name: &str| may(op, ResourceType::Topic, name);
    let cluster = |op| may(op, ResourceType::Cluster, CLUSTER_NAME);
    let (allowed, code) = match (request.method.as_str(), segments) {
        // Listed: the topics the caller may describe (api::route filters).
        ("GET", ["topics"]) => (true, 0),
        ("POST", ["topics"]) => (cluster(Operation::Create), CLUSTER),
        ("GET", ["topics", name]) => (topic(Operation::Describe, name), TOPIC),
        ("DELETE", ["topics", name]) => (topic(Operation::Delete, name), TOPIC),
        ("POST", ["topics", name, "messages"]) => (topic(Operation::Write, name), TOPIC),
        ("GET", ["topics", name, "partitions", _, "watermark"]) => {
            (topic(Operation::Describe, name), TOPIC)
        }
        ("POST", ["producers"]) => (
            cluster(Operation::IdempotentWrite)
                || authorizer.allows_any(principal, host, Operation::Write, ResourceType::Topic),
            CLUSTER,
        ),
        (_, ["consumer-groups", group, action]) => {
            // READ on the group, and on every topic the call reads or
            // commits: the one joined, polled or committed to.
            let topics = match *action {
                "join" => subscribed(&request.body),
                "commit" => committed(&request.body),
                "poll" => request.query.get("topic").cloned().into_iter().collect(),
                _ => Vec::new(),
            };
            if !may(Operation::Read, ResourceType::Group, group) {
                (false, GROUP)
            } else {
                (topics.iter().all(|t| topic(Operation::Read, t)), TOPIC)
            }
        }
        (_, ["share-groups", group, action]) => {
            // READ on the group and on the topic received from or
            // acknowledged (ShareFetch's and ShareAcknowledge's checks).
            let topic_named = match *action {
                "receive" => request.query.get("topic").cloned(),
                _ => acknowledged_topic(&request.body),
            };
            if !may(Operation::Read, ResourceType::Group, group) {
                (false, GROUP)
            } else {
                (
                    topic_named.is_none_or(|t| topic(Operation::Read, &t)),
                    TOPIC,
                )
            }
        }
        _ => (true, 0),
    };
    (!allowed).then(|| HttpResponse::error(403, code, "not authorized by the ACLs"))
}

const TOPIC: i16 = ResponseError::TopicAuthorizationFailed.code();
const GROUP: i16 = ResponseError::GroupAuthorizationFailed.code();
const CLUSTER: i16 = ResponseError::ClusterAuthorizationFailed.code();

/// The topic a share group acknowledgement names, if its body says.
fn acknowledged_topic(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    value.get("topic")?.as_str().map(str::to_string)
}

/// The topics a commit's body commits offsets of (none if it does not
/// parse: the commit itself then refuses it).
fn committed(body: &[u8]) -> Vec<String> {
    let value: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    value["offsets"]
        .as_array()
        .map(|offsets| {
            offsets
                .iter()
                .filter_map(|o| o["topic"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The topics a join's body subscribes to (none if it does not parse: the
/// join itself then refuses it).
fn subscribed(body: &[u8]) -> Vec<String> {
    let value: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    value["topics"]
        .as_array()
        .map(|topics| {
            topics
                .iter()
                .filter_map(|t| t.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}
