//! One consumer group's membership, as Kafka's group coordinator keeps it:
//! members join (JoinGroup), the join phase completes when every known
//! member has rejoined or the rebalance timeout passes, the leader's
//! assignment is handed out (SyncGroup), and heartbeats keep sessions
//! alive. Generation ids and member ids fence stale members; a static
//! member (group.instance.id) that comes back replaces its old self
//! without a rebalance.
//!
//! Sans-IO: time comes in as `now`, and answers to requests that must wait
//! (joins during a rebalance, syncs before the leader's) come out of
//! [`Group::poll`] and [`Group::sync`]. The caller (the coordinator on a
//! shard) delivers them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::ResponseError;

/// A member id (assigned by the coordinator).
pub type MemberId = String;

/// A Kafka error code (0: none).
use crate::kafka::Code;

pub use snapshot::{GroupSnapshot, MemberSnapshot};

/// The group's state, as DescribeGroups names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// No members.
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignment.
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
}

/// A JoinGroup request.
#[derive(Debug, Clone)]
pub struct Join {
    /// Empty for a member joining for the first time.
    pub member_id: MemberId,
    /// group.instance.id, for static members.
    pub instance_id: Option<String>,
    /// The client's id.
    pub client_id: String,
    /// Where the client connects from (for DescribeGroups).
    pub client_host: String,
    /// "consumer" for consumers.
    pub protocol_type: String,
    /// (protocol name, metadata), in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// Without a heartbeat for this long, the member is removed.
    pub session_timeout: Duration,
    /// How long a rebalance may wait for this member to rejoin.
    pub rebalance_timeout: Duration,
    /// JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED
    /// with its id, and joins again with it.
    pub require_known_member_id: bool,
}

/// A JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// Error code.
    pub error: Code,
    /// The new generation.
    pub generation: i32,
    /// The protocol chosen for the group.
    pub protocol: Option<String>,
    /// The leader's member id.
    pub leader: MemberId,
    /// This member's id.
    pub member_id: MemberId,
    /// For the leader only: every member's id, instance id and metadata.
    pub members: Vec<(MemberId, Option<String>, Bytes)>,
    /// The leader need not assign (JoinGroup v9): a static leader that
    /// came back to a stable group keeps the current assignment.
    pub skip_assignment: bool,
}

/// A new member id: the client id and a random suffix, as Kafka makes
/// them (unique across a group's lives and its protocols).
pub fn fresh_member_id(client_id: &str) -> MemberId {
    format!("{client_id}-{:016x}", rand::random::<u64>())
}

impl Joined {
    fn error(error: ResponseError, member_id: &str) -> Joined {
        Joined::failed(error.code(), member_id)
    }

    /// A refusal with error `code` to member `member_id`.
    pub fn failed(code: Code, member_id: &str) -> Joined {
        Joined {
            error: code,
            generation: -1,
            protocol: None,
            leader: String::new(),
            member_id: member_id.to_string(),
            members: vec![],
            skip_assignment: false,
        }
    }
}

/// What a join does right away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinStep {
    /// Answer now.
    Answer(Joined),
    /// The member (with this id) waits: its answer comes out of
    /// [`Group::poll`].
    Wait(MemberId),
}

/// What a sync does right away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncStep {
    /// Answer now: error code and the member's assignment.
    Answer(Code, Bytes),
    /// The member waits for the leader's assignment (from [`Group::sync`]
    /// of the leader, or an error from [`Group::poll`]).
    Wait,
}

#[derive(Debug, Clone)]
struct Member {
    instance_id: Option<String>,
    client_id: String,
    client_host: String,
    protocols: Vec<(String, Bytes)>,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    last_heard: Instant,
    assignment: Bytes,
}

