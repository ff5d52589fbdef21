//! Creating and deleting topics, as CreateTopics, DeleteTopics, the
//! auto-creation Metadata asks for and the HTTP API all do: checked here
//! first (so a refusal names what is wrong), decided by the controller,
//! and answered once this shard's metadata shows the change, so the
//! caller's next request sees it.

use control::service::ControllerRequest;
use control::{TopicConfig, TopicId};
use kafka_protocol::ResponseError;

use super::controller::controller_error;
use super::Cluster;
use crate::kafka::Code;

/// A topic to create, as asked.
pub struct NewTopic {
    /// Its name.
    pub name: String,
    /// Partitions (-1: the broker's default).
    pub partitions: i32,
    /// Replication factor (-1: default_replication_factor, at most the live brokers).
    pub replication_factor: i16,
    /// Configuration overrides, `key = value`.
    pub configs: Vec<(String, Option<String>)>,
}

/// A topic created (or that would be, when only validated).
#[derive(Debug, Clone)]
pub struct Created {
    /// Its id.
    pub id: TopicId,
    /// Its configuration.
    pub config: TopicConfig,
    /// Its partitions.
    pub partitions: usize,
    /// Its replication factor.
    pub replication_factor: usize,
}

/// Why a topic change was refused: the Kafka code and a message.
pub type Refused = (Code, String);

impl Cluster {
    /// Creates one topic (or only validates it) and waits for every shard
    /// of this broker to see it.
    pub async fn create_topic(
        &self,
        topic: NewTopic,
        validate_only: bool,
    ) -> Result<Created, Refused> {
        let mut created = self.check_new_topic(&topic)?;
        if validate_only {
            return Ok(created);
        }
        let request = ControllerRequest::CreateTopic {
            id: created.id,
            name: topic.name.clone(),
            partitions: created.partitions,
            replication_factor: created.replication_factor,
            config: created.config.clone(),
        };
        self.call_controller(request)
            .await
            .map_err(|e| controller_error(&e))?;
        let name = topic.name.clone();
        let shown = move |m: &control::Metadata| m.names.contains_key(&name);
        if !self.catch_up_on_every_shard(shown).await {
            let timed_out = ResponseError::RequestTimedOut.code();
            return Err((timed_out, "created, not yet visible".into()));
        }
        if let Some(id) = self.view.borrow().metadata.names.get(&topic.name) {
            created.id = *id;
        }
        Ok(created)
    }

    /// What creating `topic` would give, or why it is refused.
    fn check_new_topic(&self, topic: &NewTopic) -> Result<Created, Refused> {
        let partitions = match topic.partitions {
            -1 => self.config.default_partitions as i32,
            n => n,
        };
        let replication_factor = match topic.replication_factor {
            -1 => self.default_replication_factor(),
            n => n,
        };
        if partitions <= 0 {
            let code = ResponseError::InvalidPartitions.code();
            return Err((code, format!("{partitions} partitions")));
        }
        if replication_factor <= 0 {
            let code = ResponseError::InvalidReplicationFactor.code();
            return Err((code, format!("replication factor {replication_factor}")));
        }
        let mut config = TopicConfig::default();
        for (key, value) in &topic.configs {
            let Some(value) = value else { continue };
            if let Err(e) = config.set(key, value) {
                return Err((ResponseError::InvalidConfig.code(), e.to_string()));
            }
        }
        check_tiering(&self.config, &config, None)?;
        self.check_name_and_brokers(&topic.name, replication_factor as usize)?;
        Ok(Created {
            id: TopicId(rand::random()),
            config,
            partitions: partitions as usize,
            replication_factor: replication_factor as usize,
        })
    }

    /// The configured default, as far as live brokers allow.
    fn default_replication_factor(&self) -> i16 {
        let live = self.view.borrow().metadata.live_brokers().count().max(1);
        (self.config.default_replication_factor as usize).min(live) as i16
    }

    fn check_name_and_brokers(&self, name: &str, replication_factor: usize) -> Result<(), Refused> {
        if let Err(e) = control::model::check_topic_name(name) {
            return Err((ResponseError::InvalidTopicException.code(), e.to_string()));
        }
        let view = self.view.borrow();
        if view.metadata.names.contains_key(name) {
            let code = ResponseError::TopicAlreadyExists.code();
            return Err((code, format!("topic {name} already exists")));
        }
        let live = view.metadata.live_brokers().count();
        if replication_factor > live {
            return Err((
                ResponseError::InvalidReplicationFactor.code(),
                format!("replication factor {replication_factor} exceeds the {live} live brokers"),
            ));
        }
        Ok(())
    }

    /// Deletes a topic and waits (bounded) for every shard of this broker to
    /// see it gone.
    pub async fn delete_topic(&self, name: &str) -> Result<(), Refused> {
        if is_internal(name) {
            // The coordinators' state lives there (Kafka refuses too).
            return Err((
                ResponseError::InvalidTopicException.code(),
                format!("{name} is internal and cannot be deleted"),
            ));
        }
        if !self.view.borrow().metadata.names.contains_key(name) {
            return Err((
                ResponseError::UnknownTopicOrPartition.code(),
                format!("no topic {name}"),
            ));
        }
        let request = ControllerRequest::DeleteTopic {
            name: name.to_string(),
        };
        match self.call_controller(request).await {
            Ok(()) => {
                let name = name.to_string();
                (self.catch_up_on_every_shard(move |m| !m.names.contains_key(&name))).await;
                Ok(())
            }
            Err(e) => Err(controller_error(&e)),
        }
    }
}

/// Whether `topic` is one of the coordinators' own (`__consumer_offsets`,
/// `__transaction_state`): only they write to it, and it is never deleted.
pub fn is_internal(topic: &str) -> bool {
    topic == crate::groups::OFFSETS_TOPIC || topic == crate::transactions::TRANSACTION_STATE_TOPIC
}

/// A topic config's settings checked against each other (and against the
/// `old` one it replaces), and tiered storage refused where the broker
/// has no object store: INVALID_CONFIG, in words.
pub fn check_tiering(
    broker: &crate::config::BrokerConfig,
    config: &TopicConfig,
    old: Option<&TopicConfig>,
) -> Result<(), Refused> {
    let invalid = |why: String| (ResponseError::InvalidConfig.code(), why);
    let checked = match old {
        Some(old) => config.check_change_from(old),
        None => config.check(),
    };
    checked.map_err(|e| invalid(e.to_string()))?;
    if config.remote_storage_enable && broker.remote_store == "none" {
        return Err(invalid(
            "remote.storage.enable: tiered storage is off on this broker (remote_store = none)"
                .into(),
        ));
    }
    Ok(())
}
