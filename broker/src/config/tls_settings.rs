//! The broker's TLS settings read together: which ports speak TLS, the
//! CA the metadata quorum's peers chain to, and whether the settings make
//! sense as a whole (checked at start; the files are read then).

use std::path::PathBuf;

use super::{BrokerConfig, ConfigError};
use crate::config::listeners::SecurityProtocol;

impl BrokerConfig {
    /// The TLS settings make sense together (the files are read at start).
    pub(super) fn check_tls(&self) -> Result<(), ConfigError> {
        let invalid = |why: String| Err(ConfigError::Invalid(why));
        if !matches!(
            self.ssl_client_auth.as_str(),
            "none" | "requested" | "required"
        ) {
            return invalid(format!(
                "ssl_client_auth must be none, requested or required, got {:?}",
                self.ssl_client_auth
            ));
        }
        if !matches!(
            self.controller_security_protocol.as_str(),
            "PLAINTEXT" | "SSL"
        ) {
            return invalid(format!(
                "controller_security_protocol must be PLAINTEXT or SSL, got {:?}",
                self.controller_security_protocol
            ));
        }
        if !self.kafka_uses_tls() && !self.http_tls && !self.controller_uses_tls() {
            if self.ssl_client_auth != "none" {
                return invalid(format!(
                    "ssl_client_auth {} asks for client certificates, but no port speaks TLS \
                     (kafka_security_protocol SSL or http_tls)",
                    self.ssl_client_auth
                ));
            }
            return Ok(());
        }
        if self.ssl_certificate_location.is_none() || self.ssl_key_location.is_none() {
            return invalid(
                "kafka_security_protocol SSL or SASL_SSL, and http_tls, need \
                 ssl_certificate_location and ssl_key_location"
                    .into(),
            );
        }
        if self.inter_broker_uses_tls()
            && self.voters()?.len() > 1
            && self.ssl_ca_location.is_none()
        {
            return invalid(
                "an inter-broker listener speaking TLS in a cluster needs ssl_ca_location: \
                 brokers reach each other's Kafka ports over TLS and check the certificates \
                 against it"
                    .into(),
            );
        }
        if self.controller_uses_tls()
            && (self.quorum_ca_location().is_none() || self.ssl_certificate_location.is_none())
        {
            return invalid(
                "controller_security_protocol SSL needs ssl_certificate_location, \
                 ssl_key_location and ssl_ca_location or controller_ssl_ca_location \
                 (brokers present certificates to each other)"
                    .into(),
            );
        }
        if self.ssl_client_auth != "none" && self.ssl_ca_location.is_none() {
            return invalid(format!(
                "ssl_client_auth {} needs ssl_ca_location (the CA client certificates chain to)",
                self.ssl_client_auth
            ));
        }
        Ok(())
    }

    /// The CA the quorum's peers' certificates must chain to.
    pub fn quorum_ca_location(&self) -> Option<&PathBuf> {
        self.controller_ssl_ca_location
            .as_ref()
            .or(self.ssl_ca_location.as_ref())
    }

    /// Whether the metadata quorum's transport speaks TLS.
    pub fn controller_uses_tls(&self) -> bool {
        self.controller_security_protocol == "SSL"
    }

    /// Whether some Kafka listener speaks TLS.
    pub fn kafka_uses_tls(&self) -> bool {
        self.kafka_listeners()
            .is_ok_and(|l| l.any(SecurityProtocol::uses_tls))
    }

    /// Whether brokers reach each other's Kafka ports over TLS.
    pub fn inter_broker_uses_tls(&self) -> bool {
        self.kafka_listeners()
            .is_ok_and(|l| l.inter_broker().protocol.uses_tls())
    }
}