/// One group's membership.
#[derive(Debug)]
pub struct Group {
    id: String,
    state: GroupState,
    generation: i32,
    protocol_type: Option<String>,
    protocol: Option<String>,
    leader: Option<MemberId>,
    members: BTreeMap<MemberId, Member>,
    /// instance id -> member id.
    statics: BTreeMap<String, MemberId>,
    /// Members that joined in the current rebalance (awaiting the answer).
    joined: BTreeSet<MemberId>,
    /// New dynamic members told their id (MEMBER_ID_REQUIRED), not yet joined.
    /// Each is forgotten if it does not join within its session timeout.
    announced: BTreeMap<MemberId, Instant>,
    /// Members waiting for the leader's assignment.
    syncing: BTreeSet<MemberId>,
    /// When the current join phase ends at the latest.
    join_deadline: Option<Instant>,
    /// The current join phase started from an empty group: it waits out
    /// the initial delay even when everyone has joined.
    delayed_start: bool,
    /// Delay before the first rebalance of an empty group completes, so
    /// members starting together land in one generation.
    initial_delay: Duration,
}

impl GroupState {
    /// The name DescribeGroups and ListGroups use.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
        }
    }
}

impl Group {
    /// An empty group.
    pub fn new(id: &str, initial_delay: Duration) -> Group {
        Group {
            id: id.to_string(),
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            statics: BTreeMap::new(),
            joined: BTreeSet::new(),
            announced: BTreeMap::new(),
            syncing: BTreeSet::new(),
            join_deadline: None,
            delayed_start: false,
            initial_delay,
        }
    }

