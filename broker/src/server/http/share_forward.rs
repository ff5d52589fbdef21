//! The queue API on every broker: a receive takes records from the
//! topic's partitions led here and asks each other leader's HTTP API for
//! its own (`local=true`: it answers from its partitions only, so a call
//! is forwarded once); an acknowledgement's receipts of partitions led
//! elsewhere go to their leaders the same way. Every HTTP caller of a
//! group is one member (`http`) at each leader, so a receipt counts at
//! any broker, for the delivery it names. The caller's ACLs were checked
//! by the broker it called; brokers call each other as the broker's user.
//! The other leaders are asked at once, each for its share of what is
//! left, within the time the caller waits (at least [`CALL_MIN`]); a
//! leader that failed is left alone for [`BACK_OFF`].

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use control::BrokerId;
use serde_json::{json, Value};

use super::peer_call;
use crate::cluster::Cluster;
use crate::kafka::Code;
use kafka_protocol::ResponseError;

/// How long a call to another broker may take at most.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a receive's call to another leader may take at least (a
/// receive that does not wait still gives them this long).
const CALL_MIN: Duration = Duration::from_secs(2);
/// How long a leader whose call failed is not asked again.
const BACK_OFF: Duration = Duration::from_secs(5);
/// The most of a refused answer logged.
const LOGGED_CHARS: usize = 200;

thread_local! {
    /// Leaders whose calls failed, and until when they are left alone.
    static FAILED: RefCell<HashMap<BrokerId, Instant>> = RefCell::new(HashMap::new());
    /// Which leader a receive asks first (they take turns).
    static TURN: Cell<usize> = const { Cell::new(0) };
}

/// Whether `leader` is left alone for now.
fn backing_off(leader: BrokerId) -> bool {
    FAILED.with(|f| {
        f.borrow()
            .get(&leader)
            .is_some_and(|until| Instant::now() < *until)
    })
}

/// `leader`'s call failed: logged (once per back-off) and left alone.
fn failed(leader: BrokerId, address: &str, what: &str) {
    let first = FAILED.with(|f| {
        let until = Instant::now() + BACK_OFF;
        f.borrow_mut()
            .insert(leader, until)
            .is_none_or(|was| was < Instant::now())
    });
    if first {
        let what: String = what.chars().take(LOGGED_CHARS).collect();
        tracing::warn!(leader = leader.0, %address, %what, "a call to another leader's HTTP API failed");
    }
}

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

/// Where `broker`'s HTTP API is reached, if it said (a broker of an
/// older version does not: its partitions are left out, logged once).
fn http_address(cluster: &Cluster, broker: BrokerId) -> Option<String> {
    let found = {
        let view = cluster.view.borrow();
        let endpoints = view.metadata.broker_endpoints.get(&broker);
        let http = endpoints.and_then(|e| {
            e.iter()
                .find(|e| e.listener == control::model::HTTP_ENDPOINT)
        });
        http.map(|e| e.address.clone())
    };
    if found.is_none() && !backing_off(broker) {
        failed(broker, "?", "the broker registered no HTTP address");
    }
    found
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

/// Up to `left` messages of `asked.topic`'s partitions led by other
/// brokers: every leader asked at once for its share, each call within
/// `time_left` (at least [`CALL_MIN`], at most [`CALL_TIMEOUT`]).
pub async fn receive_elsewhere(
    cluster: &Cluster,
    asked: &Remote<'_>,
    left: usize,
    time_left: Duration,
) -> Vec<Value> {
    let mut leaders: Vec<BrokerId> = led_elsewhere(cluster, asked.topic)
        .into_keys()
        .filter(|leader| !backing_off(*leader))
        .collect();
    if leaders.is_empty() || left == 0 {
        return Vec::new();
    }
    let turn = TURN.with(|t| t.replace(t.get().wrapping_add(1)));
    let first = turn % leaders.len();
    leaders.rotate_left(first);
    leaders.truncate(left);
    let (share, extra) = (left / leaders.len(), left % leaders.len());
    let timeout = time_left.clamp(CALL_MIN, CALL_TIMEOUT);
    let calls = leaders.iter().enumerate().map(|(at, leader)| {
        let wanted = share + usize::from(at < extra);
        receive_at(cluster, *leader, asked, wanted, timeout)
    });
    let answers = futures::future::join_all(calls).await;
    answers.into_iter().flatten().collect()
}

/// Up to `max_messages` messages from `leader`'s partitions (its answer's
/// `messages`), without waiting; a leader that cannot be reached gives
/// none.
async fn receive_at(
    cluster: &Cluster,
    leader: BrokerId,
    asked: &Remote<'_>,
    max_messages: usize,
    timeout: Duration,
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
    match peer_call::post(cluster, &address, &path, "", timeout).await {
        Ok((200, body)) => {
            let answer: Value = serde_json::from_str(&body).unwrap_or_default();
            let messages = answer["messages"].as_array().cloned().unwrap_or_default();
            messages.into_iter().take(max_messages).collect()
        }
        Ok((status, body)) => {
            failed(leader, &address, &format!("{status}: {body}"));
            Vec::new()
        }
        Err(e) => {
            failed(leader, &address, &e.to_string());
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
    let answer = match peer_call::post(cluster, &address, &path, &body, CALL_TIMEOUT).await {
        Ok((200, answer)) => serde_json::from_str::<Value>(&answer).unwrap_or_default(),
        Ok((status, answer)) => {
            failed(leader, &address, &format!("{status}: {answer}"));
            return unreachable();
        }
        Err(e) => {
            failed(leader, &address, &e.to_string());
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
    use super::*;

    #[test]
    fn a_leader_whose_call_failed_is_left_alone_for_a_while() {
        let leader = BrokerId(7);
        assert!(!backing_off(leader));
        failed(leader, "10.0.0.7:8080", "refused");
        assert!(backing_off(leader));
        let passed = Instant::now() - Duration::from_millis(1);
        FAILED.with(|f| f.borrow_mut().insert(leader, passed));
        assert!(!backing_off(leader), "asked again once the back-off passed");
    }

    #[test]
    fn names_are_percent_encoded_for_the_path_and_query() {
        assert_eq!(super::encoded("orders.v2_x-y~"), "orders.v2_x-y~");
        assert_eq!(super::encoded("a b/c?d&e"), "a%20b%2Fc%3Fd%26e");
    }
}
