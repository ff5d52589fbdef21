//! What brokers ask of the active controller, and why it may refuse: the
//! requests a broker's metadata service takes, or forwards to the node
//! that leads ([`crate::transport::forward`]), and the calls and replies
//! that carry them there. They live below both the service and the
//! transports, so neither needs the other's types.

use crate::controller::AlterIsr;
use crate::model::acls::{AclBinding, AclFilter};
use crate::model::config::TopicConfig;
use crate::model::credentials::{ScramCredential, ScramMechanism};
use crate::model::error::MetadataError;
use crate::model::quotas::QuotaEntity;
use crate::model::record::{BrokerEndpoint, BrokerRegistration};
use crate::model::types::{BrokerId, Incarnation, TopicId};
use crate::raft::node::NodeId;

/// A request to the active controller.
#[derive(Debug, Clone, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(attr(allow(missing_docs)))]
pub enum ControllerRequest {
    /// A broker process announces itself, with its listeners (empty: its
    /// registration's listener serves every client).
    RegisterBroker(BrokerRegistration, Vec<BrokerEndpoint>),
    /// A new topic, placed by the controller.
    CreateTopic {
        /// Chosen by the caller (a random UUID).
        id: TopicId,
        /// Its name.
        name: String,
        /// Partition count.
        partitions: usize,
        /// Replicas per partition.
        replication_factor: usize,
        /// Its configuration.
        config: TopicConfig,
    },
    /// Delete a topic.
    DeleteTopic {
        /// Its name.
        name: String,
    },
    /// Grow a topic to `total` partitions.
    CreatePartitions {
        /// Its name.
        name: String,
        /// The new partition count.
        total: usize,
    },
    /// Replace a topic's configuration.
    AlterConfig {
        /// Its name.
        name: String,
        /// The whole new configuration.
        config: TopicConfig,
    },
    /// Move leadership off a broker, then fence it.
    ControlledShutdown {
        /// The broker.
        broker: BrokerId,
        /// Its current life.
        incarnation: Incarnation,
    },
    /// A partition leader's ISR change.
    AlterIsr(AlterIsr),
    /// A block of producer ids for a broker to hand out (Kafka's
    /// AllocateProducerIds): ids unique across the cluster, never reused.
    AllocateProducerIds {
        /// The broker asking.
        broker: BrokerId,
    },
    /// Set a user's credential for one mechanism (AlterUserScramCredentials).
    SetScramCredential(ScramCredential),
    /// Remove a user's credential for one mechanism.
    DeleteScramCredential {
        /// The user.
        user: String,
        /// The mechanism.
        mechanism: ScramMechanism,
    },
    /// A broker's configured user (`sasl_broker_user`): its credentials
    /// are set only if the user has none yet, so a password changed since
    /// (with AlterUserScramCredentials) is not put back at every start.
    BootstrapScramUser(Vec<ScramCredential>),
    /// Add ACLs (CreateAcls).
    CreateAcls(Vec<AclBinding>),
    /// Remove the ACLs each filter selects (DeleteAcls).
    DeleteAcls(Vec<AclFilter>),
    /// Set or remove client quotas (AlterClientQuotas): one entity's
    /// changes, applied together.
    AlterClientQuotas {
        /// Who.
        entity: QuotaEntity,
        /// (key, bytes per second or None to remove).
        changes: Vec<(String, Option<u64>)>,
    },
    /// Set or remove a consumer group's configs (IncrementalAlterConfigs
    /// on resource type GROUP), applied together.
    AlterGroupConfigs {
        /// The group.
        group: String,
        /// (key, value or None to remove).
        changes: Vec<(String, Option<String>)>,
    },
    /// Give the partitions named (topic, indexes) back to their preferred
    /// replicas where they are live and in sync (ElectLeaders, preferred;
    /// the broker names every partition for a null list).
    ElectPreferredLeaders {
        /// (topic, partition indexes).
        partitions: Vec<(String, Vec<i32>)>,
    },
    /// Give the partitions named (topic, indexes) that have no leader one:
    /// a live in-sync replica, else any live replica, whatever the topic
    /// allows (ElectLeaders, unclean).
    ElectUncleanLeaders {
        /// (topic, partition indexes).
        partitions: Vec<(String, Vec<i32>)>,
    },
    /// A node joins the metadata quorum as an observer (a Raft learner: it
    /// follows the log without a vote), or says its metadata listener moved.
    JoinQuorum {
        /// The node.
        node: NodeId,
        /// Its metadata listener, `ip:port`.
        address: String,
    },
    /// An observer becomes a voter (KIP-853's AddRaftVoter).
    AddVoter {
        /// The node.
        node: NodeId,
    },
    /// A voter becomes an observer; an observer leaves the quorum
    /// (KIP-853's RemoveRaftVoter).
    RemoveVoter {
        /// The node.
        node: NodeId,
    },
    /// Move partitions of a topic to new replicas, or cancel their moves
    /// (AlterPartitionReassignments): (partition, target or None).
    Reassign {
        /// The topic.
        topic: String,
        /// Each partition's target replicas; None cancels its move.
        partitions: Vec<(i32, Option<Vec<BrokerId>>)>,
    },
    /// Cordon a broker (no new replicas go to it) or lift its cordon.
    SetBrokerCordoned {
        /// The broker.
        broker: BrokerId,
        /// Cordoned, or not any more.
        cordoned: bool,
    },
}

/// Why a controller request failed.
#[derive(
    Debug, Clone, PartialEq, Eq, thiserror::Error, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(attr(allow(missing_docs)))]
pub enum ControllerError {
    /// This node does not lead; ask `leader`.
    #[error("not the active controller (leader: {leader:?})")]
    NotController {
        /// The leader, if known.
        leader: Option<NodeId>,
    },
    /// Refused by the metadata rules (when computed or when applied).
    #[error(transparent)]
    Refused(#[from] MetadataError),
    /// Leadership changed before the records committed: retry.
    #[error("leadership changed before the change committed")]
    Superseded,
    /// The service is stopping or its queue is full.
    #[error("metadata service unavailable")]
    Unavailable,
}

/// What a broker asks of the active controller.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Clone)]
#[rkyv(attr(allow(missing_docs)))]
pub enum Call {
    /// The broker is alive.
    Heartbeat {
        /// The broker.
        broker: BrokerId,
        /// Its current life.
        incarnation: Incarnation,
    },
    /// A change to commit.
    Request(ControllerRequest),
    /// Where each member's metadata listener is, as the node asked knows
    /// (answered by any member, with a [`MembersReply`]): a node about to
    /// join must be able to answer whichever member leads.
    Members,
}

/// The answer to [`Call::Members`]: (node, `ip:port`) of every member the
/// node asked knows, itself included when the metadata records it.
pub type MembersReply = Result<Vec<(NodeId, String)>, ControllerError>;

/// The controller's answer to a call: on success, the metadata log index
/// the caller's own node must apply before it acts on the answer (a
/// request's last record; for a heartbeat, the log's end when answered).
pub type Reply = Result<u64, ControllerError>;
