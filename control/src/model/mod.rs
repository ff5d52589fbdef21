//! The metadata model: what every metadata node and broker holds alike
//! (brokers, topics, partitions, topic configuration, SCRAM credentials,
//! ACLs, client quotas, group configs), the records that change it, replica placement,
//! and the snapshot format. Plain data and rules, no I/O and nothing of
//! Raft: the layers above order the records ([`crate::raft`]) and decide
//! them ([`crate::controller`]), so the rules are one piece every layer
//! shares and tests can drive directly.
//!
//! This file is the state machine itself: brokers, topics, partitions.
//! Applying a record is deterministic and all-or-nothing: a record that
//! fails validation changes nothing, on every replica alike.

pub mod acls;
pub mod config;
pub mod credentials;
// rkyv's derive generates resolver enums whose fields carry no docs.
#[allow(missing_docs)]
pub mod error;
pub mod frozen_topic;
pub mod group_configs;
pub mod placement;
pub mod quotas;
pub mod reassignment;
// rkyv's derive generates a resolver enum whose fields carry no docs.
#[allow(missing_docs)]
pub mod record;
pub mod snapshot_format;
pub mod types;

use std::collections::{BTreeMap, BTreeSet};

use rkyv::{Archive, Deserialize, Serialize};

use crate::model::acls::{check_acl, AclBinding, ACLS_MAX};
use crate::model::config::TopicConfig;
use crate::model::credentials::{check_credential, ScramCredential, ScramMechanism};
use crate::model::error::MetadataError;
use crate::model::group_configs::{check_group_config, GROUPS_WITH_CONFIGS_MAX};
use crate::model::quotas::{check_quota, QuotaEntity, QUOTA_ENTITIES_MAX};
use crate::model::record::{
    BrokerEndpoint, BrokerRegistration, MetadataRecord, PartitionAssignment, PartitionChange,
};
use crate::model::types::{
    BrokerId, ClusterId, Incarnation, LeaderEpoch, PartitionEpoch, PartitionId, ShardId, TopicId,
};

/// The longest topic name Kafka allows.
pub const TOPIC_NAME_MAX_CHARS: usize = 249;
/// The most partitions one topic may have.
pub const PARTITIONS_PER_TOPIC_MAX: usize = 100_000;
/// The largest block of producer ids one record hands out.
pub const PRODUCER_ID_BLOCK_MAX: i64 = 1_000_000;
/// The block a broker asks for (Kafka's size): one metadata record per
/// thousand producers started on it.
pub const PRODUCER_ID_BLOCK: i64 = 1_000;
/// The most listeners one broker may have.
pub const ENDPOINTS_PER_BROKER_MAX: usize = 16;
/// The endpoint name of a broker's HTTP API among its endpoints (no Kafka
/// listener may take it): other brokers forward HTTP calls there.
pub const HTTP_ENDPOINT: &str = "HTTP";
/// The longest listener name.
pub const LISTENER_NAME_MAX_CHARS: usize = 64;

/// A registered broker.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Broker {
    /// What it registered with.
    pub registration: BrokerRegistration,
    /// Fenced brokers lead nothing and are not offered to clients.
    pub fenced: bool,
}

/// One partition's replicas and leadership.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Partition {
    /// The replicas; the first is the preferred leader.
    pub replicas: Vec<BrokerId>,
    /// For each replica, the shard of its broker that owns it.
    pub shards: Vec<ShardId>,
    /// The in-sync replicas.
    pub isr: Vec<BrokerId>,
    /// The leader, if any replica can lead.
    pub leader: Option<BrokerId>,
    /// Bumped when the leader changes.
    pub leader_epoch: LeaderEpoch,
    /// Bumped on every change.
    pub partition_epoch: PartitionEpoch,
}

/// A topic.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Topic {
    /// Its UUID.
    pub id: TopicId,
    /// Its name.
    pub name: String,
    /// Its configuration.
    pub config: TopicConfig,
    /// Its partitions, by index.
    pub partitions: Vec<Partition>,
}

