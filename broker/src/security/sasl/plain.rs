//! SASL PLAIN (RFC 4616): the password itself, checked against the SCRAM
//! credential the metadata holds (so PLAIN needs no second store of
//! secrets). Meant for TLS listeners only: on a plaintext one the password
//! crosses the network readable.

use client::scram::constant_time_eq;
use control::ScramCredential;

use super::Failure;

/// The longest PLAIN message accepted (authzid, user and password).
const MESSAGE_MAX_BYTES: usize = 1024;

/// Checks a PLAIN message; the user if the password matches.
/// `credential_of` finds the user's strongest SCRAM credential.
pub fn authenticate(
    message: &[u8],
    credential_of: impl Fn(&str) -> Option<ScramCredential>,
) -> Result<String, Failure> {
    if message.len() > MESSAGE_MAX_BYTES {
        return Err(Failure::malformed("PLAIN message too long"));
    }
    let mut fields = message.split(|b| *b == 0);
    let (Some(authzid), Some(user), Some(password), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(Failure::malformed("PLAIN is authzid NUL user NUL password"));
    };
    let user =
        std::str::from_utf8(user).map_err(|_| Failure::malformed("user name is not UTF-8"))?;
    if !authzid.is_empty() && authzid != user.as_bytes() {
        return Err(Failure::credentials(
            "an authorization id other than the user",
        ));
    }
    let Some(credential) = credential_of(user) else {
        spend_like_a_check(password);
        return Err(Failure::credentials("unknown user"));
    };
    check_password(&credential, password)?;
    Ok(user.to_string())
}

/// The work of checking a password, for a user that does not exist: the
/// answer takes as long as a wrong password's, so its time does not tell
/// which users exist.
pub fn spend_like_a_check(password: &[u8]) {
    let m = client::scram::Mechanism::Sha512;
    let salted = m.salted_password(
        password,
        b"no such user",
        control::model::credentials::SCRAM_ITERATIONS_MIN,
    );
    std::hint::black_box(salted);
}

/// Whether `password` is the one `credential` was made from (one PBKDF2
/// run: milliseconds, by design).
pub fn check_password(credential: &ScramCredential, password: &[u8]) -> Result<(), Failure> {
    let mechanism = super::hash_of(credential.mechanism);
    let salted = mechanism.salted_password(password, &credential.salt, credential.iterations);
    let (stored_key, _) = mechanism.stored_keys(&salted);
    if !constant_time_eq(&stored_key, &credential.stored_key) {
        return Err(Failure::credentials("wrong password"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::sasl::scram::tests::credential;
    use client::scram::Mechanism;

    #[test]
    fn the_password_is_checked_against_the_scram_credential() {
        let stored = credential("alice", "secret", Mechanism::Sha512);
        let lookup = |name: &str| (name == "alice").then(|| stored.clone());
        assert_eq!(authenticate(b"\0alice\0secret", lookup).unwrap(), "alice");
        assert_eq!(
            authenticate(b"alice\0alice\0secret", lookup).unwrap(),
            "alice"
        );
        for refused in [
            &b"\0alice\0guess"[..],
            b"\0bob\0secret",
            b"admin\0alice\0secret",
            b"alice\0secret",
            b"\0alice\0secret\0more",
        ] {
            assert!(
                authenticate(refused, lookup).is_err(),
                "{:?}",
                String::from_utf8_lossy(refused)
            );
        }
        assert!(authenticate(&vec![b'a'; 2000], lookup).is_err());
    }
}
