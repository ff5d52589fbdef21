//! The HTTP/JSON API (docs/http-api.md): producing messages and managing
//! topics, through the same paths as the Kafka protocol (the partition's
//! owning shard appends; the controller creates and deletes topics).
//! Values and keys are base64 (or UTF-8 text with `encoding=text`).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use client::records::{encode_batch_as, ProducerRecord, ProducerSequence};
use kafka_protocol::records::Compression;
use kafka_protocol::ResponseError;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{HttpRequest, HttpResponse};
use crate::cluster::topics::{Created, NewTopic};
use crate::kafka::record_sets::RecordSet;
use crate::kafka::{error_text, Code};
use crate::partition::append::Acks;
use crate::server::shard::Shard;

/// How long an HTTP produce may wait for its acknowledgement.
const PRODUCE_TIMEOUT: Duration = Duration::from_secs(30);
/// The most records one request may carry.
const RECORDS_PER_REQUEST_MAX: usize = 100_000;

/// Answers an API request (anything but /health and /metrics).
/// Answers `request`; `visible` says which topics the caller may see
/// (DESCRIBE, with ACLs on).
pub async fn route(
    shard: &Rc<Shard>,
    request: HttpRequest,
    visible: &dyn Fn(&str) -> bool,
) -> HttpResponse {
    let segments: Vec<&str> = request
        .path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    match (request.method.as_str(), segments.as_slice()) {
        ("GET", ["topics"]) => list_topics(shard, visible),
        ("POST", ["topics"]) => create(shard, &request.body).await,
        ("GET", ["topics", topic]) => describe(shard, topic),
        ("DELETE", ["topics", topic]) => delete(shard, topic).await,
        ("POST", ["topics", topic, "messages"]) => produce(shard, topic, &request).await,
        ("POST", ["producers"]) => new_producer(shard).await,
        ("GET", ["topics", topic, "partitions", partition, "watermark"]) => {
            watermark(shard, topic, partition).await
        }
        (_, ["consumer-groups", group, action]) => {
            super::groups::route(shard, group, action, &request).await
        }
        (_, ["share-groups", group, action]) => {
            super::share_queue::route(shard, group, action, &request).await
        }
        (_, ["topics"] | ["topics", _] | ["topics", _, "messages"]) => {
            HttpResponse::error(405, -1, format!("{} not allowed here", request.method))
        }
        _ => HttpResponse::error(404, -1, format!("no endpoint {}", request.path)),
    }
}

/// The HTTP status for a Kafka error code.
fn status_for(code: Code) -> u16 {
    match ResponseError::try_from_code(code) {
        Some(ResponseError::UnknownTopicOrPartition) => 404,
        Some(ResponseError::TopicAlreadyExists)
        | Some(ResponseError::OutOfOrderSequenceNumber)
        | Some(ResponseError::InvalidProducerEpoch) => 409,
        Some(ResponseError::NotLeaderOrFollower) => 421,
        Some(ResponseError::NotEnoughReplicas)
        | Some(ResponseError::NotEnoughReplicasAfterAppend)
        | Some(ResponseError::NotController)
        | Some(ResponseError::CoordinatorNotAvailable) => 503,
        Some(ResponseError::RequestTimedOut) => 504,
        Some(ResponseError::MessageTooLarge) | Some(ResponseError::RecordListTooLarge) => 413,
        Some(ResponseError::KafkaStorageError) => 500,
        _ => 400,
    }
}

fn kafka_error(code: Code, message: impl Into<String>) -> HttpResponse {
    HttpResponse::error(status_for(code), code, message)
}

fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, HttpResponse> {
    serde_json::from_slice(body)
        .map_err(|e| HttpResponse::error(400, -1, format!("bad JSON body: {e}")))
}

