//! The bytes of a metadata snapshot: a versioned envelope around the rkyv
//! archive of [`Metadata`], so the state can grow fields while snapshots
//! written by earlier versions still load.
//!
//! `[magic: 4 bytes][version u8][rkyv archive]`. Version 1 has no
//! envelope: the bare archive of the state as it was before
//! `deleted_topics` ([`MetadataV1`]); version 2 added `deleted_topics`
//! ([`MetadataV2`]); version 3 added `cluster_id` ([`MetadataV3`]); version
//! 4 added the producer id blocks ([`MetadataV4`]); version 5 added the
//! SCRAM credentials ([`MetadataV5`]); version 6 added the ACLs
//! ([`MetadataV6`]); version 7 added the client quotas ([`MetadataV7`]);
//! version 8 added the brokers' listeners ([`MetadataV8`]); version 9
//! added the group configs ([`MetadataV9`]); version 10 added tiered
//! storage's topic settings (versions 1-9 hold the frozen topic of
//! `frozen_topic`; [`MetadataV10`]); version 11 added the cordoned
//! brokers ([`MetadataV11`]); version 12 added the quorum members'
//! addresses ([`MetadataV12`]); version 13 adds the partitions being
//! reassigned. The frozen layouts
//! below never change.
//! A new field means a new version number and a frozen copy of the
//! previous layout here.
//!
//! Caution: every frozen layout holds the live [`Broker`] and the live
//! `Partition` (inside the frozen topic), so changing either changes them
//! all (and versions 5 and 6 hold the
//! live `ScramCredential`, version 6 the live `AclBinding`, version 8 the
//! live `BrokerEndpoint`: freeze copies
//! of those too before changing them). The fixtures under
//! broker/tests/fixtures (snapshots an earlier version wrote, with brokers
//! and topics) stop loading if that happens; freeze copies of them
//! before changing them, as `frozen_topic` froze the topic.

use std::collections::{BTreeMap, BTreeSet};

use rkyv::{Archive, Deserialize, Serialize};

use crate::model::acls::AclBinding;
use crate::model::credentials::{ScramCredential, ScramMechanism};
use crate::model::error::MetadataError;
use crate::model::frozen_topic::{thaw, TopicV1};
use crate::model::quotas::QuotaEntity;
use crate::model::record::BrokerEndpoint;
use crate::model::types::{BrokerId, ClusterId, TopicId};
use crate::model::{Broker, Metadata, Topic};

/// Marks an enveloped snapshot. The first byte is not printable, so a
/// version 1 archive (which starts with the bytes of a name or address)
/// does not begin with it in practice; a misread would fail validation.
const MAGIC: [u8; 4] = [0xC0, b'M', b'D', b'S'];
/// The version written now: [`Metadata`] with the reassignments.
const VERSION_CURRENT: u8 = 13;
/// [`MetadataV12`].
const VERSION_12: u8 = 12;
/// [`MetadataV11`].
const VERSION_11: u8 = 11;
/// [`MetadataV10`].
const VERSION_10: u8 = 10;
/// [`MetadataV9`].
const VERSION_9: u8 = 9;
/// [`MetadataV8`].
const VERSION_8: u8 = 8;
/// [`MetadataV7`].
const VERSION_7: u8 = 7;
/// [`MetadataV6`].
const VERSION_6: u8 = 6;
/// [`MetadataV5`].
const VERSION_5: u8 = 5;
/// [`MetadataV4`].
const VERSION_4: u8 = 4;
/// [`MetadataV2`].
const VERSION_2: u8 = 2;
/// [`MetadataV3`].
const VERSION_3: u8 = 3;

/// The state as version 1 stored it.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[rkyv(derive(Debug))]
#[allow(missing_docs)]
pub struct MetadataV1 {
    pub brokers: BTreeMap<BrokerId, Broker>,
    pub topics: BTreeMap<TopicId, TopicV1>,
    pub names: BTreeMap<String, TopicId>,
    pub unclean_leader_elections: u64,
}

