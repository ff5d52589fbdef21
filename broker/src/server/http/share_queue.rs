//! Queues over HTTP, on share groups' share-partitions (the same state
//! Kafka's share consumers use: `partition::share_states`), as SQS
//! users expect: receive messages each with a receipt, acknowledge by
//! receipt, a message not acknowledged within its visibility timeout is
//! handed out again.
//!
//! Every HTTP caller of a group is one member of it (`http`): a receipt
//! (`partition:offset:delivery`) acknowledges whoever presents it, and
//! only for the delivery it names (a receipt of an earlier delivery of a
//! redelivered message is refused, as SQS refuses an old receipt handle).
//! Served for the partitions this broker leads.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use serde::Deserialize;
use serde_json::{json, Value};

use super::share_forward::{self, Remote};
use super::{HttpRequest, HttpResponse};
use crate::config::share_settings::LOCK_MS_BOUNDS;
use crate::kafka::Code;
use crate::partition::served::ServedPartition;
use crate::partition::share_states::{ShareRead, Wanted};
use crate::partition::Partitions;
use crate::runtime::sharded::LocalFuture;
use crate::server::shard::Shard;
use crate::share::partition::Ack;

/// How often an HTTP receive checks a share-partition against its
/// coordinator's state epoch.
const HTTP_RECHECK_MS: i64 = 5_000;

/// The member every HTTP caller of a group is.
const HTTP_MEMBER: &str = "http";
/// The longest a receive may wait.
const WAIT_MAX: Duration = Duration::from_secs(30);
/// How often a waiting receive tries again.
const WAIT_STEP: Duration = Duration::from_millis(50);
/// How often a waiting receive asks the other leaders again.
const REMOTE_STEP: Duration = Duration::from_millis(250);
/// The most messages a receive returns.
const MESSAGES_MAX: usize = 1_000;
/// The most bytes of batches a receive reads per partition.
const READ_BYTES_MAX: usize = 4 << 20;

/// Answers `/share-groups/{group}/{action}`.
pub async fn route(
    shard: &Rc<Shard>,
    group: &str,
    action: &str,
    request: &HttpRequest,
) -> HttpResponse {
    if group.is_empty() {
        return HttpResponse::error(400, ResponseError::InvalidGroupId.code(), "empty group id");
    }
    match (request.method.as_str(), action) {
        ("POST", "receive") => receive(shard, group, request).await,
        ("POST", "ack") => ack(shard, group, request).await,
        ("POST", _) => HttpResponse::error(404, -1, format!("no action {action}")),
        (method, _) => HttpResponse::error(405, -1, format!("{method} not allowed here")),
    }
}

/// What a receive asks for.
struct Receive {
    topic: String,
    max_messages: usize,
    wait: Duration,
    visibility_ms: Option<i64>,
    text: bool,
}

fn receive_of(request: &HttpRequest) -> Result<Receive, HttpResponse> {
    let number = |name: &str| -> Result<Option<i64>, HttpResponse> {
        let value = request.query.get(name);
        let parsed = value.map(|v| v.parse::<i64>());
        parsed
            .transpose()
            .map_err(|_| HttpResponse::error(400, -1, format!("{name} must be a number")))
    };
    let topic = (request.query.get("topic").cloned())
        .ok_or_else(|| HttpResponse::error(400, -1, "topic is needed"))?;
    let max_messages = number("max_messages")?.unwrap_or(10);
    if !(1..=MESSAGES_MAX as i64).contains(&max_messages) {
        return Err(HttpResponse::error(
            400,
            -1,
            format!("max_messages from 1 to {MESSAGES_MAX}"),
        ));
    }
    let visibility_ms = number("visibility_ms")?;
    let (min, max) = LOCK_MS_BOUNDS;
    if visibility_ms.is_some_and(|v| !(min as i64..=max as i64).contains(&v)) {
        let why = format!("visibility_ms from {min} to {max}");
        return Err(HttpResponse::error(400, -1, why));
    }
    let wait = Duration::from_millis(number("wait_ms")?.unwrap_or(0).max(0) as u64);
    Ok(Receive {
        topic,
        max_messages: max_messages as usize,
        wait: wait.min(WAIT_MAX),
        visibility_ms,
        text: request.query.get("encoding").is_some_and(|e| e == "text"),
    })
}