/// The whole cluster metadata (also the snapshot format).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Metadata {
    /// Registered brokers.
    pub brokers: BTreeMap<BrokerId, Broker>,
    /// Topics by id.
    pub topics: BTreeMap<TopicId, Topic>,
    /// Topic ids by name.
    pub names: BTreeMap<String, TopicId>,
    /// Leaders elected from outside the ISR (unclean_leader_elections_total).
    pub unclean_leader_elections: u64,
    /// Ids of deleted topics. A broker that was down while a topic was
    /// deleted may learn the state from a snapshot, never seeing the
    /// deletion record: this lets it tell a deleted topic's files (removed)
    /// from files of a topic it does not know (kept and reported). 16
    /// bytes per deletion, never pruned.
    pub deleted_topics: BTreeSet<TopicId>,
    /// The cluster's id, once its first active controller chose it.
    pub cluster_id: Option<ClusterId>,
    /// The next producer id no broker was given yet.
    pub next_producer_id: i64,
    /// Each broker's latest block of producer ids (first, size).
    pub producer_id_blocks: BTreeMap<BrokerId, (i64, i64)>,
    /// SCRAM credentials by user, then mechanism.
    pub scram_credentials: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
    /// The ACLs.
    pub acls: BTreeSet<AclBinding>,
    /// Client quotas: per entity, bytes per second by key.
    pub client_quotas: BTreeMap<QuotaEntity, BTreeMap<String, u64>>,
    /// Each broker life's listeners. A broker with no entry (registered
    /// before brokers had several listeners) is reached at its
    /// registration's `listener` on every listener.
    pub broker_endpoints: BTreeMap<BrokerId, Vec<BrokerEndpoint>>,
    /// Consumer group configs: per group, value by key.
    pub group_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Brokers cordoned by an operator (KIP-1066): placement gives them
    /// no new replicas; what they hold stays. Kept across their restarts.
    pub cordoned_brokers: BTreeSet<BrokerId>,
    /// The metadata listener (`ip:port`) of each node that joined the
    /// quorum while it ran (observers, and voters added later): where the
    /// leader's Raft messages and forwarded calls reach it. Nodes named in
    /// `controller_quorum_voters` need no entry; a later entry for one of
    /// them wins over the configured address.
    pub quorum_addresses: BTreeMap<u64, String>,
    /// Partitions moving to new replicas (KIP-455), by topic and index.
    pub reassignments: BTreeMap<(TopicId, PartitionId), reassignment::Reassignment>,
}

