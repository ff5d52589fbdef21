//! ListGroups (every shard's groups, of both types), DescribeGroups (of
//! classic groups) and DeleteGroups (each group on its coordinator shard).

use std::rc::Rc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    GroupId, ListGroupsRequest, ListGroupsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::access::{Caller, GROUP_DENIED};
use super::{respond, HandlerError, Outcome};
use crate::coordinator::Listed;
use crate::groups::membership::GroupSnapshot;
use crate::kafka::bounds;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::server::shard::Shard;
use control::model::acls::Operation;

/// ListGroups versions served (state filter from v4, type filter from v5).
pub const LIST_GROUPS_VERSIONS: (i16, i16) = (0, 5);
/// DescribeGroups versions served.
pub const DESCRIBE_GROUPS_VERSIONS: (i16, i16) = (0, 5);
/// DeleteGroups versions served.
pub const DELETE_GROUPS_VERSIONS: (i16, i16) = (0, 2);

/// "Authorized operations not requested".
const OPERATIONS_UNKNOWN: i32 = i32::MIN;

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// Every group of every shard.
async fn all_groups(shard: &Shard) -> Vec<Listed> {
    let listed = shard
        .coordinator
        .on_every_shard(|coordinator| {
            Box::pin(async move {
                let mut listed = Vec::new();
                for partition in coordinator.all_partitions().await {
                    listed.extend(partition.list());
                }
                listed
            })
        })
        .await;
    let mut all = Vec::new();
    for shard_listed in listed {
        match shard_listed {
            Ok(listed) => all.extend(listed),
            Err(e) => tracing::warn!(error = %e, "cannot list a shard's groups"),
        }
    }
    all.sort_by(|a, b| a.group.cmp(&b.group));
    all
}

/// Answers ListGroups.
pub async fn list_groups(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: ListGroupsRequest = checked(request, bounds::check_list_groups)?;
    let states: Vec<String> = decoded
        .states_filter
        .iter()
        .map(|s| s.to_lowercase())
        .collect();
    let types: Vec<String> = decoded
        .types_filter
        .iter()
        .map(|s| s.to_lowercase())
        .collect();
    // DESCRIBE on the cluster lists every group; otherwise those the
    // caller may describe (Kafka's rule).
    let everything = caller.may_cluster(Operation::Describe);
    let groups = all_groups(shard)
        .await
        .into_iter()
        .filter(|g| everything || caller.may_group(Operation::Describe, &g.group))
        .filter(|g| states.is_empty() || states.contains(&g.state.to_lowercase()))
        .filter(|g| types.is_empty() || types.iter().any(|t| t == g.group_type))
        .map(|g| {
            let mut listed = ListedGroup::default()
                .with_group_id(GroupId(text(g.group)))
                .with_protocol_type(text(g.protocol_type));
            if version >= 4 {
                listed = listed.with_group_state(text(g.state));
            }
            if version >= 5 {
                listed = listed.with_group_type(text(g.group_type));
            }
            listed
        })
        .collect();
    respond(request, &ListGroupsResponse::default().with_groups(groups))
}

/// Answers DescribeGroups.
pub async fn describe_groups(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: DescribeGroupsRequest = checked(request, bounds::check_describe_groups)?;
    let mut described = Vec::new();
    for group in &decoded.groups {
        let id = group.to_string();
        let key = id.clone();
        let found: Result<Option<GroupSnapshot>, Code> =
            if !caller.may_group(Operation::Describe, &id) {
                Err(GROUP_DENIED)
            } else {
                shard
                    .coordinator
                    .on_group(&key, Err, move |partition| {
                        Box::pin(async move { Ok(partition.describe(&id)) })
                    })
                    .await
            };
        let mut entry = DescribedGroup::default().with_group_id(group.clone());
        if version >= 3 {
            entry = entry.with_authorized_operations(OPERATIONS_UNKNOWN);
        }
        entry = match found {
            Err(code) => entry.with_error_code(code).with_group_state(text("Dead")),
            Ok(None) => entry.with_group_state(text("Dead")),
            Ok(Some(snapshot)) => {
                let members = snapshot
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut member = DescribedGroupMember::default()
                            .with_member_id(text(m.member_id))
                            .with_client_id(text(m.client_id))
                            .with_client_host(text(m.client_host))
                            .with_member_metadata(m.subscription)
                            .with_member_assignment(m.assignment);
                        if version >= 4 {
                            member = member.with_group_instance_id(m.instance_id.map(text));
                        }
                        member
                    })
                    .collect();
                entry
                    .with_group_state(text(snapshot.state.name()))
                    .with_protocol_type(text(snapshot.protocol_type))
                    .with_protocol_data(text(snapshot.protocol.unwrap_or_default()))
                    .with_members(members)
            }
        };
        described.push(entry);
    }
    respond(
        request,
        &DescribeGroupsResponse::default().with_groups(described),
    )
}

/// Answers DeleteGroups: each group must have no members.
pub async fn delete_groups(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: DeleteGroupsRequest = checked(request, bounds::check_delete_groups)?;
    let mut results = Vec::new();
    for group in &decoded.groups_names {
        let id = group.to_string();
        let code = if !caller.may_group(Operation::Delete, &id) {
            GROUP_DENIED
        } else if id.is_empty() {
            ResponseError::InvalidGroupId.code()
        } else {
            let key = id.clone();
            shard
                .coordinator
                .on_group(
                    &key,
                    |code| code,
                    move |partition| Box::pin(async move { partition.delete_group(&id).await }),
                )
                .await
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(group.clone())
                .with_error_code(code),
        );
    }
    respond(
        request,
        &DeleteGroupsResponse::default().with_results(results),
    )
}
