//! SASL authentication, sans-IO: the mechanisms (PLAIN, SCRAM-SHA-256,
//! SCRAM-SHA-512), one exchange of each, a connection's session (which
//! requests it may send, when it must authenticate again), and the HTTP
//! API's Basic logins against the same users. The credentials are the
//! metadata's; the Kafka messages that carry the exchange are the
//! server's.

pub mod basic;
mod plain;
mod scram;
pub mod session;

use control::{Metadata, ScramCredential, ScramMechanism};

pub use session::Session;

/// A SASL mechanism the broker can serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaslMechanism {
    /// PLAIN: the password, checked against the SCRAM credential.
    Plain,
    /// SCRAM with SHA-256 or SHA-512.
    Scram(ScramMechanism),
}

impl SaslMechanism {
    /// Every mechanism served, in the order they are offered.
    pub const ALL: [SaslMechanism; 3] = [
        SaslMechanism::Scram(ScramMechanism::Sha512),
        SaslMechanism::Scram(ScramMechanism::Sha256),
        SaslMechanism::Plain,
    ];

    /// Its name in SaslHandshake and in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
        }
    }

    /// The mechanism called `name`.
    pub fn from_name(name: &str) -> Option<SaslMechanism> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// Why an authentication failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The client's messages do not follow the mechanism.
    Malformed(String),
    /// Unknown user, wrong password: told apart only in the broker's log.
    Credentials(String),
    /// Not allowed in the session's state (e.g. no handshake first).
    State(String),
    /// A mechanism the listener does not offer.
    Unsupported(String),
}

impl Failure {
    fn malformed(why: &str) -> Failure {
        Failure::Malformed(why.to_string())
    }

    fn credentials(why: &str) -> Failure {
        Failure::Credentials(why.to_string())
    }
}

impl From<client::scram::ScramError> for Failure {
    fn from(e: client::scram::ScramError) -> Failure {
        Failure::Malformed(e.to_string())
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Malformed(why) => write!(f, "malformed exchange: {why}"),
            Failure::Credentials(why) => write!(f, "invalid credentials ({why})"),
            Failure::State(why) => write!(f, "out of order: {why}"),
            Failure::Unsupported(name) => write!(f, "mechanism {name:?} is not enabled"),
        }
    }
}

/// One authentication exchange of a mechanism.
pub struct Exchange {
    mechanism: SaslMechanism,
    scram: Option<scram::ScramServer>,
}

/// What one message of an exchange gives.
pub struct Step {
    /// The answer to send the client.
    pub message: Vec<u8>,
    /// The user, once authenticated.
    pub user: Option<String>,
}

impl Exchange {
    /// A new exchange of `mechanism`.
    pub fn new(mechanism: SaslMechanism) -> Exchange {
        let scram = match mechanism {
            SaslMechanism::Scram(m) => Some(scram::ScramServer::new(hash_of(m))),
            SaslMechanism::Plain => None,
        };
        Exchange { mechanism, scram }
    }

    /// The mechanism.
    pub fn mechanism(&self) -> SaslMechanism {
        self.mechanism
    }

    /// Takes the client's next message, checking it against `metadata`'s
    /// credentials.
    pub fn step(&mut self, message: &[u8], metadata: &Metadata) -> Result<Step, Failure> {
        match (self.mechanism, &mut self.scram) {
            (SaslMechanism::Scram(m), Some(server)) => {
                let step = server.step(message, |user| {
                    metadata.scram_credential(user, m).ok().cloned()
                })?;
                Ok(Step {
                    message: step.message,
                    user: step.user,
                })
            }
            _ => {
                let user = plain::authenticate(message, |user| strongest(metadata, user))?;
                Ok(Step {
                    message: Vec::new(),
                    user: Some(user),
                })
            }
        }
    }
}

/// The user's SCRAM-SHA-512 credential, else its SCRAM-SHA-256 one.
fn strongest(metadata: &Metadata, user: &str) -> Option<ScramCredential> {
    [ScramMechanism::Sha512, ScramMechanism::Sha256]
        .into_iter()
        .find_map(|m| metadata.scram_credential(user, m).ok().cloned())
}

/// The client crate's name for a mechanism's hash.
pub fn hash_of(mechanism: ScramMechanism) -> client::scram::Mechanism {
    match mechanism {
        ScramMechanism::Sha256 => client::scram::Mechanism::Sha256,
        ScramMechanism::Sha512 => client::scram::Mechanism::Sha512,
    }
}

/// Iterations for credentials the broker makes itself (Kafka's tools'
/// default).
pub const DEFAULT_ITERATIONS: u32 = 4096;

/// The credential a salted password gives (what AlterUserScramCredentials
/// carries: the password itself never reaches the broker).
pub fn credential_from_salted(
    user: &str,
    mechanism: ScramMechanism,
    salt: Vec<u8>,
    iterations: u32,
    salted_password: &[u8],
) -> ScramCredential {
    let (stored_key, server_key) = hash_of(mechanism).stored_keys(salted_password);
    ScramCredential {
        user: user.to_string(),
        mechanism,
        salt,
        iterations,
        stored_key,
        server_key,
    }
}

/// A credential for `password`, with a fresh random salt.
pub fn credential_for_password(
    user: &str,
    mechanism: ScramMechanism,
    password: &str,
) -> ScramCredential {
    let salt = new_salt();
    let salted = hash_of(mechanism).salted_password(password.as_bytes(), &salt, DEFAULT_ITERATIONS);
    credential_from_salted(user, mechanism, salt, DEFAULT_ITERATIONS, &salted)
}

/// 24 random bytes.
pub fn new_salt() -> Vec<u8> {
    client::scram::unbase64(&client::scram::new_nonce()).expect("our own base64")
}