impl Metadata {
    /// Checks a record against the current state without applying it.
    pub fn validate(&self, record: &MetadataRecord) -> Result<(), MetadataError> {
        match record {
            MetadataRecord::RegisterBroker(registration) => self.check_registration(registration),
            MetadataRecord::FenceBroker { id, incarnation } => {
                self.broker_life(*id, *incarnation)?;
                // Fenced brokers lead nothing: a fence whose leadership
                // moves were refused is refused too (and asked again).
                self.check_leads_nothing(*id)
            }
            MetadataRecord::UnfenceBroker { id, incarnation } => {
                self.broker_life(*id, *incarnation).map(|_| ())
            }
            MetadataRecord::CreateTopic {
                name,
                partitions,
                config,
                ..
            } => {
                check_topic_name(name)?;
                config.check()?;
                if self.names.contains_key(name) {
                    return Err(MetadataError::TopicExists(name.clone()));
                }
                self.check_assignments(partitions, 0)
            }
            MetadataRecord::DeleteTopic { id } => self.topic(*id).map(|_| ()),
            MetadataRecord::CreatePartitions { topic, partitions } => {
                let existing = self.topic(*topic)?.partitions.len();
                self.check_assignments(partitions, existing)
            }
            MetadataRecord::AlterTopicConfig { topic, config } => {
                config.check_change_from(&self.topic(*topic)?.config)
            }
            MetadataRecord::CreateTopicV1 { .. } | MetadataRecord::AlterTopicConfigV1 { .. } => {
                Err(MetadataError::Decode(
                    "a record of an earlier layout is decoded into today's, never applied".into(),
                ))
            }
            MetadataRecord::ChangePartition(change) => self.check_change(change),
            MetadataRecord::ElectUnclean(change) => self.check_unclean_election(change),
            MetadataRecord::SetBrokerCordoned { id, .. } => {
                if !self.brokers.contains_key(id) {
                    return Err(MetadataError::UnknownBroker(*id));
                }
                Ok(())
            }
            MetadataRecord::BeginReassignment {
                topic,
                partition,
                expected_epoch,
                target,
            } => self.check_begin_reassignment((*topic, *partition), *expected_epoch, target),
            MetadataRecord::FinishReassignment { change, cancelled } => {
                self.check_finish_reassignment(change, *cancelled)
            }
            MetadataRecord::SetQuorumAddress { address, .. } => {
                // Where every member sends: a bind-all address or port 0
                // would point them at themselves.
                match address.parse::<std::net::SocketAddr>() {
                    Ok(a) if !a.ip().is_unspecified() && a.port() != 0 => Ok(()),
                    _ => Err(MetadataError::InvalidQuorumAddress(address.clone())),
                }
            }
            MetadataRecord::AllocateProducerIds {
                broker,
                first,
                size,
            } => {
                if !self.brokers.contains_key(broker) {
                    return Err(MetadataError::UnknownBroker(*broker));
                }
                if *first != self.next_producer_id
                    || !(1..=PRODUCER_ID_BLOCK_MAX).contains(size)
                    || first.checked_add(*size).is_none()
                {
                    return Err(MetadataError::InvalidProducerIdBlock {
                        first: *first,
                        size: *size,
                        next: self.next_producer_id,
                    });
                }
                Ok(())
            }
            MetadataRecord::SetClusterId { .. } => match self.cluster_id {
                Some(id) => Err(MetadataError::ClusterIdSet(id)),
                None => Ok(()),
            },
            MetadataRecord::SetScramCredential(credential) => check_credential(credential),
            MetadataRecord::DeleteScramCredential { user, mechanism } => {
                self.scram_credential(user, *mechanism).map(|_| ())
            }
            MetadataRecord::CreateAcls(acls) => {
                acls.iter().try_for_each(check_acl)?;
                let new = acls.iter().filter(|a| !self.acls.contains(a)).count();
                if self.acls.len() + new > ACLS_MAX {
                    return Err(MetadataError::InvalidAcl(format!(
                        "more than {ACLS_MAX} ACLs"
                    )));
                }
                Ok(())
            }
            MetadataRecord::DeleteAcls(_) => Ok(()),
            MetadataRecord::SetBrokerEndpoints {
                id,
                incarnation,
                endpoints,
            } => {
                self.broker_life(*id, *incarnation)?;
                check_endpoints(endpoints)
            }
            MetadataRecord::SetClientQuota { entity, key, value } => {
                check_quota(entity, key, *value)?;
                let new = !self.client_quotas.contains_key(entity);
                if new && self.client_quotas.len() >= QUOTA_ENTITIES_MAX {
                    return Err(MetadataError::InvalidQuota(format!(
                        "more than {QUOTA_ENTITIES_MAX} quota entities"
                    )));
                }
                Ok(())
            }
            MetadataRecord::SetGroupConfig { group, key, value } => {
                check_group_config(group, key, value.as_deref())?;
                let new = !self.group_configs.contains_key(group);
                if new && self.group_configs.len() >= GROUPS_WITH_CONFIGS_MAX {
                    return Err(MetadataError::InvalidGroupConfig(format!(
                        "more than {GROUPS_WITH_CONFIGS_MAX} groups with configs"
                    )));
                }
                Ok(())
            }
        }
    }

