//! Bounds walks of the authentication, user and ACL APIs: SaslHandshake,
//! SaslAuthenticate, DescribeUserScramCredentials,
//! AlterUserScramCredentials, CreateAcls, DescribeAcls and DeleteAcls.

use super::{Walk, Walker};

/// SaslHandshake v0-1 (never flexible).
pub fn check_sasl_handshake(body: &[u8], _version: i16) -> Walk {
    let mut w = Walker::new(body, false);
    w.string()?; // mechanism
    w.end()
}

/// SaslAuthenticate v0-2 (flexible from v2).
pub fn check_sasl_authenticate(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 2);
    w.bytes()?; // auth_bytes
    w.tagged_fields()?;
    w.end()
}

/// DescribeUserScramCredentials v0 (flexible).
pub fn check_describe_user_scram_credentials(body: &[u8], _version: i16) -> Walk {
    let mut w = Walker::new(body, true);
    w.array(|w| {
        w.string()?; // name
        w.tagged_fields()
    })?;
    w.tagged_fields()?;
    w.end()
}

/// AlterUserScramCredentials v0 (flexible).
pub fn check_alter_user_scram_credentials(body: &[u8], _version: i16) -> Walk {
    let mut w = Walker::new(body, true);
    w.array(|w| {
        w.string()?; // name
        w.fixed(1)?; // mechanism
        w.tagged_fields()
    })?;
    w.array(|w| {
        w.string()?; // name
        w.fixed(1 + 4)?; // mechanism, iterations
        w.bytes()?; // salt
        w.bytes()?; // salted_password
        w.tagged_fields()
    })?;
    w.tagged_fields()?;
    w.end()
}

/// One ACL or ACL filter: type, name, pattern, principal, host, operation,
/// permission (the same shape in all three ACL APIs).
fn acl_fields(w: &mut Walker<'_>) -> Walk {
    w.fixed(1)?; // resource type
    w.string()?; // resource name (nullable in filters)
    w.fixed(1)?; // pattern type
    w.string()?; // principal
    w.string()?; // host
    w.fixed(1 + 1) // operation, permission
}

/// CreateAcls v1-3 (flexible from v2).
pub fn check_create_acls(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 2);
    w.array(|w| {
        acl_fields(w)?;
        w.tagged_fields()
    })?;
    w.tagged_fields()?;
    w.end()
}

/// DescribeAcls v1-3 (flexible from v2).
pub fn check_describe_acls(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 2);
    acl_fields(&mut w)?;
    w.tagged_fields()?;
    w.end()
}

/// DeleteAcls v1-3 (flexible from v2).
pub fn check_delete_acls(body: &[u8], version: i16) -> Walk {
    check_create_acls(body, version)
}

/// DescribeClientQuotas v0-1 (flexible from v1).
pub fn check_describe_client_quotas(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 1);
    w.array(|w| {
        w.string()?; // entity_type
        w.fixed(1)?; // match_type
        w.string()?; // match (nullable)
        w.tagged_fields()
    })?;
    w.fixed(1)?; // strict
    w.tagged_fields()?;
    w.end()
}

