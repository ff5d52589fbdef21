//! The metadata service on a glommio shard: drives a [`MetadataNode`] with
//! a tick timer, a [`Transport`] and the on-disk state. While its node
//! leads, it is the active controller: it fences brokers whose heartbeats
//! stop and answers controller requests once their records commit. It
//! offers the broker a view of the committed metadata and a stream of
//! committed changes. Dropping the service stops the node.

use std::cell::{Ref, RefCell};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use futures::future::{select, Either};
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::channels::shared_channel::{self, ConnectedSender, SharedReceiver, SharedSender};
use glommio::{spawn_local, Task};

use crate::controller::request::{Call, Reply};
pub use crate::controller::request::{ControllerError, ControllerRequest};
use crate::controller::Controller;
use crate::model::error::MetadataError;
use crate::model::record::MetadataRecord;
use crate::model::types::{BrokerId, Incarnation};
use crate::model::Metadata;
pub use crate::raft::changes::Change;
use crate::raft::disk::FileRaftDisk;
use crate::raft::node::{
    Applied, MemberChange, Members, MetadataNode, NodeId, Persist, ProposeError,
};
use crate::transport::forward::{ask_members, forward};
use crate::transport::link::QuorumTls;
use crate::transport::{Inbound, Transport};

mod members;

/// Commands queued before new ones are refused.
pub const COMMANDS_QUEUED_MAX: usize = 1024;

/// Settings of the service.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// One Raft tick.
    pub tick: Duration,
    /// A broker silent this long is fenced.
    pub session_timeout: Duration,
    /// How often the active controller looks for expired sessions.
    pub controller_interval: Duration,
    /// How often the active controller gives leadership back to preferred
    /// replicas (None: only when an operator asks).
    pub leader_rebalance_interval: Option<Duration>,
    /// The metadata listeners of the other voters: requests and heartbeats
    /// are forwarded to whichever leads.
    pub peers: BTreeMap<NodeId, SocketAddr>,
    /// How long a forwarded call may take.
    pub call_timeout: Duration,
    /// TLS for forwarded calls (as for the Raft transport), if the quorum
    /// speaks it.
    pub tls: Option<QuorumTls>,
}

impl ServiceConfig {
    /// Defaults around a tick length.
    pub fn new(tick: Duration) -> ServiceConfig {
        ServiceConfig {
            tick,
            session_timeout: Duration::from_secs(9),
            controller_interval: Duration::from_millis(500),
            leader_rebalance_interval: None,
            peers: BTreeMap::new(),
            call_timeout: Duration::from_secs(2),
            tls: None,
        }
    }
}

/// What the node knows now.
#[derive(Debug, Default, Clone)]
pub struct View {
    /// The applied metadata.
    pub metadata: Metadata,
    /// The leader, if known.
    pub leader: Option<NodeId>,
    /// Whether this node leads (it is the active controller).
    pub is_leader: bool,
    /// The current term.
    pub term: u64,
    /// The last applied index.
    pub applied: u64,
    /// The index of the last change sent to subscribers: every follower
    /// of the change stream reaches it. `applied` may be past it (entries
    /// that carry no record, as a new leader's first, send no change), so
    /// a follower waiting for `applied` could wait for the next record.
    pub published: u64,
    /// The quorum's voters and observers as applied.
    pub members: Members,
    /// The commit index.
    pub committed: u64,
    /// While this node leads: how far each member's log matches its own.
    pub matched: BTreeMap<NodeId, u64>,
}

/// The metadata quorum as one node sees it (Kafka's DescribeQuorum).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuorumStatus {
    /// The leader, if known.
    pub leader: Option<NodeId>,
    /// The current term (Kafka's leader epoch of the metadata log).
    pub term: u64,
    /// The commit index (the metadata log's high watermark).
    pub committed: u64,
    /// Voters and observers.
    pub members: Members,
    /// How far each member's log matches the leader's, if this node leads.
    pub matched: BTreeMap<NodeId, u64>,
}

enum Command {
    Propose(MetadataRecord),
    SubscribeShared(SharedSender<Change>),
    Heartbeat(BrokerId, Incarnation, Option<oneshot::Sender<Reply>>),
    Request(ControllerRequest, oneshot::Sender<Reply>),
    /// Members' addresses learned from another member.
    Peers(Vec<(NodeId, String)>),
}

