//! The metadata service on a glommio shard: drives a [`MetadataNode`] with
//! a tick timer, the TCP transport and the on-disk state, and offers the
//! broker a view of the committed metadata, proposals, and a stream of
//! committed changes. Dropping the service stops the node.

use std::cell::{Ref, RefCell};
use std::rc::Rc;
use std::time::Duration;

use futures::future::{select, Either};
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::{spawn_local, Task};

use crate::disk::FileRaftDisk;
use crate::model::Metadata;
use crate::node::{MetadataNode, NodeId, Persist};
use crate::record::MetadataRecord;
use crate::transport::{Inbound, Transport};

/// Proposals queued before new ones are refused.
pub const PROPOSALS_QUEUED_MAX: usize = 1024;

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
}

/// One committed change, in log order.
#[derive(Debug, Clone)]
pub struct Change {
    /// Its log index.
    pub index: u64,
    /// The record; None when a snapshot replaced the state (re-read the view).
    pub record: Option<MetadataRecord>,
}

/// A running metadata node.
pub struct MetadataService {
    proposals: LocalSender<MetadataRecord>,
    view: Rc<RefCell<View>>,
    subscribers: Rc<RefCell<Vec<LocalSender<Change>>>>,
    _task: Task<()>,
}

impl MetadataService {
    /// Starts driving `node`; ticks every `tick`.
    pub fn start<T: Transport>(
        node: MetadataNode,
        disk: FileRaftDisk,
        transport: T,
        tick: Duration,
    ) -> MetadataService {
        let (proposals, proposal_rx) = local_channel::new_bounded(PROPOSALS_QUEUED_MAX);
        let view = Rc::new(RefCell::new(View::default()));
        let subscribers = Rc::new(RefCell::new(Vec::new()));
        let driver = Driver {
            node,
            disk: Some(disk),
            transport,
            view: view.clone(),
            subscribers: subscribers.clone(),
        };
        let task = spawn_local(driver.run(proposal_rx, tick));
        MetadataService {
            proposals,
            view,
            subscribers,
            _task: task,
        }
    }

    /// Queues a record for the node to propose (it proposes only as leader
    /// and only valid records; watch the change stream for the outcome).
    pub fn propose(&self, record: MetadataRecord) -> Result<(), String> {
        self.proposals.try_send(record).map_err(|e| e.to_string())
    }

    /// The current view.
    pub fn view(&self) -> Ref<'_, View> {
        self.view.borrow()
    }

    /// A stream of committed changes from now on. A subscriber that falls
    /// `capacity` behind is dropped (its receiver ends) and must re-read
    /// the view and subscribe again.
    pub fn subscribe(&self, capacity: usize) -> LocalReceiver<Change> {
        let (tx, rx) = local_channel::new_bounded(capacity);
        self.subscribers.borrow_mut().push(tx);
        rx
    }
}

struct Driver<T> {
    node: MetadataNode,
    disk: Option<FileRaftDisk>,
    transport: T,
    view: Rc<RefCell<View>>,
    subscribers: Rc<RefCell<Vec<LocalSender<Change>>>>,
}

enum Event {
    Tick,
    Inbound(Option<Inbound>),
    Proposal(Option<MetadataRecord>),
}

impl<T: Transport> Driver<T> {
    async fn run(mut self, proposals: LocalReceiver<MetadataRecord>, tick: Duration) {
        let mut next_tick = std::time::Instant::now() + tick;
        loop {
            let wait = next_tick.saturating_duration_since(std::time::Instant::now());
            let event = {
                let timer = Box::pin(glommio::timer::sleep(wait));
                let inbound = Box::pin(self.transport.recv());
                let proposal = Box::pin(proposals.recv());
                match select(timer, select(inbound, proposal)).await {
                    Either::Left(_) => Event::Tick,
                    Either::Right((Either::Left((m, _)), _)) => Event::Inbound(m),
                    Either::Right((Either::Right((p, _)), _)) => Event::Proposal(p),
                }
            };
            match event {
                Event::Tick => {
                    self.node.tick();
                    next_tick += tick;
                }
                Event::Inbound(Some(Inbound::Message(message))) => {
                    let _ = self.node.step(message);
                }
                Event::Inbound(Some(Inbound::Unreachable { to, snapshot })) => {
                    self.node.report_unreachable(to);
                    if snapshot {
                        self.node.report_snapshot(to, false);
                    }
                }
                Event::Proposal(Some(record)) => {
                    if let Err(e) = self.node.propose(&record) {
                        tracing::debug!(error = %e, "proposal not taken");
                    }
                }
                Event::Inbound(None) | Event::Proposal(None) => return,
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

    /// Handles every ready in raft-rs's order, persisting on glommio's
    /// blocking pool before the messages that depend on it leave.
    async fn drain(&mut self) -> std::io::Result<()> {
        while let Some(output) = self.node.ready() {
            self.transport.send(output.send);
            self.persist(output.persist).await?;
            self.transport.send(output.after_persist);
            let messages = self.node.persisted();
            self.transport.send(messages);
            if let Some(snapshot) = self.node.take_new_snapshot() {
                self.persist(Persist {
                    snapshot: Some(snapshot),
                    ..Persist::default()
                })
                .await?;
            }
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
            if !changes.is_empty() {
                view.metadata = self.node.metadata().clone();
            }
        }
        if changes.is_empty() {
            return;
        }
        let mut subscribers = self.subscribers.borrow_mut();
        for (index, record) in changes {
            subscribers.retain(|tx| {
                tx.try_send(Change {
                    index,
                    record: record.clone(),
                })
                .is_ok()
            });
        }
    }
}
