//! Admin calls: topics (create, list, describe, alter configs, grow,
//! delete), the cluster's description and leader elections. Each turns a broker's error code
//! into an error carrying its message.

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeClusterRequest,
    DescribeConfigsRequest, ElectLeadersRequest, IncrementalAlterConfigsRequest, TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};
use kafka_protocol::ResponseError;

use crate::cluster::{BrokerInfo, Cluster, TopicInfo};
use crate::connection::ClientError;

/// A refusal from the broker, with its message.
pub(crate) fn refused(code: i16, message: Option<&StrBytes>) -> ClientError {
    match message {
        Some(m) => ClientError::Refused(code, m.as_str().to_string()),
        None => ClientError::Broker(code),
    }
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A topic's configuration entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Its key.
    pub name: String,
    /// Its value.
    pub value: Option<String>,
    /// Whether it is the default.
    pub is_default: bool,
}

/// One idempotent producer's state in a partition (DescribeProducers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerInfo {
    /// The producer id.
    pub producer_id: i64,
    /// Its epoch.
    pub epoch: i32,
    /// Its last record's sequence.
    pub last_sequence: i32,
    /// Its last batch's largest timestamp.
    pub last_timestamp: i64,
}

/// What DescribeCluster says.
#[derive(Debug, Clone)]
pub struct ClusterDescription {
    /// The cluster id.
    pub cluster_id: String,
    /// The active controller.
    pub controller_id: i32,
    /// The live brokers.
    pub brokers: Vec<BrokerInfo>,
    /// Each registered broker's rack, if it has one (by id), fenced ones
    /// included.
    pub racks: std::collections::BTreeMap<i32, Option<String>>,
}

/// One partition's outcome of a leader election (ElectLeaders).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Election {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// 0: elected; ELECTION_NOT_NEEDED (84), PREFERRED_LEADER_NOT_AVAILABLE
    /// (80), ELIGIBLE_LEADERS_NOT_AVAILABLE (83), or another of Kafka's codes.
    pub error_code: i16,
    /// Why, when the broker said.
    pub message: Option<String>,
}

/// Config resource types (DescribeConfigs, IncrementalAlterConfigs).
const TOPIC_RESOURCE: i8 = 2;
const BROKER_RESOURCE: i8 = 4;

/// How often a call the controller decides, answered NOT_CONTROLLER, is
/// asked again (250 ms apart: 5 s, longer than a metadata election takes).
const NOT_CONTROLLER_RETRIES: u32 = 20;

/// A response's first error: its code and message.
pub(crate) type FirstError = Option<(i16, Option<StrBytes>)>;

impl Cluster {
    /// Sends a call the controller decides (topics created, deleted, grown,
    /// configs altered) to any broker, asking again while the answer is
    /// NOT_CONTROLLER: retriable (a metadata election under way), as
    /// Kafka's clients treat it. Any other error is returned as a refusal.
    pub(crate) async fn call_controller<R: Request>(
        &self,
        request: &R,
        first_error: impl Fn(&R::Response) -> FirstError,
    ) -> Result<R::Response, ClientError> {
        let not_controller = ResponseError::NotController.code();
        let mut attempts = 0;
        loop {
            let response = self.call_any(request).await?;
            match first_error(&response) {
                Some((code, _)) if code == not_controller && attempts < NOT_CONTROLLER_RETRIES => {
                    attempts += 1;
                    glommio::timer::sleep(std::time::Duration::from_millis(250)).await;
                }
                Some((code, message)) => return Err(refused(code, message.as_ref())),
                None => return Ok(response),
            }
        }
    }