    /// Applies a committed record, or refuses it and changes nothing.
    pub fn apply(&mut self, record: &MetadataRecord) -> Result<(), MetadataError> {
        self.validate(record)?;
        match record {
            MetadataRecord::RegisterBroker(registration) => {
                // A new life starts fenced until the controller unfences it.
                let broker = Broker {
                    registration: registration.clone(),
                    fenced: true,
                };
                self.brokers.insert(registration.id, broker);
                // The old life's listeners go with it; the new life's
                // follow in the next record.
                self.broker_endpoints.remove(&registration.id);
            }
            MetadataRecord::SetBrokerEndpoints { id, endpoints, .. } => {
                self.broker_endpoints.insert(*id, endpoints.clone());
            }
            MetadataRecord::FenceBroker { id, .. } => self.broker_mut(*id).fenced = true,
            MetadataRecord::UnfenceBroker { id, .. } => self.broker_mut(*id).fenced = false,
            MetadataRecord::CreateTopic {
                id,
                name,
                config,
                partitions,
            } => {
                let topic = Topic {
                    id: *id,
                    name: name.clone(),
                    config: (**config).clone(),
                    partitions: partitions.iter().map(|a| self.new_partition(a)).collect(),
                };
                self.names.insert(name.clone(), *id);
                self.topics.insert(*id, topic);
            }
            MetadataRecord::DeleteTopic { id } => {
                let topic = self.topics.remove(id).expect("validated");
                self.names.remove(&topic.name);
                self.deleted_topics.insert(*id);
                self.reassignments.retain(|(topic, _), _| topic != id);
            }
            MetadataRecord::CreatePartitions { topic, partitions } => {
                let new: Vec<Partition> =
                    partitions.iter().map(|a| self.new_partition(a)).collect();
                self.topics
                    .get_mut(topic)
                    .expect("validated")
                    .partitions
                    .extend(new);
            }
            MetadataRecord::AlterTopicConfig { topic, config } => {
                self.topics.get_mut(topic).expect("validated").config = (**config).clone();
            }
            MetadataRecord::ChangePartition(change) | MetadataRecord::ElectUnclean(change) => {
                self.apply_change(change)
            }
            MetadataRecord::SetBrokerCordoned { id, cordoned } => {
                if *cordoned {
                    self.cordoned_brokers.insert(*id);
                } else {
                    self.cordoned_brokers.remove(id);
                }
            }
            MetadataRecord::SetQuorumAddress { node, address } => {
                self.quorum_addresses.insert(*node, address.clone());
            }
            MetadataRecord::BeginReassignment {
                topic,
                partition,
                target,
                ..
            } => self.apply_begin_reassignment((*topic, *partition), target),
            MetadataRecord::FinishReassignment { change, cancelled } => {
                self.apply_finish_reassignment(change, *cancelled)
            }
            MetadataRecord::CreateTopicV1 { .. } | MetadataRecord::AlterTopicConfigV1 { .. } => {
                unreachable!("validated: refused")
            }
            MetadataRecord::SetClusterId { id } => self.cluster_id = Some(*id),
            MetadataRecord::AllocateProducerIds {
                broker,
                first,
                size,
            } => {
                self.next_producer_id = first + size;
                self.producer_id_blocks.insert(*broker, (*first, *size));
            }
            MetadataRecord::SetScramCredential(credential) => {
                self.scram_credentials
                    .entry(credential.user.clone())
                    .or_default()
                    .insert(credential.mechanism, credential.clone());
            }
            MetadataRecord::DeleteScramCredential { user, mechanism } => {
                let user_credentials = self.scram_credentials.get_mut(user).expect("validated");
                user_credentials.remove(mechanism);
                if user_credentials.is_empty() {
                    self.scram_credentials.remove(user);
                }
            }
            MetadataRecord::CreateAcls(acls) => self.acls.extend(acls.iter().cloned()),
            MetadataRecord::DeleteAcls(acls) => {
                for acl in acls {
                    self.acls.remove(acl);
                }
            }
            MetadataRecord::SetClientQuota { entity, key, value } => {
                let quotas = self.client_quotas.entry(entity.clone()).or_default();
                match value {
                    Some(value) => {
                        quotas.insert(key.clone(), *value);
                    }
                    None => {
                        quotas.remove(key);
                    }
                }
                if quotas.is_empty() {
                    self.client_quotas.remove(entity);
                }
            }
            MetadataRecord::SetGroupConfig { group, key, value } => {
                let configs = self.group_configs.entry(group.clone()).or_default();
                match value {
                    Some(value) => {
                        configs.insert(key.clone(), value.clone());
                    }
                    None => {
                        configs.remove(key);
                    }
                }
                if configs.is_empty() {
                    self.group_configs.remove(group);
                }
            }
        }
        Ok(())
    }

