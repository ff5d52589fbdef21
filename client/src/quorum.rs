//! The metadata quorum's members (KIP-853): who leads it and in which
//! term, its voters and observers (DescribeQuorum), an observer made a
//! voter (AddRaftVoter) and a voter made an observer (RemoveRaftVoter).

use kafka_protocol::messages::{
    AddRaftVoterRequest, DescribeQuorumRequest, RemoveRaftVoterRequest,
};

use crate::admin::refused;
use crate::cluster::Cluster;
use crate::connection::ClientError;

/// How long the broker may wait for an observer to catch up before it
/// becomes a voter.
const ADD_VOTER_TIMEOUT_MS: i32 = 30_000;

/// One member of the quorum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumMember {
    /// Its node id.
    pub id: i32,
    /// How far its log matches the leader's (-1: not known to the node
    /// that answered, which does not lead).
    pub log_end: i64,
}

/// What DescribeQuorum says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumDescription {
    /// The leader (-1: none known).
    pub leader: i32,
    /// Its term (Kafka's leader epoch of the metadata log).
    pub term: i32,
    /// The commit index.
    pub high_watermark: i64,
    /// The voters.
    pub voters: Vec<QuorumMember>,
    /// The observers.
    pub observers: Vec<QuorumMember>,
}

impl Cluster {
    /// The metadata quorum as the broker asked sees it.
    pub async fn describe_quorum(&self) -> Result<QuorumDescription, ClientError> {
        let response = self.call_any(&DescribeQuorumRequest::default()).await?;
        if response.error_code != 0 {
            return Err(refused(
                response.error_code,
                response.error_message.as_ref(),
            ));
        }
        let partition = response
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .ok_or_else(|| ClientError::Protocol("DescribeQuorum without a partition".into()))?;
        let members =
            |states: &[kafka_protocol::messages::describe_quorum_response::ReplicaState]| {
                states
                    .iter()
                    .map(|s| QuorumMember {
                        id: s.replica_id.0,
                        log_end: s.log_end_offset,
                    })
                    .collect()
            };
        Ok(QuorumDescription {
            leader: partition.leader_id.0,
            term: partition.leader_epoch,
            high_watermark: partition.high_watermark,
            voters: members(&partition.current_voters),
            observers: members(&partition.observers),
        })
    }

    /// Makes observer `id` a voter (once it has caught up).
    pub async fn add_raft_voter(&self, id: i32) -> Result<(), ClientError> {
        let request = AddRaftVoterRequest::default()
            .with_cluster_id(None)
            .with_voter_id(id)
            .with_timeout_ms(ADD_VOTER_TIMEOUT_MS);
        self.call_controller(&request, |r| {
            (r.error_code != 0).then(|| (r.error_code, r.error_message.clone()))
        })
        .await
        .map(drop)
    }

    /// Makes voter `id` an observer, or removes observer `id` from the quorum.
    pub async fn remove_raft_voter(&self, id: i32) -> Result<(), ClientError> {
        let request = RemoveRaftVoterRequest::default()
            .with_cluster_id(None)
            .with_voter_id(id);
        self.call_controller(&request, |r| {
            (r.error_code != 0).then(|| (r.error_code, r.error_message.clone()))
        })
        .await
        .map(drop)
    }
}
