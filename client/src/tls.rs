//! TLS for the client's connections: the CA certificates a broker's
//! certificate must chain to, and optionally this client's own certificate
//! (for brokers that ask for one). rustls on the ring provider; the broker
//! is checked against the IP address connected to, so its certificate must
//! name that IP.

use std::path::Path;
use std::sync::Arc;

use futures_rustls::rustls;
use futures_rustls::TlsConnector;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// How a client speaks TLS.
#[derive(Clone, Debug)]
pub struct ClientTls {
    config: Arc<rustls::ClientConfig>,
}

/// Why TLS settings could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("client TLS: {0}")]
pub struct ClientTlsError(String);

impl ClientTls {
    /// Trusts the CA certificates of the PEM file `ca`; presents
    /// `identity` (certificate chain and key PEM files) when asked.
    pub fn from_files(
        ca: &Path,
        identity: Option<(&Path, &Path)>,
    ) -> Result<ClientTls, ClientTlsError> {
        let failed = |what: &str, path: &Path, e: &dyn std::fmt::Display| {
            ClientTlsError(format!("{what} {}: {e}", path.display()))
        };
        let mut roots = rustls::RootCertStore::empty();
        let certificates = CertificateDer::pem_file_iter(ca)
            .map_err(|e| failed("CA file", ca, &e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| failed("CA file", ca, &e))?;
        if certificates.is_empty() {
            return Err(failed("CA file", ca, &"no certificate in the file"));
        }
        for certificate in certificates {
            roots
                .add(certificate)
                .map_err(|e| failed("CA file", ca, &e))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| ClientTlsError(e.to_string()))?
            .with_root_certificates(roots);
        let config = match identity {
            Some((certificate, key)) => {
                let chain = CertificateDer::pem_file_iter(certificate)
                    .map_err(|e| failed("certificate", certificate, &e))?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| failed("certificate", certificate, &e))?;
                let key = PrivateKeyDer::from_pem_file(key).map_err(|e| failed("key", key, &e))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| ClientTlsError(e.to_string()))?
            }
            None => builder.with_no_client_auth(),
        };
        Ok(ClientTls {
            config: Arc::new(config),
        })
    }

    /// What makes a TLS stream of a TCP stream.
    pub fn connector(&self) -> TlsConnector {
        TlsConnector::from(self.config.clone())
    }
}