impl From<MetadataV1> for Metadata {
    fn from(v1: MetadataV1) -> Metadata {
        Metadata {
            brokers: v1.brokers,
            topics: thaw(v1.topics),
            names: v1.names,
            unclean_leader_elections: v1.unclean_leader_elections,
            deleted_topics: BTreeSet::new(),
            cluster_id: None,
            next_producer_id: 0,
            producer_id_blocks: BTreeMap::new(),
            scram_credentials: BTreeMap::new(),
            acls: BTreeSet::new(),
            client_quotas: BTreeMap::new(),
            broker_endpoints: BTreeMap::new(),
            group_configs: BTreeMap::new(),
            cordoned_brokers: BTreeSet::new(),
            quorum_addresses: BTreeMap::new(),
            reassignments: BTreeMap::new(),
        }
    }
}

/// The state as version 2 stored it.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[rkyv(derive(Debug))]
#[allow(missing_docs)]
pub struct MetadataV2 {
    pub brokers: BTreeMap<BrokerId, Broker>,
    pub topics: BTreeMap<TopicId, TopicV1>,
    pub names: BTreeMap<String, TopicId>,
    pub unclean_leader_elections: u64,
    pub deleted_topics: BTreeSet<TopicId>,
}

impl From<MetadataV2> for Metadata {
    fn from(v2: MetadataV2) -> Metadata {
        Metadata {
            brokers: v2.brokers,
            topics: thaw(v2.topics),
            names: v2.names,
            unclean_leader_elections: v2.unclean_leader_elections,
            deleted_topics: v2.deleted_topics,
            cluster_id: None,
            next_producer_id: 0,
            producer_id_blocks: BTreeMap::new(),
            scram_credentials: BTreeMap::new(),
            acls: BTreeSet::new(),
            client_quotas: BTreeMap::new(),
            broker_endpoints: BTreeMap::new(),
            group_configs: BTreeMap::new(),
            cordoned_brokers: BTreeSet::new(),
            quorum_addresses: BTreeMap::new(),
            reassignments: BTreeMap::new(),
        }
    }
}

/// The state as version 3 stored it.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[rkyv(derive(Debug))]
#[allow(missing_docs)]
pub struct MetadataV3 {
    pub brokers: BTreeMap<BrokerId, Broker>,
    pub topics: BTreeMap<TopicId, TopicV1>,
    pub names: BTreeMap<String, TopicId>,
    pub unclean_leader_elections: u64,
    pub deleted_topics: BTreeSet<TopicId>,
    pub cluster_id: Option<ClusterId>,
}

impl From<MetadataV3> for Metadata {
    fn from(v3: MetadataV3) -> Metadata {
        Metadata {
            brokers: v3.brokers,
            topics: thaw(v3.topics),
            names: v3.names,
            unclean_leader_elections: v3.unclean_leader_elections,
            deleted_topics: v3.deleted_topics,
            cluster_id: v3.cluster_id,
            next_producer_id: 0,
            producer_id_blocks: BTreeMap::new(),
            scram_credentials: BTreeMap::new(),
            acls: BTreeSet::new(),
            client_quotas: BTreeMap::new(),
            broker_endpoints: BTreeMap::new(),
            group_configs: BTreeMap::new(),
            cordoned_brokers: BTreeSet::new(),
            quorum_addresses: BTreeMap::new(),
            reassignments: BTreeMap::new(),
        }
    }
}

/// The state as version 4 stored it.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[rkyv(derive(Debug))]
#[allow(missing_docs)]
pub struct MetadataV4 {
    pub brokers: BTreeMap<BrokerId, Broker>,
    pub topics: BTreeMap<TopicId, TopicV1>,
    pub names: BTreeMap<String, TopicId>,
    pub unclean_leader_elections: u64,
    pub deleted_topics: BTreeSet<TopicId>,
    pub cluster_id: Option<ClusterId>,
    pub next_producer_id: i64,
    pub producer_id_blocks: BTreeMap<BrokerId, (i64, i64)>,
}

impl From<MetadataV4> for Metadata {
    fn from(v4: MetadataV4) -> Metadata {
        Metadata {
            brokers: v4.brokers,
            topics: thaw(v4.topics),
            names: v4.names,
            unclean_leader_elections: v4.unclean_leader_elections,
            deleted_topics: v4.deleted_topics,
            cluster_id: v4.cluster_id,
            next_producer_id: v4.next_producer_id,
            producer_id_blocks: v4.producer_id_blocks,
            scram_credentials: BTreeMap::new(),
            acls: BTreeSet::new(),
            client_quotas: BTreeMap::new(),
            broker_endpoints: BTreeMap::new(),
            group_configs: BTreeMap::new(),
            cordoned_brokers: BTreeSet::new(),
            quorum_addresses: BTreeMap::new(),
            reassignments: BTreeMap::new(),
        }
    }
}

