//! Metadata records: the commands of the metadata log. The controller
//! proposes them through Raft; every broker applies the committed ones in
//! order to its copy of the metadata.

use rkyv::{Archive, Deserialize, Serialize};

use crate::model::acls::AclBinding;
use crate::model::config::TopicConfig;
use crate::model::credentials::{ScramCredential, ScramMechanism};
use crate::model::error::MetadataError;
use crate::model::frozen_topic::TopicConfigV1;
use crate::model::quotas::QuotaEntity;
use crate::model::types::{
    BrokerId, ClusterId, Incarnation, PartitionEpoch, PartitionId, ShardId, TopicId,
};

/// A broker announcing itself (a new process: a new incarnation).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct BrokerRegistration {
    /// Node id.
    pub id: BrokerId,
    /// Larger than any earlier registration of this id.
    pub incarnation: Incarnation,
    /// Where clients reach its Kafka listener, `host:port`.
    pub listener: String,
    /// Its rack (failure domain), if configured.
    pub rack: Option<String>,
    /// How many shards (cores) it runs.
    pub shards: u16,
}

/// One of a broker's listeners: its name and where clients of that
/// listener reach the broker (Kafka's advertised.listeners entry).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct BrokerEndpoint {
    /// The listener's name (`INTERNAL`, `EXTERNAL`, `SASL_SSL`, ...).
    pub listener: String,
    /// `host:port`.
    pub address: String,
}

/// Where one partition's replicas live.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct PartitionAssignment {
    /// The replicas; the first is the preferred leader.
    pub replicas: Vec<BrokerId>,
    /// For each replica, the shard of its broker that owns it.
    pub shards: Vec<ShardId>,
}

/// A new leader and/or ISR for one partition.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct PartitionChange {
    /// The topic.
    pub topic: TopicId,
    /// The partition.
    pub partition: PartitionId,
    /// The partition epoch the change was computed from.
    pub expected_epoch: PartitionEpoch,
    /// The new leader (None: no replica can lead; the partition is offline).
    pub leader: Option<BrokerId>,
    /// The new in-sync replica set.
    pub isr: Vec<BrokerId>,
    /// The leader comes from outside the ISR (the topic must allow it).
    pub unclean: bool,
}