/// A running metadata node.
pub struct MetadataService {
    commands: LocalSender<Command>,
    /// The other members' metadata listeners: configured, then as the
    /// metadata records them.
    peers: Rc<RefCell<BTreeMap<NodeId, SocketAddr>>>,
    call_timeout: Duration,
    tls: Option<QuorumTls>,
    view: Rc<RefCell<View>>,
    subscribers: Rc<RefCell<Vec<LocalSender<Change>>>>,
    _task: Task<()>,
}

impl MetadataService {
    /// Starts driving `node`.
    pub fn start<T: Transport>(
        node: MetadataNode,
        disk: FileRaftDisk,
        transport: T,
        config: ServiceConfig,
    ) -> MetadataService {
        let (commands, command_rx) = local_channel::new_bounded(COMMANDS_QUEUED_MAX);
        // Subscribers start from this view: it must hold what the node
        // recovered (its snapshot and the entries it applied at start), not
        // an empty state that later records would be applied onto.
        let view = Rc::new(RefCell::new(View {
            metadata: node.metadata().clone(),
            leader: node.leader(),
            is_leader: node.is_leader(),
            term: node.term(),
            applied: node.applied_index(),
            published: node.applied_index(),
            members: node.members(),
            committed: node.commit_index(),
            matched: BTreeMap::new(),
        }));
        let subscribers = Rc::new(RefCell::new(Vec::new()));
        let peers = Rc::new(RefCell::new(config.peers.clone()));
        let call_timeout = config.call_timeout;
        let tls = config.tls.clone();
        let driver = Driver {
            node,
            disk: Some(disk),
            transport,
            view: view.clone(),
            subscribers: subscribers.clone(),
            shared_subscribers: Rc::default(),
            controller: Controller::new(config.session_timeout.as_millis() as u64)
                .rebalancing_leaders(
                    config
                        .leader_rebalance_interval
                        .map(|every| every.as_millis() as u64),
                ),
            waiters: BTreeMap::new(),
            controller_pending: None,
            member_waiters: BTreeMap::new(),
            peers: peers.clone(),
            started: Instant::now(),
            config,
        };
        let task = spawn_local(driver.run(command_rx));
        MetadataService {
            commands,
            peers,
            call_timeout,
            tls,
            view,
            subscribers,
            _task: task,
        }
    }

    /// Queues a raw record for the node to propose (only as leader, only if
    /// valid; watch the change stream for the outcome).
    pub fn propose(&self, record: MetadataRecord) -> Result<(), ControllerError> {
        self.send(Command::Propose(record))
    }

    /// A broker's heartbeat, for the active controller: handled here if
    /// this node leads, else forwarded to the leader (fire and forget: a
    /// lost heartbeat is made up by the next).
    pub fn heartbeat(
        &self,
        broker: BrokerId,
        incarnation: Incarnation,
    ) -> Result<(), ControllerError> {
        let leader = {
            let view = self.view.borrow();
            (!view.is_leader).then_some(view.leader).flatten()
        };
        let address = leader.and_then(|l| self.peers.borrow().get(&l).copied());
        match address {
            Some(address) => {
                let timeout = self.call_timeout;
                let tls = self.tls.clone();
                spawn_local(async move {
                    let call = Call::Heartbeat {
                        broker,
                        incarnation,
                    };
                    if let Err(e) = forward(address, &call, timeout, tls.as_ref()).await {
                        tracing::debug!(error = %e, "forwarded heartbeat refused");
                    }
                })
                .detach();
                Ok(())
            }
            None => self.send(Command::Heartbeat(broker, incarnation, None)),
        }
    }

