//! How this broker reaches other brokers' Kafka ports when they speak TLS:
//! trusting `ssl_ca_location`, presenting its own certificate and key when
//! asked. Reloaded with the served certificate on SIGHUP (both read before
//! either is put in use: a reload that fails keeps both); each new
//! connection takes the current one.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use client::tls::{ClientTls, ClientTlsError};

use crate::config::BrokerConfig;

/// The files, and what was last read from them.
#[derive(Debug)]
pub struct PeerTls {
    ca: PathBuf,
    certificate: PathBuf,
    key: PathBuf,
    current: Mutex<ClientTls>,
}

impl PeerTls {
    /// The broker's peer TLS, if its inter-broker listener speaks TLS and a CA file
    /// is given (the configuration's check asks for one in a cluster).
    pub fn of_config(config: &BrokerConfig) -> Result<Option<Arc<PeerTls>>, ClientTlsError> {
        let (true, Some(ca), Some(certificate), Some(key)) = (
            config.inter_broker_uses_tls(),
            config.ssl_ca_location.clone(),
            config.ssl_certificate_location.clone(),
            config.ssl_key_location.clone(),
        ) else {
            return Ok(None);
        };
        let current = ClientTls::from_files(&ca, Some((&certificate, &key)))?;
        Ok(Some(Arc::new(PeerTls {
            ca,
            certificate,
            key,
            current: Mutex::new(current),
        })))
    }

    /// The settings for the next connection.
    pub fn current(&self) -> ClientTls {
        self.current.lock().expect("peer TLS").clone()
    }

    /// Reads the files again into settings not yet in use.
    pub fn read_again(&self) -> Result<ClientTls, ClientTlsError> {
        ClientTls::from_files(&self.ca, Some((&self.certificate, &self.key)))
    }

    /// Puts settings [`read_again`](Self::read_again) in use.
    pub fn install(&self, tls: ClientTls) {
        *self.current.lock().expect("peer TLS") = tls;
    }
}
