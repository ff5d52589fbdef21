//! Partition reassignment (KIP-455): partitions moved to new replicas or
//! their moves cancelled (AlterPartitionReassignments), and the moves
//! under way (ListPartitionReassignments).

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, ListPartitionReassignmentsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::admin::refused;
use crate::cluster::Cluster;
use crate::connection::ClientError;

/// One partition's answer to a move: 0, or Kafka's error code and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveOutcome {
    /// The partition.
    pub partition: i32,
    /// 0, or the error code.
    pub error_code: i16,
    /// Why, when the broker said.
    pub message: Option<String>,
}

/// A move under way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OngoingMove {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Its replicas meanwhile: the target, then those leaving.
    pub replicas: Vec<i32>,
    /// Replicas catching up.
    pub adding: Vec<i32>,
    /// Replicas leaving once it finishes.
    pub removing: Vec<i32>,
}

impl Cluster {
    /// Moves `topic`'s partitions to their target replicas, or cancels
    /// their moves (None); each partition's outcome.
    pub async fn reassign_partitions(
        &self,
        topic: &str,
        moves: &[(i32, Option<Vec<i32>>)],
    ) -> Result<Vec<MoveOutcome>, ClientError> {
        let partitions = moves
            .iter()
            .map(|(index, target)| {
                ReassignablePartition::default()
                    .with_partition_index(*index)
                    .with_replicas(
                        target
                            .as_ref()
                            .map(|t| t.iter().map(|b| BrokerId(*b)).collect()),
                    )
            })
            .collect();
        let request = AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![ReassignableTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(partitions)]);
        let response = self
            .call_controller(&request, |r| {
                (r.error_code != 0).then(|| (r.error_code, r.error_message.clone()))
            })
            .await?;
        Ok(response
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| MoveOutcome {
                partition: p.partition_index,
                error_code: p.error_code,
                message: p.error_message.as_ref().map(|m| m.as_str().to_string()),
            })
            .collect())
    }

    /// The moves under way (of every topic).
    pub async fn list_reassignments(&self) -> Result<Vec<OngoingMove>, ClientError> {
        let request = ListPartitionReassignmentsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(None);
        let response = self.call_any(&request).await?;
        if response.error_code != 0 {
            return Err(refused(
                response.error_code,
                response.error_message.as_ref(),
            ));
        }
        let ids = |brokers: &[BrokerId]| brokers.iter().map(|b| b.0).collect();
        Ok(response
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| OngoingMove {
                    topic: t.name.as_str().to_string(),
                    partition: p.partition_index,
                    replicas: ids(&p.replicas),
                    adding: ids(&p.adding_replicas),
                    removing: ids(&p.removing_replicas),
                })
            })
            .collect())
    }
}