fn list_topics(shard: &Shard, visible: &dyn Fn(&str) -> bool) -> HttpResponse {
    let view = shard.cluster.view.borrow();
    let topics: Vec<Value> = view
        .metadata
        .topics
        .values()
        .filter(|t| visible(&t.name))
        .map(|t| {
            json!({
                "name": t.name,
                "partitions": t.partitions.len(),
                "internal": crate::cluster::topics::is_internal(&t.name),
            })
        })
        .collect();
    HttpResponse::json(200, &Value::Array(topics))
}

fn describe(shard: &Shard, name: &str) -> HttpResponse {
    let view = shard.cluster.view.borrow();
    let Ok(topic) = view.metadata.topic_by_name(name) else {
        return kafka_error(
            ResponseError::UnknownTopicOrPartition.code(),
            format!("no topic {name}"),
        );
    };
    let partitions: Vec<Value> = topic
        .partitions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            json!({
                "partition": i,
                "leader": p.leader.map(|b| b.0),
                "leader_epoch": p.leader_epoch.0,
                "replicas": p.replicas.iter().map(|b| b.0).collect::<Vec<_>>(),
                "isr": p.isr.iter().map(|b| b.0).collect::<Vec<_>>(),
            })
        })
        .collect();
    let configs: BTreeMap<&str, String> = control::model::config::TOPIC_CONFIG_KEYS
        .iter()
        .filter_map(|k| topic.config.get(k).map(|v| (*k, v)))
        .collect();
    HttpResponse::json(
        200,
        &json!({
            "name": topic.name,
            "id": uuid::Uuid::from_bytes(topic.id.0).to_string(),
            "partitions": partitions,
            "configs": configs,
        }),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    name: String,
    partitions: Option<i32>,
    replication_factor: Option<i16>,
    #[serde(default)]
    configs: BTreeMap<String, String>,
}

async fn create(shard: &Rc<Shard>, body: &[u8]) -> HttpResponse {
    let body: CreateBody = match parse(body) {
        Ok(body) => body,
        Err(refusal) => return refusal,
    };
    let new = NewTopic {
        name: body.name.clone(),
        partitions: body.partitions.unwrap_or(-1),
        replication_factor: body.replication_factor.unwrap_or(-1),
        configs: body
            .configs
            .into_iter()
            .map(|(k, v)| (k, Some(v)))
            .collect(),
    };
    match shard.cluster.create_topic(new, false).await {
        Ok(Created {
            id,
            partitions,
            replication_factor,
            ..
        }) => HttpResponse::json(
            201,
            &json!({
                "name": body.name,
                "id": uuid::Uuid::from_bytes(id.0).to_string(),
                "partitions": partitions,
                "replication_factor": replication_factor,
            }),
        ),
        Err((code, message)) => kafka_error(code, message),
    }
}

async fn delete(shard: &Rc<Shard>, name: &str) -> HttpResponse {
    match shard.cluster.delete_topic(name).await {
        Ok(()) => HttpResponse {
            status: 204,
            content_type: "application/json",
            body: Vec::new(),
        },
        Err((code, message)) => kafka_error(code, message),
    }
}

async fn watermark(shard: &Rc<Shard>, topic: &str, partition: &str) -> HttpResponse {
    let Ok(partition) = partition.parse::<i32>() else {
        return HttpResponse::error(400, -1, format!("partition {partition:?} is not a number"));
    };
    if let Some(leader) = shard.cluster.leader_elsewhere(topic, partition) {
        return match super::forward::watermarks(&shard.cluster, leader, topic, partition).await {
            Ok((earliest, latest)) => {
                HttpResponse::json(200, &json!({"earliest": earliest, "latest": latest}))
            }
            Err(code) => kafka_error(code, error_text(code)),
        };
    }
    let route = shard.cluster.route_by_name(topic, partition);
    let result = shard
        .partitions
        .on_led_partition(route, |_, led| {
            Box::pin(async move {
                let log = &led.partition.log;
                Ok((log.log_start().0, log.high_watermark().0))
            })
        })
        .await;
    match result {
        Ok((earliest, latest)) => {
            HttpResponse::json(200, &json!({"earliest": earliest, "latest": latest}))
        }
        Err(code) => kafka_error(code, error_text(code)),
    }
}

