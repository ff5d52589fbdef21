//! A connection's authentication session, as Kafka's brokers keep it:
//! before a client authenticates it may ask only ApiVersions, SaslHandshake
//! and then SaslAuthenticate; once authenticated, everything, until its
//! session expires (KIP-368, `connections_max_reauth_ms`), when it must
//! authenticate again on the same connection, with the same mechanism and
//! as the same user, before anything else is served. Sans-IO: the caller
//! gives the time.

use std::time::{Duration, Instant};

use control::Metadata;
use kafka_protocol::messages::ApiKey;

use super::{Exchange, Failure, SaslMechanism};

/// Where a session is.
enum State {
    /// Nothing yet: only ApiVersions and SaslHandshake.
    New,
    /// A handshake chose a mechanism: its exchange is under way.
    Exchanging(Exchange),
    /// Authenticated as `user` with `mechanism`, until `expires`.
    Authenticated(Authenticated),
    /// Authenticated, and authenticating again.
    Reauthenticating(Authenticated, Exchange),
}

/// Who a session authenticated, and until when.
#[derive(Clone, Debug)]
struct Authenticated {
    user: String,
    mechanism: SaslMechanism,
    expires: Option<Instant>,
}

/// What may happen to a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    /// Served as usual.
    Serve,
    /// Part of the authentication: the session answers it.
    Authenticate,
    /// Not allowed now: the connection is closed, for this reason.
    Refuse(&'static str),
}

/// What one SaslAuthenticate gives.
#[derive(Debug)]
pub struct Progress {
    /// The mechanism's answer.
    pub message: Vec<u8>,
    /// Set when the exchange succeeded: the user, and how long its session
    /// lasts in milliseconds (0: no limit), for the response.
    pub done: Option<(String, i64)>,
}

/// One connection's session.
pub struct Session {
    enabled: Vec<SaslMechanism>,
    lifetime: Option<Duration>,
    state: State,
    /// The exchange under way came from a SaslHandshake v0: its messages
    /// come as bare size-prefixed frames, not SaslAuthenticate requests.
    raw_tokens: bool,
}

impl Session {
    /// A session offering `enabled`, whose authentications last `lifetime`
    /// (None: as long as the connection).
    pub fn new(enabled: Vec<SaslMechanism>, lifetime: Option<Duration>) -> Session {
        Session {
            enabled,
            lifetime,
            state: State::New,
            raw_tokens: false,
        }
    }

    /// The authenticated user, if any.
    pub fn principal(&self) -> Option<&str> {
        match &self.state {
            State::Authenticated(a) | State::Reauthenticating(a, _) => Some(&a.user),
            _ => None,
        }
    }

