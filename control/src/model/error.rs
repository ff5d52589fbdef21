//! Why a metadata record or request is refused. A refused record changes nothing.

use crate::model::types::{BrokerId, Incarnation, PartitionEpoch, PartitionId, TopicId};

/// Errors of the metadata model and the controller.
#[derive(
    Debug, Clone, PartialEq, Eq, thiserror::Error, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(attr(allow(missing_docs)))]
pub enum MetadataError {
    /// No topic with this id.
    #[error("unknown topic id {0}")]
    UnknownTopicId(TopicId),
    /// No topic with this name.
    #[error("unknown topic {0}")]
    UnknownTopic(String),
    /// The name is taken.
    #[error("topic {0} already exists")]
    TopicExists(String),
    /// Names are 1-249 characters of [a-zA-Z0-9._-], and not "." or "..".
    #[error("invalid topic name {0:?}")]
    InvalidTopicName(String),
    /// No such partition.
    #[error("unknown partition {topic}-{partition}")]
    UnknownPartition {
        /// The topic.
        topic: TopicId,
        /// The partition.
        partition: PartitionId,
    },
    /// No broker with this id.
    #[error("unknown broker {0}")]
    UnknownBroker(BrokerId),
    /// A reassignment of this partition is under way already.
    #[error("partition {topic}-{partition} is being reassigned already")]
    ReassignmentInProgress {
        /// The topic.
        topic: TopicId,
        /// The partition.
        partition: PartitionId,
    },
    /// No reassignment of this partition is under way.
    #[error("partition {topic}-{partition} is not being reassigned")]
    NoReassignmentInProgress {
        /// The topic.
        topic: TopicId,
        /// The partition.
        partition: PartitionId,
    },
    /// A reassignment that is refused, and why.
    #[error("invalid reassignment: {0}")]
    ReassignmentRefused(String),
    /// A quorum member's metadata listener that is not `ip:port`.
    #[error("invalid metadata listener address {0:?}: expected a routable ip:port")]
    InvalidQuorumAddress(String),
    /// A change of the metadata quorum's voters that is refused, and why.
    #[error("{0}")]
    VoterChange(String),
    /// A node the metadata quorum does not have (neither voter nor observer).
    #[error(
        "node {0} is not a member of the metadata quorum (a broker outside \
         controller_quorum_voters joins as an observer once it runs with controller_listen set)"
    )]
    NotQuorumMember(u64),
    /// An observer whose copy of the metadata log is too far behind to vote.
    #[error(
        "node {node} has not caught up with the metadata log (it holds {matched} of {committed} \
         committed entries): try again once it has"
    )]
    QuorumMemberBehind {
        /// The node.
        node: u64,
        /// How far its log matches the leader's.
        matched: u64,
        /// The leader's commit index.
        committed: u64,
    },
    /// A registration or fencing that names an older life of the broker.
    #[error("broker {broker} incarnation {given:?} is stale (current {current:?})")]
    StaleIncarnation {
        /// The broker.
        broker: BrokerId,
        /// What the record named.
        given: Incarnation,
        /// What the metadata holds.
        current: Incarnation,
    },
    /// An ISR or leader change that was computed from an older partition state.
    #[error("stale partition epoch {given:?} for {topic}-{partition} (current {current:?})")]
    StalePartitionEpoch {
        /// The topic.
        topic: TopicId,
        /// The partition.
        partition: PartitionId,
        /// What the request named.
        given: PartitionEpoch,
        /// What the metadata holds.
        current: PartitionEpoch,
    },
    /// A replica list, ISR or leader that breaks the partition's rules.
    #[error("invalid partition change: {0}")]
    InvalidPartitionChange(String),
    /// A producer id block that is not the next one (or of a size out of
    /// bounds): ids would repeat or skip.
    #[error("producer id block [{first}, +{size}) is not the next one ({next})")]
    InvalidProducerIdBlock {
        /// The block's first id.
        first: i64,
        /// Its size.
        size: i64,
        /// The next id the metadata would hand out.
        next: i64,
    },
    /// Not enough unfenced brokers for the replication factor.
    #[error("replication factor {wanted} exceeds the {available} available brokers")]
    NotEnoughBrokers {
        /// Replicas asked for.
        wanted: usize,
        /// Brokers that can take them.
        available: usize,
    },
    /// A configuration key this broker does not know.
    #[error("unknown configuration key {0}")]
    UnknownConfig(String),
    /// A configuration value out of range.
    #[error("invalid value {value:?} for {key}: {why}")]
    InvalidConfig {
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// Why it was refused.
        why: String,
    },
    /// A record or snapshot that does not decode.
    #[error("undecodable metadata: {0}")]
    Decode(String),
    /// The cluster already has an id.
    #[error("the cluster already has id {0}")]
    ClusterIdSet(crate::model::types::ClusterId),
    /// A broker that still leads partitions cannot be fenced or replaced by
    /// a new life (its leaderships move first, in the same request; a
    /// concurrent change refused those moves).
    #[error("broker {broker} still leads {partitions} partitions")]
    StillLeads {
        /// The broker.
        broker: BrokerId,
        /// How many partitions it leads.
        partitions: usize,
    },
    /// A SCRAM credential (or user name) outside the accepted bounds.
    #[error("invalid credential: {0}")]
    InvalidCredential(String),
    /// No such user (or no credential of that mechanism).
    #[error("user {user:?} has no {mechanism} credential")]
    UnknownCredential {
        /// The user.
        user: String,
        /// The mechanism's name.
        mechanism: String,
    },
    /// An ACL outside the accepted shapes.
    #[error("invalid ACL: {0}")]
    InvalidAcl(String),
    /// A client quota outside the accepted shapes.
    #[error("invalid quota: {0}")]
    InvalidQuota(String),
    /// A group config outside the accepted shapes.
    #[error("invalid group config: {0}")]
    InvalidGroupConfig(String),
    /// A broker's listeners outside the accepted shapes.
    #[error("invalid broker endpoints: {0}")]
    InvalidEndpoints(String),
}
