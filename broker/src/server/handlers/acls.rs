//! CreateAcls, DescribeAcls and DeleteAcls v1-3: the ACLs in the metadata,
//! changed through the controller (so every broker checks the same ones
//! once a change commits). Changing them needs ALTER on the cluster,
//! reading them DESCRIBE (super users have both).

use std::rc::Rc;

use control::model::acls::{
    AclBinding, AclFilter, NameMatch, Operation, PatternType, Permission, ResourceType,
};
use control::service::ControllerRequest;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::access::{Caller, CLUSTER_DENIED};
use super::{respond, HandlerError, Outcome};
use crate::cluster::controller::controller_error;
use crate::kafka::bounds::{check_create_acls, check_delete_acls, check_describe_acls};
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::server::shard::Shard;

/// CreateAcls versions served.
pub const CREATE_VERSIONS: (i16, i16) = (1, 3);
/// DescribeAcls versions served.
pub const DESCRIBE_VERSIONS: (i16, i16) = (1, 3);
/// DeleteAcls versions served.
pub const DELETE_VERSIONS: (i16, i16) = (1, 3);

/// Kafka's "any" code in filters, and MATCH for pattern types.
const ANY: i8 = 1;
const MATCH: i8 = 2;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// An ACL from its wire fields, or why it is not one.
fn binding(
    (resource_type, name, pattern): (i8, &str, i8),
    (principal, host): (&str, &str),
    (operation, permission): (i8, i8),
) -> Result<AclBinding, String> {
    Ok(AclBinding {
        resource_type: ResourceType::from_code(resource_type)
            .ok_or(format!("resource type {resource_type}"))?,
        resource_name: name.to_string(),
        pattern: PatternType::from_code(pattern).ok_or(format!("pattern type {pattern}"))?,
        principal: principal.to_string(),
        // An address as the checks see clients' (canonical, IPv4 unmapped).
        host: match host.parse::<std::net::IpAddr>() {
            Ok(ip) => ip.to_canonical().to_string(),
            Err(_) => host.to_string(),
        },
        operation: Operation::from_code(operation).ok_or(format!("operation {operation}"))?,
        permission: Permission::from_code(permission).ok_or(format!("permission {permission}"))?,
    })
}

/// Answers CreateAcls: each ACL checked, the valid ones stored in one
/// change.
pub async fn create(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: CreateAclsRequest = checked(request, check_create_acls)?;
    let allowed = caller.may_cluster(Operation::Alter);
    let mut outcomes: Vec<Result<AclBinding, (Code, String)>> = decoded
        .creations
        .iter()
        .map(|c| {
            if !allowed {
                return Err((CLUSTER_DENIED, "needs ALTER on the cluster".into()));
            }
            let acl = binding(
                (c.resource_type, &c.resource_name, c.resource_pattern_type),
                (&c.principal, &c.host),
                (c.operation, c.permission_type),
            )
            .map_err(|why| (ResponseError::InvalidRequest.code(), why))?;
            control::model::acls::check_acl(&acl)
                .map_err(|e| (ResponseError::InvalidRequest.code(), e.to_string()))?;
            Ok(acl)
        })
        .collect();
    let valid: Vec<AclBinding> = outcomes.iter().filter_map(|o| o.clone().ok()).collect();
    if !valid.is_empty() {
        let stored = valid.clone();
        let committed = shard
            .cluster
            .call_controller(ControllerRequest::CreateAcls(stored))
            .await;
        if let Err(e) = committed {
            let failure = controller_error(&e);
            for outcome in outcomes.iter_mut().filter(|o| o.is_ok()) {
                *outcome = Err(failure.clone());
            }
        } else {
            shard
                .cluster
                .catch_up(|m| valid.iter().all(|acl| m.acls.contains(acl)))
                .await;
        }
    }
    let results = outcomes
        .into_iter()
        .map(|outcome| match outcome {
            Ok(_) => AclCreationResult::default(),
            Err((code, message)) => AclCreationResult::default()
                .with_error_code(code)
                .with_error_message(Some(text(&message))),
        })
        .collect();
    respond(
        request,
        &CreateAclsResponse::default().with_results(results),
    )
}

/// A filter from its wire fields (ANY = 1 is "any"; MATCH = 2 as pattern).
fn filter(
    (resource_type, name, pattern): (i8, Option<&str>, i8),
    (principal, host): (Option<&str>, Option<&str>),
    (operation, permission): (i8, i8),
) -> Result<AclFilter, String> {
    Ok(AclFilter {
        resource_type: any_or(resource_type, "resource type", ResourceType::from_code)?,
        resource_name: name.map(str::to_string),
        pattern: match pattern {
            ANY => NameMatch::Any,
            MATCH => NameMatch::Match,
            code => NameMatch::Exactly(
                PatternType::from_code(code).ok_or(format!("pattern type {code}"))?,
            ),
        },
        principal: principal.map(str::to_string),
        host: host.map(str::to_string),
        operation: any_or(operation, "operation", Operation::from_code)?,
        permission: any_or(permission, "permission", Permission::from_code)?,
    })
}

