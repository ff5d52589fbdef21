//! HTTP Basic authentication (RFC 7617) against the SCRAM users: the HTTP
//! API's login, meant for HTTPS. Checking a password costs a PBKDF2 run
//! (milliseconds), and an HTTP client sends its password with every
//! request, so passwords already checked are remembered, keyed by a hash
//! of the user, the password and the credential's stored key (a changed
//! or deleted credential no longer matches; the password itself is not
//! kept).

use std::collections::HashSet;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use control::Metadata;

use super::{plain, strongest, Failure};

/// Checked logins remembered at most (then forgotten all at once).
pub const REMEMBERED_MAX: usize = 1024;

/// The logins checked so far.
#[derive(Default)]
pub struct BasicAuth {
    remembered: HashSet<Vec<u8>>,
}

impl BasicAuth {
    /// The user an `Authorization: Basic ...` header value proves, checked
    /// against `metadata`'s credentials.
    pub fn verify(&mut self, header: &str, metadata: &Metadata) -> Result<String, Failure> {
        let (user, password) = parse(header)?;
        let Some(credential) = strongest(metadata, &user) else {
            plain::spend_like_a_check(password.as_bytes());
            return Err(Failure::credentials("unknown user"));
        };
        let m = client::scram::Mechanism::Sha256;
        let key = m.hash(
            &[
                user.as_bytes(),
                b"\0",
                password.as_bytes(),
                b"\0",
                &credential.stored_key,
            ]
            .concat(),
        );
        if self.remembered.contains(&key) {
            return Ok(user);
        }
        plain::check_password(&credential, password.as_bytes())?;
        if self.remembered.len() >= REMEMBERED_MAX {
            self.remembered.clear();
        }
        self.remembered.insert(key);
        Ok(user)
    }
}

/// The user and password of a Basic header value.
fn parse(header: &str) -> Result<(String, String), Failure> {
    let encoded = header
        .strip_prefix("Basic ")
        .or_else(|| header.strip_prefix("basic "))
        .ok_or_else(|| Failure::malformed("not Basic authentication"))?;
    let decoded = BASE64
        .decode(encoded.trim())
        .map_err(|_| Failure::malformed("Basic credentials are not base64"))?;
    let text = String::from_utf8(decoded).map_err(|_| Failure::malformed("not UTF-8"))?;
    let (user, password) = text
        .split_once(':')
        .ok_or_else(|| Failure::malformed("Basic credentials are user:password"))?;
    Ok((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::sasl::scram::tests::credential;
    use client::scram::Mechanism;
    use control::MetadataRecord;

    fn header(user_password: &str) -> String {
        format!("Basic {}", BASE64.encode(user_password))
    }

    #[test]
    fn the_password_is_checked_once_and_a_changed_credential_is_checked_again() {
        let mut metadata = Metadata::default();
        let set = |m: &mut Metadata, password| {
            let record = credential("alice", password, Mechanism::Sha512);
            m.apply(&MetadataRecord::SetScramCredential(record))
                .unwrap();
        };
        set(&mut metadata, "secret");
        let mut auth = BasicAuth::default();
        assert_eq!(
            auth.verify(&header("alice:secret"), &metadata).unwrap(),
            "alice"
        );
        assert_eq!(auth.remembered.len(), 1);
        assert_eq!(
            auth.verify(&header("alice:secret"), &metadata).unwrap(),
            "alice"
        );
        assert_eq!(auth.remembered.len(), 1, "remembered, not checked again");
        for refused in ["alice:guess", "bob:secret", "alice", "Bearer x"] {
            let value = if refused.starts_with("Bearer") {
                refused.to_string()
            } else {
                header(refused)
            };
            assert!(auth.verify(&value, &metadata).is_err(), "{refused}");
        }
        assert!(auth.verify("Basic !!!", &metadata).is_err());
        // A new password: the old one no longer lets in, even remembered.
        set(&mut metadata, "changed");
        assert!(auth.verify(&header("alice:secret"), &metadata).is_err());
        assert!(auth.verify(&header("alice:changed"), &metadata).is_ok());
    }
}