    /// A heartbeat answered by the active controller (here or forwarded):
    /// on success, the metadata log index this node must apply to be as
    /// current as the controller was when it answered.
    pub async fn heartbeat_acknowledged(
        &self,
        broker: BrokerId,
        incarnation: Incarnation,
    ) -> Reply {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Heartbeat(broker, incarnation, Some(tx)))?;
        let local = rx.await.unwrap_or(Err(ControllerError::Unavailable));
        self.or_forwarded(
            local,
            Call::Heartbeat {
                broker,
                incarnation,
            },
        )
        .await
    }

    /// Asks the active controller for a change; resolves once its records
    /// are committed and applied, or with why not. Forwarded to the leader
    /// when this node does not lead.
    pub async fn request(&self, request: ControllerRequest) -> Result<(), ControllerError> {
        self.request_applied(request).await.map(|_| ())
    }

    /// [`MetadataService::request`], answering the metadata log index its
    /// last record was applied at on the controller: once this node's
    /// view reaches it, the change is visible here too.
    pub async fn request_applied(
        &self,
        request: ControllerRequest,
    ) -> Result<u64, ControllerError> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Request(request.clone(), tx))?;
        let local = rx.await.unwrap_or(Err(ControllerError::Unavailable));
        self.or_forwarded(local, Call::Request(request)).await
    }

    /// The local answer, unless it says another node leads: then that
    /// node's answer to `call`.
    async fn or_forwarded(&self, local: Reply, call: Call) -> Reply {
        match &local {
            Err(ControllerError::NotController {
                leader: Some(leader),
            }) => {
                let address = self.peers.borrow().get(leader).copied();
                match address {
                    Some(address) => {
                        forward(address, &call, self.call_timeout, self.tls.as_ref()).await
                    }
                    None => local,
                }
            }
            _ => local,
        }
    }

    /// Asks the quorum to take `node` as an observer reached at `address`
    /// (its metadata listener), or to record that it moved: through the
    /// leader this node knows of, else through each other member in turn
    /// (a node that has not joined yet hears from no leader). Resolves
    /// once the change is applied on the active controller.
    pub async fn join_quorum(&self, node: NodeId, address: SocketAddr) -> Reply {
        let request = ControllerRequest::JoinQuorum {
            node,
            address: address.to_string(),
        };
        let members: Vec<SocketAddr> = self.peers.borrow().values().copied().collect();
        // First where every member is: once taken, whichever member leads
        // sends to this node, and the node must be able to answer it.
        for &member in &members {
            if let Ok(book) = ask_members(member, self.call_timeout, self.tls.as_ref()).await {
                self.send(Command::Peers(book))?;
                break;
            }
        }
        let mut outcome = self.request_applied(request.clone()).await;
        if outcome.is_ok() {
            return outcome;
        }
        for member in members {
            let call = Call::Request(request.clone());
            let reply = forward(member, &call, self.call_timeout, self.tls.as_ref()).await;
            outcome = self.or_forwarded(reply, call).await;
            if outcome.is_ok() {
                break;
            }
        }
        outcome
    }

    fn send(&self, command: Command) -> Result<(), ControllerError> {
        self.commands
            .try_send(command)
            .map_err(|_| ControllerError::Unavailable)
    }

    /// The current view.
    pub fn view(&self) -> Ref<'_, View> {
        self.view.borrow()
    }

    /// The quorum as this node sees it.
    pub fn quorum_status(&self) -> QuorumStatus {
        let view = self.view.borrow();
        QuorumStatus {
            leader: view.leader,
            term: view.term,
            committed: view.committed,
            members: view.members.clone(),
            matched: view.matched.clone(),
        }
    }

    /// A stream of committed changes for another shard: hand the receiver
    /// to that shard, which connects it on its own executor. Same rules as
    /// [`MetadataService::subscribe`].
    pub fn subscribe_shared(
        &self,
        capacity: usize,
    ) -> Result<SharedReceiver<Change>, ControllerError> {
        let (tx, rx) = shared_channel::new_bounded(capacity);
        self.send(Command::SubscribeShared(tx))?;
        Ok(rx)
    }

    /// A stream of committed changes on this shard: first the whole
    /// state, then every change in order. A subscriber that falls
    /// `capacity` behind is dropped (its receiver ends) and must subscribe
    /// again.
    pub fn subscribe(&self, capacity: usize) -> LocalReceiver<Change> {
        let (tx, rx) = local_channel::new_bounded(capacity.max(1));
        let start = {
            let view = self.view.borrow();
            Change::state(view.applied, &view.metadata)
        };
        if tx.try_send(start).is_ok() {
            self.subscribers.borrow_mut().push(tx);
        }
        rx
    }
}

/// Every Raft message at trace level (`RUST_LOG=control=trace`): what a
/// stuck quorum was saying.
fn trace_message(what: &str, m: &raft::eraftpb::Message) {
    tracing::trace!(
        from = m.from,
        to = m.to,
        kind = ?m.get_msg_type(),
        term = m.term,
        index = m.index,
        commit = m.commit,
        reject = m.reject,
        snapshot = m.get_snapshot().get_metadata().index,
        "raft message {what}"
    );
}

