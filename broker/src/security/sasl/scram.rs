//! The broker's side of a SCRAM exchange (RFC 5802): two messages in, two
//! out, checked against the credential the metadata holds. Sans-IO. The
//! key derivations are the client crate's, shared with the client's side.

use client::scram::{
    attribute, attributes, base64, constant_time_eq, new_nonce, unbase64, unescape_user, xor,
    Mechanism, NONCE_MAX_BYTES,
};
use control::ScramCredential;

use super::Failure;

/// Where an exchange is.
enum State {
    /// Waiting for the client's first message.
    First,
    /// The server's first message went out; waiting for the proof.
    Final(Box<Pending>),
    /// Finished (either way): nothing more is accepted.
    Done,
}

/// What the server's first message committed the exchange to.
struct Pending {
    user: String,
    /// None for a user that does not exist (it fails at the proof).
    credential: Option<ScramCredential>,
    gs2_header: String,
    /// The client's nonce and the server's, concatenated.
    nonce: String,
    /// How much of `nonce` is the client's.
    client_nonce_len: usize,
    /// The client's bare first message and the server's first message.
    auth_message_start: String,
}

/// One exchange.
pub struct ScramServer {
    mechanism: Mechanism,
    state: State,
}

/// What a step gives: the message to send, and the user once proven.
pub struct Step {
    /// The server's message.
    pub message: Vec<u8>,
    /// The authenticated user, after the last step.
    pub user: Option<String>,
}

impl ScramServer {
    /// A new exchange for `mechanism`.
    pub fn new(mechanism: Mechanism) -> ScramServer {
        ScramServer {
            mechanism,
            state: State::First,
        }
    }

    /// Takes the client's next message. `credential_of` looks a user's
    /// credential up for this mechanism.
    pub fn step(
        &mut self,
        message: &[u8],
        credential_of: impl Fn(&str) -> Option<ScramCredential>,
    ) -> Result<Step, Failure> {
        let text = std::str::from_utf8(message).map_err(|_| Failure::malformed("not UTF-8"))?;
        match std::mem::replace(&mut self.state, State::Done) {
            State::First => self.first(text, credential_of),
            State::Final(pending) => {
                let signature = self.verify(text, &pending)?;
                Ok(Step {
                    message: format!("v={}", base64(&signature)).into_bytes(),
                    user: Some(pending.user),
                })
            }
            State::Done => Err(Failure::malformed("the exchange is over")),
        }
    }

    fn first(
        &mut self,
        text: &str,
        credential_of: impl Fn(&str) -> Option<ScramCredential>,
    ) -> Result<Step, Failure> {
        let (gs2_header, bare) = split_gs2_header(text)?;
        let attrs = attributes(bare).map_err(Failure::from)?;
        let user = unescape_user(attribute(&attrs, 0, 'n')?)
            .ok_or_else(|| Failure::malformed("user name escape"))?;
        let client_nonce = attribute(&attrs, 1, 'r')?;
        if attrs.len() > 2 {
            // Kafka's tokenauth extension: delegation tokens are not served.
            return Err(Failure::malformed("extensions are not supported"));
        }
        if client_nonce.is_empty() || client_nonce.len() > NONCE_MAX_BYTES {
            return Err(Failure::malformed("client nonce length"));
        }
        if let Some(authzid) = authzid(gs2_header) {
            if authzid != user {
                return Err(Failure::credentials(
                    "an authorization id other than the user",
                ));
            }
        }
        let credential = credential_of(&user);
        // An unknown user gets a salt and count as a known one would, and
        // fails at the proof like a wrong password: the answer does not
        // tell which users exist.
        let (salt, iterations) = match &credential {
            Some(c) => (c.salt.clone(), c.iterations),
            None => (
                decoy_salt(&user),
                control::model::credentials::SCRAM_ITERATIONS_MIN,
            ),
        };
        let nonce = format!("{client_nonce}{}", new_nonce());
        let server_first = format!("r={nonce},s={},i={iterations}", base64(&salt));
        self.state = State::Final(Box::new(Pending {
            user,
            credential,
            gs2_header: gs2_header.to_string(),
            nonce,
            client_nonce_len: client_nonce.len(),
            auth_message_start: format!("{bare},{server_first}"),
        }));
        Ok(Step {
            message: server_first.into_bytes(),
            user: None,
        })
    }