    /// Where clients of listener `listener` reach `broker` (`host:port`):
    /// its endpoint of that name; None if it has none (it is not offered
    /// to those clients, as Kafka leaves it out). A broker that registered
    /// no endpoints is reached at its registration's listener.
    pub fn endpoint<'a>(&'a self, broker: &'a Broker, listener: &str) -> Option<&'a str> {
        match self.broker_endpoints.get(&broker.registration.id) {
            None => Some(&broker.registration.listener),
            Some(endpoints) => endpoints
                .iter()
                .find(|e| e.listener == listener)
                .map(|e| e.address.as_str()),
        }
    }

    /// The quota `key` that applies to `user` connecting with `client_id`
    /// (the most specific entity that sets it), in bytes per second.
    pub fn client_quota(&self, user: &str, client_id: &str, key: &str) -> Option<u64> {
        self.client_quota_entity(user, client_id, key)
            .map(|(_, quota)| quota)
    }

    /// [`Metadata::client_quota`] with the entity that set it (a meter is
    /// shared by what the entity names: all of a user's client ids for a
    /// user quota, as Kafka's).
    pub fn client_quota_entity(
        &self,
        user: &str,
        client_id: &str,
        key: &str,
    ) -> Option<(QuotaEntity, u64)> {
        QuotaEntity::precedence(user, client_id)
            .into_iter()
            .find_map(|entity| {
                let quota = *self.client_quotas.get(&entity)?.get(key)?;
                Some((entity, quota))
            })
    }

    /// A user's credential for a mechanism.
    pub fn scram_credential(
        &self,
        user: &str,
        mechanism: ScramMechanism,
    ) -> Result<&ScramCredential, MetadataError> {
        self.scram_credentials
            .get(user)
            .and_then(|by_mechanism| by_mechanism.get(&mechanism))
            .ok_or_else(|| MetadataError::UnknownCredential {
                user: user.to_string(),
                mechanism: mechanism.name().to_string(),
            })
    }

    /// A topic by id.
    pub fn topic(&self, id: TopicId) -> Result<&Topic, MetadataError> {
        self.topics
            .get(&id)
            .ok_or(MetadataError::UnknownTopicId(id))
    }

    /// A topic by name.
    pub fn topic_by_name(&self, name: &str) -> Result<&Topic, MetadataError> {
        let id = self
            .names
            .get(name)
            .ok_or_else(|| MetadataError::UnknownTopic(name.to_string()))?;
        self.topic(*id)
    }

    /// A partition.
    pub fn partition(
        &self,
        topic: TopicId,
        partition: PartitionId,
    ) -> Result<&Partition, MetadataError> {
        let unknown = MetadataError::UnknownPartition { topic, partition };
        let index = usize::try_from(partition.0).map_err(|_| unknown.clone())?;
        self.topic(topic)?.partitions.get(index).ok_or(unknown)
    }

    /// Unfenced brokers, by id.
    pub fn live_brokers(&self) -> impl Iterator<Item = &Broker> {
        self.brokers.values().filter(|b| !b.fenced)
    }

    fn broker_mut(&mut self, id: BrokerId) -> &mut Broker {
        self.brokers.get_mut(&id).expect("validated")
    }

    /// Refuses a broker that leads any partition.
    fn check_leads_nothing(&self, broker: BrokerId) -> Result<(), MetadataError> {
        let partitions = self
            .topics
            .values()
            .flat_map(|t| &t.partitions)
            .filter(|p| p.leader == Some(broker))
            .count();
        if partitions > 0 {
            return Err(MetadataError::StillLeads { broker, partitions });
        }
        Ok(())
    }

    fn check_registration(&self, registration: &BrokerRegistration) -> Result<(), MetadataError> {
        if registration.shards == 0 {
            return Err(MetadataError::InvalidPartitionChange(
                "a broker runs at least one shard".into(),
            ));
        }
        match self.brokers.get(&registration.id) {
            Some(current) if registration.incarnation <= current.registration.incarnation => {
                Err(MetadataError::StaleIncarnation {
                    broker: registration.id,
                    given: registration.incarnation,
                    current: current.registration.incarnation,
                })
            }
            // A new life starts fenced, so the old one must lead nothing.
            Some(_) => self.check_leads_nothing(registration.id),
            None => Ok(()),
        }
    }

