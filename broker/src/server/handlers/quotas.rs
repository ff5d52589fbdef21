//! DescribeClientQuotas and AlterClientQuotas v0-1 (KIP-546): the client
//! quotas in the metadata, changed through the controller. Reading them
//! needs DESCRIBE_CONFIGS on the cluster, changing them ALTER_CONFIGS.

use std::rc::Rc;

use control::model::acls::Operation;
use control::model::quotas::{check_quota, EntityName, QuotaEntity};
use control::service::ControllerRequest;
use kafka_protocol::messages::alter_client_quotas_request::EntityData as AlterEntity;
use kafka_protocol::messages::alter_client_quotas_response::{
    EntityData as AlteredEntity, EntryData as AlteredEntry,
};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::describe_client_quotas_response::{
    EntityData as DescribedEntity, EntryData as DescribedEntry, ValueData,
};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::access::{Caller, CLUSTER_DENIED};
use super::{respond, HandlerError, Outcome};
use crate::cluster::controller::controller_error;
use crate::kafka::bounds::{check_alter_client_quotas, check_describe_client_quotas};
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::server::shard::Shard;

/// DescribeClientQuotas versions served.
pub const DESCRIBE_VERSIONS: (i16, i16) = (0, 1);
/// AlterClientQuotas versions served.
pub const ALTER_VERSIONS: (i16, i16) = (0, 1);

const USER: &str = "user";
const CLIENT_ID: &str = "client-id";
/// Component match types: a name, the default, any that is set.
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn name_of(part: &EntityName) -> Option<StrBytes> {
    match part {
        EntityName::Default => None,
        EntityName::Named(name) => Some(text(name)),
    }
}

/// Whether a component filter selects an entity's part.
fn selects(component: &ComponentData, part: &Option<EntityName>) -> bool {
    match (component.match_type, part) {
        (_, None) => false,
        (MATCH_EXACT, Some(EntityName::Named(name))) => {
            component._match.as_deref() == Some(name.as_str())
        }
        (MATCH_EXACT, Some(EntityName::Default)) => false,
        (MATCH_DEFAULT, Some(part)) => *part == EntityName::Default,
        (_, Some(_)) => true,
    }
}

/// Answers DescribeClientQuotas.
pub async fn describe(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: DescribeClientQuotasRequest = checked(request, check_describe_client_quotas)?;
    if !caller.may_cluster(Operation::DescribeConfigs) {
        let refused = DescribeClientQuotasResponse::default()
            .with_error_code(CLUSTER_DENIED)
            .with_error_message(Some(text("needs DESCRIBE_CONFIGS on the cluster")));
        return respond(request, &refused);
    }
    let view = shard.cluster.view.borrow();
    let entries = view
        .metadata
        .client_quotas
        .iter()
        .filter(|(entity, _)| {
            let parts = [(USER, &entity.user), (CLIENT_ID, &entity.client_id)];
            let wanted = decoded.components.iter().all(|c| {
                parts
                    .iter()
                    .any(|(kind, part)| c.entity_type.as_str() == *kind && selects(c, part))
            });
            let set = parts.iter().filter(|(_, part)| part.is_some()).count();
            wanted && (!decoded.strict || set == decoded.components.len())
        })
        .map(|(entity, values)| {
            let mut parts = Vec::new();
            if let Some(user) = &entity.user {
                parts.push(
                    DescribedEntity::default()
                        .with_entity_type(text(USER))
                        .with_entity_name(name_of(user)),
                );
            }
            if let Some(client) = &entity.client_id {
                parts.push(
                    DescribedEntity::default()
                        .with_entity_type(text(CLIENT_ID))
                        .with_entity_name(name_of(client)),
                );
            }
            let values = values
                .iter()
                .map(|(key, value)| {
                    ValueData::default()
                        .with_key(text(key))
                        .with_value(*value as f64)
                })
                .collect();
            DescribedEntry::default()
                .with_entity(parts)
                .with_values(values)
        })
        .collect();
    respond(
        request,
        &DescribeClientQuotasResponse::default().with_entries(Some(entries)),
    )
}

/// The entity an AlterClientQuotas entry names, or why it is not one.
fn entity_of(parts: &[AlterEntity]) -> Result<QuotaEntity, String> {
    let mut entity = QuotaEntity {
        user: None,
        client_id: None,
    };
    for part in parts {
        let name = match &part.entity_name {
            None => EntityName::Default,
            Some(name) => EntityName::Named(name.to_string()),
        };
        let slot = match part.entity_type.as_str() {
            USER => &mut entity.user,
            CLIENT_ID => &mut entity.client_id,
            other => return Err(format!("entity type {other:?}: user or client-id")),
        };
        if slot.replace(name).is_some() {
            return Err(format!(
                "entity type {} named twice",
                part.entity_type.as_str()
            ));
        }
    }
    Ok(entity)
}

/// Answers AlterClientQuotas: each entry's changes checked, then made
/// together through the controller (unless validate_only).
pub async fn alter(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: AlterClientQuotasRequest = checked(request, check_alter_client_quotas)?;
    let allowed = caller.may_cluster(Operation::AlterConfigs);
    let mut entries = Vec::new();
    for entry in &decoded.entries {
        let outcome = match allowed {
            false => Err((
                CLUSTER_DENIED,
                "needs ALTER_CONFIGS on the cluster".to_string(),
            )),
            true => alter_entry(shard, entry, decoded.validate_only).await,
        };
        let (code, message) = match outcome {
            Ok(()) => (0, None),
            Err((code, why)) => (code, Some(text(&why))),
        };
        let entity = entry
            .entity
            .iter()
            .map(|p| {
                AlteredEntity::default()
                    .with_entity_type(p.entity_type.clone())
                    .with_entity_name(p.entity_name.clone())
            })
            .collect();
        entries.push(
            AlteredEntry::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_entity(entity),
        );
    }
    respond(
        request,
        &AlterClientQuotasResponse::default().with_entries(entries),
    )
}

async fn alter_entry(
    shard: &Shard,
    entry: &kafka_protocol::messages::alter_client_quotas_request::EntryData,
    validate_only: bool,
) -> Result<(), (Code, String)> {
    let invalid = |why: String| (ResponseError::InvalidRequest.code(), why);
    let entity = entity_of(&entry.entity).map_err(invalid)?;
    let mut changes = Vec::new();
    for op in &entry.ops {
        let value = match op.remove {
            true => None,
            false if op.value >= 1.0 && op.value.fract() == 0.0 && op.value <= u64::MAX as f64 => {
                Some(op.value as u64)
            }
            false => {
                return Err(invalid(format!(
                    "{}: a whole number of bytes per second, at least 1",
                    op.key.as_str()
                )))
            }
        };
        check_quota(&entity, op.key.as_str(), value).map_err(|e| invalid(e.to_string()))?;
        changes.push((op.key.to_string(), value));
    }
    if validate_only || changes.is_empty() {
        return Ok(());
    }
    let wanted = changes.clone();
    let request = ControllerRequest::AlterClientQuotas {
        entity: entity.clone(),
        changes,
    };
    shard
        .cluster
        .call_controller(request)
        .await
        .map_err(|e| controller_error(&e))?;
    shard
        .cluster
        .catch_up(|m| {
            wanted.iter().all(|(key, value)| {
                m.client_quotas
                    .get(&entity)
                    .and_then(|q| q.get(key))
                    .copied()
                    == *value
            })
        })
        .await;
    Ok(())
}