/// One message as posted.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageIn {
    key: Option<String>,
    value: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, Option<String>>,
    partition: Option<i32>,
}

/// A message body: one message, or `{"records": [...]}`.
#[derive(Deserialize)]
#[serde(untagged)]
enum MessagesIn {
    Batch { records: Vec<MessageIn> },
    One(MessageIn),
}

/// An idempotent producer's numbering of a request's records, from the
/// query (`producer_id`, `producer_epoch`, `sequence`: the first record's
/// sequence in its partition). All three or none.
fn producer_of(request: &HttpRequest) -> Result<Option<(i64, i16, i32)>, HttpResponse> {
    let get = |name: &str| request.query.get(name);
    match (get("producer_id"), get("producer_epoch"), get("sequence")) {
        (None, None, None) => Ok(None),
        (Some(id), Some(epoch), Some(sequence)) => {
            let parsed = (
                id.parse::<i64>(),
                epoch.parse::<i16>(),
                sequence.parse::<i32>(),
            );
            match parsed {
                (Ok(id), Ok(epoch), Ok(sequence)) if id >= 0 && epoch >= 0 && sequence >= 0 => {
                    Ok(Some((id, epoch, sequence)))
                }
                _ => Err(HttpResponse::error(
                    400,
                    -1,
                    "producer_id, producer_epoch and sequence must be non-negative numbers",
                )),
            }
        }
        _ => Err(HttpResponse::error(
            400,
            -1,
            "an idempotent request names producer_id, producer_epoch and sequence together",
        )),
    }
}

/// `POST /producers`: a producer id and epoch for idempotent requests
/// (what InitProducerId gives a Kafka producer).
async fn new_producer(shard: &Rc<Shard>) -> HttpResponse {
    match shard.cluster.next_producer_id().await {
        Ok(id) => HttpResponse::json(200, &json!({"producer_id": id, "producer_epoch": 0})),
        Err(code) => kafka_error(code, "no producer id available now; retry"),
    }
}

/// A message decoded, with its partition.
struct Message {
    partition: i32,
    record: ProducerRecord,
}

/// Keyless messages of a request go to one partition, the next one each
/// request (Kafka's sticky partitioner does the like per batch).
static KEYLESS_NEXT: AtomicU32 = AtomicU32::new(0);

async fn produce(shard: &Rc<Shard>, topic: &str, request: &HttpRequest) -> HttpResponse {
    let options = match produce_options(request) {
        Ok(options) => options,
        Err(refusal) => return refusal,
    };
    let (decoded, single) = match decode_messages(shard, topic, request, options.text) {
        Ok(decoded) => decoded,
        Err(refusal) => return refusal,
    };
    let answers = match write_by_partition(shard, topic, &decoded, &options).await {
        Ok(answers) => answers,
        Err(refusal) => return refusal,
    };
    produce_answer(&decoded, &answers, single)
}

/// How a produce request asks to be written (from its query).
struct ProduceOptions {
    acks: i16,
    /// Keys and values are text, not base64.
    text: bool,
    /// An idempotent producer's (id, epoch, first sequence).
    producer: Option<(i64, i16, i32)>,
}

fn produce_options(request: &HttpRequest) -> Result<ProduceOptions, HttpResponse> {
    let acks: i16 = match request.query.get("acks").map(String::as_str) {
        None | Some("all") | Some("-1") => -1,
        Some("1") => 1,
        Some("0") => 0,
        Some(other) => {
            return Err(HttpResponse::error(
                400,
                ResponseError::InvalidRequiredAcks.code(),
                format!("acks must be 0, 1 or all, not {other:?}"),
            ))
        }
    };
    let text = match request.query.get("encoding").map(String::as_str) {
        None | Some("base64") => false,
        Some("text") => true,
        Some(other) => {
            return Err(HttpResponse::error(
                400,
                -1,
                format!("encoding must be base64 or text, not {other:?}"),
            ))
        }
    };
    let producer = producer_of(request)?;
    if producer.is_some() && acks != -1 {
        return Err(HttpResponse::error(
            400,
            ResponseError::InvalidRequiredAcks.code(),
            "an idempotent request needs acks=all",
        ));
    }
    Ok(ProduceOptions {
        acks,
        text,
        producer,
    })
}