    /// The broker `id` in its life `incarnation`; an unknown broker or an
    /// older (or newer) life is an error.
    pub fn broker_life(
        &self,
        id: BrokerId,
        incarnation: Incarnation,
    ) -> Result<&Broker, MetadataError> {
        let broker = self
            .brokers
            .get(&id)
            .ok_or(MetadataError::UnknownBroker(id))?;
        let current = broker.registration.incarnation;
        if incarnation != current {
            return Err(MetadataError::StaleIncarnation {
                broker: id,
                given: incarnation,
                current,
            });
        }
        Ok(broker)
    }

    fn check_assignments(
        &self,
        partitions: &[PartitionAssignment],
        existing: usize,
    ) -> Result<(), MetadataError> {
        let invalid = |why: String| Err(MetadataError::InvalidPartitionChange(why));
        if partitions.is_empty() {
            return invalid("at least one partition".into());
        }
        if existing + partitions.len() > PARTITIONS_PER_TOPIC_MAX {
            return invalid(format!("more than {PARTITIONS_PER_TOPIC_MAX} partitions"));
        }
        for assignment in partitions {
            if assignment.replicas.is_empty()
                || assignment.replicas.len() != assignment.shards.len()
            {
                return invalid("every replica needs a shard, and there is at least one".into());
            }
            if has_duplicates(&assignment.replicas) {
                return invalid(format!(
                    "replicas repeat a broker: {:?}",
                    assignment.replicas
                ));
            }
            for (broker, shard) in assignment.replicas.iter().zip(&assignment.shards) {
                let known = self
                    .brokers
                    .get(broker)
                    .ok_or(MetadataError::UnknownBroker(*broker))?;
                if shard.0 >= known.registration.shards {
                    return invalid(format!("broker {broker} has no shard {shard}"));
                }
            }
        }
        Ok(())
    }

    fn new_partition(&self, assignment: &PartitionAssignment) -> Partition {
        // A new partition's replicas are all trivially in sync (empty logs);
        // the first live one leads.
        let leader = assignment
            .replicas
            .iter()
            .copied()
            .find(|b| self.brokers.get(b).is_some_and(|b| !b.fenced));
        Partition {
            replicas: assignment.replicas.clone(),
            shards: assignment.shards.clone(),
            isr: assignment.replicas.clone(),
            leader,
            leader_epoch: LeaderEpoch(0),
            partition_epoch: PartitionEpoch(0),
        }
    }

    fn check_change(&self, change: &PartitionChange) -> Result<(), MetadataError> {
        let allowed = self.topic(change.topic)?.config.unclean_leader_election;
        self.check_change_with(change, allowed)
    }

    /// An operator's unclean election: only of a partition without a
    /// leader, the new leader its only in-sync replica.
    fn check_unclean_election(&self, change: &PartitionChange) -> Result<(), MetadataError> {
        let partition = self.partition(change.topic, change.partition)?;
        let invalid = |why: String| Err(MetadataError::InvalidPartitionChange(why));
        if let Some(leader) = partition.leader {
            return invalid(format!("the partition has a leader ({leader})"));
        }
        if !change.unclean || change.leader.is_none_or(|l| change.isr != [l]) {
            return invalid(format!(
                "an unclean election names a leader as its only in-sync replica (leader {:?}, ISR {:?})",
                change.leader, change.isr
            ));
        }
        self.check_change_with(change, true)
    }