/// The state as version 5 stored it.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[rkyv(derive(Debug))]
#[allow(missing_docs)]
pub struct MetadataV5 {
    pub brokers: BTreeMap<BrokerId, Broker>,
    pub topics: BTreeMap<TopicId, TopicV1>,
    pub names: BTreeMap<String, TopicId>,
    pub unclean_leader_elections: u64,
    pub deleted_topics: BTreeSet<TopicId>,
    pub cluster_id: Option<ClusterId>,
    pub next_producer_id: i64,
    pub producer_id_blocks: BTreeMap<BrokerId, (i64, i64)>,
    pub scram_credentials: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
}

impl From<MetadataV5> for Metadata {
    fn from(v5: MetadataV5) -> Metadata {
        Metadata {
            brokers: v5.brokers,
            topics: thaw(v5.topics),
            names: v5.names,
            unclean_leader_elections: v5.unclean_leader_elections,
            deleted_topics: v5.deleted_topics,
            cluster_id: v5.cluster_id,
            next_producer_id: v5.next_producer_id,
            producer_id_blocks: v5.producer_id_blocks,
            scram_credentials: v5.scram_credentials,
            acls: BTreeSet::new(),
            client_quotas: BTreeMap::new(),
            broker_endpoints: BTreeMap::new(),
            group_configs: BTreeMap::new(),
            cordoned_brokers: BTreeSet::new(),
            quorum_addresses: BTreeMap::new(),
            reassignments: BTreeMap::new(),
        }
    }
}

/// The state as version 6 stored it.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[rkyv(derive(Debug))]
#[allow(missing_docs)]
pub struct MetadataV6 {
    pub brokers: BTreeMap<BrokerId, Broker>,
    pub topics: BTreeMap<TopicId, TopicV1>,
    pub names: BTreeMap<String, TopicId>,
    pub unclean_leader_elections: u64,
    pub deleted_topics: BTreeSet<TopicId>,
    pub cluster_id: Option<ClusterId>,
    pub next_producer_id: i64,
    pub producer_id_blocks: BTreeMap<BrokerId, (i64, i64)>,
    pub scram_credentials: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
    pub acls: BTreeSet<AclBinding>,
}

impl From<MetadataV6> for Metadata {
    fn from(v6: MetadataV6) -> Metadata {
        Metadata {
            brokers: v6.brokers,
            topics: thaw(v6.topics),
            names: v6.names,
            unclean_leader_elections: v6.unclean_leader_elections,
            deleted_topics: v6.deleted_topics,
            cluster_id: v6.cluster_id,
            next_producer_id: v6.next_producer_id,
            producer_id_blocks: v6.producer_id_blocks,
            scram_credentials: v6.scram_credentials,
            acls: v6.acls,
            client_quotas: BTreeMap::new(),
            broker_endpoints: BTreeMap::new(),
            group_configs: BTreeMap::new(),
            cordoned_brokers: BTreeSet::new(),
            quorum_addresses: BTreeMap::new(),
            reassignments: BTreeMap::new(),
        }
    }
}

/// The state as version 7 stored it.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[rkyv(derive(Debug))]
#[allow(missing_docs)]
pub struct MetadataV7 {
    pub brokers: BTreeMap<BrokerId, Broker>,
    pub topics: BTreeMap<TopicId, TopicV1>,
    pub names: BTreeMap<String, TopicId>,
    pub unclean_leader_elections: u64,
    pub deleted_topics: BTreeSet<TopicId>,
    pub cluster_id: Option<ClusterId>,
    pub next_producer_id: i64,
    pub producer_id_blocks: BTreeMap<BrokerId, (i64, i64)>,
    pub scram_credentials: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
    pub acls: BTreeSet<AclBinding>,
    pub client_quotas: BTreeMap<QuotaEntity, BTreeMap<String, u64>>,
}

