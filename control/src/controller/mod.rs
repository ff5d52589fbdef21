//! The controller: the decisions the Raft leader makes about the cluster,
//! as pure functions from the applied metadata (and the clock) to records
//! to propose. Liveness (heartbeats) is the controller's own memory, not
//! metadata: a new controller starts by giving every broker a full session.
//!
//! [`request`] is what brokers ask of it and why it may refuse: the
//! vocabulary of the service and of the calls forwarded to the active
//! controller, kept here, below both the transports and the service, so
//! neither needs the other's types.

pub mod members;
pub mod preferred;
pub mod reassign;
#[allow(missing_docs)]
pub mod request;
pub mod unclean;

use std::collections::BTreeMap;

use crate::model::config::TopicConfig;
use crate::model::error::MetadataError;
use crate::model::placement::place;
use crate::model::record::{BrokerEndpoint, BrokerRegistration, MetadataRecord, PartitionChange};
use crate::model::types::{
    BrokerId, Incarnation, LeaderEpoch, PartitionEpoch, PartitionId, TopicId,
};
use crate::model::{Metadata, Partition, Topic};

/// A partition leader's request to change its ISR (Kafka's AlterPartition).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct AlterIsr {
    /// The topic.
    pub topic: TopicId,
    /// The partition.
    pub partition: PartitionId,
    /// The broker asking: it must be the leader.
    pub leader: BrokerId,
    /// The leader epoch it leads in.
    pub leader_epoch: LeaderEpoch,
    /// The partition epoch its view comes from.
    pub partition_epoch: PartitionEpoch,
    /// The ISR it wants.
    pub isr: Vec<BrokerId>,
}

/// The controller's state beyond the metadata: when each broker last
/// proved it was alive, and which leaderless partitions it asked to elect.
#[derive(Debug)]
pub struct Controller {
    session_timeout_ms: u64,
    last_heartbeat_ms: BTreeMap<BrokerId, (Incarnation, u64)>,
    /// Elections proposed by [`Controller::tick`]: (partition epoch, when),
    /// so a proposal not applied yet is not proposed again every tick.
    elections_asked: BTreeMap<(TopicId, PartitionId), (PartitionEpoch, u64)>,
    /// How often leadership goes back to preferred replicas (None: never
    /// by itself), and when it next does.
    rebalance_every_ms: Option<u64>,
    next_rebalance_ms: Option<u64>,
    /// The quorum term this memory is from (see [`Controller::lead_in`]).
    term: Option<u64>,
}

/// How long an election [`Controller::tick`] proposed may take to apply
/// before it is proposed again.
const ELECTION_RETRY_MS: u64 = 1_000;

/// At most this many preferred elections per rebalance (Kafka's
/// controller makes at most 1,000 at a time too): the rest at the next.
pub const REBALANCE_ELECTIONS_MAX: usize = 1_000;

impl Controller {
    /// A controller fencing brokers silent for `session_timeout_ms`.
    pub fn new(session_timeout_ms: u64) -> Controller {
        Controller {
            session_timeout_ms,
            last_heartbeat_ms: BTreeMap::new(),
            elections_asked: BTreeMap::new(),
            rebalance_every_ms: None,
            next_rebalance_ms: None,
            term: None,
        }
    }

    /// This node acts as the active controller in quorum term `term`. A
    /// leadership after another node's forgets what an earlier one of its
    /// own remembered: the heartbeats went to the other node meanwhile, so
    /// its times of them are stale and would fence live brokers at the
    /// first tick. Every broker then gets a full session again, as with a
    /// controller that never led.
    pub fn lead_in(&mut self, term: u64) {
        if self.term == Some(term) {
            return;
        }
        self.term = Some(term);
        self.last_heartbeat_ms.clear();
        self.elections_asked.clear();
        self.next_rebalance_ms = None;
    }

    /// Gives leadership back to preferred replicas every `every_ms` (see
    /// [`preferred`]); None: only when asked (ElectLeaders).
    pub fn rebalancing_leaders(mut self, every_ms: Option<u64>) -> Controller {
        self.rebalance_every_ms = every_ms;
        self
    }