/// Hands out up to `max_messages` messages of `topic`'s partitions led
/// here, waiting up to `wait_ms` for some.
async fn receive(shard: &Rc<Shard>, group: &str, request: &HttpRequest) -> HttpResponse {
    let asked = match receive_of(request) {
        Ok(asked) => asked,
        Err(refusal) => return refusal,
    };
    let count = {
        let view = shard.cluster.view.borrow();
        let topic = view.metadata.topic_by_name(&asked.topic).ok();
        topic.map(|t| t.partitions.len() as u32)
    };
    let Some(count) = count else {
        let code = ResponseError::UnknownTopicOrPartition.code();
        return HttpResponse::error(404, code, format!("no topic {}", asked.topic));
    };
    // Asked by another broker: this broker's partitions only.
    let local_only = request.query.get("local").is_some_and(|v| v == "true");
    let deadline = Instant::now() + asked.wait;
    let mut asked_others_at: Option<Instant> = None;
    loop {
        let mut messages = match acquire_all(shard, group, &asked, count).await {
            Ok(messages) => messages,
            Err(code) if code == ResponseError::CorruptMessage.code() => {
                return HttpResponse::error(500, code, "a batch of the topic does not decode");
            }
            Err(code) if code == ResponseError::GroupIdNotFound.code() => {
                let why = format!("group {group} is a consumer group, not a share group");
                return HttpResponse::error(404, code, why);
            }
            Err(code) => {
                let why = "the share group is not available here now; retry";
                return HttpResponse::error(503, code, why);
            }
        };
        // The other leaders' partitions, asked less often than this
        // broker's while waiting.
        let due = asked_others_at.is_none_or(|at| at.elapsed() >= REMOTE_STEP);
        if !local_only && due && messages.len() < asked.max_messages {
            asked_others_at = Some(Instant::now());
            let remote = Remote {
                group,
                topic: &asked.topic,
                visibility_ms: asked.visibility_ms,
                text: asked.text,
            };
            let left = asked.max_messages - messages.len();
            let time_left = deadline.saturating_duration_since(Instant::now());
            let elsewhere =
                share_forward::receive_elsewhere(&shard.cluster, &remote, left, time_left);
            messages.extend(elsewhere.await);
        }
        if !messages.is_empty() || Instant::now() >= deadline {
            return HttpResponse::json(200, &json!({ "messages": messages }));
        }
        glommio::timer::sleep(WAIT_STEP).await;
    }
}

/// Acquires on each partition led here in turn while messages are left
/// to ask for; the messages as JSON.
async fn acquire_all(
    shard: &Shard,
    group: &str,
    asked: &Receive,
    partitions: u32,
) -> Result<Vec<Value>, Code> {
    let mut messages = Vec::new();
    let mut unavailable = None;
    for index in 0..partitions as i32 {
        let left = asked.max_messages - messages.len();
        if left == 0 {
            break;
        }
        let route = shard.cluster.route_by_name(&asked.topic, index);
        let wanted = Wanted {
            max_records: left,
            max_bytes: READ_BYTES_MAX,
            lock_ms: asked.visibility_ms,
            // The HTTP member is no member of the group (an administrator
            // may reset it meanwhile): its share-partitions are checked
            // against the coordinator's state epoch every few seconds, not
            // at each receive.
            recheck_after_ms: Some(HTTP_RECHECK_MS),
        };
        let (group, topic, text) = (group.to_string(), asked.topic.clone(), asked.text);
        let work = move |owner: Rc<Partitions>, led: ServedPartition| -> LocalFuture<_> {
            Box::pin(async move {
                let who = (group.as_str(), HTTP_MEMBER);
                let states = &owner.share_states;
                let read = states.acquire(&owner.cluster, &led, who, wanted).await?;
                let offsets: Vec<(i64, u16)> = (read.acquired.iter())
                    .flat_map(|a| (a.first..=a.last).map(move |o| (o, a.delivery_count)))
                    .collect();
                match as_json(&topic, index, &read, text) {
                    Ok((messages, sent)) => {
                        // Offsets without a record to give (transaction
                        // markers, compacted away) are done: gaps.
                        let gaps: Vec<(i64, u16)> = (offsets.into_iter())
                            .filter(|(o, _)| !sent.contains(o))
                            .collect();
                        if !gaps.is_empty() {
                            states.acknowledge_each(&led, who, &gaps, Ack::Gap).await;
                        }
                        Ok(messages)
                    }
                    Err(code) => {
                        tracing::error!(%topic, partition = index, "a share group's batch does not decode");
                        states
                            .acknowledge_each(&led, who, &offsets, Ack::Release)
                            .await;
                        Err(code)
                    }
                }
            })
        };
        match shard.partitions.on_led_partition(route, work).await {
            Ok(more) => messages.extend(more),
            Err(code) if code == ResponseError::NotLeaderOrFollower.code() => {}
            Err(code) => unavailable = Some(code),
        }
    }
    match (messages.is_empty(), unavailable) {
        (true, Some(code)) => Err(code),
        _ => Ok(messages),
    }
}