impl From<MetadataV7> for Metadata {
    fn from(v7: MetadataV7) -> Metadata {
        Metadata {
            brokers: v7.brokers,
            topics: thaw(v7.topics),
            names: v7.names,
            unclean_leader_elections: v7.unclean_leader_elections,
            deleted_topics: v7.deleted_topics,
            cluster_id: v7.cluster_id,
            next_producer_id: v7.next_producer_id,
            producer_id_blocks: v7.producer_id_blocks,
            scram_credentials: v7.scram_credentials,
            acls: v7.acls,
            client_quotas: v7.client_quotas,
            broker_endpoints: BTreeMap::new(),
            group_configs: BTreeMap::new(),
            cordoned_brokers: BTreeSet::new(),
            quorum_addresses: BTreeMap::new(),
            reassignments: BTreeMap::new(),
        }
    }
}

/// The state as version 8 stored it.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[rkyv(derive(Debug))]
#[allow(missing_docs)]
pub struct MetadataV8 {
    pub brokers: BTreeMap<BrokerId, Broker>,
    pub topics: BTreeMap<TopicId, TopicV1>,
    pub names: BTreeMap<String, TopicId>,
    pub unclean_leader_elections: u64,
    pub deleted_topics: BTreeSet<TopicId>,
    pub cluster_id: Option<ClusterId>,
    pub next_producer_id: i64,
    pub producer_id_blocks: BTreeMap<BrokerId, (i64, i64)>,
    pub scram_credentials: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
    pub acls: BTreeSet<AclBinding>,
    pub client_quotas: BTreeMap<QuotaEntity, BTreeMap<String, u64>>,
    pub broker_endpoints: BTreeMap<BrokerId, Vec<BrokerEndpoint>>,
}

impl From<MetadataV8> for Metadata {
    fn from(v8: MetadataV8) -> Metadata {
        Metadata {
            brokers: v8.brokers,
            topics: thaw(v8.topics),
            names: v8.names,
            unclean_leader_elections: v8.unclean_leader_elections,
            deleted_topics: v8.deleted_topics,
            cluster_id: v8.cluster_id,
            next_producer_id: v8.next_producer_id,
            producer_id_blocks: v8.producer_id_blocks,
            scram_credentials: v8.scram_credentials,
            acls: v8.acls,
            client_quotas: v8.client_quotas,
            broker_endpoints: v8.broker_endpoints,
            group_configs: BTreeMap::new(),
            cordoned_brokers: BTreeSet::new(),
            quorum_addresses: BTreeMap::new(),
            reassignments: BTreeMap::new(),
        }
    }
}

/// The state as version 9 stored it: [`Metadata`] before tiered storage's
/// topic settings.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[rkyv(derive(Debug))]
#[allow(missing_docs)]
pub struct MetadataV9 {
    pub brokers: BTreeMap<BrokerId, Broker>,
    pub topics: BTreeMap<TopicId, TopicV1>,
    pub names: BTreeMap<String, TopicId>,
    pub unclean_leader_elections: u64,
    pub deleted_topics: BTreeSet<TopicId>,
    pub cluster_id: Option<ClusterId>,
    pub next_producer_id: i64,
    pub producer_id_blocks: BTreeMap<BrokerId, (i64, i64)>,
    pub scram_credentials: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
    pub acls: BTreeSet<AclBinding>,
    pub client_quotas: BTreeMap<QuotaEntity, BTreeMap<String, u64>>,
    pub broker_endpoints: BTreeMap<BrokerId, Vec<BrokerEndpoint>>,
    pub group_configs: BTreeMap<String, BTreeMap<String, String>>,
}

impl From<MetadataV9> for Metadata {
    fn from(v9: MetadataV9) -> Metadata {
        Metadata {
            brokers: v9.brokers,
            topics: thaw(v9.topics),
            names: v9.names,
            unclean_leader_elections: v9.unclean_leader_elections,
            deleted_topics: v9.deleted_topics,
            cluster_id: v9.cluster_id,
            next_producer_id: v9.next_producer_id,
            producer_id_blocks: v9.producer_id_blocks,
            scram_credentials: v9.scram_credentials,
            acls: v9.acls,
            client_quotas: v9.client_quotas,
            broker_endpoints: v9.broker_endpoints,
            group_configs: v9.group_configs,
            cordoned_brokers: BTreeSet::new(),
            quorum_addresses: BTreeMap::new(),
            reassignments: BTreeMap::new(),
        }
    }
}

