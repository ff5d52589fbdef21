//! An in-memory network of metadata nodes on one glommio executor, for
//! tests of the service: nodes join it, and it can isolate one and heal.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use raft::eraftpb::{Message, MessageType};

use crate::raft::node::NodeId;
use crate::transport::{Inbound, Transport};

/// Inbound events queued per node before new ones are dropped.
pub const MEMORY_QUEUE_MESSAGES_MAX: usize = 4096;

#[derive(Default)]
struct Network {
    inboxes: BTreeMap<NodeId, LocalSender<Inbound>>,
    isolated: BTreeSet<NodeId>,
}

/// The network shared by the nodes of one test.
#[derive(Clone, Default)]
pub struct MemoryNetwork {
    inner: Rc<RefCell<Network>>,
}

/// One node's end of a [`MemoryNetwork`].
pub struct MemoryTransport {
    id: NodeId,
    network: MemoryNetwork,
    inbox: LocalReceiver<Inbound>,
}

impl MemoryNetwork {
    /// An empty network.
    pub fn new() -> MemoryNetwork {
        MemoryNetwork::default()
    }

    /// Joins node `id` (replacing an earlier join of the same id).
    pub fn join(&self, id: NodeId) -> MemoryTransport {
        let (tx, rx) = local_channel::new_bounded(MEMORY_QUEUE_MESSAGES_MAX);
        self.inner.borrow_mut().inboxes.insert(id, tx);
        MemoryTransport {
            id,
            network: self.clone(),
            inbox: rx,
        }
    }

    /// Cuts a node off from everyone.
    pub fn isolate(&self, id: NodeId) {
        self.inner.borrow_mut().isolated.insert(id);
    }

    /// Reconnects everyone.
    pub fn heal(&self) {
        self.inner.borrow_mut().isolated.clear();
    }
}

impl Transport for MemoryTransport {
    fn send(&self, messages: Vec<Message>) {
        let network = self.network.inner.borrow();
        for message in messages {
            let to = message.to;
            let cut = network.isolated.contains(&self.id) || network.isolated.contains(&to);
            let snapshot = message.get_msg_type() == MessageType::MsgSnapshot;
            let delivered = !cut
                && network
                    .inboxes
                    .get(&to)
                    .is_some_and(|inbox| inbox.try_send(Inbound::Message(message)).is_ok());
            if !delivered {
                if let Some(own) = network.inboxes.get(&self.id) {
                    let _ = own.try_send(Inbound::Unreachable { to, snapshot });
                }
            }
        }
    }

    async fn recv(&self) -> Option<Inbound> {
        self.inbox.recv().await
    }
}

impl Drop for MemoryTransport {
    fn drop(&mut self) {
        // Leaving the network: messages to this node are now undeliverable.
        self.network.inner.borrow_mut().inboxes.remove(&self.id);
    }
}
