//! Consumer groups over HTTP, on the same coordinator as Kafka groups
//! (same generations, same fencing), with the assignment computed by the
//! broker: an HTTP member joins as a static member (its `consumer_id` is
//! its group.instance.id) offering the "range" protocol; when it is the
//! group's leader the broker assigns for everyone with Kafka's range
//! assignor, so HTTP and Kafka consumers can share a group.

use std::rc::Rc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use kafka_protocol::ResponseError;
use serde::Deserialize;
use serde_json::{json, Value};

use super::group_calls as calls;
use super::{HttpRequest, HttpResponse};
use crate::groups::consumer_protocol::{
    assign_range, assigned_partitions, encode_assignment, encode_subscription, subscribed_topics,
};
use crate::groups::membership::Join;
use crate::groups::records::CommittedOffset;
use crate::kafka::Code;
use crate::partition::read::Bound;
use crate::partition::served::ServedPartition;
use crate::runtime::sharded::LocalFuture;
use crate::server::shard::Shard;

/// The session of an HTTP member unless it asks for another.
const SESSION_TIMEOUT_DEFAULT_MS: u64 = 30_000;
/// The longest a poll may wait.
const POLL_WAIT_MAX: Duration = Duration::from_secs(30);
/// The most bytes a poll returns.
const POLL_BYTES_MAX: usize = 4 << 20;

/// Answers `/consumer-groups/{group}/{action}`.
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
        ("POST", "join") => join(shard, group, &request.body).await,
        ("POST", "heartbeat") => heartbeat(shard, group, &request.body).await,
        ("POST", "commit") => commit(shard, group, &request.body).await,
        ("POST", "leave") => leave(shard, group, &request.body).await,
        ("GET", "poll") => poll(shard, request).await,
        ("GET" | "POST", _) => HttpResponse::error(404, -1, format!("no action {action}")),
        (method, _) => HttpResponse::error(405, -1, format!("{method} not allowed here")),
    }
}

/// The HTTP status of a group error: fencing and rebalances are 409 (the
/// member must rejoin), an unknown member 404.
fn status_for(code: Code) -> u16 {
    match ResponseError::try_from_code(code) {
        Some(ResponseError::RebalanceInProgress)
        | Some(ResponseError::IllegalGeneration)
        | Some(ResponseError::FencedInstanceId) => 409,
        Some(ResponseError::UnknownMemberId) => 404,
        Some(ResponseError::NotCoordinator)
        | Some(ResponseError::CoordinatorNotAvailable)
        | Some(ResponseError::CoordinatorLoadInProgress) => 503,
        Some(ResponseError::InvalidSessionTimeout) | Some(ResponseError::InvalidGroupId) => 400,
        Some(ResponseError::UnknownTopicOrPartition) => 404,
        Some(ResponseError::NotLeaderOrFollower) => 421,
        _ => 500,
    }
}

fn refused(code: Code) -> HttpResponse {
    let message = match ResponseError::try_from_code(code) {
        Some(ResponseError::RebalanceInProgress) => "the group is rebalancing: join again".into(),
        Some(ResponseError::IllegalGeneration) => {
            "an older generation: the group rebalanced, join again".into()
        }
        Some(ResponseError::UnknownMemberId) => {
            "no such member (session expired?): join again".into()
        }
        Some(ResponseError::FencedInstanceId) => {
            "another member with this consumer_id took over".into()
        }
        _ => crate::kafka::error_text(code),
    };
    HttpResponse::error(status_for(code), code, message)
}

fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, HttpResponse> {
    serde_json::from_slice(body)
        .map_err(|e| HttpResponse::error(400, -1, format!("bad JSON body: {e}")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JoinBody {
    consumer_id: String,
    topics: Vec<String>,
    session_timeout_ms: Option<u64>,
}

/// `POST /consumer-groups/{g}/join`: joins as a static member (the
/// consumer id is its instance id) and syncs, assigning for everyone when
/// it leads; answers the member's partitions.
async fn join(shard: &Rc<Shard>, group: &str, body: &[u8]) -> HttpResponse {
    let body: JoinBody = match parse(body) {
        Ok(body) => body,
        Err(refusal) => return refusal,
    };
    let join = match join_of(shard, &body) {
        Ok(join) => join,
        Err(refusal) => return refusal,
    };
    if let Err(code) = crate::coordinator::ensure_offsets_topic(&shard.cluster).await {
        return refused(code);
    }
    let at = match calls::coordinator(shard, group) {
        Ok(at) => at,
        Err(code) => return refused(code),
    };
    let joined = match calls::join(shard, at, group, join).await {
        Ok(joined) => joined,
        Err(code) => return refused(code),
    };
    // The leader assigns for everyone, others wait for it in the sync.
    let assignments = if joined.leader {
        assign_for_everyone(shard, &joined.members)
    } else {
        Vec::new()
    };
    let member = (
        joined.member_id.as_str(),
        body.consumer_id.as_str(),
        joined.generation,
    );
    let assignment = match calls::sync(shard, at, group, member, assignments).await {
        Ok(assignment) => assignment,
        Err(code) => return refused(code),
    };
    let assigned: Vec<Value> = assigned_partitions(&assignment)
        .unwrap_or_default()
        .into_iter()
        .map(|(topic, partitions)| json!({"topic": topic, "partitions": partitions}))
        .collect();
    HttpResponse::json(
        200,
        &json!({
            "member_id": joined.member_id,
            "generation_id": joined.generation,
            "leader": joined.leader,
            "assigned_partitions": assigned,
        }),
    )
}

/// The Kafka join an HTTP member's body asks for, or its refusal.
fn join_of(shard: &Shard, body: &JoinBody) -> Result<Join, HttpResponse> {
    if body.consumer_id.is_empty() || body.topics.is_empty() {
        return Err(HttpResponse::error(
            400,
            -1,
            "consumer_id and at least one topic are needed",
        ));
    }
    let session = body
        .session_timeout_ms
        .unwrap_or(SESSION_TIMEOUT_DEFAULT_MS);
    let config = &shard.cluster.config;
    if !(config.group_min_session_timeout_ms..=config.group_max_session_timeout_ms)
        .contains(&session)
    {
        return Err(refused(ResponseError::InvalidSessionTimeout.code()));
    }
    Ok(Join {
        member_id: String::new(),
        instance_id: Some(body.consumer_id.clone()),
        client_id: format!("http-{}", body.consumer_id),
        client_host: "http".into(),
        protocol_type: "consumer".into(),
        protocols: vec![(
            "range".into(),
            Bytes::from(encode_subscription(&body.topics)),
        )],
        session_timeout: Duration::from_millis(session),
        rebalance_timeout: Duration::from_millis(session),
        require_known_member_id: false,
    })
}

/// The group leader's assignment for every member (the range assignor,
/// over the partitions each member's subscription names).
fn assign_for_everyone(shard: &Shard, members: &[(String, Bytes)]) -> Vec<(String, Bytes)> {
    let members: Vec<(String, Vec<String>)> = members
        .iter()
        .map(|(id, metadata)| (id.clone(), subscribed_topics(metadata).unwrap_or_default()))
        .collect();
    let view = shard.cluster.view.borrow();
    let counts = |topic: &str| {
        view.metadata
            .topic_by_name(topic)
            .ok()
            .map(|t| t.partitions.len() as u32)
    };
    assign_range(&members, counts)
        .into_iter()
        .map(|(member, topics)| (member, Bytes::from(encode_assignment(&topics))))
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemberBody {
    consumer_id: String,
    member_id: String,
    generation_id: Option<i32>,
}

async fn heartbeat(shard: &Rc<Shard>, group: &str, body: &[u8]) -> HttpResponse {
    let body: MemberBody = match parse(body) {
        Ok(body) => body,
        Err(refusal) => return refusal,
    };
    let generation = body.generation_id.unwrap_or(-1);
    let code = match calls::coordinator(shard, group) {
        Ok(at) => {
            let member = (
                body.member_id.as_str(),
                body.consumer_id.as_str(),
                generation,
            );
            calls::heartbeat(shard, at, group, member).await
        }
        Err(code) => code,
    };
    match code {
        0 => HttpResponse::json(200, &json!({})),
        code => refused(code),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CommitBody {
    consumer_id: String,
    member_id: String,
    generation_id: i32,
    offsets: Vec<OffsetIn>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OffsetIn {
    topic: String,
    partition: i32,
    offset: i64,
}

async fn commit(shard: &Rc<Shard>, group: &str, body: &[u8]) -> HttpResponse {
    let body: CommitBody = match parse(body) {
        Ok(body) => body,
        Err(refusal) => return refusal,
    };
    if body.offsets.is_empty() || body.offsets.iter().any(|o| o.offset < 0 || o.partition < 0) {
        return HttpResponse::error(400, -1, "offsets: one or more, none negative");
    }
    let now = crate::runtime::clock::wall_ms();
    let offsets: Vec<(String, i32, CommittedOffset)> = body
        .offsets
        .into_iter()
        .map(|o| {
            (
                o.topic,
                o.partition,
                CommittedOffset {
                    offset: o.offset,
                    leader_epoch: -1,
                    metadata: String::new(),
                    commit_timestamp: now,
                },
            )
        })
        .collect();
    let code = match calls::coordinator(shard, group) {
        Ok(at) => {
            let member = (
                body.member_id.as_str(),
                body.consumer_id.as_str(),
                body.generation_id,
            );
            calls::commit(shard, at, group, member, offsets).await
        }
        Err(code) => code,
    };
    match code {
        0 => HttpResponse::json(200, &json!({})),
        code => refused(code),
    }
}

async fn leave(shard: &Rc<Shard>, group: &str, body: &[u8]) -> HttpResponse {
    let body: MemberBody = match parse(body) {
        Ok(body) => body,
        Err(refusal) => return refusal,
    };
    let code = match calls::coordinator(shard, group) {
        Ok(at) => calls::leave(shard, at, group, &body.member_id, &body.consumer_id).await,
        Err(code) => code,
    };
    match code {
        0 => HttpResponse::json(200, &json!({})),
        code => refused(code),
    }
}

/// `GET /consumer-groups/{group}/poll?topic=&partition=&offset=&max_wait_ms=&max_bytes=`:
/// records from `offset` below the high watermark, waiting up to
/// `max_wait_ms` for some to arrive.
async fn poll(shard: &Rc<Shard>, request: &HttpRequest) -> HttpResponse {
    let number = |name: &str| -> Result<Option<i64>, HttpResponse> {
        match request.query.get(name) {
            None => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| HttpResponse::error(400, -1, format!("{name} must be a number"))),
        }
    };
    let (partition, offset, wait, max_bytes) = match (
        number("partition"),
        number("offset"),
        number("max_wait_ms"),
        number("max_bytes"),
    ) {
        (Ok(Some(p)), Ok(Some(o)), Ok(w), Ok(b)) => (p as i32, o, w.unwrap_or(0), b),
        (Err(e), ..) | (_, Err(e), ..) | (_, _, Err(e), _) | (.., Err(e)) => return e,
        _ => return HttpResponse::error(400, -1, "partition and offset are needed"),
    };
    let Some(topic) = request.query.get("topic").cloned() else {
        return HttpResponse::error(400, -1, "topic is needed");
    };
    let text = request.query.get("encoding").is_some_and(|e| e == "text");
    let wait = Duration::from_millis(wait.max(0) as u64).min(POLL_WAIT_MAX);
    let max_bytes = max_bytes
        .map_or(1 << 20, |b| b.max(1) as usize)
        .min(POLL_BYTES_MAX);
    let read = match shard.cluster.leader_elsewhere(&topic, partition) {
        Some(leader) => {
            super::forward::fetch(
                &shard.cluster,
                leader,
                &topic,
                partition,
                offset,
                wait,
                max_bytes,
            )
            .await
        }
        None => local_read(shard, &topic, partition, offset, wait, max_bytes).await,
    };
    poll_answer(read, partition, offset, text)
}

/// A poll's read on this broker, the partition's leader.
async fn local_read(
    shard: &Shard,
    topic: &str,
    partition: i32,
    offset: i64,
    wait: Duration,
    max_bytes: usize,
) -> Result<(Bytes, i64), Code> {
    let route = shard.cluster.route_by_name(topic, partition);
    let poll = move |_, led: ServedPartition| -> LocalFuture<_> {
        Box::pin(async move {
            let read = led
                .read_waiting(offset, max_bytes, Bound::HighWatermark, wait)
                .await?;
            Ok((read.joined(), read.high_watermark.0))
        })
    };
    shard.partitions.on_led_partition(route, poll).await
}

/// The JSON answer to a poll.
fn poll_answer(
    read: Result<(Bytes, i64), Code>,
    partition: i32,
    offset: i64,
    text: bool,
) -> HttpResponse {
    let (bytes, high_watermark) = match read {
        Ok(read) => read,
        Err(code) if code == ResponseError::OffsetOutOfRange.code() => {
            return HttpResponse::error(416, code, "offset outside the partition's log")
        }
        Err(code) => return refused(code),
    };
    let decoded = match client::records::decode_records(partition, &bytes, offset) {
        Ok(decoded) => decoded,
        Err(e) => return HttpResponse::error(500, -1, format!("stored batches: {e}")),
    };
    let encode = |b: &Option<Bytes>| -> Value {
        match b {
            None => Value::Null,
            Some(b) if text => Value::String(String::from_utf8_lossy(b).to_string()),
            Some(b) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
        }
    };
    let records: Vec<Value> = decoded
        .records
        .iter()
        .map(|r| {
            json!({
                "offset": r.offset,
                "timestamp": r.timestamp,
                "key": encode(&r.key),
                "value": encode(&r.value),
            })
        })
        .collect();
    let next = decoded
        .records
        .last()
        .map_or(offset, |r| r.offset + 1)
        .max(decoded.next_offset.unwrap_or(offset));
    HttpResponse::json(
        200,
        &json!({
            "records": records,
            "next_offset": next,
            "high_watermark": high_watermark,
        }),
    )
}