    /// A broker's heartbeat. A fenced broker of the current incarnation is
    /// unfenced (it is alive again); a stale incarnation is refused.
    pub fn heartbeat(
        &mut self,
        metadata: &Metadata,
        broker: BrokerId,
        incarnation: Incarnation,
        now_ms: u64,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        let known = metadata.broker_life(broker, incarnation)?;
        self.last_heartbeat_ms.insert(broker, (incarnation, now_ms));
        if !known.fenced {
            return Ok(Vec::new());
        }
        let mut records = vec![MetadataRecord::UnfenceBroker {
            id: broker,
            incarnation,
        }];
        // Partitions left without a leader while it was away, with it as
        // their last in-sync replica, can be led by it again.
        for topic in metadata.topics.values() {
            for (index, partition) in topic.partitions.iter().enumerate() {
                if partition.leader.is_none() && partition.isr.contains(&broker) {
                    records.push(MetadataRecord::ChangePartition(PartitionChange {
                        topic: topic.id,
                        partition: PartitionId(index as i32),
                        expected_epoch: partition.partition_epoch,
                        leader: Some(broker),
                        isr: partition.isr.clone(),
                        unclean: false,
                    }));
                }
            }
        }
        Ok(records)
    }

    /// Periodic work: fences live brokers whose session expired and moves
    /// their leaderships to other in-sync replicas, then elects a leader
    /// for any partition left without one while an in-sync replica is live
    /// (see [`Controller::elect_leaderless`]); when none of that was
    /// needed, finishes the reassignments whose target is in sync. Brokers never heard from
    /// by this controller get a session from `now_ms` (a new controller
    /// does not fence everyone at once).
    pub fn tick(&mut self, metadata: &Metadata, now_ms: u64) -> Vec<MetadataRecord> {
        let (scratch, mut records) = self.fence_expired(metadata, now_ms);
        records.extend(self.elect_leaderless(&scratch, now_ms));
        // Only partitions that have a leader: the leaderless ones are the
        // elections above (two changes of one partition from one epoch
        // would refuse the whole batch).
        records.extend(self.rebalance_if_due(&scratch, now_ms));
        // Reassignments finish at a tick with nothing else to do: two
        // changes of one partition from one epoch refuse the whole batch.
        if records.is_empty() {
            records.extend(reassign::finished(metadata));
        }
        records
    }

    /// The preferred elections due at `now_ms` (see [`preferred`]). The
    /// first check is one interval after this controller's first tick; a
    /// check that made its maximum of elections is followed by another at
    /// the next tick (more may be waiting), as Kafka's controller does.
    fn rebalance_if_due(&mut self, metadata: &Metadata, now_ms: u64) -> Vec<MetadataRecord> {
        let Some(every) = self.rebalance_every_ms else {
            return Vec::new();
        };
        let next = *self.next_rebalance_ms.get_or_insert(now_ms + every);
        if now_ms < next {
            return Vec::new();
        }
        let records = preferred::rebalance(metadata, REBALANCE_ELECTIONS_MAX);
        let more = records.len() == REBALANCE_ELECTIONS_MAX;
        self.next_rebalance_ms = Some(if more { now_ms } else { now_ms + every });
        if !records.is_empty() {
            tracing::info!(
                elections = records.len(),
                "leadership goes back to preferred replicas"
            );
        }
        records
    }