/// The acquired records of a read, each with its receipt, and their
/// offsets.
fn as_json(
    topic: &str,
    partition: i32,
    read: &ShareRead,
    text: bool,
) -> Result<(Vec<Value>, BTreeSet<i64>), Code> {
    let mut bytes = BytesMut::with_capacity(read.bytes);
    read.chunks.iter().for_each(|c| bytes.extend_from_slice(c));
    let first = read.acquired.first().map_or(0, |a| a.first);
    let decoded = client::records::decode_records(partition, &bytes.freeze(), first)
        .map_err(|_| ResponseError::CorruptMessage.code())?;
    let delivery_of = |offset: i64| {
        let mut runs = read.acquired.iter();
        let run = runs.find(|a| (a.first..=a.last).contains(&offset))?;
        Some(run.delivery_count)
    };
    let encode = |b: &Option<Bytes>| match (b, text) {
        (None, _) => Value::Null,
        (Some(b), true) => Value::String(String::from_utf8_lossy(b).into_owned()),
        (Some(b), false) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
    };
    let mut sent = BTreeSet::new();
    let messages = (decoded.records.iter())
        .filter_map(|r| Some((r, delivery_of(r.offset)?)))
        .map(|(r, delivery)| {
            sent.insert(r.offset);
            json!({
                "topic": topic,
                "partition": partition,
                "offset": r.offset,
                "delivery_count": delivery,
                "timestamp": r.timestamp,
                "key": encode(&r.key),
                "value": encode(&r.value),
                "receipt": format!("{partition}:{}:{delivery}", r.offset),
            })
        });
    let messages = messages.collect();
    Ok((messages, sent))
}

/// An acknowledgement: receipts of one topic and how.
#[derive(Deserialize)]
struct AckBody {
    topic: String,
    receipts: Vec<String>,
    #[serde(rename = "type", default = "accept")]
    kind: String,
}

fn accept() -> String {
    "accept".into()
}

/// A receipt's offset and delivery.
type Receipt = (i64, u16);

/// A receipt's partition, offset and delivery.
fn receipt_of(receipt: &str) -> Option<(i32, i64, u16)> {
    let mut parts = receipt.split(':');
    let partition = parts.next()?.parse().ok()?;
    let offset = parts.next()?.parse().ok()?;
    let delivery = parts.next()?.parse().ok()?;
    parts
        .next()
        .is_none()
        .then_some((partition, offset, delivery))
}