/// The state as version 10 stored it: [`Metadata`] before the cordoned
/// brokers.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[rkyv(derive(Debug))]
#[allow(missing_docs)]
pub struct MetadataV10 {
    pub brokers: BTreeMap<BrokerId, Broker>,
    pub topics: BTreeMap<TopicId, Topic>,
    pub names: BTreeMap<String, TopicId>,
    pub unclean_leader_elections: u64,
    pub deleted_topics: BTreeSet<TopicId>,
    pub cluster_id: Option<ClusterId>,
    pub next_producer_id: i64,
    pub producer_id_blocks: BTreeMap<BrokerId, (i64, i64)>,
    pub scram_credentials: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
    pub acls: BTreeSet<AclBinding>,
    pub client_quotas: BTreeMap<QuotaEntity, BTreeMap<String, u64>>,
    pub broker_endpoints: BTreeMap<BrokerId, Vec<BrokerEndpoint>>,
    pub group_configs: BTreeMap<String, BTreeMap<String, String>>,
}

impl From<MetadataV10> for Metadata {
    fn from(v10: MetadataV10) -> Metadata {
        Metadata {
            brokers: v10.brokers,
            topics: v10.topics,
            names: v10.names,
            unclean_leader_elections: v10.unclean_leader_elections,
            deleted_topics: v10.deleted_topics,
            cluster_id: v10.cluster_id,
            next_producer_id: v10.next_producer_id,
            producer_id_blocks: v10.producer_id_blocks,
            scram_credentials: v10.scram_credentials,
            acls: v10.acls,
            client_quotas: v10.client_quotas,
            broker_endpoints: v10.broker_endpoints,
            group_configs: v10.group_configs,
            cordoned_brokers: BTreeSet::new(),
            quorum_addresses: BTreeMap::new(),
            reassignments: BTreeMap::new(),
        }
    }
}

/// The state as version 11 stored it: [`Metadata`] before the quorum
/// members' addresses.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[rkyv(derive(Debug))]
#[allow(missing_docs)]
pub struct MetadataV11 {
    pub brokers: BTreeMap<BrokerId, Broker>,
    pub topics: BTreeMap<TopicId, Topic>,
    pub names: BTreeMap<String, TopicId>,
    pub unclean_leader_elections: u64,
    pub deleted_topics: BTreeSet<TopicId>,
    pub cluster_id: Option<ClusterId>,
    pub next_producer_id: i64,
    pub producer_id_blocks: BTreeMap<BrokerId, (i64, i64)>,
    pub scram_credentials: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
    pub acls: BTreeSet<AclBinding>,
    pub client_quotas: BTreeMap<QuotaEntity, BTreeMap<String, u64>>,
    pub broker_endpoints: BTreeMap<BrokerId, Vec<BrokerEndpoint>>,
    pub group_configs: BTreeMap<String, BTreeMap<String, String>>,
    pub cordoned_brokers: BTreeSet<BrokerId>,
}

impl From<MetadataV11> for Metadata {
    fn from(v11: MetadataV11) -> Metadata {
        Metadata {
            brokers: v11.brokers,
            topics: v11.topics,
            names: v11.names,
            unclean_leader_elections: v11.unclean_leader_elections,
            deleted_topics: v11.deleted_topics,
            cluster_id: v11.cluster_id,
            next_producer_id: v11.next_producer_id,
            producer_id_blocks: v11.producer_id_blocks,
            scram_credentials: v11.scram_credentials,
            acls: v11.acls,
            client_quotas: v11.client_quotas,
            broker_endpoints: v11.broker_endpoints,
            group_configs: v11.group_configs,
            cordoned_brokers: v11.cordoned_brokers,
            quorum_addresses: BTreeMap::new(),
            reassignments: BTreeMap::new(),
        }
    }
}

/// The state as version 12 stored it: [`Metadata`] before the
/// reassignments.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[rkyv(derive(Debug))]
#[allow(missing_docs)]
pub struct MetadataV12 {
    pub brokers: BTreeMap<BrokerId, Broker>,
    pub topics: BTreeMap<TopicId, Topic>,
    pub names: BTreeMap<String, TopicId>,
    pub unclean_leader_elections: u64,
    pub deleted_topics: BTreeSet<TopicId>,
    pub cluster_id: Option<ClusterId>,
    pub next_producer_id: i64,
    pub producer_id_blocks: BTreeMap<BrokerId, (i64, i64)>,
    pub scram_credentials: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
    pub acls: BTreeSet<AclBinding>,
    pub client_quotas: BTreeMap<QuotaEntity, BTreeMap<String, u64>>,
    pub broker_endpoints: BTreeMap<BrokerId, Vec<BrokerEndpoint>>,
    pub group_configs: BTreeMap<String, BTreeMap<String, String>>,
    pub cordoned_brokers: BTreeSet<BrokerId>,
    pub quorum_addresses: BTreeMap<u64, String>,
}

