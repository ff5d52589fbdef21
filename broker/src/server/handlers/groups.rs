//! FindCoordinator and the membership APIs (JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup): decode, run on the group's coordinator shard
//! (`crate::coordinator`), encode.

use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest, HeartbeatResponse,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, SyncGroupRequest,
    SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::access::{Caller, GROUP_DENIED, TXN_ID_DENIED};
use super::{respond, HandlerError, Outcome};
use crate::groups::membership::{Join, Joined};
use crate::kafka::bounds;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::server::shard::Shard;
use control::model::acls::Operation;

/// FindCoordinator versions served (batched keys from v4).
pub const FIND_COORDINATOR_VERSIONS: (i16, i16) = (0, 6);
/// JoinGroup versions served.
pub const JOIN_GROUP_VERSIONS: (i16, i16) = (0, 9);
/// SyncGroup versions served.
pub const SYNC_GROUP_VERSIONS: (i16, i16) = (0, 5);
/// Heartbeat versions served.
pub const HEARTBEAT_VERSIONS: (i16, i16) = (0, 4);
/// LeaveGroup versions served (batched members from v3).
pub const LEAVE_GROUP_VERSIONS: (i16, i16) = (0, 5);

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// A broker's id, host and port.
type Endpoint = (i32, String, i32);

/// The broker coordinating `key` (a group, key type 0; a transactional
/// id, key type 1), at its address on `listener`.
fn coordinator_of(
    shard: &Shard,
    key_type: i8,
    key: &str,
    listener: &str,
) -> Result<Endpoint, Code> {
    let (broker, _) = match key_type {
        0 => shard.cluster.group_coordinator(key)?,
        _ => shard.cluster.transaction_coordinator(key)?,
    };
    let address = shard
        .cluster
        .client_endpoint(broker, listener)
        .ok_or(ResponseError::CoordinatorNotAvailable.code())?;
    let (host, port) = address
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h.to_string(), p.parse().ok()?)))
        .ok_or(ResponseError::CoordinatorNotAvailable.code())?;
    Ok((broker.0, host, port))
}

/// Answers FindCoordinator for groups and transactional ids. Up to v3 a request names one key, from v4 a list; both are answered
/// from one list and laid out for the version.
pub async fn find_coordinator(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: FindCoordinatorRequest = checked(request, bounds::check_find_coordinator)?;
    let keys: Vec<String> = if version >= 4 {
        decoded
            .coordinator_keys
            .iter()
            .map(|k| k.to_string())
            .collect()
    } else {
        vec![decoded.key.to_string()]
    };
    let mut found = find_each(shard, decoded.key_type, &keys, &caller.listener).await;
    for (key, found) in keys.iter().zip(found.iter_mut()) {
        if decoded.key_type == 0 && !caller.may_group(Operation::Describe, key) {
            *found = Err((GROUP_DENIED, "not authorized to describe this group"));
        }
        if decoded.key_type == 1 && !caller.may_transactional_id(Operation::Describe, key) {
            *found = Err((
                TXN_ID_DENIED,
                "not authorized to describe this transactional id",
            ));
        }
    }
    let answer = if version >= 4 {
        coordinators_layout(keys, found)
    } else {
        one_key_layout(version, found)
    };
    respond(request, &answer)
}