    /// Checks the client's proof; the server's signature if it holds.
    fn verify(&self, text: &str, expected: &Pending) -> Result<Vec<u8>, Failure> {
        let attrs = attributes(text).map_err(Failure::from)?;
        let binding = unbase64(attribute(&attrs, 0, 'c')?).map_err(Failure::from)?;
        if binding != expected.gs2_header.as_bytes() {
            return Err(Failure::malformed(
                "channel binding differs from the first message",
            ));
        }
        if !nonce_matches(attribute(&attrs, 1, 'r')?, expected) {
            return Err(Failure::malformed("nonce differs from the server's"));
        }
        let proof = unbase64(attribute(&attrs, 2, 'p')?).map_err(Failure::from)?;
        let without_proof = &text[..text.rfind(",p=").expect("the proof was found")];
        let auth_message = format!("{},{without_proof}", expected.auth_message_start);
        let Some(credential) = &expected.credential else {
            return Err(Failure::credentials("unknown user"));
        };
        let m = self.mechanism;
        let client_signature = m.hmac_of(&credential.stored_key, auth_message.as_bytes());
        if proof.len() != client_signature.len() {
            return Err(Failure::credentials("wrong proof length"));
        }
        let client_key = xor(&proof, &client_signature);
        if !constant_time_eq(&m.hash(&client_key), &credential.stored_key) {
            return Err(Failure::credentials("wrong password"));
        }
        Ok(m.hmac_of(&credential.server_key, auth_message.as_bytes()))
    }
}

/// Whether the final message's nonce is the server's (RFC 5802), or the
/// server's with the client's prepended once more: librdkafka before
/// 2.6.1 sends that (its bug since its first SCRAM release), and the
/// clients built on it must keep working, as they do with Kafka 3.x. The
/// server's part is checked either way.
fn nonce_matches(given: &str, expected: &Pending) -> bool {
    let client_nonce = &expected.nonce[..expected.client_nonce_len];
    given == expected.nonce
        || given
            .strip_prefix(client_nonce)
            .is_some_and(|rest| rest == expected.nonce)
}

/// Splits "n,[a=authzid]," from the bare message. Channel binding ('p')
/// is refused: Kafka's clients never ask for it.
fn split_gs2_header(text: &str) -> Result<(&str, &str), Failure> {
    let flag_end = text
        .find(',')
        .ok_or_else(|| Failure::malformed("no gs2 header"))?;
    if !matches!(&text[..flag_end], "n" | "y") {
        return Err(Failure::malformed("channel binding is not supported"));
    }
    let authzid_end = text[flag_end + 1..]
        .find(',')
        .ok_or_else(|| Failure::malformed("no gs2 header"))?
        + flag_end
        + 1;
    Ok((&text[..=authzid_end], &text[authzid_end + 1..]))
}

/// The authzid of a gs2 header, if it names one.
fn authzid(gs2_header: &str) -> Option<String> {
    let field = gs2_header.split(',').nth(1)?;
    unescape_user(field.strip_prefix("a=")?)
}