/// AlterClientQuotas v0-1 (flexible from v1).
pub fn check_alter_client_quotas(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 1);
    w.array(|w| {
        w.array(|w| {
            w.string()?; // entity_type
            w.string()?; // entity_name (nullable)
            w.tagged_fields()
        })?;
        w.array(|w| {
            w.string()?; // key
            w.fixed(8 + 1)?; // value, remove
            w.tagged_fields()
        })?;
        w.tagged_fields()
    })?;
    w.fixed(1)?; // validate_only
    w.tagged_fields()?;
    w.end()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::bounds::tests::encoded;
    use bytes::Bytes;
    use kafka_protocol::messages::alter_user_scram_credentials_request::{
        ScramCredentialDeletion, ScramCredentialUpsertion,
    };
    use kafka_protocol::messages::create_acls_request::AclCreation;
    use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    use kafka_protocol::messages::{
        AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
        SaslAuthenticateRequest, SaslHandshakeRequest,
    };
    use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
    use kafka_protocol::protocol::StrBytes;

    fn name(s: &'static str) -> StrBytes {
        StrBytes::from_static_str(s)
    }

    #[test]
    fn every_version_the_codec_writes_passes_and_forged_counts_do_not() {
        for version in 0..=1 {
            let handshake = SaslHandshakeRequest::default().with_mechanism(name("PLAIN"));
            check_sasl_handshake(&encoded(&handshake, version), version).unwrap();
        }
        for version in 0..=2 {
            let authenticate = SaslAuthenticateRequest::default()
                .with_auth_bytes(Bytes::from_static(b"n,,n=alice,r=abc"));
            check_sasl_authenticate(&encoded(&authenticate, version), version)
                .unwrap_or_else(|e| panic!("v{version}: {e}"));
        }
        for users in [
            None,
            Some(vec![UserName::default().with_name(name("alice"))]),
        ] {
            let describe = DescribeUserScramCredentialsRequest::default().with_users(users);
            check_describe_user_scram_credentials(&encoded(&describe, 0), 0).unwrap();
        }
        let alter = AlterUserScramCredentialsRequest::default()
            .with_deletions(vec![ScramCredentialDeletion::default()
                .with_name(name("bob"))
                .with_mechanism(1)])
            .with_upsertions(vec![ScramCredentialUpsertion::default()
                .with_name(name("alice"))
                .with_mechanism(2)
                .with_iterations(4096)
                .with_salt(Bytes::from_static(&[1; 16]))
                .with_salted_password(Bytes::from_static(&[2; 64]))]);
        check_alter_user_scram_credentials(&encoded(&alter, 0), 0).unwrap();
        for version in 1..=3 {
            let creation = AclCreation::default()
                .with_resource_type(2)
                .with_resource_name(name("orders"))
                .with_resource_pattern_type(3)
                .with_principal(name("User:alice"))
                .with_host(name("*"))
                .with_operation(4)
                .with_permission_type(3);
            let create = CreateAclsRequest::default().with_creations(vec![creation]);
            check_create_acls(&encoded(&create, version), version).unwrap();
            let describe = DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_resource_name_filter(None)
                .with_pattern_type_filter(1)
                .with_principal_filter(Some(name("User:alice")));
            check_describe_acls(&encoded(&describe, version), version).unwrap();
            let filter = DeleteAclsFilter::default()
                .with_resource_type_filter(2)
                .with_resource_name_filter(Some(name("orders")))
                .with_pattern_type_filter(3);
            let delete = DeleteAclsRequest::default().with_filters(vec![filter]);
            check_delete_acls(&encoded(&delete, version), version).unwrap();
        }
        assert!(check_create_acls(&[0x7f, 0xff, 0xff, 0xff], 1).is_err());
        for version in 0..=1 {
            use kafka_protocol::messages::alter_client_quotas_request::{
                EntityData, EntryData, OpData,
            };
            use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
            use kafka_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};
            let describe = DescribeClientQuotasRequest::default().with_components(vec![
                ComponentData::default()
                    .with_entity_type(name("user"))
                    .with_match_type(1),
            ]);
            check_describe_client_quotas(&encoded(&describe, version), version).unwrap();
            let alter =
                AlterClientQuotasRequest::default().with_entries(vec![EntryData::default()
                    .with_entity(vec![EntityData::default()
                        .with_entity_type(name("user"))
                        .with_entity_name(Some(name("alice")))])
                    .with_ops(vec![OpData::default()
                        .with_key(name("producer_byte_rate"))
                        .with_value(1024.0)])]);
            check_alter_client_quotas(&encoded(&alter, version), version).unwrap();
        }
        assert!(check_alter_client_quotas(&[0x7f, 0xff, 0xff, 0xff], 0).is_err());
        // Forged: a count of 2^28 elements, a 2 GiB byte string.
        assert!(check_alter_user_scram_credentials(&[0xff, 0xff, 0xff, 0xff, 0x01], 0).is_err());
        assert!(check_sasl_authenticate(&[0x7f, 0xff, 0xff, 0xff], 0).is_err());
        assert!(check_describe_user_scram_credentials(&[0xff, 0xff, 0xff, 0x0f], 0).is_err());
    }
}
