//! One member of the metadata quorum, sans I/O: raft-rs's `RawNode` plus
//! the metadata state machine. A driver (the simulation in tests, a
//! glommio shard in the broker) feeds it ticks and messages, persists what
//! it asks, and sends what it returns, in raft-rs's documented order:
//!
//! 1. `ready()`: messages to send now; the snapshot, committed entries and
//!    new entries are applied to memory; returns what must be made durable
//!    and the messages that may leave only after that;
//! 2. the driver persists (fsync) the [`Persist`] and sends the messages;
//! 3. `persisted()`: advances raft-rs, applies what the light ready
//!    committed, and returns more messages to send.

use std::cell::RefCell;
use std::rc::Rc;

use protobuf::Message as _;
use raft::eraftpb::{
    ConfChangeSingle, ConfChangeType, ConfChangeV2, ConfState, Entry, EntryType, HardState,
    Message, Snapshot,
};
use raft::storage::MemStorage;
use raft::{Config, GetEntriesContext, RaftState, RawNode, Ready, StateRole, Storage};

use crate::model::error::MetadataError;
use crate::model::record::MetadataRecord;
use crate::model::Metadata;

/// A node's id in the quorum (its broker id, as Raft's u64).
pub type NodeId = u64;

/// What the node asks to be made durable (in this order).
#[derive(Debug, Default, Clone)]
pub struct Persist {
    /// A snapshot received from the leader: it replaces the whole log
    /// (this node's entries after a point where its log differs from the
    /// leader's belong to a history the quorum did not keep).
    pub received_snapshot: Option<Snapshot>,
    /// Entries to append; an entry at index i replaces any at i or above.
    pub entries: Vec<Entry>,
    /// The new term, vote and commit.
    pub hard_state: Option<HardState>,
    /// A snapshot this node took of its applied state: the entries at or
    /// below its index may be dropped, the ones after it stay.
    pub taken_snapshot: Option<Snapshot>,
}

impl Persist {
    /// Whether there is nothing to persist.
    pub fn is_empty(&self) -> bool {
        self.received_snapshot.is_none()
            && self.entries.is_empty()
            && self.hard_state.is_none()
            && self.taken_snapshot.is_none()
    }
}

/// The second half of handling a ready.
#[derive(Debug, Default)]
pub struct Persisted {
    /// Send these now.
    pub send: Vec<Message>,
    /// Make this durable when convenient: a commit index learned after the
    /// ready (so a restart knows what it had committed) and a snapshot
    /// taken of the applied state. Nothing waits on it, and losing it in a
    /// crash loses nothing the quorum committed.
    pub persist: Persist,
}

/// The first half of handling a ready.
#[derive(Debug, Default)]
pub struct ReadyOutput {
    /// Send these at once (the leader's appends may leave before its own
    /// log is durable: raft-rs counts its own vote only once persisted).
    pub send: Vec<Message>,
    /// Make this durable, then call [`MetadataNode::persisted`].
    pub persist: Persist,
    /// Send these only after `persist` is durable (votes, acks).
    pub after_persist: Vec<Message>,
}

/// One log entry applied to the metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Its log index.
    pub index: u64,
    /// The record; None when a snapshot replaced the whole state.
    pub record: Option<MetadataRecord>,
    /// Why the record was refused (it then changed nothing), if it was.
    pub refused: Option<MetadataError>,
}

/// What a node's durable storage held when it restarted.
#[derive(Debug, Default, Clone)]
pub struct Recovered {
    /// The last snapshot, if any.
    pub snapshot: Option<Snapshot>,
    /// Entries after it.
    pub entries: Vec<Entry>,
    /// The last hard state.
    pub hard_state: HardState,
}

