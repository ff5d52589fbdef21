//! SASL/SCRAM credentials in the metadata: what a broker needs to check a
//! user's proof (RFC 5802's StoredKey and ServerKey, with the salt and
//! iteration count), never the password nor anything a client could log
//! in with. They live in the metadata log so every broker knows every
//! user once the change commits.

use rkyv::{Archive, Deserialize, Serialize};

use crate::model::error::MetadataError;

/// Kafka's bounds on SCRAM iterations (fewer is too cheap to guess,
/// more costs every login more than it protects).
pub const SCRAM_ITERATIONS_MIN: u32 = 4096;
/// See [`SCRAM_ITERATIONS_MIN`].
pub const SCRAM_ITERATIONS_MAX: u32 = 16384;
/// The longest user name accepted (bytes).
pub const USER_NAME_MAX_BYTES: usize = 256;
/// The longest salt accepted (bytes).
pub const SALT_MAX_BYTES: usize = 256;

/// A SCRAM mechanism, with Kafka's wire codes (AlterUserScramCredentials).
#[derive(
    Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[rkyv(derive(Debug, PartialEq, Eq, PartialOrd, Ord))]
pub enum ScramMechanism {
    /// SCRAM-SHA-256 (code 1).
    Sha256,
    /// SCRAM-SHA-512 (code 2).
    Sha512,
}

impl ScramMechanism {
    /// Both, in Kafka's order.
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The SASL mechanism name.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism called `name` (as SaslHandshake names it).
    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Kafka's code for it.
    pub fn code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    /// The mechanism of a Kafka code.
    pub fn from_code(code: i8) -> Option<ScramMechanism> {
        Self::ALL.into_iter().find(|m| m.code() == code)
    }

    /// The length of its hash, and so of its keys.
    pub fn key_len(self) -> usize {
        match self {
            ScramMechanism::Sha256 => 32,
            ScramMechanism::Sha512 => 64,
        }
    }
}

impl std::fmt::Display for ScramMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One user's credential for one mechanism.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct ScramCredential {
    /// The user name.
    pub user: String,
    /// The mechanism.
    pub mechanism: ScramMechanism,
    /// The salt the password was salted with.
    pub salt: Vec<u8>,
    /// PBKDF2 iterations.
    pub iterations: u32,
    /// H(ClientKey): checks the client's proof.
    pub stored_key: Vec<u8>,
    /// HMAC(SaltedPassword, "Server Key"): signs the server's answer.
    pub server_key: Vec<u8>,
}

/// Checks a user name: not empty, not too long, no control characters.
pub fn check_user_name(user: &str) -> Result<(), MetadataError> {
    if user.is_empty() || user.len() > USER_NAME_MAX_BYTES || user.chars().any(char::is_control) {
        return Err(MetadataError::InvalidCredential(format!(
            "user name {user:?}: 1 to {USER_NAME_MAX_BYTES} bytes, no control characters"
        )));
    }
    Ok(())
}

/// Checks a credential's shape before it is stored.
pub fn check_credential(credential: &ScramCredential) -> Result<(), MetadataError> {
    check_user_name(&credential.user)?;
    let invalid = |why: String| Err(MetadataError::InvalidCredential(why));
    if !(SCRAM_ITERATIONS_MIN..=SCRAM_ITERATIONS_MAX).contains(&credential.iterations) {
        return invalid(format!(
            "{} iterations: between {SCRAM_ITERATIONS_MIN} and {SCRAM_ITERATIONS_MAX}",
            credential.iterations
        ));
    }
    if credential.salt.is_empty() || credential.salt.len() > SALT_MAX_BYTES {
        return invalid(format!("a salt of 1 to {SALT_MAX_BYTES} bytes"));
    }
    let len = credential.mechanism.key_len();
    if credential.stored_key.len() != len || credential.server_key.len() != len {
        return invalid(format!("{} keys are {len} bytes", credential.mechanism));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential() -> ScramCredential {
        ScramCredential {
            user: "alice".into(),
            mechanism: ScramMechanism::Sha512,
            salt: vec![1; 16],
            iterations: 4096,
            stored_key: vec![2; 64],
            server_key: vec![3; 64],
        }
    }

    #[test]
    fn credentials_outside_kafkas_bounds_are_refused() {
        check_credential(&credential()).unwrap();
        let cases: [fn(&mut ScramCredential); 6] = [
            |c| c.iterations = 4095,
            |c| c.iterations = 16385,
            |c| c.salt.clear(),
            |c| c.stored_key.truncate(32),
            |c| c.user.clear(),
            |c| c.user = "a\nb".into(),
        ];
        for change in cases {
            let mut c = credential();
            change(&mut c);
            assert!(check_credential(&c).is_err(), "{c:?}");
        }
    }

    #[test]
    fn mechanisms_map_to_kafkas_names_and_codes() {
        for m in ScramMechanism::ALL {
            assert_eq!(ScramMechanism::from_name(m.name()), Some(m));
            assert_eq!(ScramMechanism::from_code(m.code()), Some(m));
        }
        assert_eq!(ScramMechanism::Sha512.code(), 2);
        assert_eq!(ScramMechanism::from_name("PLAIN"), None);
        assert_eq!(ScramMechanism::from_code(0), None);
    }
}
