//! ShareGroupHeartbeat (KIP-932): decode, check, run on the group's
//! coordinator shard (`crate::coordinator::share_groups`), encode.

use std::collections::BTreeSet;
use std::rc::Rc;

use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};

use super::access::{Caller, GROUP_DENIED, TOPIC_DENIED};
use super::{respond, HandlerError, Outcome};
use crate::groups::modern::consumer::{by_topic, Partition};
use crate::groups::modern::share_group::{self, ShareAnswer, ShareRequest};
use crate::kafka::bounds;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::server::shard::Shard;
use control::model::acls::Operation;

/// ShareGroupHeartbeat versions served (v1: Kafka 4.2's and librdkafka's).
pub const HEARTBEAT_VERSIONS: (i16, i16) = (1, 1);

/// Answers ShareGroupHeartbeat.
pub async fn heartbeat(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: ShareGroupHeartbeatRequest =
        checked(request, bounds::check_share_group_heartbeat)?;
    let group = decoded.group_id.to_string();
    let beat = heartbeat_of(request, &decoded, caller.group_host);
    let answered = if !caller.may_group(Operation::Read, &group) {
        Err(GROUP_DENIED)
    } else if !caller.may_subscribe(beat.subscribed_topic_names.as_deref()) {
        Err(TOPIC_DENIED)
    } else {
        match share_group::validate(&group, &beat) {
            Err(code) => Err(code),
            Ok(()) => {
                let key = group.clone();
                shard
                    .coordinator
                    .on_group(&key, Err, move |partition| {
                        Box::pin(async move { partition.share_heartbeat(&group, beat).await })
                    })
                    .await
            }
        }
    };
    let settings = shard
        .cluster
        .share_group_settings(&decoded.group_id.to_string());
    let interval = settings.heartbeat_interval_ms;
    respond(request, &answer(answered, &decoded, interval as i32))
}

/// The request as the group's rules take it.
fn heartbeat_of(
    request: &Request,
    decoded: &ShareGroupHeartbeatRequest,
    host: &str,
) -> ShareRequest {
    let client_id = request.header.client_id.as_ref();
    ShareRequest {
        member_id: decoded.member_id.to_string(),
        member_epoch: decoded.member_epoch,
        rack_id: decoded.rack_id.as_ref().map(|r| r.to_string()),
        subscribed_topic_names: (decoded.subscribed_topic_names.as_ref())
            .map(|names| names.iter().map(|n| n.to_string()).collect()),
        client_id: client_id.map(|c| c.to_string()).unwrap_or_default(),
        client_host: host.to_string(),
    }
}

fn answer(
    answered: Result<ShareAnswer, Code>,
    decoded: &ShareGroupHeartbeatRequest,
    heartbeat_interval_ms: i32,
) -> ShareGroupHeartbeatResponse {
    let member_id = Some(decoded.member_id.clone());
    let base = ShareGroupHeartbeatResponse::default()
        .with_member_id(member_id)
        .with_heartbeat_interval_ms(heartbeat_interval_ms);
    match answered {
        Err(code) => base.with_error_code(code).with_member_epoch(-1),
        Ok(answer) => base
            .with_member_epoch(answer.member_epoch)
            .with_assignment(answer.assignment.as_ref().map(assignment)),
    }
}

fn assignment(partitions: &BTreeSet<Partition>) -> Assignment {
    let topics = by_topic(partitions).into_iter().map(|t| {
        TopicPartitions::default()
            .with_topic_id(uuid::Uuid::from_bytes(t.topic_id))
            .with_partitions(t.partitions)
    });
    Assignment::default().with_topic_partitions(topics.collect())
}
