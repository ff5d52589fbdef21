//! Admin calls for client quotas: DescribeClientQuotas and
//! AlterClientQuotas (KIP-546). An entity is a list of (type, name) with
//! type `user` or `client-id` and no name for the default.

use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};
use kafka_protocol::protocol::StrBytes;

use crate::cluster::Cluster;
use crate::connection::ClientError;

/// A quota entity: (type, name or None for the default).
pub type Entity = Vec<(String, Option<String>)>;

/// One entity's quotas, as described.
#[derive(Debug, Clone, PartialEq)]
pub struct Quotas {
    /// Who.
    pub entity: Entity,
    /// (key, value).
    pub values: Vec<(String, f64)>,
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

impl Cluster {
    /// Sets (Some) or removes (None) quotas of `entity`.
    pub async fn alter_quotas(
        &self,
        entity: &Entity,
        changes: &[(String, Option<f64>)],
    ) -> Result<(), ClientError> {
        let entity = entity
            .iter()
            .map(|(kind, name)| {
                EntityData::default()
                    .with_entity_type(text(kind))
                    .with_entity_name(name.as_deref().map(text))
            })
            .collect();
        let ops = changes
            .iter()
            .map(|(key, value)| {
                OpData::default()
                    .with_key(text(key))
                    .with_value(value.unwrap_or(0.0))
                    .with_remove(value.is_none())
            })
            .collect();
        let entry = EntryData::default().with_entity(entity).with_ops(ops);
        let response = self
            .call_any(&AlterClientQuotasRequest::default().with_entries(vec![entry]))
            .await?;
        match response.entries.iter().find(|e| e.error_code != 0) {
            Some(e) => Err(ClientError::Refused(
                e.error_code,
                e.error_message
                    .as_ref()
                    .map(|m| m.to_string())
                    .unwrap_or_default(),
            )),
            None => Ok(()),
        }
    }

    /// Every entity's quotas.
    pub async fn describe_quotas(&self) -> Result<Vec<Quotas>, ClientError> {
        let response = self
            .call_any(&DescribeClientQuotasRequest::default())
            .await?;
        if response.error_code != 0 {
            let message = response.error_message.map(|m| m.to_string());
            return Err(ClientError::Refused(
                response.error_code,
                message.unwrap_or_default(),
            ));
        }
        Ok(response
            .entries
            .unwrap_or_default()
            .into_iter()
            .map(|e| Quotas {
                entity: e
                    .entity
                    .iter()
                    .map(|p| {
                        (
                            p.entity_type.to_string(),
                            p.entity_name.as_ref().map(|n| n.to_string()),
                        )
                    })
                    .collect(),
                values: e
                    .values
                    .iter()
                    .map(|v| (v.key.to_string(), v.value))
                    .collect(),
            })
            .collect())
    }
}
