//! SCRAM (RFC 5802, with SHA-256 and SHA-512 as RFC 7677 and Kafka's
//! KIP-84): the key derivations both sides share, the message syntax, and
//! the client's side of the exchange. Sans-IO: callers carry the messages
//! (in SaslAuthenticate requests). The broker's side is built on the same
//! derivations, so the two cannot drift apart.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use ring::{digest, hmac, pbkdf2};

/// The gs2 header this client sends: no channel binding, no authzid.
const GS2_HEADER: &str = "n,,";
/// The iteration counts a client accepts from a server (Kafka's bounds).
pub const ITERATIONS_MIN: u32 = 4096;
/// See [`ITERATIONS_MIN`].
pub const ITERATIONS_MAX: u32 = 16384;
/// The longest nonce (either side's part) accepted.
pub const NONCE_MAX_BYTES: usize = 256;

/// A SCRAM hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    /// SCRAM-SHA-256.
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl Mechanism {
    /// The SASL mechanism name.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha256 => "SCRAM-SHA-256",
            Mechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism called `name`.
    pub fn from_name(name: &str) -> Option<Mechanism> {
        [Mechanism::Sha256, Mechanism::Sha512]
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name))
    }

    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            Mechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            Mechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    fn hmac(self) -> hmac::Algorithm {
        match self {
            Mechanism::Sha256 => hmac::HMAC_SHA256,
            Mechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            Mechanism::Sha256 => &digest::SHA256,
            Mechanism::Sha512 => &digest::SHA512,
        }
    }

    /// The hash's length: the length of every key.
    pub fn key_len(self) -> usize {
        self.digest().output_len()
    }

    /// SaltedPassword := Hi(password, salt, i). Kafka applies no SASLprep.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0; self.key_len()];
        let iterations = std::num::NonZeroU32::new(iterations.max(1)).expect("at least one");
        pbkdf2::derive(self.pbkdf2(), iterations, salt, password, &mut out);
        out
    }

    /// HMAC(key, data).
    pub fn hmac_of(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        let key = hmac::Key::new(self.hmac(), key);
        hmac::sign(&key, data).as_ref().to_vec()
    }

    /// H(data).
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        digest::digest(self.digest(), data).as_ref().to_vec()
    }

    /// ClientKey := HMAC(SaltedPassword, "Client Key").
    pub fn client_key(self, salted_password: &[u8]) -> Vec<u8> {
        self.hmac_of(salted_password, b"Client Key")
    }

    /// ServerKey := HMAC(SaltedPassword, "Server Key").
    pub fn server_key(self, salted_password: &[u8]) -> Vec<u8> {
        self.hmac_of(salted_password, b"Server Key")
    }

    /// What a server stores for a password: (StoredKey, ServerKey).
    pub fn stored_keys(self, salted_password: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let stored_key = self.hash(&self.client_key(salted_password));
        (stored_key, self.server_key(salted_password))
    }
}

/// Why an exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    /// A message that does not follow RFC 5802's syntax.
    #[error("malformed SCRAM message: {0}")]
    Malformed(String),
    /// The server answered with an error (`e=...`).
    #[error("the server refused: {0}")]
    Refused(String),
    /// The server's signature is not the one the password gives: it does
    /// not know the password (or the exchange was tampered with).
    #[error("the server's signature does not verify")]
    ServerSignature,
}

fn malformed(why: impl Into<String>) -> ScramError {
    ScramError::Malformed(why.into())
}

/// The `k=value` attributes of a message, in order.
pub fn attributes(message: &str) -> Result<Vec<(char, &str)>, ScramError> {
    message
        .split(',')
        .map(|part| {
            let mut chars = part.chars();
            match (chars.next(), chars.next()) {
                (Some(key), Some('=')) if key.is_ascii_alphabetic() => Ok((key, &part[2..])),
                _ => Err(malformed(format!("attribute {part:?}"))),
            }
        })
        .collect()
}

/// The value of attribute `key`, which must be the `position`th.
pub fn attribute<'a>(
    attributes: &[(char, &'a str)],
    position: usize,
    key: char,
) -> Result<&'a str, ScramError> {
    match attributes.get(position) {
        Some((k, value)) if *k == key => Ok(value),
        _ => Err(malformed(format!("attribute {key} expected at {position}"))),
    }
}

/// A user name as a SCRAM message carries it ('=' and ',' escaped).
pub fn escape_user(user: &str) -> String {
    user.replace('=', "=3D").replace(',', "=2C")
}

