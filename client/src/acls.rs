//! Admin calls for ACLs: CreateAcls, DescribeAcls and DeleteAcls (v1+),
//! with Kafka's codes (resource type 2 topic, 3 group, 4 cluster, 5
//! transactional id; pattern 3 literal, 4 prefixed; filters: 1 any, and
//! pattern 2 match).

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;

use crate::cluster::Cluster;
use crate::connection::ClientError;

/// One ACL, in Kafka's codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl {
    /// Resource type code.
    pub resource_type: i8,
    /// Resource name (or prefix).
    pub resource_name: String,
    /// Pattern type code.
    pub pattern: i8,
    /// `User:name`.
    pub principal: String,
    /// An IP address or `*`.
    pub host: String,
    /// Operation code.
    pub operation: i8,
    /// Permission code (2 deny, 3 allow).
    pub permission: i8,
}

/// A pattern of ACLs: None (or code 1) matches any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclPattern {
    /// Resource type code (1: any).
    pub resource_type: i8,
    /// Resource name.
    pub resource_name: Option<String>,
    /// Pattern type code (1 any, 2 match, 3 literal, 4 prefixed).
    pub pattern: i8,
    /// Principal.
    pub principal: Option<String>,
    /// Host.
    pub host: Option<String>,
    /// Operation code (1: any).
    pub operation: i8,
    /// Permission code (1: any).
    pub permission: i8,
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn refused(code: i16, message: Option<&StrBytes>) -> ClientError {
    ClientError::Refused(code, message.map(|m| m.to_string()).unwrap_or_default())
}

impl Cluster {
    /// Creates `acls` (all or, per ACL, its refusal).
    pub async fn create_acls(&self, acls: &[Acl]) -> Result<(), ClientError> {
        let creations = acls
            .iter()
            .map(|a| {
                AclCreation::default()
                    .with_resource_type(a.resource_type)
                    .with_resource_name(text(&a.resource_name))
                    .with_resource_pattern_type(a.pattern)
                    .with_principal(text(&a.principal))
                    .with_host(text(&a.host))
                    .with_operation(a.operation)
                    .with_permission_type(a.permission)
            })
            .collect();
        let response = self
            .call_any(&CreateAclsRequest::default().with_creations(creations))
            .await?;
        match response.results.iter().find(|r| r.error_code != 0) {
            Some(r) => Err(refused(r.error_code, r.error_message.as_ref())),
            None => Ok(()),
        }
    }

    /// The ACLs `pattern` selects.
    pub async fn describe_acls(&self, pattern: &AclPattern) -> Result<Vec<Acl>, ClientError> {
        let request = DescribeAclsRequest::default()
            .with_resource_type_filter(pattern.resource_type)
            .with_resource_name_filter(pattern.resource_name.as_deref().map(text))
            .with_pattern_type_filter(pattern.pattern)
            .with_principal_filter(pattern.principal.as_deref().map(text))
            .with_host_filter(pattern.host.as_deref().map(text))
            .with_operation(pattern.operation)
            .with_permission_type(pattern.permission);
        let response = self.call_any(&request).await?;
        if response.error_code != 0 {
            return Err(refused(
                response.error_code,
                response.error_message.as_ref(),
            ));
        }
        let mut acls = Vec::new();
        for resource in response.resources {
            for acl in resource.acls {
                acls.push(Acl {
                    resource_type: resource.resource_type,
                    resource_name: resource.resource_name.to_string(),
                    pattern: resource.pattern_type,
                    principal: acl.principal.to_string(),
                    host: acl.host.to_string(),
                    operation: acl.operation,
                    permission: acl.permission_type,
                });
            }
        }
        Ok(acls)
    }

    /// Deletes the ACLs `pattern` selects; how many.
    pub async fn delete_acls(&self, pattern: &AclPattern) -> Result<usize, ClientError> {
        let filter = DeleteAclsFilter::default()
            .with_resource_type_filter(pattern.resource_type)
            .with_resource_name_filter(pattern.resource_name.as_deref().map(text))
            .with_pattern_type_filter(pattern.pattern)
            .with_principal_filter(pattern.principal.as_deref().map(text))
            .with_host_filter(pattern.host.as_deref().map(text))
            .with_operation(pattern.operation)
            .with_permission_type(pattern.permission);
        let response = self
            .call_any(&DeleteAclsRequest::default().with_filters(vec![filter]))
            .await?;
        let mut deleted = 0;
        for result in &response.filter_results {
            if result.error_code != 0 {
                return Err(refused(result.error_code, result.error_message.as_ref()));
            }
            deleted += result.matching_acls.len();
        }
        Ok(deleted)
    }
}
