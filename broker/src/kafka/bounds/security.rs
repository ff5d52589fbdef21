//! Bounds walks of the authentication and user APIs: SaslHandshake,
//! SaslAuthenticate, DescribeUserScramCredentials and
//! AlterUserScramCredentials.

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::bounds::tests::encoded;
    use bytes::Bytes;
    use kafka_protocol::messages::alter_user_scram_credentials_request::{
        ScramCredentialDeletion, ScramCredentialUpsertion,
    };
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    use kafka_protocol::messages::{
        AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
        SaslAuthenticateRequest, SaslHandshakeRequest,
    };
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
        // Forged: a count of 2^28 elements, a 2 GiB byte string.
        assert!(check_alter_user_scram_credentials(&[0xff, 0xff, 0xff, 0xff, 0x01], 0).is_err());
        assert!(check_sasl_authenticate(&[0x7f, 0xff, 0xff, 0xff], 0).is_err());
        assert!(check_describe_user_scram_credentials(&[0xff, 0xff, 0xff, 0x0f], 0).is_err());
    }
}