    /// The fences of brokers whose session expired, and the metadata
    /// they leave.
    fn fence_expired(
        &mut self,
        metadata: &Metadata,
        now_ms: u64,
    ) -> (Metadata, Vec<MetadataRecord>) {
        let mut records = Vec::new();
        let mut scratch = metadata.clone();
        for broker in metadata.live_brokers() {
            let id = broker.registration.id;
            let incarnation = broker.registration.incarnation;
            let seen = self
                .last_heartbeat_ms
                .entry(id)
                .or_insert((incarnation, now_ms));
            if seen.0 != incarnation {
                *seen = (incarnation, now_ms);
            }
            if now_ms.saturating_sub(seen.1) < self.session_timeout_ms {
                continue;
            }
            // The records are computed from `scratch` and meant to apply
            // to it; if one does not (a state this controller did not
            // foresee), that broker waits for the next tick rather than
            // take the quorum's leader down with it.
            let mut attempt = scratch.clone();
            let fencing = fence(&scratch, id, incarnation);
            match fencing.iter().try_for_each(|r| attempt.apply(r)) {
                Ok(()) => {
                    scratch = attempt;
                    records.extend(fencing);
                }
                Err(e) => {
                    tracing::error!(broker = %id, error = %e, "cannot compute a valid fence; trying again next tick")
                }
            }
        }
        (scratch, records)
    }

    /// Elections for partitions without a leader whose ISR holds a live
    /// broker: the first such in replica order leads (a clean election).
    /// A broker's unfencing elects the partitions waiting for it, but its
    /// records apply one by one: if a change committed in between makes
    /// the election stale, the broker is live and nothing else would ever
    /// elect the partition. This is the net under that, and under any
    /// state no other path foresaw.
    fn elect_leaderless(&mut self, metadata: &Metadata, now_ms: u64) -> Vec<MetadataRecord> {
        let live = |b: &BrokerId| metadata.brokers.get(b).is_some_and(|x| !x.fenced);
        let mut records = Vec::new();
        for topic in metadata.topics.values() {
            for (index, partition) in topic.partitions.iter().enumerate() {
                if partition.leader.is_some() {
                    continue;
                }
                let Some(leader) = partition
                    .replicas
                    .iter()
                    .copied()
                    .find(|b| partition.isr.contains(b) && live(b))
                else {
                    continue;
                };
                let key = (topic.id, PartitionId(index as i32));
                let epoch = partition.partition_epoch;
                if let Some((asked_epoch, at)) = self.elections_asked.get(&key) {
                    if *asked_epoch == epoch && now_ms < at + ELECTION_RETRY_MS {
                        continue;
                    }
                }
                tracing::info!(topic = %topic.name, partition = index, %leader, "electing a leader for a partition left without one while an in-sync replica is live");
                self.elections_asked.insert(key, (epoch, now_ms));
                records.push(MetadataRecord::ChangePartition(PartitionChange {
                    topic: topic.id,
                    partition: key.1,
                    expected_epoch: epoch,
                    leader: Some(leader),
                    isr: partition.isr.clone(),
                    unclean: false,
                }));
            }
        }
        self.elections_asked
            .retain(|_, (_, at)| now_ms < *at + ELECTION_RETRY_MS);
        records
    }

    /// Controlled shutdown: leadership moves off the broker, then it is
    /// fenced, before it stops.
    pub fn controlled_shutdown(
        &mut self,
        metadata: &Metadata,
        broker: BrokerId,
        incarnation: Incarnation,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        let records = fence_checked(metadata, broker, incarnation)?;
        self.last_heartbeat_ms.remove(&broker);
        Ok(records)
    }