/// The request's messages with their partitions, and whether the body was
/// one message (answered as one) rather than a list.
fn decode_messages(
    shard: &Shard,
    topic: &str,
    request: &HttpRequest,
    text: bool,
) -> Result<(Vec<Message>, bool), HttpResponse> {
    let (messages, single) = match parse::<MessagesIn>(&request.body)? {
        MessagesIn::Batch { records } => (records, false),
        MessagesIn::One(one) => (vec![one], true),
    };
    if messages.is_empty() || messages.len() > RECORDS_PER_REQUEST_MAX {
        return Err(HttpResponse::error(
            400,
            -1,
            format!("1 to {RECORDS_PER_REQUEST_MAX} records per request"),
        ));
    }
    let partitions = match shard.cluster.view.borrow().metadata.topic_by_name(topic) {
        Ok(t) => t.partitions.len() as u32,
        Err(_) => {
            return Err(kafka_error(
                ResponseError::UnknownTopicOrPartition.code(),
                format!("no topic {topic}"),
            ))
        }
    };
    let keyless = KEYLESS_NEXT.fetch_add(1, Ordering::Relaxed) % partitions.max(1);
    let timestamp = crate::runtime::clock::wall_ms();
    let mut decoded = Vec::with_capacity(messages.len());
    for (i, m) in messages.into_iter().enumerate() {
        match decode_message(m, text, (partitions, keyless), timestamp) {
            Ok(message) => decoded.push(message),
            Err(why) => return Err(HttpResponse::error(400, -1, format!("record {i}: {why}"))),
        }
    }
    Ok((decoded, single))
}

/// Writes the messages as one batch per partition, in the order they
/// came, here or on the partition's leader: each message's offset (-1
/// for acks=0) or its partition's error code.
async fn write_by_partition(
    shard: &Rc<Shard>,
    topic: &str,
    decoded: &[Message],
    options: &ProduceOptions,
) -> Result<Vec<Result<i64, Code>>, HttpResponse> {
    let mut by_partition: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    for (i, m) in decoded.iter().enumerate() {
        by_partition.entry(m.partition).or_default().push(i);
    }
    if options.producer.is_some() && by_partition.len() > 1 {
        return Err(HttpResponse::error(
            400,
            -1,
            "an idempotent request writes to one partition (its sequence is that partition's)",
        ));
    }
    let acks = options.acks;
    let mut answers: Vec<Result<i64, Code>> = vec![Err(-1); decoded.len()];
    for (partition, indexes) in by_partition {
        let batch = encode(decoded, &indexes, options.producer)
            .map_err(|why| HttpResponse::error(500, -1, why))?;
        let (code, base) = match shard.cluster.leader_elsewhere(topic, partition) {
            Some(leader) => {
                super::forward::produce(
                    &shard.cluster,
                    leader,
                    topic,
                    partition,
                    batch,
                    acks,
                    PRODUCE_TIMEOUT,
                )
                .await
            }
            None => produce_here(shard, topic, partition, batch, acks).await,
        };
        for (n, i) in indexes.into_iter().enumerate() {
            answers[i] = if code == 0 {
                Ok(if acks == 0 { -1 } else { base + n as i64 })
            } else {
                Err(code)
            };
        }
    }
    Ok(answers)
}