/// None for ANY, else the value of `code` (or why there is none).
fn any_or<T>(code: i8, what: &str, parse: fn(i8) -> Option<T>) -> Result<Option<T>, String> {
    match code {
        ANY => Ok(None),
        code => parse(code).map(Some).ok_or(format!("{what} {code}")),
    }
}

/// Answers DescribeAcls: the ACLs the filter selects, by resource.
pub async fn describe(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let d: DescribeAclsRequest = checked(request, check_describe_acls)?;
    if !caller.may_cluster(Operation::Describe) {
        let refused = DescribeAclsResponse::default()
            .with_error_code(CLUSTER_DENIED)
            .with_error_message(Some(text("needs DESCRIBE on the cluster")));
        return respond(request, &refused);
    }
    let wanted = filter(
        (
            d.resource_type_filter,
            d.resource_name_filter.as_deref(),
            d.pattern_type_filter,
        ),
        (d.principal_filter.as_deref(), d.host_filter.as_deref()),
        (d.operation, d.permission_type),
    );
    let wanted = match wanted {
        Ok(wanted) => wanted,
        Err(why) => {
            let refused = DescribeAclsResponse::default()
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_error_message(Some(text(&why)));
            return respond(request, &refused);
        }
    };
    let view = shard.cluster.view.borrow();
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    // The set is ordered by resource first, so each resource's ACLs are
    // consecutive.
    for acl in view.metadata.acls.iter().filter(|a| wanted.selects(a)) {
        let same = resources.last().is_some_and(|r| {
            r.resource_type == acl.resource_type.code()
                && r.resource_name.as_str() == acl.resource_name
                && r.pattern_type == acl.pattern.code()
        });
        if !same {
            resources.push(
                DescribeAclsResource::default()
                    .with_resource_type(acl.resource_type.code())
                    .with_resource_name(text(&acl.resource_name))
                    .with_pattern_type(acl.pattern.code()),
            );
        }
        let description = AclDescription::default()
            .with_principal(text(&acl.principal))
            .with_host(text(&acl.host))
            .with_operation(acl.operation.code())
            .with_permission_type(acl.permission.code());
        resources.last_mut().expect("pushed").acls.push(description);
    }
    respond(
        request,
        &DescribeAclsResponse::default().with_resources(resources),
    )
}

/// Answers DeleteAcls: per filter, the ACLs it removed.
pub async fn delete(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: DeleteAclsRequest = checked(request, check_delete_acls)?;
    let allowed = caller.may_cluster(Operation::Alter);
    let filters: Vec<Result<AclFilter, (Code, String)>> = decoded
        .filters
        .iter()
        .map(|f| {
            if !allowed {
                return Err((CLUSTER_DENIED, "needs ALTER on the cluster".to_string()));
            }
            filter(
                (
                    f.resource_type_filter,
                    f.resource_name_filter.as_deref(),
                    f.pattern_type_filter,
                ),
                (f.principal_filter.as_deref(), f.host_filter.as_deref()),
                (f.operation, f.permission_type),
            )
            .map_err(|why| (ResponseError::InvalidRequest.code(), why))
        })
        .collect();
    // What each filter selects now is what it removes.
    let matched: Vec<Vec<AclBinding>> = {
        let view = shard.cluster.view.borrow();
        filters
            .iter()
            .map(|f| match f {
                Ok(f) => view
                    .metadata
                    .acls
                    .iter()
                    .filter(|a| f.selects(a))
                    .cloned()
                    .collect(),
                Err(_) => Vec::new(),
            })
            .collect()
    };
    let valid: Vec<AclFilter> = filters.iter().filter_map(|f| f.clone().ok()).collect();
    let mut failure = None;
    if matched.iter().any(|m| !m.is_empty()) {
        match shard
            .cluster
            .call_controller(ControllerRequest::DeleteAcls(valid))
            .await
        {
            Ok(()) => {
                let gone: Vec<&AclBinding> = matched.iter().flatten().collect();
                shard
                    .cluster
                    .catch_up(|m| gone.iter().all(|acl| !m.acls.contains(*acl)))
                    .await;
            }
            Err(e) => failure = Some(controller_error(&e)),
        }
    }
    let results = filters
        .into_iter()
        .zip(matched)
        .map(|(f, matched)| match f.err().or_else(|| failure.clone()) {
            Some((code, why)) => DeleteAclsFilterResult::default()
                .with_error_code(code)
                .with_error_message(Some(text(&why))),
            None => DeleteAclsFilterResult::default()
                .with_matching_acls(matched.iter().map(matching).collect()),
        })
        .collect();
    respond(
        request,
        &DeleteAclsResponse::default().with_filter_results(results),
    )
}

fn matching(acl: &AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(acl.resource_type.code())
        .with_resource_name(text(&acl.resource_name))
        .with_pattern_type(acl.pattern.code())
        .with_principal(text(&acl.principal))
        .with_host(text(&acl.host))
        .with_operation(acl.operation.code())
        .with_permission_type(acl.permission.code())
}