    /// A partition change, an unclean one allowed if `unclean_allowed`.
    fn check_change_with(
        &self,
        change: &PartitionChange,
        unclean_allowed: bool,
    ) -> Result<(), MetadataError> {
        let topic = self.topic(change.topic)?;
        let partition = self.partition(change.topic, change.partition)?;
        if change.expected_epoch != partition.partition_epoch {
            return Err(MetadataError::StalePartitionEpoch {
                topic: change.topic,
                partition: change.partition,
                given: change.expected_epoch,
                current: partition.partition_epoch,
            });
        }
        let invalid = |why: String| Err(MetadataError::InvalidPartitionChange(why));
        if has_duplicates(&change.isr) || change.isr.iter().any(|b| !partition.replicas.contains(b))
        {
            return invalid(format!(
                "ISR {:?} is not a set of replicas {:?}",
                change.isr, partition.replicas
            ));
        }
        let Some(leader) = change.leader else {
            return Ok(());
        };
        if !partition.replicas.contains(&leader) {
            return invalid(format!("leader {leader} is not a replica"));
        }
        if self.brokers.get(&leader).is_none_or(|b| b.fenced) {
            return invalid(format!("leader {leader} is fenced or unknown"));
        }
        if !change.isr.contains(&leader) {
            return invalid(format!("leader {leader} is not in the new ISR"));
        }
        let from_isr = partition.isr.contains(&leader) || partition.leader == Some(leader);
        if change.unclean {
            if !unclean_allowed {
                return invalid(format!(
                    "topic {} does not allow unclean leader election",
                    topic.name
                ));
            }
        } else if !from_isr {
            return invalid(format!(
                "leader {leader} is not in the ISR {:?}",
                partition.isr
            ));
        }
        Ok(())
    }

    fn apply_change(&mut self, change: &PartitionChange) {
        let topic = self.topics.get_mut(&change.topic).expect("validated");
        let partition = &mut topic.partitions[change.partition.0 as usize];
        if partition.leader != change.leader {
            partition.leader_epoch = LeaderEpoch(partition.leader_epoch.0 + 1);
        }
        partition.leader = change.leader;
        partition.isr = change.isr.clone();
        partition.partition_epoch = PartitionEpoch(partition.partition_epoch.0 + 1);
        if change.unclean {
            self.unclean_leader_elections += 1;
        }
    }
}

fn has_duplicates(brokers: &[BrokerId]) -> bool {
    let mut sorted = brokers.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).any(|w| w[0] == w[1])
}

/// Kafka's topic name rule.
pub fn check_topic_name(name: &str) -> Result<(), MetadataError> {
    let valid_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if name.is_empty()
        || name.len() > TOPIC_NAME_MAX_CHARS
        || !valid_chars
        || name == "."
        || name == ".."
    {
        return Err(MetadataError::InvalidTopicName(name.to_string()));
    }
    Ok(())
}

/// A listener name: letters, digits, `_` and `-`, at most
/// [`LISTENER_NAME_MAX_CHARS`] (Kafka's names are upper case by custom).
pub fn check_listener_name(name: &str) -> Result<(), MetadataError> {
    let valid_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    if name.is_empty() || name.len() > LISTENER_NAME_MAX_CHARS || !valid_chars {
        return Err(MetadataError::InvalidEndpoints(format!(
            "listener name {name:?}: 1 to {LISTENER_NAME_MAX_CHARS} letters, digits, _ or -"
        )));
    }
    Ok(())
}

/// A broker's endpoints: at most [`ENDPOINTS_PER_BROKER_MAX`], names
/// unique, each address `host:port`.
fn check_endpoints(endpoints: &[BrokerEndpoint]) -> Result<(), MetadataError> {
    let invalid = |why: String| Err(MetadataError::InvalidEndpoints(why));
    if endpoints.is_empty() || endpoints.len() > ENDPOINTS_PER_BROKER_MAX {
        return invalid(format!(
            "{} listeners (1 to {ENDPOINTS_PER_BROKER_MAX})",
            endpoints.len()
        ));
    }
    let mut names = BTreeSet::new();
    for endpoint in endpoints {
        check_listener_name(&endpoint.listener)?;
        if !names.insert(endpoint.listener.as_str()) {
            return invalid(format!("listener {} twice", endpoint.listener));
        }
        let port = endpoint
            .address
            .rsplit_once(':')
            .map(|(host, port)| (host, port.parse::<u16>()));
        if !matches!(port, Some((host, Ok(_))) if !host.is_empty()) {
            return invalid(format!("{}: expected host:port", endpoint.address));
        }
    }
    Ok(())
}
