//! The TLS material of a broker's ports from its PEM files: the server's
//! certificate chain and key, and the CA that client certificates (and,
//! between brokers, the brokers' certificates) chain to, loaded into a
//! rustls server configuration (ring provider). Below the server layers:
//! the Kafka and HTTP ports (server::tls) and the metadata quorum's
//! transport (cluster::quorum) build on it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
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
        /// The setting naming the file.
        setting: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
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

    /// The files for the metadata quorum's listener: the same certificate,
    /// and the brokers' certificates required from every peer.
    pub fn for_quorum(config: &BrokerConfig) -> Option<TlsFiles> {
        Some(TlsFiles {
            certificate: config.ssl_certificate_location.clone()?,
            key: config.ssl_key_location.clone()?,
            ca: Some(config.quorum_ca_location()?.clone()),
            client_auth: ClientAuth::Required,
        })
    }

    /// Reads the files into a server configuration.
    pub fn load(&self) -> Result<Arc<ServerConfig>, TlsError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_auth_settings_parse() {
        assert_eq!(ClientAuth::parse("required"), Some(ClientAuth::Required));
        assert_eq!(ClientAuth::parse("requested"), Some(ClientAuth::Requested));
        assert_eq!(ClientAuth::parse("none"), Some(ClientAuth::None));
        assert_eq!(ClientAuth::parse("yes"), None);
    }
}