/// A request waiting for its last record to apply.
struct Waiter {
    record: MetadataRecord,
    reply: oneshot::Sender<Reply>,
}

struct Driver<T> {
    node: MetadataNode,
    disk: Option<FileRaftDisk>,
    transport: T,
    view: Rc<RefCell<View>>,
    subscribers: Rc<RefCell<Vec<LocalSender<Change>>>>,
    shared_subscribers: Rc<RefCell<Vec<ConnectedSender<Change>>>>,
    controller: Controller,
    /// By log index of the request's last record.
    waiters: BTreeMap<u64, Waiter>,
    /// (term, log index): the controller's last proposals must apply
    /// before it decides again — in the term it proposed them: entries of
    /// an older term may never commit (a new leader overwrote them), and
    /// waiting for their index would stall the controller of a quiet
    /// cluster forever (found by a coordinator failover test).
    controller_pending: Option<(u64, u64)>,
    /// Membership requests by the log index of their change, answered once
    /// it applies (by whether the members show it).
    member_waiters: BTreeMap<u64, (MemberChange, oneshot::Sender<Reply>)>,
    /// Shared with the service: where forwarded calls reach each member.
    peers: Rc<RefCell<BTreeMap<NodeId, SocketAddr>>>,
    started: Instant,
    config: ServiceConfig,
}

enum Event {
    Tick,
    Inbound(Option<Inbound>),
    Command(Option<Command>),
}

