//! TLS on the Kafka and HTTP ports: the server's certificate and key from PEM files,
//! optionally client certificates checked against a CA (mTLS, whose
//! principal is the certificate's subject, as Kafka's), reloaded on SIGHUP
//! without touching open connections.
//!
//! rustls with the ring provider only: no C crypto library to build or
//! patch. The settings are loaded whole at start (a broken file stops the
//! start with its path) and again on every reload; a reload that fails
//! keeps the settings in use and says why.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures_rustls::TlsAcceptor;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ServerConnection, WebPkiClientVerifier};
use rustls::{RootCertStore, ServerConfig};

use crate::config::BrokerConfig;

/// Whether clients present certificates (Kafka's `ssl.client.auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// Not asked for.
    None,
    /// Asked for, checked if given, not required.
    Requested,
    /// Required: a client without a valid certificate is refused.
    Required,
}

impl ClientAuth {
    /// The setting's value, if valid.
    pub fn parse(value: &str) -> Option<ClientAuth> {
        match value {
            "none" => Some(ClientAuth::None),
            "requested" => Some(ClientAuth::Requested),
            "required" => Some(ClientAuth::Required),
            _ => None,
        }
    }
}

/// Why TLS settings could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file missing, unreadable or without what it should hold.
    #[error("{setting} {path}: {why}")]
    File {
        setting: &'static str,
        path: PathBuf,
        why: String,
    },
    /// The certificate, key and CA do not make a server configuration
    /// (e.g. the key does not match the certificate).
    #[error("TLS settings: {0}")]
    Invalid(String),
}

/// Where the TLS material is.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    certificate: PathBuf,
    key: PathBuf,
    ca: Option<PathBuf>,
    client_auth: ClientAuth,
}

impl TlsFiles {
    /// The files, if a port speaks TLS (the configuration's check has
    /// made sure the paths are given).
    pub fn of_config(config: &BrokerConfig) -> Option<TlsFiles> {
        if !config.kafka_uses_tls() && !config.http_tls {
            return None;
        }
        Some(TlsFiles {
            certificate: config.ssl_certificate_location.clone()?,
            key: config.ssl_key_location.clone()?,
            ca: config.ssl_ca_location.clone(),
            client_auth: ClientAuth::parse(&config.ssl_client_auth)?,
        })
    }

    /// Reads the files into a server configuration.
    fn load(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = read_certificates("ssl_certificate_location", &self.certificate)?;
        let key = PrivateKeyDer::from_pem_file(&self.key).map_err(|e| TlsError::File {
            setting: "ssl_key_location",
            path: self.key.clone(),
            why: e.to_string(),
        })?;
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Invalid(e.to_string()))?;
        let builder = match (self.client_auth, &self.ca) {
            (ClientAuth::None, _) | (_, None) => builder.with_no_client_auth(),
            (auth, Some(ca)) => {
                let mut roots = RootCertStore::empty();
                for certificate in read_certificates("ssl_ca_location", ca)? {
                    roots
                        .add(certificate)
                        .map_err(|e| TlsError::Invalid(format!("ssl_ca_location: {e}")))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let verifier = match auth {
                    ClientAuth::Requested => verifier.allow_unauthenticated(),
                    _ => verifier,
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| TlsError::Invalid(format!("ssl_ca_location: {e}")))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|e| TlsError::Invalid(e.to_string()))?;
        Ok(Arc::new(config))
    }
}

/// Every certificate of a PEM file (at least one).
fn read_certificates(
    setting: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let failed = |why: String| TlsError::File {
        setting,
        path: path.to_path_buf(),
        why,
    };
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|e| failed(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed(e.to_string()))?;
    if certificates.is_empty() {
        return Err(failed("no certificate in the file".into()));
    }
    Ok(certificates)
}

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

    #[test]
    fn client_auth_settings_parse() {
        assert_eq!(ClientAuth::parse("required"), Some(ClientAuth::Required));
        assert_eq!(ClientAuth::parse("requested"), Some(ClientAuth::Requested));
        assert_eq!(ClientAuth::parse("none"), Some(ClientAuth::None));
        assert_eq!(ClientAuth::parse("yes"), None);
    }
}