impl Recovered {
    /// Checks what raft-rs assumes of a restarted node's storage (it
    /// panics otherwise, or worse): entries contiguous and right after the
    /// snapshot, terms never going down, the commit index inside the log.
    /// Returns what is wrong.
    pub fn check(&self) -> Result<(), String> {
        let snapshot_index = self.snapshot.as_ref().map_or(0, |s| s.get_metadata().index);
        if let Some(first) = self.entries.first() {
            if first.index != snapshot_index + 1 {
                return Err(format!(
                    "the log starts at index {} but its snapshot ends at {snapshot_index}",
                    first.index
                ));
            }
        }
        if let Some(gap) = self
            .entries
            .windows(2)
            .find(|w| w[1].index != w[0].index + 1)
        {
            return Err(format!(
                "the log skips from index {} to {}",
                gap[0].index, gap[1].index
            ));
        }
        // Terms never go down along a Raft log: a lower term after a higher
        // one is an entry of a history the quorum replaced.
        let snapshot_term = self.snapshot.as_ref().map_or(0, |s| s.get_metadata().term);
        let mut term = snapshot_term;
        for entry in &self.entries {
            if entry.term < term {
                return Err(format!(
                    "the log's term goes down from {term} to {} at index {}",
                    entry.term, entry.index
                ));
            }
            term = entry.term;
        }
        let last = self.entries.last().map_or(snapshot_index, |e| e.index);
        let commit = self.hard_state.commit;
        if commit > last {
            return Err(format!(
                "the hard state's commit index {commit} is past the log's last index {last}"
            ));
        }
        if commit < snapshot_index {
            return Err(format!(
                "the hard state's commit index {commit} is below the snapshot's index {snapshot_index}"
            ));
        }
        Ok(())
    }
}

/// One change of the quorum's members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberChange {
    /// The node follows the log without a vote (an observer).
    AddLearner(NodeId),
    /// The node votes (a learner promoted, or a new node).
    AddVoter(NodeId),
    /// The node leaves the quorum.
    Remove(NodeId),
}

/// The quorum's members.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Members {
    /// Nodes that vote.
    pub voters: Vec<NodeId>,
    /// Nodes that follow the log without a vote (observers).
    pub learners: Vec<NodeId>,
}

/// Why a proposal was not taken.
#[derive(Debug, thiserror::Error)]
pub enum ProposeError {
    /// Only the leader proposes.
    #[error("not the leader (leader is {leader:?})")]
    NotLeader {
        /// Who is, if known.
        leader: Option<NodeId>,
    },
    /// The record is invalid against the current metadata.
    #[error(transparent)]
    Invalid(#[from] MetadataError),
    /// raft-rs refused it (e.g. a leadership transfer is under way).
    #[error("raft refused the proposal: {0}")]
    Raft(String),
}

/// Settings of a metadata node.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// This node.
    pub id: NodeId,
    /// All voters (used only when starting a brand-new quorum).
    pub voters: Vec<NodeId>,
    /// Ticks without a leader before an election.
    pub election_ticks: usize,
    /// Ticks between leader heartbeats.
    pub heartbeat_ticks: usize,
    /// Take a snapshot and compact the log every this many applied entries.
    pub snapshot_every_entries: u64,
    /// Election timeouts drawn from [min, max) ticks. raft-rs draws them
    /// from an unseeded generator; a deterministic simulation sets
    /// `max = min + 1` with a different `min` per node instead.
    pub election_timeout_ticks: (usize, usize),
}

impl NodeConfig {
    /// Defaults for `id` in a quorum of `voters`.
    pub fn new(id: NodeId, voters: Vec<NodeId>) -> NodeConfig {
        NodeConfig {
            id,
            voters,
            election_ticks: 10,
            heartbeat_ticks: 2,
            snapshot_every_entries: 1000,
            election_timeout_ticks: (10, 20),
        }
    }
}

/// raft-rs's in-memory storage, serving our metadata snapshot (MemStorage
/// alone would serve snapshots without data to followers that fell behind).
#[derive(Clone)]
pub struct NodeStorage {
    mem: MemStorage,
    snapshot: Rc<RefCell<Option<Snapshot>>>,
    /// Set when a follower needed a snapshot the last one cannot serve: it
    /// predates the follower joining (raft-rs's follower refuses a snapshot
    /// whose members do not include it). The node then takes a new one.
    snapshot_wanted: Rc<std::cell::Cell<bool>>,
}