impl<T: Transport> Driver<T> {
    async fn run(mut self, commands: LocalReceiver<Command>) {
        let tick = self.config.tick;
        let controller_every =
            (self.config.controller_interval.as_millis() / tick.as_millis().max(1)).max(1) as u64;
        let mut ticks = 0u64;
        let mut next_tick = Instant::now() + tick;
        self.sync_peers();
        loop {
            let wait = next_tick.saturating_duration_since(Instant::now());
            let event = {
                let timer = Box::pin(glommio::timer::sleep(wait));
                let inbound = Box::pin(self.transport.recv());
                let command = Box::pin(commands.recv());
                match select(timer, select(inbound, command)).await {
                    Either::Left(_) => Event::Tick,
                    Either::Right((Either::Left((m, _)), _)) => Event::Inbound(m),
                    Either::Right((Either::Right((c, _)), _)) => Event::Command(c),
                }
            };
            match event {
                Event::Tick => {
                    self.node.tick();
                    next_tick += tick;
                    ticks += 1;
                    if ticks.is_multiple_of(controller_every) {
                        self.controller_tick();
                    }
                }
                Event::Inbound(Some(Inbound::Message(message))) => {
                    trace_message("received", &message);
                    let _ = self.node.step(message);
                }
                Event::Inbound(Some(Inbound::Unreachable { to, snapshot })) => {
                    self.node.report_unreachable(to);
                    if snapshot {
                        self.node.report_snapshot(to, false);
                    }
                }
                Event::Inbound(Some(Inbound::Call { call, reply })) => self.call(call, reply),
                Event::Inbound(Some(Inbound::Members { reply })) => {
                    let _ = reply.send(Ok(self.address_book()));
                }
                Event::Command(Some(command)) => self.command(command),
                Event::Inbound(None) | Event::Command(None) => return,
            }
            if let Err(e) = self.drain().await {
                // The node's durable state is unknown: stop rather than
                // acknowledge anything (its peers carry on without it).
                tracing::error!(error = %e, "metadata node stopped: persisting failed");
                return;
            }
            self.publish();
        }
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn controller_tick(&mut self) {
        if !self.node.is_leader() {
            return;
        }
        if let Some((term, index)) = self.controller_pending {
            if term == self.node.term() && self.node.applied_index() < index {
                return;
            }
        }
        let mut records = Vec::new();
        if self.node.metadata().cluster_id.is_none() {
            // A new quorum (or one from before cluster ids): its first
            // active controller names it.
            records.push(MetadataRecord::SetClusterId {
                id: crate::model::types::ClusterId(rand::random()),
            });
        }
        self.controller.lead_in(self.node.term());
        records.extend(self.controller.tick(self.node.metadata(), self.now_ms()));
        if !records.is_empty() {
            let _ = self.propose_all(&records);
        }
    }

    /// A call forwarded by another broker: answered here only if this
    /// node leads (never forwarded again, so calls cannot loop), except a
    /// node's request to join, which a member that does not lead passes
    /// to its leader once: the joiner may know no address of a leader
    /// that joined after the quorum began.
    fn call(&mut self, call: Call, reply: oneshot::Sender<Reply>) {
        let leader = self.node.leader().filter(|_| !self.node.is_leader());
        let leader_address = leader.and_then(|l| self.peers.borrow().get(&l).copied());
        if let (Call::Request(ControllerRequest::JoinQuorum { .. }), Some(address)) =
            (&call, leader_address)
        {
            let (timeout, tls) = (self.config.call_timeout, self.config.tls.clone());
            spawn_local(async move {
                let _ = reply.send(forward(address, &call, timeout, tls.as_ref()).await);
            })
            .detach();
            return;
        }
        match call {
            Call::Request(request) => self.command(Command::Request(request, reply)),
            Call::Heartbeat {
                broker,
                incarnation,
            } => self.command(Command::Heartbeat(broker, incarnation, Some(reply))),
            // Transports answer it with the address book (Inbound::Members).
            Call::Members => {
                let _ = reply.send(Err(ControllerError::Unavailable));
            }
        }
    }

    fn command(&mut self, command: Command) {
        match command {
            Command::SubscribeShared(sender) => {
                // Connecting waits for the other shard to connect its
                // end: do it aside, never in the loop that ticks Raft.
                let subscribers = self.shared_subscribers.clone();
                let view = self.view.clone();
                spawn_local(async move {
                    let connected = sender.connect().await;
                    // Start it from the current state; later changes
                    // follow in order (nothing runs between these lines).
                    let view = view.borrow();
                    let start = Change::state(view.applied, &view.metadata);
                    if connected.try_send(start).is_ok() {
                        subscribers.borrow_mut().push(connected);
                    }
                })
                .detach();
            }
            Command::Peers(book) => {
                let own = self.node.id();
                let mut peers = self.peers.borrow_mut();
                for (node, address) in book {
                    let Ok(address) = address.parse::<SocketAddr>() else {
                        continue;
                    };
                    if node != own && peers.get(&node) != Some(&address) {
                        self.transport.set_peer(node, address);
                        peers.insert(node, address);
                    }
                }
            }
            Command::Propose(record) => {
                if let Err(e) = self.node.propose(&record) {
                    tracing::debug!(error = %e, "proposal not taken");
                }
            }
            Command::Heartbeat(broker, incarnation, reply) => {
                let outcome = if !self.node.is_leader() {
                    Err(ControllerError::NotController {
                        leader: self.node.leader(),
                    })
                } else {
                    let now = self.now_ms();
                    self.controller.lead_in(self.node.term());
                    match self
                        .controller
                        .heartbeat(self.node.metadata(), broker, incarnation, now)
                    {
                        Ok(records) if records.is_empty() => Ok(self.node.last_index()),
                        Ok(records) => self.propose_all(&records).map(|_| self.node.last_index()),
                        Err(e) => Err(ControllerError::Refused(e)),
                    }
                };
                if let Err(e) = &outcome {
                    tracing::debug!(%broker, error = %e, "heartbeat refused");
                }
                if let Some(reply) = reply {
                    let _ = reply.send(outcome);
                }
            }
            Command::Request(request, reply) => {
                if !self.node.is_leader() {
                    let _ = reply.send(Err(ControllerError::NotController {
                        leader: self.node.leader(),
                    }));
                    return;
                }
                // Membership requests are answered there; the rest here.
                let Some((request, reply)) = self.member_request(request, reply) else {
                    return;
                };
                match self.records_for(request) {
                    // Nothing to change (a bootstrap user that exists):
                    // done as of what is committed.
                    Ok(records) if records.is_empty() => {
                        let _ = reply.send(Ok(self.node.last_index()));
                    }
                    Ok(records) => match self.propose_all(&records) {
                        Ok(record) => {
                            let index = self.node.last_index();
                            self.waiters.insert(index, Waiter { record, reply });
                        }
                        Err(e) => {
                            let _ = reply.send(Err(e));
                        }
                    },
                    Err(e) => {
                        let _ = reply.send(Err(e.into()));
                    }
                }
            }
        }
    }

    fn records_for(
        &self,
        request: ControllerRequest,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        let metadata = self.node.metadata();
        let controller = &self.controller;
        Ok(match request {
            ControllerRequest::RegisterBroker(registration, endpoints) => {
                crate::controller::register(metadata, registration, endpoints)
            }
            ControllerRequest::CreateTopic {
                id,
                name,
                partitions,
                replication_factor,
                config,
            } => vec![controller.create_topic(
                metadata,
                id,
                &name,
                partitions,
                replication_factor,
                config,
            )?],
            ControllerRequest::ElectPreferredLeaders { partitions } => {
                crate::controller::preferred::asked(metadata, &partitions)
            }
            ControllerRequest::ElectUncleanLeaders { partitions } => {
                crate::controller::unclean::asked(metadata, &partitions)
            }
            ControllerRequest::SetBrokerCordoned { broker, cordoned } => {
                let record = MetadataRecord::SetBrokerCordoned {
                    id: broker,
                    cordoned,
                };
                metadata.validate(&record)?;
                vec![record]
            }
            ControllerRequest::JoinQuorum { .. }
            | ControllerRequest::AddVoter { .. }
            | ControllerRequest::RemoveVoter { .. } => {
                unreachable!("membership requests are answered by member_request")
            }
            ControllerRequest::Reassign { topic, partitions } => {
                let id = metadata.topic_by_name(&topic)?.id;
                let mut records = Vec::new();
                for (index, target) in partitions {
                    let moved = crate::controller::reassign::asked(
                        metadata,
                        id,
                        crate::model::types::PartitionId(index),
                        target,
                    )?;
                    records.extend(moved);
                }
                records
            }
            ControllerRequest::DeleteTopic { name } => vec![MetadataRecord::DeleteTopic {
                id: metadata.topic_by_name(&name)?.id,
            }],
            ControllerRequest::CreatePartitions { name, total } => {
                vec![controller.create_partitions(
                    metadata,
                    metadata.topic_by_name(&name)?.id,
                    total,
                )?]
            }
            ControllerRequest::AlterConfig { name, config } => {
                vec![MetadataRecord::AlterTopicConfig {
                    topic: metadata.topic_by_name(&name)?.id,
                    config: Box::new(config),
                }]
            }
            ControllerRequest::ControlledShutdown {
                broker,
                incarnation,
            } => {
                // Borrow ends before the mutable call below in `command`.
                crate::controller::fence_checked(metadata, broker, incarnation)?
            }
            ControllerRequest::AlterIsr(request) => vec![controller.alter_isr(metadata, &request)?],
            ControllerRequest::AllocateProducerIds { broker } => {
                vec![MetadataRecord::AllocateProducerIds {
                    broker,
                    first: metadata.next_producer_id,
                    size: crate::model::PRODUCER_ID_BLOCK,
                }]
            }
            ControllerRequest::SetScramCredential(credential) => {
                vec![MetadataRecord::SetScramCredential(credential)]
            }
            ControllerRequest::DeleteScramCredential { user, mechanism } => {
                vec![MetadataRecord::DeleteScramCredential { user, mechanism }]
            }
            ControllerRequest::BootstrapScramUser(credentials) => {
                let known = |c: &crate::model::credentials::ScramCredential| {
                    metadata.scram_credentials.contains_key(&c.user)
                };
                credentials
                    .into_iter()
                    .filter(|c| !known(c))
                    .map(MetadataRecord::SetScramCredential)
                    .collect()
            }
            ControllerRequest::CreateAcls(acls) => vec![MetadataRecord::CreateAcls(acls)],
            ControllerRequest::AlterClientQuotas { entity, changes } => changes
                .into_iter()
                .map(|(key, value)| MetadataRecord::SetClientQuota {
                    entity: entity.clone(),
                    key,
                    value,
                })
                .collect(),
            ControllerRequest::AlterGroupConfigs { group, changes } => changes
                .into_iter()
                .map(|(key, value)| MetadataRecord::SetGroupConfig {
                    group: group.clone(),
                    key,
                    value,
                })
                .collect(),
            ControllerRequest::DeleteAcls(filters) => {
                let selected: Vec<_> = metadata
                    .acls
                    .iter()
                    .filter(|acl| filters.iter().any(|f| f.selects(acl)))
                    .cloned()
                    .collect();
                if selected.is_empty() {
                    vec![]
                } else {
                    vec![MetadataRecord::DeleteAcls(selected)]
                }
            }
        })
    }

    /// Proposes records in order; returns the last one if all were taken,
    /// or why not (a record invalid against the metadata is refused).
    fn propose_all(
        &mut self,
        records: &[MetadataRecord],
    ) -> Result<MetadataRecord, ControllerError> {
        let last = records.last().cloned().ok_or(ControllerError::Superseded)?;
        if let Err(e) = self.node.propose_all(records) {
            tracing::debug!(error = %e, "controller proposal not taken");
            return Err(match e {
                ProposeError::Invalid(refused) => ControllerError::Refused(refused),
                ProposeError::NotLeader { leader } => ControllerError::NotController { leader },
                ProposeError::Raft(_) => ControllerError::Superseded,
            });
        }
        self.controller_pending = Some((self.node.term(), self.node.last_index()));
        Ok(last)
    }

    /// Handles every ready in raft-rs's order, persisting on glommio's
    /// blocking pool before the messages that depend on it leave.
    async fn drain(&mut self) -> std::io::Result<()> {
        while let Some(output) = self.node.ready() {
            for message in output.send.iter().chain(&output.after_persist) {
                trace_message("sending", message);
            }
            self.transport.send(output.send);
            self.persist(output.persist).await?;
            self.transport.send(output.after_persist);
            let persisted = self.node.persisted();
            self.transport.send(persisted.send);
            self.persist(persisted.persist).await?;
        }
        Ok(())
    }

    async fn persist(&mut self, persist: Persist) -> std::io::Result<()> {
        if persist.is_empty() {
            return Ok(());
        }
        let mut disk = self.disk.take().expect("one persist at a time");
        let (disk, result) = glommio::executor()
            .spawn_blocking(move || {
                let result = disk.persist(&persist);
                (disk, result)
            })
            .await;
        self.disk = Some(disk);
        result
    }

    fn publish(&mut self) {
        let changes = self.node.take_applied();
        {
            let mut view = self.view.borrow_mut();
            view.leader = self.node.leader();
            view.is_leader = self.node.is_leader();
            view.term = self.node.term();
            view.applied = self.node.applied_index();
            view.members = self.node.members();
            view.committed = self.node.commit_index();
            view.matched = (view.members.voters.iter())
                .chain(&view.members.learners)
                .filter_map(|&id| Some((id, self.node.matched(id)?)))
                .collect();
            if !changes.is_empty() {
                view.metadata = self.node.metadata().clone();
            }
        }
        if !changes.is_empty() {
            self.sync_peers();
        }
        self.answer_member_changes();
        for applied in &changes {
            self.answer(applied);
        }
        let mut subscribers = self.subscribers.borrow_mut();
        let index = self.node.applied_index();
        let published = Change::for_applied(&changes, self.node.metadata(), index);
        if let Some(last) = published.last() {
            self.view.borrow_mut().published = last.index;
        }
        for change in published {
            subscribers.retain(|tx| tx.try_send(change.clone()).is_ok());
            self.shared_subscribers
                .borrow_mut()
                .retain(|tx| tx.try_send(change.clone()).is_ok());
        }
    }

    /// Answers the request whose last record landed at this index.
    fn answer(&mut self, applied: &Applied) {
        // A snapshot install may skip indexes: those requests are lost.
        let skipped: Vec<u64> = self
            .waiters
            .range(..applied.index)
            .map(|(i, _)| *i)
            .collect();
        for index in skipped {
            if let Some(waiter) = self.waiters.remove(&index) {
                let _ = waiter.reply.send(Err(ControllerError::Superseded));
            }
        }
        let Some(waiter) = self.waiters.remove(&applied.index) else {
            return;
        };
        let outcome = match (&applied.record, &applied.refused) {
            (Some(record), None) if *record == waiter.record => Ok(applied.index),
            (Some(record), Some(refused)) if *record == waiter.record => {
                Err(ControllerError::Refused(refused.clone()))
            }
            _ => Err(ControllerError::Superseded),
        };
        let _ = waiter.reply.send(outcome);
    }
}