    /// An ISR change from a partition's leader, accepted only at the
    /// current partition epoch, from the current leader in the current
    /// leader epoch, and keeping the leader in the ISR.
    ///
    /// The partition epoch is checked first: a leader reads any other
    /// refusal as "nothing changed since the partition you know" and stops
    /// counting the members it asked for. A deposed leader's view is
    /// always stale (an election bumps the partition epoch), and one of
    /// its earlier requests, its answer lost, may have committed: it must
    /// hear "stale", not "not the leader".
    pub fn alter_isr(
        &self,
        metadata: &Metadata,
        request: &AlterIsr,
    ) -> Result<MetadataRecord, MetadataError> {
        let partition = metadata.partition(request.topic, request.partition)?;
        if request.partition_epoch != partition.partition_epoch {
            return Err(MetadataError::StalePartitionEpoch {
                topic: request.topic,
                partition: request.partition,
                given: request.partition_epoch,
                current: partition.partition_epoch,
            });
        }
        if partition.leader != Some(request.leader)
            || request.leader_epoch != partition.leader_epoch
        {
            return Err(MetadataError::InvalidPartitionChange(format!(
                "broker {} in leader epoch {:?} does not lead (leader {:?}, epoch {:?})",
                request.leader, request.leader_epoch, partition.leader, partition.leader_epoch
            )));
        }
        if !request.isr.contains(&request.leader) {
            return Err(MetadataError::InvalidPartitionChange(
                "the leader must stay in the ISR".into(),
            ));
        }
        // Only a live broker joins the ISR: a fenced one (stopping, or
        // silent past its session) may look caught up to a leader that
        // heard from it a moment ago, but must not be elected.
        if let Some(fenced) = request.isr.iter().find(|b| {
            !partition.isr.contains(b) && metadata.brokers.get(b).is_none_or(|x| x.fenced)
        }) {
            return Err(MetadataError::InvalidPartitionChange(format!(
                "broker {fenced} is fenced and cannot join the ISR"
            )));
        }
        let record = MetadataRecord::ChangePartition(PartitionChange {
            topic: request.topic,
            partition: request.partition,
            // The request's view: a stale one is refused by validation.
            expected_epoch: request.partition_epoch,
            leader: partition.leader,
            isr: request.isr.clone(),
            unclean: false,
        });
        metadata.validate(&record)?;
        Ok(record)
    }

    /// A new topic, placed rack-aware and balanced on the live brokers.
    pub fn create_topic(
        &self,
        metadata: &Metadata,
        id: TopicId,
        name: &str,
        partitions: usize,
        replication_factor: usize,
        config: TopicConfig,
    ) -> Result<MetadataRecord, MetadataError> {
        let record = MetadataRecord::CreateTopic {
            id,
            name: name.to_string(),
            config: Box::new(config),
            partitions: place(metadata, partitions, replication_factor)?,
        };
        metadata.validate(&record)?;
        Ok(record)
    }

    /// More partitions for a topic, with its replication factor.
    pub fn create_partitions(
        &self,
        metadata: &Metadata,
        topic: TopicId,
        total: usize,
    ) -> Result<MetadataRecord, MetadataError> {
        let existing = metadata.topic(topic)?;
        let current = existing.partitions.len();
        if total <= current {
            return Err(MetadataError::InvalidPartitionChange(format!(
                "{} has {current} partitions; the count can only grow",
                existing.name
            )));
        }
        // Partition 0's replicas, or its target while it moves (its
        // replicas are then the target and those leaving).
        let moving = metadata.reassignments.get(&(topic, PartitionId(0)));
        let replication_factor = match (moving, existing.partitions.first()) {
            (Some(m), _) => m.target.len(),
            (None, first) => first.map_or(1, |p| p.replicas.len()),
        };
        let record = MetadataRecord::CreatePartitions {
            topic,
            partitions: place(metadata, total - current, replication_factor)?,
        };
        metadata.validate(&record)?;
        Ok(record)
    }
}

/// The partitions named (topic name, indexes) that exist, each once
/// however often it is named: two changes of one partition from one epoch
/// in a batch would refuse the whole batch.
fn named_partitions<'a>(
    metadata: &'a Metadata,
    partitions: &'a [(String, Vec<i32>)],
) -> impl Iterator<Item = (TopicId, PartitionId, &'a Partition)> + 'a {
    let mut seen = std::collections::BTreeSet::new();
    partitions
        .iter()
        .filter_map(|(name, indexes)| Some((metadata.topic_by_name(name).ok()?, indexes)))
        .flat_map(|(topic, indexes)| indexes.iter().map(move |&index| (topic, index)))
        .filter_map(|(topic, index)| {
            let partition = topic.partitions.get(usize::try_from(index).ok()?)?;
            Some((topic.id, PartitionId(index), partition))
        })
        .filter(move |(topic, index, _)| seen.insert((*topic, *index)))
}

/// A broker process's registration, with its listeners. A new life of a
/// broker whose old life still leads: the old one is fenced first (its
/// leaderships move to other in-sync replicas, or wait for it), so the
/// new life leads again only in a new leader epoch, once it heartbeats.
pub fn register(
    metadata: &Metadata,
    registration: BrokerRegistration,
    endpoints: Vec<BrokerEndpoint>,
) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    if let Some(old) = metadata.brokers.get(&registration.id) {
        let previous = old.registration.incarnation;
        if !old.fenced && previous < registration.incarnation {
            records.extend(fence(metadata, registration.id, previous));
        }
    }
    let (id, incarnation) = (registration.id, registration.incarnation);
    records.push(MetadataRecord::RegisterBroker(registration));
    // In the same batch: no client sees the new life without its
    // listeners.
    if !endpoints.is_empty() {
        records.push(MetadataRecord::SetBrokerEndpoints {
            id,
            incarnation,
            endpoints,
        });
    }
    records
}

