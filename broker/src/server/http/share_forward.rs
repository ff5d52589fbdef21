//! The queue API on every broker: a receive takes records from the
//! topic's partitions led here and asks each other leader's HTTP API for
//! its own (`local=true`: it answers from its partitions only, so a call
//! is forwarded once); an acknowledgement's receipts of partitions led
//! elsewhere go to their leaders the same way. Every HTTP caller of a
//! group is one member (`http`) at each leader, so a receipt counts at
//! any broker, for the delivery it names. The caller's ACLs were checked
//! by the broker it called; brokers call each other as the broker's user.

use std::collections::BTreeMap;
use std::time::Duration;

use control::BrokerId;
use serde_json::{json, Value};

use super::peer_call;
use crate::cluster::Cluster;
use crate::kafka::Code;
use kafka_protocol::ResponseError;

/// How long a call to another broker may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The leader of each of `topic`'s partitions led by another broker, by
/// leader (partitions without a leader are left out).
pub fn led_elsewhere(cluster: &Cluster, topic: &str) -> BTreeMap<BrokerId, Vec<i32>> {
    let view = cluster.view.borrow();
    let mut elsewhere: BTreeMap<BrokerId, Vec<i32>> = BTreeMap::new();
    if let Ok(topic) = view.metadata.topic_by_name(topic) {
        for (index, partition) in topic.partitions.iter().enumerate() {
            match partition.leader {
                Some(leader) if leader != cluster.me => {
                    elsewhere.entry(leader).or_default().push(index as i32)
                }
                _ => {}
            }
        }
    }
    elsewhere
}

/// Where `broker`'s HTTP API is reached, if it said.
fn http_address(cluster: &Cluster, broker: BrokerId) -> Option<String> {
    let view = cluster.view.borrow();
    let endpoints = view.metadata.broker_endpoints.get(&broker)?;
    let http = endpoints
        .iter()
        .find(|e| e.listener == control::model::HTTP_ENDPOINT);
    http.map(|e| e.address.clone())
}

/// Percent-encodes a path segment or query value.
fn encoded(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// What a receive asks the other leaders for.
pub struct Remote<'a> {
    /// The share group.
    pub group: &'a str,
    /// The topic.
    pub topic: &'a str,
    /// The visibility timeout asked for, if any.
    pub visibility_ms: Option<i64>,
    /// Values as text, not base64.
    pub text: bool,
}

/// Up to `max_messages` messages from `leader`'s partitions (its answer's
/// `messages`), without waiting; a leader that cannot be reached gives
/// none (logged).
pub async fn receive_at(
    cluster: &Cluster,
    leader: BrokerId,
    asked: &Remote<'_>,
    max_messages: usize,
) -> Vec<Value> {
    let Some(address) = http_address(cluster, leader) else {
        return Vec::new();
    };
    let mut path = format!(
        "/share-groups/{}/receive?topic={}&max_messages={max_messages}&wait_ms=0&local=true",
        encoded(asked.group),
        encoded(asked.topic)
    );
    if let Some(visibility) = asked.visibility_ms {
        path.push_str(&format!("&visibility_ms={visibility}"));
    }
    if asked.text {
        path.push_str("&encoding=text");
    }
    match peer_call::post(&cluster.config, &address, &path, "", CALL_TIMEOUT).await {
        Ok((200, body)) => {
            let answer: Value = serde_json::from_str(&body).unwrap_or_default();
            let messages = answer["messages"].as_array().cloned().unwrap_or_default();
            messages.into_iter().take(max_messages).collect()
        }
        Ok((status, body)) => {
            tracing::warn!(%address, status, %body, "a leader refused a forwarded receive");
            Vec::new()
        }
        Err(e) => {
            tracing::warn!(%address, error = %e, "cannot forward a receive to a leader");
            Vec::new()
        }
    }
}

/// Acknowledges `receipts` with `kind` at `leader`: each one's outcome
/// (NOT_LEADER_OR_FOLLOWER for all if it cannot be reached).
pub async fn ack_at(
    cluster: &Cluster,
    leader: BrokerId,
    (group, topic): (&str, &str),
    receipts: &[String],
    kind: &str,
) -> Vec<Result<(), Code>> {
    let unreachable = || vec![Err(ResponseError::NotLeaderOrFollower.code()); receipts.len()];
    let Some(address) = http_address(cluster, leader) else {
        return unreachable();
    };
    let path = format!("/share-groups/{}/ack?local=true", encoded(group));
    let body = json!({ "topic": topic, "receipts": receipts, "type": kind }).to_string();
    let answer = match peer_call::post(&cluster.config, &address, &path, &body, CALL_TIMEOUT).await
    {
        Ok((200, answer)) => serde_json::from_str::<Value>(&answer).unwrap_or_default(),
        Ok((status, answer)) => {
            tracing::warn!(%address, status, %answer, "a leader refused a forwarded ack");
            return unreachable();
        }
        Err(e) => {
            tracing::warn!(%address, error = %e, "cannot forward an ack to a leader");
            return unreachable();
        }
    };
    let results = answer["results"].as_array().cloned().unwrap_or_default();
    let each = (0..receipts.len()).map(|at| {
        let result = results.get(at);
        let code = result.and_then(|r| r["error_code"].as_i64());
        match code {
            Some(0) => Ok(()),
            Some(code) => Err(code as Code),
            None => Err(ResponseError::UnknownServerError.code()),
        }
    });
    each.collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_percent_encoded_for_the_path_and_query() {
        assert_eq!(super::encoded("orders.v2_x-y~"), "orders.v2_x-y~");
        assert_eq!(super::encoded("a b/c?d&e"), "a%20b%2Fc%3Fd%26e");
    }
}