/// Acknowledges receipts: each one's outcome (those of partitions led
/// elsewhere at their leaders).
async fn ack(shard: &Rc<Shard>, group: &str, request: &HttpRequest) -> HttpResponse {
    let Ok(body) = serde_json::from_slice::<AckBody>(&request.body) else {
        return HttpResponse::error(
            400,
            -1,
            "a body {\"topic\", \"receipts\": [..], \"type\"} is needed",
        );
    };
    let ack = match body.kind.as_str() {
        "accept" => Ack::Accept,
        "release" => Ack::Release,
        "reject" => Ack::Reject,
        "renew" => Ack::Renew,
        other => {
            let why = format!("type {other:?}: accept, release, reject or renew");
            return HttpResponse::error(400, -1, why);
        }
    };
    // One hop and one durable write per partition, whatever the number
    // of receipts.
    let mut outcomes: Vec<Option<Result<(), Code>>> = vec![None; body.receipts.len()];
    let mut by_partition: BTreeMap<i32, Vec<(usize, Receipt)>> = BTreeMap::new();
    for (at, receipt) in body.receipts.iter().enumerate() {
        match receipt_of(receipt) {
            None => outcomes[at] = Some(Err(ResponseError::InvalidRequest.code())),
            Some((partition, offset, delivery)) => {
                by_partition
                    .entry(partition)
                    .or_default()
                    .push((at, (offset, delivery)));
            }
        }
    }
    // Asked by another broker: this broker's partitions only.
    let local_only = request.query.get("local").is_some_and(|v| v == "true");
    let mut leader_of = BTreeMap::new();
    if !local_only {
        for (leader, partitions) in share_forward::led_elsewhere(&shard.cluster, &body.topic) {
            leader_of.extend(partitions.into_iter().map(|p| (p, leader)));
        }
    }
    let mut forwarded: BTreeMap<control::BrokerId, Vec<usize>> = BTreeMap::new();
    for (partition, receipts) in by_partition {
        if let Some(leader) = leader_of.get(&partition) {
            let ats = receipts.iter().map(|(at, _)| *at);
            forwarded.entry(*leader).or_default().extend(ats);
            continue;
        }
        let route = shard.cluster.route_by_name(&body.topic, partition);
        let (group, asked): (String, Vec<(i64, u16)>) = (
            group.to_string(),
            receipts.iter().map(|(_, r)| *r).collect(),
        );
        let work = move |owner: Rc<Partitions>, led: ServedPartition| -> LocalFuture<_> {
            Box::pin(async move {
                let who = (group.as_str(), HTTP_MEMBER);
                let states = &owner.share_states;
                Ok(states.acknowledge_each(&led, who, &asked, ack).await)
            })
        };
        let each = shard.partitions.on_led_partition(route, work).await;
        for (n, (at, _)) in receipts.iter().enumerate() {
            let outcome = match &each {
                Ok(each) => each.get(n).copied().unwrap_or(Ok(())),
                Err(code) => Err(*code),
            };
            outcomes[*at] = Some(outcome);
        }
    }
    // The other leaders at once.
    let (asked, kind) = ((group, body.topic.as_str()), body.kind.as_str());
    let calls = forwarded.into_iter().map(|(leader, ats)| {
        let receipts: Vec<String> = ats.iter().map(|at| body.receipts[*at].clone()).collect();
        async move {
            let each = share_forward::ack_at(&shard.cluster, leader, asked, &receipts, kind).await;
            (ats, each)
        }
    });
    for (ats, each) in futures::future::join_all(calls).await {
        for (at, outcome) in ats.into_iter().zip(each) {
            outcomes[at] = Some(outcome);
        }
    }
    let results: Vec<Value> = (body.receipts.iter().zip(outcomes))
        .map(|(receipt, outcome)| {
            let outcome = outcome.unwrap_or(Ok(()));
            let mut result =
                json!({ "receipt": receipt, "error_code": outcome.err().unwrap_or(0) });
            if let Err(code) = outcome {
                result["error"] = Value::String(error_text(code));
            }
            result
        })
        .collect();
    HttpResponse::json(200, &json!({ "results": results }))
}

/// What an acknowledgement's error means, in words.
fn error_text(code: Code) -> String {
    match ResponseError::try_from_code(code) {
        Some(ResponseError::InvalidRecordState) => {
            "not held by this group's HTTP member in the delivery the receipt names (its visibility timeout passed, or it was acknowledged)".into()
        }
        Some(ResponseError::InvalidRequest) => "not a receipt (partition:offset:delivery)".into(),
        Some(ResponseError::NotLeaderOrFollower) => "the partition is not led by this broker".into(),
        _ => crate::kafka::error_text(code),
    }
}
