//! TLS on the Kafka and HTTP ports: the server's certificate and key from PEM files,
//! optionally client certificates checked against a CA (mTLS, whose
//! principal is the certificate's subject, as Kafka's), reloaded on SIGHUP
//! without touching open connections.
//!
//! rustls with the ring provider only: no C crypto library to build or
//! patch. The settings are loaded whole at start (a broken file stops the
//! start with its path) and again on every reload; a reload that fails
//! keeps the settings in use and says why.

use std::sync::{Arc, Mutex};

use futures_rustls::TlsAcceptor;
use rustls::pki_types::CertificateDer;
use rustls::server::ServerConnection;
use rustls::ServerConfig;

pub use crate::security::tls_files::{TlsError, TlsFiles};

/// The TLS side of a port: the settings in use, replaced whole by a
/// reload (a handshake under way keeps the ones it started with).
#[derive(Debug)]
pub struct TlsServer {
    files: TlsFiles,
    current: Mutex<Arc<ServerConfig>>,
}

impl TlsServer {
    /// Loads the files: an error stops the start.
    pub fn start(files: TlsFiles) -> Result<TlsServer, TlsError> {
        let config = files.load()?;
        Ok(TlsServer {
            files,
            current: Mutex::new(config),
        })
    }

    /// What accepts the next connection, with the settings now in use.
    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.current.lock().expect("TLS settings").clone())
    }

    /// Reads the files again into settings not yet in use.
    pub fn read_again(&self) -> Result<Arc<ServerConfig>, TlsError> {
        self.files.load()
    }

    /// Puts settings [`read_again`](Self::read_again) in use.
    pub fn install(&self, config: Arc<ServerConfig>) {
        *self.current.lock().expect("TLS settings") = config;
    }
}

/// The client's principal when it presented a certificate: its subject as
/// Kafka writes it (`CN=alice,OU=ops,O=example`, RFC 4514 order).
pub fn principal(connection: &ServerConnection) -> Option<String> {
    subject_of(connection.peer_certificates()?.first()?)
}

/// A DER certificate's subject, RFC 4514 (as Java's X500Principal).
fn subject_of(certificate: &CertificateDer<'_>) -> Option<String> {
    use x509_cert::der::Decode;
    let certificate = x509_cert::Certificate::from_der(certificate.as_ref()).ok()?;
    Some(certificate.tbs_certificate.subject.to_string())
}

/// Whether the first bytes a plaintext port read look like a TLS
/// handshake (a ClientHello record: content type 22, version 3.x): the
/// log then says what went wrong instead of "frame too large".
pub fn looks_like_tls(first_bytes: &[u8]) -> bool {
    matches!(first_bytes, [0x16, 0x03, 0x00..=0x04, ..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_hello_is_recognised_and_a_kafka_frame_is_not() {
        assert!(looks_like_tls(&[0x16, 0x03, 0x01, 0x02, 0x00]));
        // A Kafka request of 22 bytes: size prefix 0, 0, 0, 22.
        assert!(!looks_like_tls(&[0, 0, 0, 22, 0, 18]));
        assert!(!looks_like_tls(&[0x16]));
    }

    #[test]
    fn the_principal_is_the_subject_most_specific_part_first() {
        let mut params = rcgen::CertificateParams::new(vec!["alice".to_string()]).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "example");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationalUnitName, "ops");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        let key = rcgen::KeyPair::generate().unwrap();
        let certificate = params.self_signed(&key).unwrap();
        assert_eq!(
            subject_of(certificate.der()).as_deref(),
            Some("CN=alice,OU=ops,O=example")
        );
        assert_eq!(subject_of(&CertificateDer::from(vec![1, 2, 3])), None);
    }
}