/// One command of the metadata log.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug), attr(allow(missing_docs)))]
pub enum MetadataRecord {
    /// A broker process started.
    RegisterBroker(BrokerRegistration),
    /// Its heartbeats stopped, or it shut down: it may lead nothing.
    FenceBroker {
        /// The broker.
        id: BrokerId,
        /// The life being fenced.
        incarnation: Incarnation,
    },
    /// It is alive and caught up: it may lead again.
    UnfenceBroker {
        /// The broker.
        id: BrokerId,
        /// The life being unfenced.
        incarnation: Incarnation,
    },
    /// [`MetadataRecord::CreateTopic`] as written before tiered storage's
    /// settings (decoded into it; never written now).
    CreateTopicV1 {
        /// Chosen by the proposer, so every replica applies the same id.
        id: TopicId,
        /// The name.
        name: String,
        /// Its configuration.
        config: TopicConfigV1,
        /// One assignment per partition.
        partitions: Vec<PartitionAssignment>,
    },
    /// A topic is deleted.
    DeleteTopic {
        /// The topic.
        id: TopicId,
    },
    /// Partitions are added to a topic.
    CreatePartitions {
        /// The topic.
        topic: TopicId,
        /// One assignment per new partition.
        partitions: Vec<PartitionAssignment>,
    },
    /// [`MetadataRecord::AlterTopicConfig`] as written before tiered
    /// storage's settings (decoded into it; never written now).
    AlterTopicConfigV1 {
        /// The topic.
        topic: TopicId,
        /// The whole new configuration.
        config: TopicConfigV1,
    },
    /// A partition's leader or ISR changes.
    ChangePartition(PartitionChange),
    /// The cluster gets its id (once, from its first active controller).
    /// Appended last: records written before it decode unchanged.
    SetClusterId {
        /// The id.
        id: ClusterId,
    },
    /// A block of producer ids `[first, first + size)` goes to a broker:
    /// the cluster's next free id moves past it, so no id is handed out
    /// twice, even by a broker that restarts and asks again.
    AllocateProducerIds {
        /// The broker that hands them out.
        broker: BrokerId,
        /// The first id: the cluster's next free one.
        first: i64,
        /// How many.
        size: i64,
    },
    /// A user's SCRAM credential for one mechanism is set (created or
    /// replaced). Appended last, as every record after it will be.
    SetScramCredential(ScramCredential),
    /// A user's SCRAM credential for one mechanism is removed.
    DeleteScramCredential {
        /// The user.
        user: String,
        /// The mechanism.
        mechanism: ScramMechanism,
    },
    /// ACLs are added (those already there stay once).
    CreateAcls(Vec<AclBinding>),
    /// ACLs are removed (those not there are skipped).
    DeleteAcls(Vec<AclBinding>),
    /// A client quota is set (or removed, with no value).
    SetClientQuota {
        /// Who it is for.
        entity: QuotaEntity,
        /// Which quota (`producer_byte_rate`, `consumer_byte_rate`).
        key: String,
        /// Bytes per second; None removes it.
        value: Option<u64>,
    },
    /// A broker life's listeners (proposed right after its registration,
    /// which keeps the inter-broker one in `listener`).
    SetBrokerEndpoints {
        /// The broker.
        id: BrokerId,
        /// The life they belong to.
        incarnation: Incarnation,
        /// One per listener, names unique.
        endpoints: Vec<BrokerEndpoint>,
    },
    /// A consumer group's config is set (or removed, with no value).
    /// Appended last, as every record after it will be.
    SetGroupConfig {
        /// The group.
        group: String,
        /// Which config (`consumer.session.timeout.ms`, ...).
        key: String,
        /// Its value; None removes it.
        value: Option<String>,
    },
    /// A topic is created with its partitions placed. (Its config is
    /// boxed: the archived record's size, which rkyv finds the record's
    /// root by, must stay what records written before were.)
    CreateTopic {
        /// Chosen by the proposer, so every replica applies the same id.
        id: TopicId,
        /// The name.
        name: String,
        /// Its configuration.
        config: Box<TopicConfig>,
        /// One assignment per partition.
        partitions: Vec<PartitionAssignment>,
    },
    /// A topic's configuration is replaced.
    AlterTopicConfig {
        /// The topic.
        topic: TopicId,
        /// The whole new configuration.
        config: Box<TopicConfig>,
    },
    /// An operator's unclean election (ElectLeaders, type UNCLEAN): a live
    /// replica outside the ISR leads a partition left without a leader and
    /// without a live in-sync replica, whatever its topic's
    /// `unclean.leader.election.enable` says. Appended last.
    ElectUnclean(PartitionChange),
    /// An operator cordons a broker (KIP-1066: no new replicas go to it)
    /// or lifts the cordon.
    SetBrokerCordoned {
        /// The broker.
        id: BrokerId,
        /// Cordoned, or not any more.
        cordoned: bool,
    },
    /// A node joining the metadata quorum (an observer, or a voter added
    /// later) says where its metadata listener is.
    SetQuorumAddress {
        /// The node (its broker id).
        node: u64,
        /// Its metadata listener, `ip:port`.
        address: String,
    },
    /// An operator moves a partition to new replicas (KIP-455): until it
    /// finishes, its replicas are the target followed by those leaving.
    BeginReassignment {
        /// The topic.
        topic: TopicId,
        /// The partition.
        partition: PartitionId,
        /// The partition epoch the move was decided from.
        expected_epoch: PartitionEpoch,
        /// The replicas (and their shards) it moves to.
        target: PartitionAssignment,
    },
    /// A reassignment ends, with `change`'s leader and ISR: completed (the
    /// replicas become the target) or cancelled (back to the original).
    FinishReassignment {
        /// The leader and ISR after it.
        change: PartitionChange,
        /// Cancelled, not completed.
        cancelled: bool,
    },
}

/// The archived size of every record written so far: rkyv finds a
/// record's root this many bytes before its end, so a record type that
/// grew would misread every record already in a metadata log. A variant
/// too large for it keeps its bulk behind a `Box`.
pub const ARCHIVED_RECORD_BYTES: usize = 104;

const _: () = assert!(std::mem::size_of::<ArchivedMetadataRecord>() == ARCHIVED_RECORD_BYTES);

impl MetadataRecord {
    /// The record's bytes in the metadata log (rkyv).
    pub fn encode(&self) -> Vec<u8> {
        rkyv::to_bytes::<rkyv::rancor::Error>(self)
            .expect("metadata records always serialize")
            .to_vec()
    }

    /// Decodes and validates a record read from the metadata log.
    pub fn decode(bytes: &[u8]) -> Result<MetadataRecord, MetadataError> {
        // rkyv needs aligned input; log entries come from arbitrary buffers.
        let mut aligned = rkyv::util::AlignedVec::<16>::with_capacity(bytes.len());
        aligned.extend_from_slice(bytes);
        let record = rkyv::from_bytes::<MetadataRecord, rkyv::rancor::Error>(&aligned)
            .map_err(|e| MetadataError::Decode(e.to_string()))?;
        Ok(record.current())
    }

    /// The record in today's form: a frozen layout's record becomes the
    /// one written now, its config with the newer settings at defaults.
    fn current(self) -> MetadataRecord {
        match self {
            MetadataRecord::CreateTopicV1 {
                id,
                name,
                config,
                partitions,
            } => MetadataRecord::CreateTopic {
                id,
                name,
                config: Box::new(config.into()),
                partitions,
            },
            MetadataRecord::AlterTopicConfigV1 { topic, config } => {
                MetadataRecord::AlterTopicConfig {
                    topic,
                    config: Box::new(config.into()),
                }
            }
            current => current,
        }
    }
}