impl Storage for NodeStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        self.mem.initial_state()
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        self.mem.entries(low, high, max_size, context)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        self.mem.term(idx)
    }

    fn first_index(&self) -> raft::Result<u64> {
        self.mem.first_index()
    }

    fn last_index(&self) -> raft::Result<u64> {
        self.mem.last_index()
    }

    fn snapshot(&self, request_index: u64, to: u64) -> raft::Result<Snapshot> {
        let member = |snapshot: &Snapshot| {
            let conf = snapshot.get_metadata().get_conf_state();
            conf.voters.contains(&to) || conf.learners.contains(&to)
        };
        match &*self.snapshot.borrow() {
            Some(snapshot)
                if snapshot.get_metadata().index >= request_index && member(snapshot) =>
            {
                Ok(snapshot.clone())
            }
            Some(_) => {
                self.snapshot_wanted.set(true);
                Err(raft::Error::Store(
                    raft::StorageError::SnapshotTemporarilyUnavailable,
                ))
            }
            // Never MemStorage's: it carries no metadata, and a follower
            // installing it would hold an empty state. raft-rs retries.
            _ => Err(raft::Error::Store(
                raft::StorageError::SnapshotTemporarilyUnavailable,
            )),
        }
    }
}

/// One voter of the metadata quorum with its state machine.
pub struct MetadataNode {
    raw: RawNode<NodeStorage>,
    metadata: Metadata,
    applied: u64,
    /// Index of the last snapshot taken or installed.
    snapshot_index: u64,
    pending: Option<Ready>,
    snapshot_every_entries: u64,
    /// (index, record) applied since last asked, for observers and tests.
    applied_log: Vec<Applied>,
}

fn raft_config(config: &NodeConfig, applied: u64) -> Config {
    Config {
        id: config.id,
        election_tick: config.election_ticks,
        min_election_tick: config.election_timeout_ticks.0,
        max_election_tick: config.election_timeout_ticks.1,
        heartbeat_tick: config.heartbeat_ticks,
        applied,
        check_quorum: true,
        pre_vote: true,
        max_size_per_msg: 1 << 20,
        max_inflight_msgs: 256,
        ..Config::default()
    }
}

fn discard_logger() -> slog::Logger {
    slog::Logger::root(slog::Discard, slog::o!())
}

impl MetadataNode {
    /// Starts a node from what its disk recovered; a node with an empty
    /// disk starts a new quorum of `config.voters`.
    pub fn start(config: &NodeConfig, recovered: Recovered) -> Result<MetadataNode, String> {
        recovered.check()?;
        let mem = MemStorage::new();
        let mut metadata = Metadata::default();
        let mut applied = 0;
        // Without a snapshot, which carries it, the voter set starts as
        // configured (as it did when the quorum began, on every node,
        // observers included); the membership changes in the log are then
        // applied again on top of it.
        if recovered.snapshot.is_none() {
            let conf = ConfState {
                voters: config.voters.clone(),
                ..ConfState::default()
            };
            mem.initialize_with_conf_state(conf);
        }
        if let Some(snapshot) = &recovered.snapshot {
            metadata = Metadata::decode(&snapshot.data).map_err(|e| e.to_string())?;
            applied = snapshot.get_metadata().index;
            mem.wl()
                .apply_snapshot(snapshot.clone())
                .map_err(|e| e.to_string())?;
        }
        mem.wl()
            .append(&recovered.entries)
            .map_err(|e| e.to_string())?;
        if recovered.hard_state != HardState::default() {
            mem.wl().set_hardstate(recovered.hard_state.clone());
        }
        let storage = NodeStorage {
            mem,
            snapshot: Rc::new(RefCell::new(recovered.snapshot.clone())),
            snapshot_wanted: Rc::default(),
        };
        let raw = RawNode::new(&raft_config(config, applied), storage, &discard_logger())
            .map_err(|e| e.to_string())?;
        Ok(MetadataNode {
            raw,
            metadata,
            applied,
            snapshot_index: applied,
            pending: None,
            snapshot_every_entries: config.snapshot_every_entries.max(1),
            applied_log: Vec::new(),
        })
    }

    /// raft-rs's in-memory log and hard state.
    fn memory(&self) -> &MemStorage {
        &self.raw.raft.raft_log.store.mem
    }

