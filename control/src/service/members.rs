//! The service's part in changing the quorum's members: membership
//! requests answered once their change applies, the members' addresses
//! kept in the transport and the forwarding table, and the address book
//! a joining node asks for. The decisions are control's
//! `controller::members`; this drives them on the node.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use futures::channel::oneshot;

use super::{ControllerError, ControllerRequest, Driver};
use crate::controller::members::{self, MemberPlan, QuorumState};
use crate::controller::request::Reply;
use crate::raft::node::{NodeId, ProposeError};
use crate::transport::Transport;

impl<T: Transport> Driver<T> {
    /// Every member's metadata listener this node knows: the configured
    /// and recorded ones (its own included when recorded).
    pub(super) fn address_book(&self) -> Vec<(NodeId, String)> {
        let mut book: BTreeMap<NodeId, String> = (self.peers.borrow().iter())
            .map(|(id, address)| (*id, address.to_string()))
            .collect();
        for (id, address) in &self.node.metadata().quorum_addresses {
            book.insert(*id, address.clone());
        }
        book.into_iter().collect()
    }

    /// Answers a change of the quorum's members (handing back any other
    /// request): proposes its records and its change, and answers once the
    /// change applies.
    pub(super) fn member_request(
        &mut self,
        request: ControllerRequest,
        reply: oneshot::Sender<Reply>,
    ) -> Option<(ControllerRequest, oneshot::Sender<Reply>)> {
        let members = self.node.members();
        let node = &self.node;
        let matched = |id| node.matched(id);
        let quorum = QuorumState {
            leader: node.id(),
            members: &members,
            committed: node.commit_index(),
            matched: &matched,
        };
        let plan = match &request {
            ControllerRequest::JoinQuorum { node, address } => {
                Ok(members::join(self.node.metadata(), &quorum, *node, address))
            }
            ControllerRequest::AddVoter { node } => members::add_voter(&quorum, *node),
            ControllerRequest::RemoveVoter { node } => members::remove_voter(&quorum, *node),
            _ => return Some((request, reply)),
        };
        let outcome = match plan {
            Err(refused) => Err(ControllerError::Refused(refused)),
            Ok(MemberPlan::TransferFirst { to }) => {
                tracing::info!(to, "handing the quorum's leadership over before leaving it");
                self.node.transfer_leadership(to);
                Err(ControllerError::Superseded)
            }
            Ok(MemberPlan::Propose { records, change }) => {
                let proposed = if records.is_empty() {
                    Ok(())
                } else {
                    self.propose_all(&records).map(|_| ())
                };
                match (proposed, change) {
                    (Err(e), _) => Err(e),
                    (Ok(()), None) => Ok(self.node.last_index()),
                    (Ok(()), Some(change)) => match self.node.propose_member_change(change) {
                        Ok(()) => {
                            let index = self.node.last_index();
                            tracing::info!(?change, index, "metadata quorum change proposed");
                            self.member_waiters.insert(index, (change, reply));
                            return None;
                        }
                        // raft-rs drops proposals during a leadership
                        // hand-over: asked again, the next leader decides.
                        Err(ProposeError::NotLeader { leader }) => {
                            Err(ControllerError::NotController { leader })
                        }
                        Err(ProposeError::Raft(_)) => Err(ControllerError::Superseded),
                        Err(ProposeError::Invalid(refused)) => {
                            Err(ControllerError::Refused(refused))
                        }
                    },
                }
            }
        };
        let _ = reply.send(outcome);
        None
    }

    /// Answers the membership requests whose change has applied.
    pub(super) fn answer_member_changes(&mut self) {
        let applied = self.node.applied_index();
        let members = self.node.members();
        while let Some(entry) = self.member_waiters.first_entry() {
            if *entry.key() > applied {
                break;
            }
            let (index, (change, reply)) = entry.remove_entry();
            // raft-rs turns a change proposed while another was pending
            // into an empty entry: then the members do not show it.
            let outcome = if members::satisfied(change, &members) {
                Ok(index)
            } else {
                Err(ControllerError::Superseded)
            };
            let _ = reply.send(outcome);
        }
    }

    /// Points the transport and forwarded calls at every member's
    /// metadata listener the metadata records.
    pub(super) fn sync_peers(&mut self) {
        let own = self.node.id();
        let mut peers = self.peers.borrow_mut();
        for (&node, address) in &self.node.metadata().quorum_addresses {
            let Ok(address) = address.parse::<SocketAddr>() else {
                continue;
            };
            if node == own || peers.get(&node) == Some(&address) {
                continue;
            }
            tracing::info!(node, %address, "metadata quorum member reached at a new address");
            self.transport.set_peer(node, address);
            peers.insert(node, address);
        }
    }
}