/// A user name from its escaped form; None for a bad escape.
pub fn unescape_user(escaped: &str) -> Option<String> {
    let mut out = String::with_capacity(escaped.len());
    let mut rest = escaped;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=3D") => out.push('='),
            Some("=2C") => out.push(','),
            _ => return None,
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// Base64 of bytes.
pub fn base64(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}

/// Bytes of base64.
pub fn unbase64(text: &str) -> Result<Vec<u8>, ScramError> {
    BASE64
        .decode(text)
        .map_err(|e| malformed(format!("base64: {e}")))
}

/// `a XOR b` (equal lengths).
pub fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

/// Equality whose time does not depend on where the inputs differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A fresh random nonce (printable, no ',').
pub fn new_nonce() -> String {
    let mut bytes = [0u8; 24];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .expect("the system's random source works");
    base64(&bytes)
}

/// The client's side of one exchange.
pub struct ScramClient {
    mechanism: Mechanism,
    password: Vec<u8>,
    client_first_bare: String,
    nonce: String,
    /// Set once the final message is made: the signature the server must
    /// answer with.
    expected_server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    /// An exchange for `user` with `password`, using `nonce` (see
    /// [`new_nonce`]; tests give their own).
    pub fn new(mechanism: Mechanism, user: &str, password: &str, nonce: String) -> ScramClient {
        let client_first_bare = format!("n={},r={nonce}", escape_user(user));
        ScramClient {
            mechanism,
            password: password.as_bytes().to_vec(),
            client_first_bare,
            nonce,
            expected_server_signature: None,
        }
    }

    /// The first message to send.
    pub fn first_message(&self) -> String {
        format!("{GS2_HEADER}{}", self.client_first_bare)
    }

    /// The final message, given the server's first.
    pub fn final_message(&mut self, server_first: &str) -> Result<String, ScramError> {
        let attrs = attributes(server_first)?;
        let nonce = attribute(&attrs, 0, 'r')?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(malformed("the server's nonce does not extend the client's"));
        }
        let salt = unbase64(attribute(&attrs, 1, 's')?)?;
        let iterations: u32 = attribute(&attrs, 2, 'i')?
            .parse()
            .map_err(|_| malformed("iteration count"))?;
        // Fewer would make a captured proof cheap to guess from; more
        // would hold this client's thread (Kafka's bounds).
        if !(ITERATIONS_MIN..=ITERATIONS_MAX).contains(&iterations) {
            return Err(malformed(format!(
                "{iterations} iterations: outside {ITERATIONS_MIN}..={ITERATIONS_MAX}"
            )));
        }
        let without_proof = format!("c={},r={nonce}", base64(GS2_HEADER.as_bytes()));
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let m = self.mechanism;
        let salted = m.salted_password(&self.password, &salt, iterations);
        let client_key = m.client_key(&salted);
        let signature = m.hmac_of(&m.hash(&client_key), auth_message.as_bytes());
        let proof = xor(&client_key, &signature);
        self.expected_server_signature =
            Some(m.hmac_of(&m.server_key(&salted), auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", base64(&proof)))
    }

    /// Checks the server's final message: the server proves it knows the
    /// password too.
    pub fn verify_server_final(&self, server_final: &str) -> Result<(), ScramError> {
        let attrs = attributes(server_final)?;
        if let Some((_, error)) = attrs.iter().find(|(k, _)| *k == 'e') {
            return Err(ScramError::Refused(error.to_string()));
        }
        let signature = unbase64(attribute(&attrs, 0, 'v')?)?;
        match &self.expected_server_signature {
            Some(expected) if constant_time_eq(expected, &signature) => Ok(()),
            _ => Err(ScramError::ServerSignature),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's example exchange (SCRAM-SHA-256, user "user", password
    /// "pencil"), byte for byte.
    #[test]
    fn the_rfc_7677_exchange_is_reproduced() {
        let mut client = ScramClient::new(
            Mechanism::Sha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO".into(),
        );
        assert_eq!(client.first_message(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                            s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        assert_eq!(
            client.final_message(server_first).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        client
            .verify_server_final("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        assert_eq!(
            client.verify_server_final("v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
            Err(ScramError::ServerSignature)
        );
        assert!(matches!(
            client.verify_server_final("e=invalid-proof"),
            Err(ScramError::Refused(_))
        ));
    }

    #[test]
    fn a_server_nonce_not_extending_the_clients_is_refused() {
        let mut client = ScramClient::new(Mechanism::Sha512, "u", "p", "abc".into());
        for server_first in [
            "r=abc,s=AAAA,i=4096",
            "r=xyz1,s=AAAA,i=4096",
            "s=AAAA",
            "",
            "r=abcd,s=AAAA,i=1",
            "r=abcd,s=AAAA,i=4294967295",
        ] {
            assert!(
                client.final_message(server_first).is_err(),
                "{server_first}"
            );
        }
    }

    #[test]
    fn user_names_escape_and_unescape() {
        assert_eq!(escape_user("a=b,c"), "a=3Db=2Cc");
        assert_eq!(unescape_user("a=3Db=2Cc").as_deref(), Some("a=b,c"));
        assert_eq!(unescape_user("a=4Fb"), None);
        assert_eq!(unescape_user("a="), None);
    }
}