    /// Advances logical time by one tick. A leader that is no voter any
    /// more (its demotion committed in its own term) hands leadership to
    /// the voter furthest along: raft-rs would let it lead on.
    pub fn tick(&mut self) {
        self.raw.tick();
        let raft = &self.raw.raft;
        let voters = &raft.prs().conf().voters();
        if raft.state == StateRole::Leader
            && !voters.contains(raft.id)
            && raft.lead_transferee.is_none()
        {
            let successor = (raft.prs().iter())
                .filter(|(id, _)| voters.contains(**id))
                .max_by_key(|(_, progress)| progress.matched)
                .map(|(id, _)| *id);
            if let Some(successor) = successor {
                self.raw.transfer_leader(successor);
            }
        }
    }

    /// Hands the node a message from a peer. Messages from unknown or stale
    /// peers are raft-rs's to judge; an error means it was dropped.
    pub fn step(&mut self, message: Message) -> Result<(), String> {
        self.raw.step(message).map_err(|e| e.to_string())
    }

    /// Tells raft-rs whether a snapshot message reached `to`. The transport
    /// must report every snapshot it sends: a leader waits for the report
    /// before it replicates to that follower again.
    pub fn report_snapshot(&mut self, to: NodeId, delivered: bool) {
        let status = if delivered {
            raft::SnapshotStatus::Finish
        } else {
            raft::SnapshotStatus::Failure
        };
        self.raw.report_snapshot(to, status);
    }

    /// Tells raft-rs that `to` could not be reached (a failed send).
    pub fn report_unreachable(&mut self, to: NodeId) {
        self.raw.report_unreachable(to);
    }

    /// Proposes records that depend on each other (a fence and the
    /// leaderships it moves, an unfence and the leaderships it allows):
    /// each is validated against the metadata with the ones before it
    /// applied, then all are proposed, in order. All or none.
    pub fn propose_all(&mut self, records: &[MetadataRecord]) -> Result<(), ProposeError> {
        if self.raw.raft.state != StateRole::Leader {
            return Err(ProposeError::NotLeader {
                leader: self.leader(),
            });
        }
        if records.len() > 1 {
            let mut scratch = self.metadata.clone();
            for record in records {
                scratch.validate(record)?;
                scratch.apply(record)?;
            }
        } else if let Some(record) = records.first() {
            self.metadata.validate(record)?;
        }
        for record in records {
            self.raw
                .propose(Vec::new(), record.encode())
                .map_err(|e| ProposeError::Raft(e.to_string()))?;
        }
        Ok(())
    }

    /// Proposes a record: validated against the applied metadata first, so
    /// an invalid record never enters the log (it could still be refused at
    /// apply time if an earlier record changes the state meanwhile, and is
    /// then refused identically everywhere).
    pub fn propose(&mut self, record: &MetadataRecord) -> Result<(), ProposeError> {
        if self.raw.raft.state != StateRole::Leader {
            return Err(ProposeError::NotLeader {
                leader: self.leader(),
            });
        }
        self.metadata.validate(record)?;
        self.raw
            .propose(Vec::new(), record.encode())
            .map_err(|e| ProposeError::Raft(e.to_string()))
    }

    /// Proposes a change of the quorum's members (one node added as a
    /// learner or a voter, or removed). raft-rs takes one at a time: a
    /// proposal made while another is unapplied becomes an empty entry, so
    /// the caller checks the members once its index applies.
    pub fn propose_member_change(&mut self, change: MemberChange) -> Result<(), ProposeError> {
        if self.raw.raft.state != StateRole::Leader {
            return Err(ProposeError::NotLeader {
                leader: self.leader(),
            });
        }
        let (node, kind) = match change {
            MemberChange::AddLearner(node) => (node, ConfChangeType::AddLearnerNode),
            MemberChange::AddVoter(node) => (node, ConfChangeType::AddNode),
            MemberChange::Remove(node) => (node, ConfChangeType::RemoveNode),
        };
        // A leader without its own progress makes raft-rs panic; one that
        // is not a voter leads on. It hands leadership over first.
        if node == self.id() && kind != ConfChangeType::AddNode {
            return Err(ProposeError::Raft(
                "the leader does not demote or remove itself: it hands leadership over first"
                    .into(),
            ));
        }
        let mut single = ConfChangeSingle::default();
        single.set_change_type(kind);
        single.node_id = node;
        let mut conf_change = ConfChangeV2::default();
        conf_change.mut_changes().push(single);
        self.raw
            .propose_conf_change(Vec::new(), conf_change)
            .map_err(|e| ProposeError::Raft(e.to_string()))
    }