    /// The names of the mechanisms offered.
    pub fn enabled_names(&self) -> Vec<&'static str> {
        self.enabled.iter().map(|m| m.name()).collect()
    }

    /// Whether a request of `api` may be served at `now`.
    pub fn admit(&self, api: ApiKey, now: Instant) -> Admission {
        match api {
            ApiKey::SaslHandshake | ApiKey::SaslAuthenticate => return Admission::Authenticate,
            ApiKey::ApiVersions => return Admission::Serve,
            _ => {}
        }
        match &self.state {
            State::New | State::Exchanging(_) => {
                Admission::Refuse("a request before authenticating")
            }
            State::Authenticated(a) | State::Reauthenticating(a, _) => {
                if a.expires.is_some_and(|at| now >= at) {
                    Admission::Refuse("a request after its session expired")
                } else {
                    Admission::Serve
                }
            }
        }
    }

    /// Whether the next frame is a bare token of the exchange (after a
    /// SaslHandshake v0) rather than a request.
    pub fn wants_raw_token(&self) -> bool {
        self.raw_tokens
            && matches!(
                self.state,
                State::Exchanging(_) | State::Reauthenticating(..)
            )
    }

    /// A SaslHandshake naming `mechanism`; `raw_tokens` for v0, whose
    /// exchange goes in bare frames.
    pub fn handshake(&mut self, mechanism: &str, raw_tokens: bool) -> Result<(), Failure> {
        self.raw_tokens = raw_tokens;
        let chosen = SaslMechanism::from_name(mechanism)
            .filter(|m| self.enabled.contains(m))
            .ok_or_else(|| Failure::Unsupported(mechanism.to_string()))?;
        self.state = match std::mem::replace(&mut self.state, State::New) {
            State::New => State::Exchanging(Exchange::new(chosen)),
            State::Authenticated(a) if a.mechanism == chosen => {
                State::Reauthenticating(a, Exchange::new(chosen))
            }
            State::Authenticated(a) => {
                self.state = State::Authenticated(a);
                return Err(Failure::State(
                    "re-authentication must use the session's mechanism".into(),
                ));
            }
            other => {
                self.state = other;
                return Err(Failure::State("a handshake during an exchange".into()));
            }
        };
        Ok(())
    }

    /// A SaslAuthenticate carrying `message`. A failure ends the session
    /// (the caller closes the connection).
    pub fn authenticate(
        &mut self,
        message: &[u8],
        metadata: &Metadata,
        now: Instant,
    ) -> Result<Progress, Failure> {
        let (previous, mut exchange) = match std::mem::replace(&mut self.state, State::New) {
            State::Exchanging(exchange) => (None, exchange),
            State::Reauthenticating(a, exchange) => (Some(a), exchange),
            other => {
                self.state = other;
                return Err(Failure::State(
                    "SaslAuthenticate without a handshake".into(),
                ));
            }
        };
        let step = exchange.step(message, metadata)?;
        let Some(user) = step.user else {
            self.state = match previous {
                Some(a) => State::Reauthenticating(a, exchange),
                None => State::Exchanging(exchange),
            };
            return Ok(Progress {
                message: step.message,
                done: None,
            });
        };
        if previous.is_some_and(|a| a.user != user) {
            return Err(Failure::State("re-authenticated as another user".into()));
        }
        self.raw_tokens = false;
        self.state = State::Authenticated(Authenticated {
            user: user.clone(),
            mechanism: exchange.mechanism(),
            expires: self.lifetime.map(|l| now + l),
        });
        let lifetime_ms = self.lifetime.map_or(0, |l| l.as_millis() as i64);
        Ok(Progress {
            message: step.message,
            done: Some((user, lifetime_ms)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use control::{MetadataRecord, ScramMechanism};

    fn metadata_with(user: &str, password: &str) -> Metadata {
        let mut metadata = Metadata::default();
        let m = client::scram::Mechanism::Sha256;
        let salt = b"saltsaltsaltsalt".to_vec();
        let (stored_key, server_key) =
            m.stored_keys(&m.salted_password(password.as_bytes(), &salt, 4096));
        metadata
            .apply(&MetadataRecord::SetScramCredential(
                control::ScramCredential {
                    user: user.into(),
                    mechanism: ScramMechanism::Sha256,
                    salt,
                    iterations: 4096,
                    stored_key,
                    server_key,
                },
            ))
            .unwrap();
        metadata
    }

    fn plain(user: &str, password: &str) -> Vec<u8> {
        format!("\0{user}\0{password}").into_bytes()
    }

    fn session(lifetime: Option<Duration>) -> Session {
        Session::new(SaslMechanism::ALL.to_vec(), lifetime)
    }

    #[test]
    fn nothing_but_versions_and_the_exchange_before_authenticating() {
        let metadata = metadata_with("alice", "secret");
        let now = Instant::now();
        let mut s = session(None);
        assert_eq!(s.admit(ApiKey::ApiVersions, now), Admission::Serve);
        assert!(matches!(
            s.admit(ApiKey::Metadata, now),
            Admission::Refuse(_)
        ));
        assert!(
            s.authenticate(&plain("alice", "secret"), &metadata, now)
                .is_err(),
            "no handshake"
        );
        let mut s = session(None);
        assert!(matches!(
            s.handshake("GSSAPI", false),
            Err(Failure::Unsupported(_))
        ));
        s.handshake("PLAIN", false).unwrap();
        assert!(
            s.handshake("PLAIN", false).is_err(),
            "a handshake during an exchange"
        );
        let mut s = session(None);
        s.handshake("PLAIN", false).unwrap();
        assert!(matches!(
            s.admit(ApiKey::Produce, now),
            Admission::Refuse(_)
        ));
        let done = s
            .authenticate(&plain("alice", "secret"), &metadata, now)
            .unwrap();
        assert_eq!(done.done, Some(("alice".into(), 0)));
        assert_eq!(s.principal(), Some("alice"));
        assert_eq!(
            s.admit(ApiKey::Produce, now + Duration::from_secs(3600)),
            Admission::Serve
        );
    }

    #[test]
    fn an_expired_session_serves_nothing_until_the_same_user_authenticates_again() {
        let metadata = metadata_with("alice", "secret");
        let mut extra = metadata.clone();
        let bob = metadata_with("bob", "pw");
        extra.scram_credentials.extend(bob.scram_credentials);
        let lifetime = Duration::from_secs(60);
        let start = Instant::now();
        let mut s = session(Some(lifetime));
        s.handshake("PLAIN", false).unwrap();
        let done = s
            .authenticate(&plain("alice", "secret"), &extra, start)
            .unwrap();
        assert_eq!(done.done, Some(("alice".into(), 60_000)));
        let later = start + lifetime;
        assert!(matches!(
            s.admit(ApiKey::Fetch, later),
            Admission::Refuse(_)
        ));
        assert!(
            s.handshake("SCRAM-SHA-256", false).is_err(),
            "another mechanism"
        );
        s.handshake("PLAIN", false).unwrap();
        s.authenticate(&plain("alice", "secret"), &extra, later)
            .unwrap();
        assert_eq!(s.admit(ApiKey::Fetch, later), Admission::Serve);
        s.handshake("PLAIN", false).unwrap();
        assert!(
            s.authenticate(&plain("bob", "pw"), &extra, later).is_err(),
            "another user"
        );
    }

    #[test]
    fn a_wrong_password_fails() {
        let metadata = metadata_with("alice", "secret");
        let mut s = session(None);
        s.handshake("PLAIN", false).unwrap();
        let failure = s
            .authenticate(&plain("alice", "guess"), &metadata, Instant::now())
            .unwrap_err();
        assert!(matches!(failure, Failure::Credentials(_)));
        assert_eq!(s.principal(), None);
    }
}