    /// The group's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The protocol type ("consumer" for consumer groups), if any member
    /// ever joined.
    pub fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }

    /// The state.
    pub fn state(&self) -> GroupState {
        self.state
    }

    /// The current generation.
    pub fn generation(&self) -> i32 {
        self.generation
    }

    /// The members' ids.
    pub fn member_ids(&self) -> Vec<MemberId> {
        self.members.keys().cloned().collect()
    }

    /// The members' current assignments (the protocol's bytes; empty for
    /// a member not given one yet).
    pub fn assignments(&self) -> impl Iterator<Item = &Bytes> {
        self.members.values().map(|m| &m.assignment)
    }

    /// Whether the group holds no one: no members, none joining, none
    /// told their member id and expected back.
    pub fn is_idle(&self) -> bool {
        self.members.is_empty() && self.joined.is_empty() && self.announced.is_empty()
    }

    /// Whether `member_id` is a member.
    pub fn has_member(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }

    /// Whether `member_id` waits for the leader's assignment (a rebalance
    /// starting, or the member leaving, ends the wait).
    pub fn is_syncing(&self, member_id: &str) -> bool {
        self.syncing.contains(member_id)
    }

    /// The protocols `member_id` joined with (name, metadata).
    pub fn protocols_of(&self, member_id: &str) -> Option<&[(String, Bytes)]> {
        self.members.get(member_id).map(|m| m.protocols.as_slice())
    }

    /// Starts a rebalance of a stable group now (one converted from a
    /// consumer group: its members join again under this protocol).
    pub fn rebalance(&mut self, now: Instant) {
        if self.state == GroupState::Stable {
            self.start_rebalance(now);
        }
    }

    /// The chosen protocol.
    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    /// A member id unique across the group's lives (a restored group
    /// must not hand out an id a restored member holds): the client id
    /// and a random suffix, as Kafka does.
    fn new_member_id(&mut self, client_id: &str) -> MemberId {
        fresh_member_id(client_id)
    }

    /// A JoinGroup request.
    pub fn join(&mut self, join: Join, now: Instant) -> JoinStep {
        if join.protocols.is_empty()
            || self
                .protocol_type
                .as_ref()
                .is_some_and(|t| *t != join.protocol_type && !self.members.is_empty())
        {
            return JoinStep::Answer(Joined::error(
                ResponseError::InconsistentGroupProtocol,
                &join.member_id,
            ));
        }
        let (member_id, replaced_static) = match self.joining_member_id(&join, now) {
            Ok(joining) => joining,
            Err(refused) => return JoinStep::Answer(refused),
        };
        if !self.compatible(&join.protocols) {
            return JoinStep::Answer(Joined::error(
                ResponseError::InconsistentGroupProtocol,
                &member_id,
            ));
        }
        let unchanged = self
            .members
            .get(&member_id)
            .is_some_and(|m| m.protocols == join.protocols);
        self.admit(&member_id, &join, now);
        // A known member rejoining a stable group with the same protocols
        // (e.g. a lost answer) gets the current generation back; so does a
        // static member's new life, even the leader's (told to skip the
        // assignment). A dynamic leader rejoining asks for a rebalance.
        let is_leader = self.leader.as_deref() == Some(&member_id);
        if self.state == GroupState::Stable && unchanged && (!is_leader || replaced_static) {
            let mut answer = self.joined_answer(&member_id);
            answer.skip_assignment = is_leader;
            return JoinStep::Answer(answer);
        }
        self.joined.insert(member_id.clone());
        if self.state != GroupState::PreparingRebalance {
            self.start_rebalance(now);
        }
        JoinStep::Wait(member_id)
    }

    /// The member id a join goes on with, and whether it replaced a
    /// static member's old id; or the refusal to answer: a static member
    /// coming back takes over its old id's place (another id for the same
    /// instance is fenced), a new member gets an id (first answered with
    /// MEMBER_ID_REQUIRED when the client asks to know it first), an id
    /// the group never gave out is unknown.
    fn joining_member_id(&mut self, join: &Join, now: Instant) -> Result<(MemberId, bool), Joined> {
        let mut member_id = join.member_id.clone();
        let mut replaced_static = false;
        if let Some(instance) = &join.instance_id {
            if let Some(old) = self.statics.get(instance).cloned() {
                if member_id.is_empty() {
                    member_id = self.replace_static(&old, join, now);
                    replaced_static = true;
                } else if member_id != old {
                    return Err(Joined::error(ResponseError::FencedInstanceId, &member_id));
                }
            }
        }
        if member_id.is_empty() {
            let id = self.new_member_id(&join.client_id);
            if join.require_known_member_id && join.instance_id.is_none() {
                self.announced
                    .insert(id.clone(), now + join.session_timeout);
                return Err(Joined::error(ResponseError::MemberIdRequired, &id));
            }
            member_id = id;
        } else if !self.members.contains_key(&member_id)
            && self.announced.remove(&member_id).is_none()
        {
            return Err(Joined::error(ResponseError::UnknownMemberId, &member_id));
        }
        Ok((member_id, replaced_static))
    }

    /// Records the joining member (keeping the assignment a known member
    /// holds).
    fn admit(&mut self, member_id: &MemberId, join: &Join, now: Instant) {
        let assignment = self
            .members
            .get(member_id)
            .map(|m| m.assignment.clone())
            .unwrap_or_default();
        self.protocol_type = Some(join.protocol_type.clone());
        if let Some(instance) = &join.instance_id {
            self.statics.insert(instance.clone(), member_id.clone());
        }
        self.members.insert(
            member_id.clone(),
            Member {
                instance_id: join.instance_id.clone(),
                client_id: join.client_id.clone(),
                client_host: join.client_host.clone(),
                protocols: join.protocols.clone(),
                session_timeout: join.session_timeout,
                rebalance_timeout: join.rebalance_timeout,
                last_heard: now,
                assignment,
            },
        );
    }

    /// A static member's new life replaces the old member id (which is
    /// then fenced); the group keeps its generation and assignment.
    fn replace_static(&mut self, old: &MemberId, join: &Join, now: Instant) -> MemberId {
        let new = self.new_member_id(&join.client_id);
        if let Some(mut member) = self.members.remove(old) {
            member.last_heard = now;
            self.members.insert(new.clone(), member);
        }
        if self.leader.as_ref() == Some(old) {
            self.leader = Some(new.clone());
        }
        if self.joined.remove(old) {
            self.joined.insert(new.clone());
        }
        self.syncing.remove(old);
        new
    }

    fn compatible(&self, protocols: &[(String, Bytes)]) -> bool {
        self.members.is_empty()
            || protocols.iter().any(|(name, _)| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(n, _)| n == name))
            })
    }

    fn start_rebalance(&mut self, now: Instant) {
        let longest = self
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default();
        self.delayed_start = self.state == GroupState::Empty;
        let wait = if self.delayed_start {
            self.initial_delay.min(longest)
        } else {
            longest
        };
        self.state = GroupState::PreparingRebalance;
        self.join_deadline = Some(now + wait);
        self.syncing.clear();
    }

    /// Completes what time or the members' requests made due: expired
    /// sessions, the end of a join phase. Returns the join answers to
    /// deliver, and the members whose pending sync failed (answer them
    /// REBALANCE_IN_PROGRESS).
    pub fn poll(&mut self, now: Instant) -> (Vec<Joined>, Vec<MemberId>) {
        let mut failed_syncs = Vec::new();
        self.announced.retain(|_, deadline| *deadline > now);
        // Sessions (members waiting in a join phase are exempt: the
        // rebalance timeout bounds them).
        let expired: Vec<MemberId> = self
            .members
            .iter()
            .filter(|(id, m)| {
                !self.joined.contains(*id) && now.duration_since(m.last_heard) > m.session_timeout
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.remove(&id);
            if matches!(
                self.state,
                GroupState::Stable | GroupState::CompletingRebalance
            ) {
                failed_syncs.extend(self.syncing.iter().cloned());
                self.start_rebalance(now);
            }
        }
        if self.state != GroupState::PreparingRebalance {
            return (vec![], failed_syncs);
        }
        let everyone_in =
            !self.members.is_empty() && self.members.keys().all(|id| self.joined.contains(id));
        let due = self.join_deadline.is_some_and(|d| now >= d);
        // Nobody left to wait for: the phase ends now, the group empty.
        let nobody = self.members.is_empty();
        if !(due || nobody || (everyone_in && !self.delayed_start)) {
            return (vec![], failed_syncs);
        }
        // Members that did not rejoin in time are out.
        let late: Vec<MemberId> = self
            .members
            .keys()
            .filter(|id| !self.joined.contains(*id))
            .cloned()
            .collect();
        for id in late {
            self.remove(&id);
        }
        self.generation += 1;
        self.join_deadline = None;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.leader = None;
            self.protocol = None;
            return (vec![], failed_syncs);
        }
        self.protocol = self.choose_protocol();
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l))
        {
            self.leader = self.joined.iter().next().cloned();
        }
        self.state = GroupState::CompletingRebalance;
        let answers = std::mem::take(&mut self.joined)
            .into_iter()
            .map(|id| self.joined_answer(&id))
            .collect();
        (answers, failed_syncs)
    }

    fn joined_answer(&self, member_id: &str) -> Joined {
        let leader = self.leader.clone().unwrap_or_default();
        let protocol = self.protocol.clone();
        let members = if leader == member_id {
            self.members
                .iter()
                .map(|(id, m)| {
                    let metadata = m
                        .protocols
                        .iter()
                        .find(|(n, _)| Some(n) == protocol.as_ref())
                        .map(|(_, meta)| meta.clone())
                        .unwrap_or_default();
                    (id.clone(), m.instance_id.clone(), metadata)
                })
                .collect()
        } else {
            vec![]
        };
        Joined {
            error: 0,
            generation: self.generation,
            protocol,
            leader,
            member_id: member_id.to_string(),
            members,
            skip_assignment: false,
        }
    }

    /// The protocol every member supports with the most first-choice votes.
    fn choose_protocol(&self) -> Option<String> {
        let candidates: Vec<&String> = self
            .members
            .values()
            .next()?
            .protocols
            .iter()
            .map(|(n, _)| n)
            .filter(|n| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(p, _)| p == *n))
            })
            .collect();
        let mut votes: BTreeMap<&String, usize> = BTreeMap::new();
        for member in self.members.values() {
            if let Some((vote, _)) = member
                .protocols
                .iter()
                .find(|(n, _)| candidates.contains(&n))
            {
                *votes.entry(vote).or_default() += 1;
            }
        }
        votes
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .map(|(p, _)| p.clone())
    }

    fn remove(&mut self, id: &MemberId) {
        if let Some(member) = self.members.remove(id) {
            if let Some(instance) = member.instance_id {
                if self.statics.get(&instance) == Some(id) {
                    self.statics.remove(&instance);
                }
            }
        }
        self.joined.remove(id);
        self.syncing.remove(id);
        if self.leader.as_ref() == Some(id) {
            self.leader = None;
        }
    }

    fn check_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), Code> {
        if let Some(instance) = instance_id {
            if let Some(current) = self.statics.get(instance) {
                if current != member_id {
                    return Err(ResponseError::FencedInstanceId.code());
                }
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(ResponseError::UnknownMemberId.code());
        }
        if generation != self.generation {
            return Err(ResponseError::IllegalGeneration.code());
        }
        Ok(())
    }

    /// A SyncGroup request; the leader brings every member's assignment.
    /// Returns this member's step and, when the leader's sync completes the
    /// phase, the answers of the members that were waiting.
    pub fn sync(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        assignments: Vec<(MemberId, Bytes)>,
        now: Instant,
    ) -> (SyncStep, Vec<(MemberId, Bytes)>) {
        if let Err(code) = self.check_member(member_id, instance_id, generation) {
            return (SyncStep::Answer(code, Bytes::new()), vec![]);
        }
        self.heard(member_id, now);
        match self.state {
            GroupState::PreparingRebalance | GroupState::Empty => (
                SyncStep::Answer(ResponseError::RebalanceInProgress.code(), Bytes::new()),
                vec![],
            ),
            GroupState::Stable => {
                let assignment = self.members[member_id].assignment.clone();
                (SyncStep::Answer(0, assignment), vec![])
            }
            GroupState::CompletingRebalance => {
                if self.leader.as_deref() != Some(member_id) {
                    self.syncing.insert(member_id.to_string());
                    return (SyncStep::Wait, vec![]);
                }
                let mut given: BTreeMap<MemberId, Bytes> = assignments.into_iter().collect();
                for (id, member) in self.members.iter_mut() {
                    member.assignment = given.remove(id).unwrap_or_default();
                }
                self.state = GroupState::Stable;
                let waiting = std::mem::take(&mut self.syncing)
                    .into_iter()
                    .map(|id| {
                        let assignment = self.members[&id].assignment.clone();
                        (id, assignment)
                    })
                    .collect();
                let mine = self.members[member_id].assignment.clone();
                (SyncStep::Answer(0, mine), waiting)
            }
        }
    }

    fn heard(&mut self, member_id: &str, now: Instant) {
        if let Some(member) = self.members.get_mut(member_id) {
            member.last_heard = now;
        }
    }

    /// A Heartbeat: 0, or the error telling the member what to do.
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: Instant,
    ) -> Code {
        if let Err(code) = self.check_member(member_id, instance_id, generation) {
            return code;
        }
        self.heard(member_id, now);
        match self.state {
            GroupState::PreparingRebalance => ResponseError::RebalanceInProgress.code(),
            _ => 0,
        }
    }

    /// A member leaves (LeaveGroup): the others rebalance.
    pub fn leave(&mut self, member_id: &str, instance_id: Option<&str>, now: Instant) -> Code {
        let id = match (
            member_id.is_empty(),
            instance_id.and_then(|i| self.statics.get(i)),
        ) {
            (true, Some(id)) => id.clone(),
            _ => member_id.to_string(),
        };
        if let Some(instance) = instance_id {
            if self
                .statics
                .get(instance)
                .is_some_and(|current| *current != id)
            {
                return ResponseError::FencedInstanceId.code();
            }
        }
        if !self.members.contains_key(&id) {
            return ResponseError::UnknownMemberId.code();
        }
        self.remove(&id);
        if self.members.is_empty() && self.state != GroupState::PreparingRebalance {
            self.state = GroupState::Empty;
            self.generation += 1;
            self.leader = None;
            self.protocol = None;
        } else if self.state != GroupState::PreparingRebalance {
            self.start_rebalance(now);
        }
        0
    }

    /// Whether an OffsetCommit from this member at this generation may be
    /// stored: any commit to an empty group (simple consumers use -1), a
    /// current member's at the current generation otherwise.
    pub fn may_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), Code> {
        if self.state == GroupState::Empty && generation < 0 && member_id.is_empty() {
            return Ok(());
        }
        self.check_member(member_id, instance_id, generation)?;
        if self.state == GroupState::PreparingRebalance {
            return Err(ResponseError::RebalanceInProgress.code());
        }
        Ok(())
    }
}

mod snapshot;
#[cfg(test)]
mod tests;