impl From<MetadataV12> for Metadata {
    fn from(v12: MetadataV12) -> Metadata {
        Metadata {
            brokers: v12.brokers,
            topics: v12.topics,
            names: v12.names,
            unclean_leader_elections: v12.unclean_leader_elections,
            deleted_topics: v12.deleted_topics,
            cluster_id: v12.cluster_id,
            next_producer_id: v12.next_producer_id,
            producer_id_blocks: v12.producer_id_blocks,
            scram_credentials: v12.scram_credentials,
            acls: v12.acls,
            client_quotas: v12.client_quotas,
            broker_endpoints: v12.broker_endpoints,
            group_configs: v12.group_configs,
            cordoned_brokers: v12.cordoned_brokers,
            quorum_addresses: v12.quorum_addresses,
            reassignments: BTreeMap::new(),
        }
    }
}

// The snapshot methods of the state live here, with the format (the
// model does not depend on its encoding).
impl Metadata {
    /// The snapshot bytes, in the current version.
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    /// Decodes and validates a snapshot of any format version.
    pub fn decode(bytes: &[u8]) -> Result<Metadata, MetadataError> {
        decode(bytes)
    }
}

/// The current version's bytes.
pub fn encode(metadata: &Metadata) -> Vec<u8> {
    let archive =
        rkyv::to_bytes::<rkyv::rancor::Error>(metadata).expect("metadata always serializes");
    let mut out = Vec::with_capacity(MAGIC.len() + 1 + archive.len());
    out.extend_from_slice(&MAGIC);
    out.push(VERSION_CURRENT);
    out.extend_from_slice(&archive);
    out
}

/// Decodes and validates a snapshot of any version.
pub fn decode(bytes: &[u8]) -> Result<Metadata, MetadataError> {
    let Some(rest) = bytes.strip_prefix(&MAGIC) else {
        return archive::<MetadataV1>(bytes).map(Metadata::from);
    };
    match rest.split_first() {
        Some((&VERSION_CURRENT, archived)) => archive::<Metadata>(archived),
        Some((&VERSION_12, archived)) => archive::<MetadataV12>(archived).map(Metadata::from),
        Some((&VERSION_11, archived)) => archive::<MetadataV11>(archived).map(Metadata::from),
        Some((&VERSION_10, archived)) => archive::<MetadataV10>(archived).map(Metadata::from),
        Some((&VERSION_9, archived)) => archive::<MetadataV9>(archived).map(Metadata::from),
        Some((&VERSION_8, archived)) => archive::<MetadataV8>(archived).map(Metadata::from),
        Some((&VERSION_7, archived)) => archive::<MetadataV7>(archived).map(Metadata::from),
        Some((&VERSION_6, archived)) => archive::<MetadataV6>(archived).map(Metadata::from),
        Some((&VERSION_5, archived)) => archive::<MetadataV5>(archived).map(Metadata::from),
        Some((&VERSION_4, archived)) => archive::<MetadataV4>(archived).map(Metadata::from),
        Some((&VERSION_3, archived)) => archive::<MetadataV3>(archived).map(Metadata::from),
        Some((&VERSION_2, archived)) => archive::<MetadataV2>(archived).map(Metadata::from),
        Some((version, _)) => Err(MetadataError::Decode(format!(
            "snapshot format version {version} is newer than this broker knows ({VERSION_CURRENT})"
        ))),
        None => Err(MetadataError::Decode("empty snapshot envelope".into())),
    }
}