    /// Creates a topic; `partitions`/`replication_factor` -1 take the broker's defaults.
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &[(&str, &str)],
    ) -> Result<(), ClientError> {
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(text(name)))
                .with_num_partitions(partitions)
                .with_replication_factor(replication_factor)
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            CreatableTopicConfig::default()
                                .with_name(text(k))
                                .with_value(Some(text(v)))
                        })
                        .collect(),
                )]);
        self.call_controller(&request, |r| {
            r.topics
                .iter()
                .find(|t| t.error_code != 0)
                .map(|t| (t.error_code, t.error_message.clone()))
        })
        .await?;
        self.refresh(Some(&[name]), false).await
    }

    /// Each partition's idempotent producers, asked of its leader
    /// (DescribeProducers): (partition, its producers or the error code).
    pub async fn describe_producers(
        &self,
        topic: &str,
    ) -> Result<Vec<(i32, Result<Vec<ProducerInfo>, i16>)>, ClientError> {
        use kafka_protocol::messages::describe_producers_request::TopicRequest;
        use kafka_protocol::messages::DescribeProducersRequest;
        self.refresh(Some(&[topic]), false).await?;
        let info = self.topic(topic).ok_or(ClientError::Broker(
            ResponseError::UnknownTopicOrPartition.code(),
        ))?;
        let mut out = Vec::new();
        for (index, leader) in info.leaders.iter().enumerate() {
            let request =
                DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
                    .with_name(TopicName(text(topic)))
                    .with_partition_indexes(vec![index as i32])]);
            let answer = match self.broker(*leader).await {
                Ok(connection) => self.call_on(&connection, &request).await,
                Err(e) => Err(e),
            };
            let partition = answer?
                .topics
                .into_iter()
                .flat_map(|t| t.partitions)
                .find(|p| p.partition_index == index as i32);
            out.push((
                index as i32,
                match partition {
                    Some(p) if p.error_code == 0 => Ok(p
                        .active_producers
                        .iter()
                        .map(|s| ProducerInfo {
                            producer_id: s.producer_id.0,
                            epoch: s.producer_epoch,
                            last_sequence: s.last_sequence,
                            last_timestamp: s.last_timestamp,
                        })
                        .collect()),
                    Some(p) => Err(p.error_code),
                    None => Err(ResponseError::UnknownServerError.code()),
                },
            ));
        }
        Ok(out)
    }

    /// Deletes a topic.
    pub async fn delete_topic(&self, name: &str) -> Result<(), ClientError> {
        let request = DeleteTopicsRequest::default()
            .with_timeout_ms(30_000)
            // v6 names topics in `topics`, earlier versions in `topic_names`.
            .with_topic_names(vec![TopicName(text(name))])
            .with_topics(vec![
                DeleteTopicState::default().with_name(Some(TopicName(text(name))))
            ]);
        self.call_controller(&request, |r| {
            r.responses
                .iter()
                .find(|t| t.error_code != 0)
                .map(|t| (t.error_code, t.error_message.clone()))
        })
        .await?;
        Ok(())
    }

    /// Every topic, sorted by name.
    pub async fn list_topics(&self) -> Result<Vec<TopicInfo>, ClientError> {
        self.refresh(None, false).await?;
        let request = kafka_protocol::messages::MetadataRequest::default().with_topics(None);
        let response = self.call_any(&request).await?;
        let mut topics: Vec<TopicInfo> = response
            .topics
            .iter()
            .filter_map(|t| t.name.as_ref())
            .filter_map(|n| self.topic(n.as_str()))
            .collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(topics)
    }

    /// A topic's configuration.
    pub async fn describe_configs(&self, topic: &str) -> Result<Vec<ConfigEntry>, ClientError> {
        self.describe_resource_configs(TOPIC_RESOURCE, topic).await
    }

    /// Whether broker `id` is cordoned (KIP-1066: no new replicas go to it).
    pub async fn broker_cordoned(&self, id: i32) -> Result<bool, ClientError> {
        let configs = self
            .describe_resource_configs(BROKER_RESOURCE, &id.to_string())
            .await?;
        Ok(configs.iter().any(|c| {
            c.name == "cordoned.log.dirs" && c.value.as_deref().is_some_and(|v| !v.is_empty())
        }))
    }

    /// Cordons broker `id` (`cordoned.log.dirs=*`) or lifts its cordon.
    pub async fn set_broker_cordoned(&self, id: i32, cordoned: bool) -> Result<(), ClientError> {
        let value = cordoned.then_some("*");
        self.alter_resource_configs(
            BROKER_RESOURCE,
            &id.to_string(),
            &[("cordoned.log.dirs", value)],
        )
        .await
    }

    async fn describe_resource_configs(
        &self,
        resource_type: i8,
        name: &str,
    ) -> Result<Vec<ConfigEntry>, ClientError> {
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(text(name))
                .with_configuration_keys(None),
        ]);
        let response = self.call_any(&request).await?;
        let result = response
            .results
            .first()
            .ok_or_else(|| ClientError::Protocol("no result".into()))?;
        if result.error_code != 0 {
            return Err(refused(result.error_code, result.error_message.as_ref()));
        }
        Ok(result
            .configs
            .iter()
            .map(|c| ConfigEntry {
                name: c.name.as_str().to_string(),
                value: c.value.as_ref().map(|v| v.as_str().to_string()),
                is_default: c.config_source == 5,
            })
            .collect())
    }

    /// Sets (Some) or resets to the default (None) a topic's config keys.
    pub async fn alter_configs(
        &self,
        topic: &str,
        changes: &[(&str, Option<&str>)],
    ) -> Result<(), ClientError> {
        self.alter_resource_configs(TOPIC_RESOURCE, topic, changes)
            .await
    }

    async fn alter_resource_configs(
        &self,
        resource_type: i8,
        name: &str,
        changes: &[(&str, Option<&str>)],
    ) -> Result<(), ClientError> {
        let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(text(name))
                .with_configs(
                    changes
                        .iter()
                        .map(|(k, v)| {
                            AlterableConfig::default()
                                .with_name(text(k))
                                .with_config_operation(if v.is_some() { 0 } else { 1 })
                                .with_value(v.map(text))
                        })
                        .collect(),
                ),
        ]);
        self.call_controller(&request, |r| {
            r.responses
                .iter()
                .find(|c| c.error_code != 0)
                .map(|c| (c.error_code, c.error_message.clone()))
        })
        .await?;
        Ok(())
    }

    /// Grows a topic to `total` partitions.
    pub async fn create_partitions(&self, topic: &str, total: i32) -> Result<(), ClientError> {
        let request = CreatePartitionsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(TopicName(text(topic)))
                .with_count(total)]);
        self.call_controller(&request, |r| {
            r.results
                .iter()
                .find(|t| t.error_code != 0)
                .map(|t| (t.error_code, t.error_message.clone()))
        })
        .await?;
        self.refresh(Some(&[topic]), false).await
    }

    /// The cluster's id, controller and brokers.
    pub async fn describe_cluster(&self) -> Result<ClusterDescription, ClientError> {
        // Fenced brokers too (v2): their racks count in rack-aware plans.
        let request = DescribeClusterRequest::default().with_include_fenced_brokers(true);
        let response = self.call_any(&request).await?;
        if response.error_code != 0 {
            return Err(refused(
                response.error_code,
                response.error_message.as_ref(),
            ));
        }
        Ok(ClusterDescription {
            cluster_id: response.cluster_id.as_str().to_string(),
            controller_id: response.controller_id.0,
            brokers: response
                .brokers
                .iter()
                .filter(|b| !b.is_fenced)
                .map(|b| BrokerInfo {
                    id: b.broker_id.0,
                    address: format!("{}:{}", b.host.as_str(), b.port),
                })
                .collect(),
            racks: (response.brokers.iter())
                .map(|b| {
                    (
                        b.broker_id.0,
                        b.rack.as_ref().map(|r| r.as_str().to_string()),
                    )
                })
                .collect(),
        })
    }

    /// Gives partitions back to their preferred replicas, or (`unclean`)
    /// a leader to those without one, from outside the ISR if none in it
    /// is live: those named (topic, partitions), or every partition (None:
    /// the answer then leaves out those that need nothing). Each
    /// partition's outcome.
    pub async fn elect_leaders(
        &self,
        unclean: bool,
        partitions: Option<&[(String, Vec<i32>)]>,
    ) -> Result<Vec<Election>, ClientError> {
        let named = partitions.map(|named| {
            named
                .iter()
                .map(|(topic, ids)| {
                    TopicPartitions::default()
                        .with_topic(TopicName(text(topic)))
                        .with_partitions(ids.clone())
                })
                .collect()
        });
        let request = ElectLeadersRequest::default()
            .with_election_type(i8::from(unclean))
            .with_timeout_ms(30_000)
            .with_topic_partitions(named);
        let response = self
            .call_controller(&request, |r| {
                (r.error_code != 0).then(|| (r.error_code, None))
            })
            .await?;
        let elections = response
            .replica_election_results
            .iter()
            .flat_map(|t| {
                t.partition_result.iter().map(|p| Election {
                    topic: t.topic.as_str().to_string(),
                    partition: p.partition_id,
                    error_code: p.error_code,
                    message: p.error_message.as_ref().map(|m| m.as_str().to_string()),
                })
            })
            .collect();
        self.refresh(None, false).await?;
        Ok(elections)
    }
}