/// The produce answer: one message's offset, or every message's.
fn produce_answer(
    decoded: &[Message],
    answers: &[Result<i64, Code>],
    single: bool,
) -> HttpResponse {
    let entry = |i: usize| match answers[i] {
        Ok(offset) => json!({
            "partition": decoded[i].partition,
            "offset": offset,
            "timestamp": decoded[i].record.timestamp,
        }),
        Err(code) => json!({
            "partition": decoded[i].partition,
            "error_code": code,
            "message": error_text(code),
        }),
    };
    let failed = answers.iter().find_map(|a| a.err());
    if single {
        return match failed {
            Some(code) => kafka_error(code, error_text(code)),
            None => HttpResponse::json(200, &entry(0)),
        };
    }
    let status = failed.map_or(200, status_for);
    let offsets: Vec<Value> = (0..decoded.len()).map(entry).collect();
    HttpResponse::json(status, &json!({ "offsets": offsets }))
}

fn decode_message(
    message: MessageIn,
    text: bool,
    (partitions, keyless): (u32, u32),
    timestamp: i64,
) -> Result<Message, String> {
    let bytes = |field: &str, value: Option<String>| -> Result<Option<Bytes>, String> {
        match value {
            None => Ok(None),
            Some(v) if text => Ok(Some(Bytes::from(v.into_bytes()))),
            Some(v) => base64::engine::general_purpose::STANDARD
                .decode(v.as_bytes())
                .map(|b| Some(Bytes::from(b)))
                .map_err(|e| format!("{field} is not base64 ({e}); use encoding=text for text")),
        }
    };
    let key = bytes("key", message.key)?;
    let value = bytes("value", message.value)?;
    if key.is_none() && value.is_none() {
        return Err("a record needs a key or a value".into());
    }
    let mut headers = Vec::with_capacity(message.headers.len());
    for (name, v) in message.headers {
        headers.push((name, bytes("header", v)?));
    }
    let partition = match (message.partition, &key) {
        (Some(p), _) if p < 0 || p as u32 >= partitions => {
            return Err(format!("partition {p} not in 0..{partitions}"))
        }
        (Some(p), _) => p,
        // As the Java client's default partitioner: Kafka producers and
        // this API put a key on the same partition.
        (None, Some(key)) => client::partitioner::partition_for_key(key, partitions) as i32,
        (None, None) => keyless as i32,
    };
    Ok(Message {
        partition,
        record: ProducerRecord {
            key,
            value,
            timestamp,
            headers,
        },
    })
}

/// One v2 batch of the messages at `indexes` (the client's encoder), an
/// idempotent producer's when `producer` (id, epoch, first sequence) is
/// given.
fn encode(
    messages: &[Message],
    indexes: &[usize],
    producer: Option<(i64, i16, i32)>,
) -> Result<Bytes, String> {
    let records: Vec<ProducerRecord> = indexes
        .iter()
        .map(|i| messages[*i].record.clone())
        .collect();
    let producer = producer.map(|(producer_id, epoch, first_sequence)| ProducerSequence {
        producer_id,
        epoch,
        first_sequence,
    });
    encode_batch_as(&records, Compression::None, producer).map_err(|e| e.to_string())
}

/// Appends a batch to a partition this broker leads: (error code, base offset).
async fn produce_here(
    shard: &Shard,
    topic: &str,
    partition: i32,
    records: Bytes,
    acks: i16,
) -> (Code, i64) {
    let started = std::time::Instant::now();
    let route = shard.cluster.route_by_name(topic, partition);
    let acks_wanted = Acks::from_field(acks).unwrap_or(Acks::All);
    let appended = shard
        .partitions
        .on_led_partition(route, move |owner, led| {
            Box::pin(async move {
                // The batch was built here, for this append alone: taken
                // over, not copied.
                let records = RecordSet::built(BytesMut::from(records));
                owner
                    .produce(led, records, acks_wanted, PRODUCE_TIMEOUT, None)
                    .await
            })
        })
        .await;
    shard.metrics.produce(acks, started.elapsed());
    match appended {
        Ok(appended) => (0, appended.base_offset.0),
        Err(code) => (code, -1),
    }
}