    /// The quorum's members as of the applied log, each list in id order.
    pub fn members(&self) -> Members {
        let mut conf = self.raw.raft.prs().conf().to_conf_state();
        conf.voters.sort_unstable();
        conf.learners.sort_unstable();
        Members {
            voters: conf.voters,
            learners: conf.learners,
        }
    }

    /// How far `node`'s log matches the leader's (leader only; None
    /// elsewhere, for a node outside the quorum, or for one the leader has
    /// not heard from within an election timeout: it may be down).
    pub fn matched(&self, node: NodeId) -> Option<u64> {
        if !self.is_leader() {
            return None;
        }
        let own = node == self.id();
        self.raw
            .raft
            .prs()
            .get(node)
            .filter(|progress| own || progress.recent_active)
            .map(|progress| progress.matched)
    }

    /// Hands leadership to `node` (leader only; raft-rs gives up if `node`
    /// does not catch up within an election timeout).
    pub fn transfer_leadership(&mut self, node: NodeId) {
        self.raw.transfer_leader(node);
    }

    /// The first half of handling a ready, if there is one.
    pub fn ready(&mut self) -> Option<ReadyOutput> {
        assert!(self.pending.is_none(), "persisted() must follow ready()");
        if !self.raw.has_ready() {
            return None;
        }
        let mut ready = self.raw.ready();
        let mut output = ReadyOutput {
            send: ready.take_messages(),
            ..ReadyOutput::default()
        };
        if !ready.snapshot().is_empty() {
            let snapshot = ready.snapshot().clone();
            self.install_snapshot(&snapshot);
            output.persist.received_snapshot = Some(snapshot);
        }
        self.apply_entries(ready.take_committed_entries());
        if !ready.entries().is_empty() {
            self.memory()
                .wl()
                .append(ready.entries())
                .expect("appending to memory");
            output.persist.entries = ready.entries().to_vec();
        }
        if let Some(hard_state) = ready.hs() {
            self.memory().wl().set_hardstate(hard_state.clone());
            output.persist.hard_state = Some(hard_state.clone());
        }
        output.after_persist = ready.take_persisted_messages();
        self.pending = Some(ready);
        Some(output)
    }

    /// The second half: the last ready's [`Persist`] is durable.
    pub fn persisted(&mut self) -> Persisted {
        let ready = self.pending.take().expect("ready() came first");
        let mut light = self.raw.advance(ready);
        let mut persist = Persist::default();
        if let Some(commit) = light.commit_index() {
            // raft-rs leaves persisting this commit to us (a lone voter
            // learns every commit here): without it a restart would find
            // a snapshot past its commit index.
            let mut store = self.memory().wl();
            store.mut_hard_state().commit = commit;
            persist.hard_state = Some(store.hard_state().clone());
        }
        let send = light.take_messages();
        self.apply_entries(light.take_committed_entries());
        self.raw.advance_apply();
        persist.taken_snapshot = self.maybe_snapshot();
        Persisted { send, persist }
    }

    fn install_snapshot(&mut self, snapshot: &Snapshot) {
        let index = snapshot.get_metadata().index;
        match Metadata::decode(&snapshot.data) {
            Ok(metadata) => self.metadata = metadata,
            // A snapshot from our own leader that does not decode is a bug.
            Err(e) => panic!("undecodable metadata snapshot at {index}: {e}"),
        }
        let store = &self.raw.raft.raft_log.store;
        store
            .mem
            .wl()
            .apply_snapshot(snapshot.clone())
            .expect("installing a newer snapshot");
        *store.snapshot.borrow_mut() = Some(snapshot.clone());
        self.applied = index;
        self.snapshot_index = index;
        self.applied_log.push(Applied {
            index,
            record: None,
            refused: None,
        });
    }