fn archive<T>(bytes: &[u8]) -> Result<T, MetadataError>
where
    T: Archive,
    T::Archived: for<'a> rkyv::bytecheck::CheckBytes<rkyv::api::high::HighValidator<'a, rkyv::rancor::Error>>
        + Deserialize<T, rkyv::api::high::HighDeserializer<rkyv::rancor::Error>>,
{
    // rkyv needs aligned input; snapshots come from arbitrary buffers.
    let mut aligned = rkyv::util::AlignedVec::<16>::with_capacity(bytes.len());
    aligned.extend_from_slice(bytes);
    rkyv::from_bytes::<T, rkyv::rancor::Error>(&aligned)
        .map_err(|e| MetadataError::Decode(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_1_archive_decodes_into_the_current_state() {
        let mut v1 = MetadataV1 {
            unclean_leader_elections: 3,
            ..MetadataV1::default()
        };
        v1.names.insert("orders".into(), TopicId([7; 16]));
        let bytes = rkyv::to_bytes::<rkyv::rancor::Error>(&v1).unwrap();
        let metadata = decode(&bytes).unwrap();
        assert_eq!(metadata.unclean_leader_elections, 3);
        assert_eq!(metadata.names["orders"], TopicId([7; 16]));
        assert!(metadata.deleted_topics.is_empty());
    }

    #[test]
    fn a_version_2_snapshot_decodes_into_the_current_state() {
        let mut v2 = MetadataV2::default();
        v2.deleted_topics.insert(TopicId([4; 16]));
        let mut bytes = MAGIC.to_vec();
        bytes.push(VERSION_2);
        bytes.extend_from_slice(&rkyv::to_bytes::<rkyv::rancor::Error>(&v2).unwrap());
        let metadata = decode(&bytes).unwrap();
        assert!(metadata.deleted_topics.contains(&TopicId([4; 16])));
        assert_eq!(metadata.cluster_id, None);
    }

    #[test]
    fn a_version_4_snapshot_decodes_into_the_current_state() {
        let mut v4 = MetadataV4 {
            next_producer_id: 3000,
            ..MetadataV4::default()
        };
        v4.producer_id_blocks.insert(BrokerId(2), (2000, 1000));
        let mut bytes = MAGIC.to_vec();
        bytes.push(VERSION_4);
        bytes.extend_from_slice(&rkyv::to_bytes::<rkyv::rancor::Error>(&v4).unwrap());
        let metadata = decode(&bytes).unwrap();
        assert_eq!(metadata.next_producer_id, 3000);
        assert_eq!(metadata.producer_id_blocks[&BrokerId(2)], (2000, 1000));
        assert!(metadata.scram_credentials.is_empty());
    }

    #[test]
    fn a_version_5_snapshot_decodes_into_the_current_state() {
        let mut v5 = MetadataV5::default();
        v5.scram_credentials.insert("alice".into(), BTreeMap::new());
        let mut bytes = MAGIC.to_vec();
        bytes.push(VERSION_5);
        bytes.extend_from_slice(&rkyv::to_bytes::<rkyv::rancor::Error>(&v5).unwrap());
        let metadata = decode(&bytes).unwrap();
        assert!(metadata.scram_credentials.contains_key("alice"));
        assert!(metadata.acls.is_empty());
    }

    #[test]
    fn a_version_6_snapshot_decodes_into_the_current_state() {
        let mut v6 = MetadataV6::default();
        v6.scram_credentials.insert("alice".into(), BTreeMap::new());
        let mut bytes = MAGIC.to_vec();
        bytes.push(VERSION_6);
        bytes.extend_from_slice(&rkyv::to_bytes::<rkyv::rancor::Error>(&v6).unwrap());
        let metadata = decode(&bytes).unwrap();
        assert!(metadata.scram_credentials.contains_key("alice"));
        assert!(metadata.client_quotas.is_empty());
    }

    #[test]
    fn a_version_7_snapshot_decodes_into_the_current_state() {
        let mut v7 = MetadataV7::default();
        let quota = BTreeMap::from([("producer_byte_rate".to_string(), 1024)]);
        let entity = QuotaEntity::precedence("alice", "app")[0].clone();
        v7.client_quotas.insert(entity.clone(), quota.clone());
        let mut bytes = MAGIC.to_vec();
        bytes.push(VERSION_7);
        bytes.extend_from_slice(&rkyv::to_bytes::<rkyv::rancor::Error>(&v7).unwrap());
        let metadata = decode(&bytes).unwrap();
        assert_eq!(metadata.client_quotas[&entity], quota);
        assert!(metadata.broker_endpoints.is_empty());
    }

    #[test]
    fn a_version_8_snapshot_decodes_into_the_current_state() {
        let mut v8 = MetadataV8::default();
        let endpoint = BrokerEndpoint {
            listener: "EXTERNAL".into(),
            address: "broker1.example:9093".into(),
        };
        v8.broker_endpoints
            .insert(BrokerId(1), vec![endpoint.clone()]);
        let mut bytes = MAGIC.to_vec();
        bytes.push(VERSION_8);
        bytes.extend_from_slice(&rkyv::to_bytes::<rkyv::rancor::Error>(&v8).unwrap());
        let metadata = decode(&bytes).unwrap();
        assert_eq!(metadata.broker_endpoints[&BrokerId(1)], vec![endpoint]);
        assert!(metadata.group_configs.is_empty());
    }

    #[test]
    fn a_version_10_snapshot_decodes_into_the_current_state() {
        let mut v10 = MetadataV10::default();
        v10.group_configs.insert("workers".into(), BTreeMap::new());
        v10.deleted_topics.insert(TopicId([5; 16]));
        let mut bytes = MAGIC.to_vec();
        bytes.push(VERSION_10);
        bytes.extend_from_slice(&rkyv::to_bytes::<rkyv::rancor::Error>(&v10).unwrap());
        let metadata = decode(&bytes).unwrap();
        assert!(metadata.group_configs.contains_key("workers"));
        assert!(metadata.deleted_topics.contains(&TopicId([5; 16])));
        assert!(metadata.cordoned_brokers.is_empty());
    }

    #[test]
    fn a_version_11_snapshot_decodes_into_the_current_state() {
        let mut v11 = MetadataV11::default();
        v11.cordoned_brokers.insert(BrokerId(2));
        let mut bytes = MAGIC.to_vec();
        bytes.push(VERSION_11);
        bytes.extend_from_slice(&rkyv::to_bytes::<rkyv::rancor::Error>(&v11).unwrap());
        let metadata = decode(&bytes).unwrap();
        assert!(metadata.cordoned_brokers.contains(&BrokerId(2)));
        assert!(metadata.quorum_addresses.is_empty());
    }

    #[test]
    fn a_version_12_snapshot_decodes_into_the_current_state() {
        let mut v12 = MetadataV12::default();
        v12.quorum_addresses.insert(4, "127.0.0.1:9193".into());
        let mut bytes = MAGIC.to_vec();
        bytes.push(VERSION_12);
        bytes.extend_from_slice(&rkyv::to_bytes::<rkyv::rancor::Error>(&v12).unwrap());
        let metadata = decode(&bytes).unwrap();
        assert_eq!(metadata.quorum_addresses[&4], "127.0.0.1:9193");
        assert!(metadata.reassignments.is_empty());
    }

    #[test]
    fn the_current_version_round_trips_and_a_newer_one_is_refused() {
        let mut metadata = Metadata::default();
        metadata.quorum_addresses.insert(4, "127.0.0.1:9193".into());
        let moving = crate::model::reassignment::Reassignment {
            original: vec![BrokerId(1), BrokerId(2)],
            original_shards: vec![crate::model::types::ShardId(0); 2],
            target: vec![BrokerId(2), BrokerId(3)],
            target_shards: vec![crate::model::types::ShardId(0); 2],
        };
        let key = (TopicId([9; 16]), crate::model::types::PartitionId(3));
        metadata.reassignments.insert(key, moving);
        metadata.cordoned_brokers.insert(BrokerId(3));
        metadata.deleted_topics.insert(TopicId([1; 16]));
        let endpoint = crate::model::record::BrokerEndpoint {
            listener: "EXTERNAL".into(),
            address: "broker1.example:9093".into(),
        };
        metadata
            .broker_endpoints
            .insert(BrokerId(1), vec![endpoint]);
        let configs = BTreeMap::from([("consumer.session.timeout.ms".into(), "50000".into())]);
        metadata.group_configs.insert("workers".into(), configs);
        assert_eq!(decode(&encode(&metadata)).unwrap(), metadata);
        let mut newer = encode(&metadata);
        newer[MAGIC.len()] = VERSION_CURRENT + 1;
        let refused = decode(&newer).unwrap_err().to_string();
        assert!(refused.contains("newer"), "{refused}");
        assert!(decode(&[1, 2, 3]).is_err());
    }
}
