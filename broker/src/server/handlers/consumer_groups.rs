//! ConsumerGroupHeartbeat (KIP-848): decode, check, run on the group's
//! coordinator shard (`crate::coordinator::consumer_groups`), encode.

use std::collections::BTreeSet;
use std::rc::Rc;

use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;

use super::access::{Caller, GROUP_DENIED, TOPIC_DENIED};
use super::{respond, HandlerError, Outcome};
use crate::groups::modern::consumer::{self, Answer, Partition, Request as Heartbeat};
use crate::kafka::bounds;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::server::shard::Shard;
use control::model::acls::Operation;

/// ConsumerGroupHeartbeat versions served (v1: the regex, client-made ids).
pub const HEARTBEAT_VERSIONS: (i16, i16) = (0, 1);

/// Answers ConsumerGroupHeartbeat.
pub async fn heartbeat(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: ConsumerGroupHeartbeatRequest =
        checked(request, bounds::check_consumer_group_heartbeat)?;
    let group = decoded.group_id.to_string();
    let mut beat = heartbeat_of(request, &decoded, caller.group_host);
    let version = request.header.request_api_version;
    if version == 0 && beat.member_epoch == 0 && beat.member_id.is_empty() {
        // v0 clients may join without an id: the broker makes one (v1
        // clients make their own, KIP-1082).
        beat.member_id = uuid::Builder::from_random_bytes(rand::random())
            .into_uuid()
            .to_string();
    }
    let answered = if !caller.may_group(Operation::Read, &group) {
        Err(GROUP_DENIED)
    } else if !caller.may_subscribe(beat.subscribed_topic_names.as_deref()) {
        Err(TOPIC_DENIED)
    } else {
        match consumer::validate(&group, &beat) {
            Err(code) => Err(code),
            Ok(()) => {
                let key = group.clone();
                shard
                    .coordinator
                    .on_group(&key, Err, move |partition| {
                        Box::pin(async move { partition.consumer_heartbeat(&group, beat).await })
                    })
                    .await
            }
        }
    };
    let timeouts = shard
        .cluster
        .consumer_group_timeouts(decoded.group_id.as_str());
    let interval = timeouts.heartbeat_interval_ms as i32;
    respond(request, &answer(answered, &decoded, interval))
}

/// The request as the group's rules take it.
fn heartbeat_of(
    request: &Request,
    decoded: &ConsumerGroupHeartbeatRequest,
    host: &str,
) -> Heartbeat {
    let text = |s: &Option<StrBytes>| s.as_ref().map(|s| s.to_string());
    Heartbeat {
        member_id: decoded.member_id.to_string(),
        member_epoch: decoded.member_epoch,
        instance_id: text(&decoded.instance_id),
        rack_id: text(&decoded.rack_id),
        rebalance_timeout_ms: decoded.rebalance_timeout_ms,
        subscribed_topic_names: decoded
            .subscribed_topic_names
            .as_ref()
            .map(|names| names.iter().map(|n| n.to_string()).collect()),
        subscribed_topic_regex: text(&decoded.subscribed_topic_regex),
        server_assignor: text(&decoded.server_assignor),
        owned: decoded.topic_partitions.as_ref().map(|topics| {
            let each = topics.iter().flat_map(|t| {
                let id = *t.topic_id.as_bytes();
                t.partitions.iter().map(move |p| (id, *p))
            });
            each.collect()
        }),
        client_id: request
            .header
            .client_id
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default(),
        client_host: host.to_string(),
    }
}

fn answer(
    answered: Result<Answer, Code>,
    decoded: &ConsumerGroupHeartbeatRequest,
    interval: i32,
) -> ConsumerGroupHeartbeatResponse {
    match answered {
        Err(code) => ConsumerGroupHeartbeatResponse::default()
            .with_error_code(code)
            .with_member_id(Some(decoded.member_id.clone()))
            .with_member_epoch(-1)
            .with_heartbeat_interval_ms(interval),
        Ok(answer) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(StrBytes::from_string(answer.member_id)))
            .with_member_epoch(answer.member_epoch)
            .with_heartbeat_interval_ms(interval)
            .with_assignment(answer.assignment.as_ref().map(assignment)),
    }
}

fn assignment(partitions: &BTreeSet<Partition>) -> Assignment {
    let topics = consumer::by_topic(partitions).into_iter().map(|t| {
        TopicPartitions::default()
            .with_topic_id(uuid::Uuid::from_bytes(t.topic_id))
            .with_partitions(t.partitions)
    });
    Assignment::default().with_topic_partitions(topics.collect())
}
