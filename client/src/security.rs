//! How a client protects its connections and proves who it is: TLS (see
//! [`crate::tls`]) and a SASL login (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512),
//! the settings Kafka clients call security.protocol, sasl.mechanism,
//! sasl.username and sasl.password.

use crate::scram::Mechanism;
use crate::tls::ClientTls;

/// A connection's security: none by default (PLAINTEXT).
#[derive(Clone, Debug, Default)]
pub struct Security {
    /// TLS, if the broker's port speaks it.
    pub tls: Option<ClientTls>,
    /// A SASL login, if the broker's port asks for one.
    pub sasl: Option<SaslLogin>,
}

impl Security {
    /// TLS only (or nothing).
    pub fn tls(tls: Option<ClientTls>) -> Security {
        Security { tls, sasl: None }
    }
}

/// A SASL mechanism a client logs in with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaslMechanism {
    /// The password itself (only over TLS, or on a trusted network).
    Plain,
    /// SCRAM: the password never crosses the network.
    Scram(Mechanism),
}

impl SaslMechanism {
    /// The mechanism called `name` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
    pub fn from_name(name: &str) -> Option<SaslMechanism> {
        if name.eq_ignore_ascii_case("PLAIN") {
            return Some(SaslMechanism::Plain);
        }
        Mechanism::from_name(name).map(SaslMechanism::Scram)
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
        }
    }
}

/// Who a client logs in as.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslLogin {
    /// The mechanism.
    pub mechanism: SaslMechanism,
    /// The user name.
    pub user: String,
    /// The password (never printed).
    pub password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslLogin")
            .field("mechanism", &self.mechanism)
            .field("user", &self.user)
            .field("password", &"***")
            .finish()
    }
}