/// [`fence`] for a controlled shutdown: refuses an unknown broker or a
/// stale incarnation first.
pub fn fence_checked(
    metadata: &Metadata,
    broker: BrokerId,
    incarnation: Incarnation,
) -> Result<Vec<MetadataRecord>, MetadataError> {
    metadata.broker_life(broker, incarnation)?;
    Ok(fence(metadata, broker, incarnation))
}

/// Records that take every leadership of `broker` to another in-sync
/// replica (first in replica order), drop it from every ISR it is in, and
/// fence it. A partition with no other in-sync replica gets an unclean
/// leader where its topic allows one, and no leader otherwise.
pub fn fence(
    metadata: &Metadata,
    broker: BrokerId,
    incarnation: Incarnation,
) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for topic in metadata.topics.values() {
        for (index, partition) in topic.partitions.iter().enumerate() {
            if partition.leader != Some(broker) && !partition.isr.contains(&broker) {
                continue;
            }
            let change = move_off(
                metadata,
                topic,
                PartitionId(index as i32),
                partition,
                broker,
            );
            records.push(MetadataRecord::ChangePartition(change));
        }
    }
    records.push(MetadataRecord::FenceBroker {
        id: broker,
        incarnation,
    });
    records
}

fn move_off(
    metadata: &Metadata,
    topic: &Topic,
    partition_id: PartitionId,
    partition: &Partition,
    broker: BrokerId,
) -> PartitionChange {
    let live = |b: &BrokerId| *b != broker && metadata.brokers.get(b).is_some_and(|x| !x.fenced);
    let isr: Vec<BrokerId> = partition
        .isr
        .iter()
        .copied()
        .filter(|b| *b != broker)
        .collect();
    let mut change = PartitionChange {
        topic: topic.id,
        partition: partition_id,
        expected_epoch: partition.partition_epoch,
        leader: partition.leader.filter(|l| *l != broker),
        isr: isr.clone(),
        unclean: false,
    };
    // The leader stays unless it is the broker leaving, or (in a state
    // from before fenced brokers were kept from leading) no longer live; a
    // partition without a leader waits for its last in-sync replica, which
    // stays on record even when it is the broker leaving (an empty ISR
    // would leave nobody to wait for: the partition could only come back
    // by an unclean election).
    match partition.leader {
        None => {
            if change.isr.is_empty() {
                change.isr = vec![broker];
            }
            return change;
        }
        Some(leader) if leader != broker && live(&leader) => return change,
        Some(_) => {}
    }
    // Preferred order: the replica list, restricted to live ISR members.
    change.leader = partition
        .replicas
        .iter()
        .copied()
        .find(|b| isr.contains(b) && live(b));
    if change.leader.is_none() && topic.config.unclean_leader_election {
        // Availability over durability, by the topic's choice: counted.
        let order = metadata.unclean_order(topic.id, partition_id, partition);
        if let Some(replica) = order.into_iter().find(|b| live(b)) {
            change.leader = Some(replica);
            change.isr = vec![replica];
            change.unclean = true;
        }
    }
    if change.leader.is_none() && change.isr.is_empty() {
        // Keep the last in-sync replica on record: it is the one to wait for.
        change.isr = vec![broker];
    }
    change
}