    fn apply_entries(&mut self, entries: Vec<Entry>) {
        for entry in entries {
            if entry.index <= self.applied {
                continue;
            }
            self.applied = entry.index;
            if entry.get_entry_type() == EntryType::EntryConfChangeV2 {
                self.apply_member_change(&entry);
                continue;
            }
            if entry.get_entry_type() != EntryType::EntryNormal || entry.data.is_empty() {
                // A new leader's empty entry (or a version 1 membership
                // change, which this quorum never proposes).
                continue;
            }
            // Entries passed their checksum and were proposed encoded: one
            // that does not decode was written by a newer broker.
            let record = MetadataRecord::decode(&entry.data).unwrap_or_else(|e| {
                panic!(
                    "committed metadata record at index {} does not decode ({e}): written by a \
                     newer broker version?",
                    entry.index
                )
            });
            // Refused records change nothing, identically on every node.
            let refused = self.metadata.apply(&record).err();
            self.applied_log.push(Applied {
                index: entry.index,
                record: Some(record),
                refused,
            });
        }
    }

    /// Applies a committed membership change to raft-rs's progress and to
    /// the configuration its storage reports.
    fn apply_member_change(&mut self, entry: &Entry) {
        let conf_change = match ConfChangeV2::parse_from_bytes(&entry.data) {
            Ok(conf_change) => conf_change,
            // Proposed encoded by a leader of this quorum: a bug.
            Err(e) => panic!(
                "undecodable membership change at index {}: {e}",
                entry.index
            ),
        };
        match self.raw.apply_conf_change(&conf_change) {
            Ok(conf) => self.memory().wl().set_conf_state(conf),
            // raft-rs refuses a change that would leave no voter, or a
            // voter demoted in one step: identically on every node.
            Err(e) => tracing::warn!(index = entry.index, error = %e, "membership change refused"),
        }
    }

    /// Every `snapshot_every_entries` applied entries (or sooner when a
    /// follower needs a newer one), snapshots the metadata and compacts
    /// the in-memory log behind it; the driver persists the snapshot, and
    /// only then drops those entries from disk.
    fn maybe_snapshot(&mut self) -> Option<Snapshot> {
        let store = self.raw.raft.raft_log.store.clone();
        let wanted = store.snapshot_wanted.take() && self.applied > self.snapshot_index;
        if self.applied < self.snapshot_index + self.snapshot_every_entries && !wanted {
            return None;
        }
        let term = store.mem.term(self.applied).ok()?;
        let mut snapshot = Snapshot {
            data: self.metadata.encode().into(),
            ..Snapshot::default()
        };
        let meta = snapshot.mut_metadata();
        meta.index = self.applied;
        meta.term = term;
        meta.set_conf_state(self.raw.raft.prs().conf().to_conf_state());
        *store.snapshot.borrow_mut() = Some(snapshot.clone());
        store
            .mem
            .wl()
            .compact(self.applied)
            .expect("compacting applied entries");
        self.snapshot_index = self.applied;
        Some(snapshot)
    }

    /// The applied metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The last applied index.
    pub fn applied_index(&self) -> u64 {
        self.applied
    }

    /// (index, record) applied since last asked; None marks a snapshot install.
    pub fn take_applied(&mut self) -> Vec<Applied> {
        std::mem::take(&mut self.applied_log)
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.raw.raft.id
    }

    /// Whether this node is the leader.
    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    /// The current term.
    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    /// The leader this node knows of.
    pub fn leader(&self) -> Option<NodeId> {
        let leader = self.raw.raft.leader_id;
        (leader != raft::INVALID_ID).then_some(leader)
    }

    /// The index of the last entry in the log (after a proposal: its index).
    pub fn last_index(&self) -> u64 {
        self.raw.raft.raft_log.last_index()
    }

    /// The commit index.
    pub fn commit_index(&self) -> u64 {
        self.raw.raft.raft_log.committed
    }
}