/// A key's coordinator, or why there is none.
type Found = Result<Endpoint, (Code, &'static str)>;

/// Each key's coordinator (creating the coordinator's topic on first use).
async fn find_each(shard: &Shard, key_type: i8, keys: &[String], listener: &str) -> Vec<Found> {
    let ensured = match key_type {
        0 => crate::coordinator::ensure_offsets_topic(&shard.cluster).await,
        1 => crate::txn_coordinator::ensure_state_topic(&shard.cluster).await,
        _ => Err(ResponseError::InvalidRequest.code()),
    };
    keys.iter()
        .map(|key| {
            if !(0..=1).contains(&key_type) {
                return Err((
                    ResponseError::InvalidRequest.code(),
                    "key type: 0 (group) or 1 (transaction)",
                ));
            }
            if key.is_empty() {
                let code = match key_type {
                    0 => ResponseError::InvalidGroupId.code(),
                    _ => ResponseError::InvalidRequest.code(),
                };
                return Err((code, "empty key"));
            }
            ensured.map_err(|c| (c, "no coordinator topic"))?;
            coordinator_of(shard, key_type, key, listener)
                .map_err(|c| (c, "coordinator not available"))
        })
        .collect()
}

/// The v4+ layout: one entry per key.
fn coordinators_layout(keys: Vec<String>, found: Vec<Found>) -> FindCoordinatorResponse {
    let coordinators = keys
        .into_iter()
        .zip(found)
        .map(|(key, found)| {
            let entry = Coordinator::default().with_key(text(key));
            match found {
                Ok((node, host, port)) => entry
                    .with_node_id(BrokerId(node))
                    .with_host(text(host))
                    .with_port(port),
                Err((code, why)) => entry
                    .with_node_id(BrokerId(-1))
                    .with_port(-1)
                    .with_error_code(code)
                    .with_error_message(Some(text(why))),
            }
        })
        .collect();
    FindCoordinatorResponse::default().with_coordinators(coordinators)
}

/// The v0-v3 layout: the one key's coordinator at the top.
fn one_key_layout(version: i16, found: Vec<Found>) -> FindCoordinatorResponse {
    let answer = FindCoordinatorResponse::default();
    match found.into_iter().next().expect("one key") {
        Ok((node, host, port)) => answer
            .with_node_id(BrokerId(node))
            .with_host(text(host))
            .with_port(port),
        Err((code, why)) => {
            let failed = answer
                .with_error_code(code)
                .with_node_id(BrokerId(-1))
                .with_port(-1);
            if version >= 1 {
                failed.with_error_message(Some(text(why)))
            } else {
                failed
            }
        }
    }
}

fn failed_join(code: Code) -> Joined {
    Joined::failed(code, "")
}

/// Answers JoinGroup, once the join phase completes (bounded by the
/// group's rebalance timeout).
pub async fn join_group(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: JoinGroupRequest = checked(request, bounds::check_join_group)?;
    let group = decoded.group_id.to_string();
    let join = if !caller.may_group(Operation::Read, &group) {
        Err(GROUP_DENIED)
    } else if group.is_empty() {
        Err(ResponseError::InvalidGroupId.code())
    } else {
        join_of(shard, request, &decoded, caller.group_host)
    };
    let joined = match join {
        Err(code) => failed_join(code),
        Ok(join) => {
            let key = group.clone();
            shard
                .coordinator
                .on_group(&key, failed_join, move |partition| {
                    Box::pin(async move { partition.join(&group, join).await })
                })
                .await
        }
    };
    respond(request, &join_answer(version, &decoded, joined))
}

/// The join a request asks for, or INVALID_SESSION_TIMEOUT when its
/// session timeout is outside the broker's range (or its rebalance
/// timeout negative).
fn join_of(
    shard: &Shard,
    request: &Request,
    decoded: &JoinGroupRequest,
    client_host: &str,
) -> Result<Join, Code> {
    let version = request.header.request_api_version;
    let session = decoded.session_timeout_ms;
    let rebalance = if version >= 1 {
        decoded.rebalance_timeout_ms
    } else {
        session
    };
    let config = &shard.cluster.config;
    let session_range =
        config.group_min_session_timeout_ms as i64..=config.group_max_session_timeout_ms as i64;
    if !session_range.contains(&(session as i64)) || rebalance < 0 {
        return Err(ResponseError::InvalidSessionTimeout.code());
    }
    Ok(Join {
        member_id: decoded.member_id.to_string(),
        instance_id: decoded.group_instance_id.as_ref().map(|i| i.to_string()),
        client_id: request
            .header
            .client_id
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default(),
        client_host: client_host.to_string(),
        protocol_type: decoded.protocol_type.to_string(),
        protocols: decoded
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
        session_timeout: Duration::from_millis(session as u64),
        rebalance_timeout: Duration::from_millis(rebalance as u64),
        require_known_member_id: version >= 4,
    })
}

/// The JoinGroup answer for `version`.
fn join_answer(version: i16, decoded: &JoinGroupRequest, joined: Joined) -> JoinGroupResponse {
    let members = joined
        .members
        .into_iter()
        .map(|(id, instance, metadata)| {
            let member = JoinGroupResponseMember::default()
                .with_member_id(text(id))
                .with_metadata(metadata);
            if version >= 5 {
                member.with_group_instance_id(instance.map(text))
            } else {
                member
            }
        })
        .collect();
    let mut answer = JoinGroupResponse::default()
        .with_error_code(joined.error)
        .with_generation_id(joined.generation)
        .with_protocol_name(Some(text(joined.protocol.unwrap_or_default())))
        .with_leader(text(joined.leader))
        .with_member_id(text(joined.member_id))
        .with_members(members);
    if version >= 7 {
        answer = answer.with_protocol_type(Some(decoded.protocol_type.clone()));
    }
    if version >= 9 {
        answer = answer.with_skip_assignment(joined.skip_assignment);
    }
    answer
}

/// Answers SyncGroup: the member's assignment, once the leader sent it.
pub async fn sync_group(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: SyncGroupRequest = checked(request, bounds::check_sync_group)?;
    let group = decoded.group_id.to_string();
    if !caller.may_group(Operation::Read, &group) {
        return respond(
            request,
            &SyncGroupResponse::default().with_error_code(GROUP_DENIED),
        );
    }
    let member = decoded.member_id.to_string();
    let instance = decoded.group_instance_id.as_ref().map(|i| i.to_string());
    let generation = decoded.generation_id;
    let assignments: Vec<(String, Bytes)> = decoded
        .assignments
        .iter()
        .map(|a| (a.member_id.to_string(), a.assignment.clone()))
        .collect();
    let protocol_type = decoded.protocol_type.as_ref().map(|t| t.to_string());
    let protocol_name = decoded.protocol_name.as_ref().map(|n| n.to_string());
    let key = group.clone();
    let (code, assignment) = shard
        .coordinator
        .on_group(
            &key,
            |code| (code, Bytes::new()),
            move |partition| {
                Box::pin(async move {
                    partition
                        .sync(
                            &group,
                            &member,
                            instance.as_deref(),
                            generation,
                            (
                                assignments,
                                (protocol_type.as_deref(), protocol_name.as_deref()),
                            ),
                        )
                        .await
                })
            },
        )
        .await;
    let mut answer = SyncGroupResponse::default()
        .with_error_code(code)
        .with_assignment(assignment);
    if version >= 5 {
        answer = answer
            .with_protocol_type(decoded.protocol_type.clone())
            .with_protocol_name(decoded.protocol_name.clone());
    }
    respond(request, &answer)
}

/// Answers Heartbeat.
pub async fn heartbeat(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: HeartbeatRequest = checked(request, bounds::check_heartbeat)?;
    let group = decoded.group_id.to_string();
    if !caller.may_group(Operation::Read, &group) {
        return respond(
            request,
            &HeartbeatResponse::default().with_error_code(GROUP_DENIED),
        );
    }
    let member = decoded.member_id.to_string();
    let instance = decoded.group_instance_id.as_ref().map(|i| i.to_string());
    let generation = decoded.generation_id;
    let key = group.clone();
    let code = shard
        .coordinator
        .on_group(
            &key,
            |code| code,
            move |partition| {
                Box::pin(async move {
                    partition.heartbeat(&group, &member, instance.as_deref(), generation)
                })
            },
        )
        .await;
    respond(request, &HeartbeatResponse::default().with_error_code(code))
}

/// Answers LeaveGroup (one member before v3, a list from v3).
pub async fn leave_group(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: LeaveGroupRequest = checked(request, bounds::check_leave_group)?;
    let group = decoded.group_id.to_string();
    if !caller.may_group(Operation::Read, &group) {
        return respond(
            request,
            &LeaveGroupResponse::default().with_error_code(GROUP_DENIED),
        );
    }
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        decoded
            .members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|i| i.to_string()),
                )
            })
            .collect()
    } else {
        vec![(decoded.member_id.to_string(), None)]
    };
    let count = members.len();
    let asked = members.clone();
    let key = group.clone();
    let codes: Result<Vec<Code>, Code> = shard
        .coordinator
        .on_group(&key, Err, move |partition| {
            Box::pin(async move { Ok(partition.leave(&group, members).await) })
        })
        .await;
    let mut answer = LeaveGroupResponse::default();
    match codes {
        Err(code) => answer = answer.with_error_code(code),
        Ok(codes) if version >= 3 => {
            answer.members = asked
                .into_iter()
                .zip(codes)
                .map(|((member, instance), code)| {
                    MemberResponse::default()
                        .with_member_id(text(member))
                        .with_group_instance_id(instance.map(text))
                        .with_error_code(code)
                })
                .collect();
        }
        Ok(codes) => {
            debug_assert_eq!(codes.len(), count);
            answer = answer.with_error_code(codes.first().copied().unwrap_or(0));
        }
    }
    respond(request, &answer)
}