/// A salt for a user that does not exist: as long as the salts the broker
/// makes ([`super::new_salt`], 24 bytes) and the same for the same name
/// within this process, so two attempts look like a real user's. (Another
/// broker, or this one after a restart, gives another: a user enumerating
/// names across brokers could tell; a cluster-wide secret would close it.)
fn decoy_salt(user: &str) -> Vec<u8> {
    static KEY: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let key = KEY.get_or_init(super::new_salt);
    let salt_len = super::new_salt().len();
    Mechanism::Sha256.hmac_of(key, user.as_bytes())[..salt_len].to_vec()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use client::scram::ScramClient;

    pub fn credential(user: &str, password: &str, mechanism: Mechanism) -> ScramCredential {
        let salt = b"0123456789abcdef".to_vec();
        let salted = mechanism.salted_password(password.as_bytes(), &salt, 4096);
        let (stored_key, server_key) = mechanism.stored_keys(&salted);
        ScramCredential {
            user: user.into(),
            mechanism: match mechanism {
                Mechanism::Sha256 => control::ScramMechanism::Sha256,
                Mechanism::Sha512 => control::ScramMechanism::Sha512,
            },
            salt,
            iterations: 4096,
            stored_key,
            server_key,
        }
    }

    /// Runs a whole exchange of `user`/`password` against a store holding
    /// alice/secret; the server's outcome.
    fn exchange(mechanism: Mechanism, user: &str, password: &str) -> Result<String, Failure> {
        let stored = credential("alice", "secret", mechanism);
        let lookup = |name: &str| (name == "alice").then(|| stored.clone());
        let mut client = ScramClient::new(mechanism, user, password, new_nonce());
        let mut server = ScramServer::new(mechanism);
        let first = server.step(client.first_message().as_bytes(), lookup)?;
        let server_first = String::from_utf8(first.message).unwrap();
        let client_final = client.final_message(&server_first).unwrap();
        let last = server.step(client_final.as_bytes(), lookup)?;
        client
            .verify_server_final(std::str::from_utf8(&last.message).unwrap())
            .expect("the server proves it knows the password");
        Ok(last.user.expect("a user once proven"))
    }

    #[test]
    fn the_right_password_authenticates_with_either_mechanism() {
        for mechanism in [Mechanism::Sha256, Mechanism::Sha512] {
            assert_eq!(exchange(mechanism, "alice", "secret").unwrap(), "alice");
        }
    }

    #[test]
    fn a_wrong_password_and_an_unknown_user_fail_alike_at_the_proof() {
        for (user, password) in [("alice", "guess"), ("mallory", "secret")] {
            let failure = exchange(Mechanism::Sha512, user, password).unwrap_err();
            assert!(matches!(failure, Failure::Credentials(_)), "{failure:?}");
        }
        // The unknown user's salt is stable, as a real user's is.
        assert_eq!(decoy_salt("mallory"), decoy_salt("mallory"));
        assert_ne!(decoy_salt("mallory"), decoy_salt("eve"));
    }

    #[test]
    fn malformed_and_replayed_messages_are_refused() {
        let lookup = |_: &str| None;
        for first in [
            &b"p=tls-unique,,n=a,r=x"[..],
            b"n,,r=x,n=a",
            b"garbage",
            b"n,,n=a,r=",
            b"\xff\xfe",
            b"n,,n=a,r=x,tokenauth=true",
        ] {
            let mut server = ScramServer::new(Mechanism::Sha256);
            assert!(
                server.step(first, lookup).is_err(),
                "{:?}",
                String::from_utf8_lossy(first)
            );
        }
        let mut server = ScramServer::new(Mechanism::Sha256);
        server.step(b"n,,n=a,r=abc", lookup).unwrap();
        assert!(
            server.step(b"c=biws,r=abc,p=AAAA", lookup).is_err(),
            "wrong nonce"
        );
        assert!(server.step(b"n,,n=a,r=abc", lookup).is_err(), "over");
    }

    /// librdkafka before 2.6.1 sends the client's nonce twice in its final
    /// message (and signs that message): accepted; any other nonce is not.
    #[test]
    fn the_final_nonce_of_older_librdkafka_is_accepted_and_no_other() {
        let m = Mechanism::Sha256;
        let stored = credential("alice", "secret", m);
        let lookup = |_: &str| Some(stored.clone());
        let salted = m.salted_password(b"secret", &stored.salt, stored.iterations);
        let client_key = m.client_key(&salted);
        let final_with = |server_first: &str, nonce: &str| {
            let without_proof = format!("c=biws,r={nonce}");
            let auth = format!("n=alice,r=cn,{server_first},{without_proof}");
            let proof = xor(
                &client_key,
                &m.hmac_of(&m.hash(&client_key), auth.as_bytes()),
            );
            format!("{without_proof},p={}", base64(&proof))
        };
        for (shape, accepted) in [
            ("cn{}", true),
            ("{}", true),
            ("cncn{}", false),
            ("x{}", false),
        ] {
            let mut server = ScramServer::new(m);
            let first = server.step(b"n,,n=alice,r=cn", lookup).unwrap();
            let server_first = String::from_utf8(first.message).unwrap();
            let full = server_first[2..server_first.find(',').unwrap()].to_string();
            let nonce = shape.replace("{}", &full);
            let outcome = server.step(final_with(&server_first, &nonce).as_bytes(), lookup);
            assert_eq!(outcome.is_ok(), accepted, "{shape}");
        }
    }

    #[test]
    fn an_authorization_id_must_be_the_user() {
        let lookup = |_: &str| None;
        let mut server = ScramServer::new(Mechanism::Sha256);
        assert!(server.step(b"n,a=admin,n=alice,r=abc", lookup).is_err());
        let mut server = ScramServer::new(Mechanism::Sha256);
        assert!(server.step(b"n,a=alice,n=alice,r=abc", lookup).is_ok());
    }
}
