//! What a node runs (Kafka's `process.roles`): the broker (Kafka
//! listeners, partitions, groups), the controller (a member of the
//! metadata quorum), or both, the default. A node whose roles lack the
//! controller still follows the metadata log, as an observer: it never
//! votes. One whose roles lack the broker serves no Kafka data: it binds
//! its metadata listener and the HTTP port (health and metrics) only.

use super::{BrokerConfig, ConfigError};

/// The roles of a node, as `process_roles` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roles {
    /// Serves Kafka clients and holds partitions.
    pub broker: bool,
    /// May vote in the metadata quorum.
    pub controller: bool,
}

impl Roles {
    /// Parses `broker`, `controller` or both, separated by commas.
    pub fn parse(text: &str) -> Result<Roles, ConfigError> {
        let mut roles = Roles {
            broker: false,
            controller: false,
        };
        for role in text.split(',').map(str::trim).filter(|r| !r.is_empty()) {
            match role {
                "broker" => roles.broker = true,
                "controller" => roles.controller = true,
                other => {
                    return Err(ConfigError::Invalid(format!(
                        "process_roles: unknown role {other:?} (broker, controller, or both \
                         separated by a comma)"
                    )))
                }
            }
        }
        if !roles.broker && !roles.controller {
            return Err(ConfigError::Invalid(
                "process_roles must name broker, controller or both".into(),
            ));
        }
        Ok(roles)
    }

    /// A node that serves no Kafka data.
    pub fn controller_only(self) -> bool {
        !self.broker
    }
}

impl BrokerConfig {
    /// This node's roles (checked when the configuration loads).
    pub fn roles(&self) -> Roles {
        Roles::parse(&self.process_roles).expect("process_roles checked at load")
    }

    /// Roles that fit the quorum: a controller-only node belongs to a
    /// configured quorum (alone, it would serve nothing), and a node named
    /// among the voters is a controller.
    pub(super) fn check_roles(&self) -> Result<(), ConfigError> {
        let roles = Roles::parse(&self.process_roles)?;
        let voters = self.voters()?;
        if roles.controller_only() && voters.is_empty() {
            return Err(ConfigError::Invalid(
                "process_roles = \"controller\" needs controller_quorum_voters: a controller \
                 alone serves nothing (brokers join its quorum as observers)"
                    .into(),
            ));
        }
        if !roles.controller && voters.contains_key(&self.node_id) {
            return Err(ConfigError::Invalid(format!(
                "node {} is among controller_quorum_voters, so it is a controller: add it to \
                 process_roles (\"broker,controller\") or take it out of the voters",
                self.node_id
            )));
        }
        if !roles.controller && voters.is_empty() {
            return Err(ConfigError::Invalid(
                "process_roles = \"broker\" needs controller_quorum_voters: a broker alone runs \
                 its own metadata quorum (leave process_roles at \"broker,controller\")"
                    .into(),
            ));
        }
        Ok(())
    }
}
