//! Changes of the metadata quorum's members, decided by the active
//! controller: observers joining (Raft learners, which follow the log
//! without a vote), observers promoted to voters and voters demoted
//! (KIP-853's AddRaftVoter and RemoveRaftVoter). One change at a time, as
//! raft-rs takes them, and never one that could stall the quorum: only a
//! caught-up observer becomes a voter, the last voter stays, and the
//! leader hands its leadership over before it is demoted.

use crate::model::error::MetadataError;
use crate::model::record::MetadataRecord;
use crate::model::Metadata;
use crate::raft::node::{MemberChange, Members, NodeId};

/// How many committed entries an observer may lag and still be promoted:
/// it then joins the majority at once instead of holding commits back
/// while it catches up.
pub const PROMOTION_LAG_ENTRIES_MAX: u64 = 100;

/// What the quorum looks like to its leader.
pub struct QuorumState<'a> {
    /// The leader (this node).
    pub leader: NodeId,
    /// The members as applied.
    pub members: &'a Members,
    /// The commit index.
    pub committed: u64,
    /// How far a member's log matches the leader's; None for a member not
    /// heard from recently (it may be down).
    pub matched: &'a dyn Fn(NodeId) -> Option<u64>,
}

/// What to do for a membership request.
#[derive(Debug, PartialEq, Eq)]
pub enum MemberPlan {
    /// Propose these records, then this change (either may be absent).
    Propose {
        /// Records, first.
        records: Vec<MetadataRecord>,
        /// The membership change, last.
        change: Option<MemberChange>,
    },
    /// The leader itself is to be demoted: it hands leadership to `to`
    /// first (a leader that is no voter would lead on alone), and the
    /// caller asks again.
    TransferFirst {
        /// The voter that takes over.
        to: NodeId,
    },
}

/// Whether `change` shows in `members`.
pub fn satisfied(change: MemberChange, members: &Members) -> bool {
    match change {
        MemberChange::AddLearner(node) => members.learners.contains(&node),
        MemberChange::AddVoter(node) => members.voters.contains(&node),
        MemberChange::Remove(node) => {
            !members.voters.contains(&node) && !members.learners.contains(&node)
        }
    }
}

/// A node joins as an observer at `address`, or says it moved: its
/// address is recorded if new, and it becomes a learner if it is no member.
pub fn join(metadata: &Metadata, quorum: &QuorumState, node: NodeId, address: &str) -> MemberPlan {
    let mut records = Vec::new();
    if metadata.quorum_addresses.get(&node).map(String::as_str) != Some(address) {
        records.push(MetadataRecord::SetQuorumAddress {
            node,
            address: address.to_string(),
        });
    }
    let member = quorum.members.voters.contains(&node) || quorum.members.learners.contains(&node);
    MemberPlan::Propose {
        records,
        change: (!member).then_some(MemberChange::AddLearner(node)),
    }
}

/// An observer becomes a voter, once its log has caught up.
pub fn add_voter(quorum: &QuorumState, node: NodeId) -> Result<MemberPlan, MetadataError> {
    if quorum.members.voters.contains(&node) {
        return Ok(MemberPlan::Propose {
            records: Vec::new(),
            change: None,
        });
    }
    if !quorum.members.learners.contains(&node) {
        return Err(MetadataError::NotQuorumMember(node));
    }
    let Some(matched) = (quorum.matched)(node) else {
        // Promoting a node that is down could stall the quorum for good
        // (two voters of which one is gone have no majority).
        return Err(MetadataError::VoterChange(format!(
            "node {node} has not been heard from recently: an observer that may be down is not \
             made a voter"
        )));
    };
    if matched + PROMOTION_LAG_ENTRIES_MAX < quorum.committed {
        return Err(MetadataError::QuorumMemberBehind {
            node,
            matched,
            committed: quorum.committed,
        });
    }
    Ok(MemberPlan::Propose {
        records: Vec::new(),
        change: Some(MemberChange::AddVoter(node)),
    })
}

/// A voter becomes an observer: it keeps following the log, so a broker
/// on it keeps serving. An observer named is already what was asked (so a
/// request asked again after a hand-over never goes further). Observers
/// are never removed from the quorum here: a running one would be left
/// without metadata while its heartbeats kept it unfenced.
pub fn remove_voter(quorum: &QuorumState, node: NodeId) -> Result<MemberPlan, MetadataError> {
    let members = quorum.members;
    if members.learners.contains(&node) {
        // A leader demoted already hands over by itself (MetadataNode::tick).
        return Ok(MemberPlan::Propose {
            records: Vec::new(),
            change: None,
        });
    }
    if !members.voters.contains(&node) {
        return Err(MetadataError::NotQuorumMember(node));
    }
    if members.voters.len() == 1 {
        return Err(MetadataError::VoterChange(format!(
            "node {node} is the quorum's last voter: add another voter first"
        )));
    }
    if node == quorum.leader {
        return transfer_from(quorum, node);
    }
    Ok(MemberPlan::Propose {
        records: Vec::new(),
        change: Some(MemberChange::AddLearner(node)),
    })
}

/// The leader hands its leadership to the reachable voter furthest along
/// (it wins its election at once) before it is demoted.
fn transfer_from(quorum: &QuorumState, leader: NodeId) -> Result<MemberPlan, MetadataError> {
    let successor = (quorum.members.voters.iter())
        .filter(|&&voter| voter != leader)
        .filter_map(|&voter| Some((voter, (quorum.matched)(voter)?)))
        .max_by_key(|&(_, matched)| matched)
        .map(|(voter, _)| voter);
    match successor {
        Some(to) => Ok(MemberPlan::TransferFirst { to }),
        None => Err(MetadataError::VoterChange(format!(
            "node {leader} leads and no other voter has been heard from recently to take over"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quorum<'a>(
        members: &'a Members,
        matched: &'a dyn Fn(NodeId) -> Option<u64>,
    ) -> QuorumState<'a> {
        QuorumState {
            leader: 1,
            members,
            committed: 500,
            matched,
        }
    }

    fn members(voters: &[NodeId], learners: &[NodeId]) -> Members {
        Members {
            voters: voters.to_vec(),
            learners: learners.to_vec(),
        }
    }

    #[test]
    fn an_observer_joins_once_and_a_move_records_only_its_address() {
        let mut metadata = Metadata::default();
        let m = members(&[1, 2, 3], &[]);
        let caught_up = |_| Some(500);
        let q = quorum(&m, &caught_up);
        let plan = join(&metadata, &q, 4, "127.0.0.1:9000");
        let record = MetadataRecord::SetQuorumAddress {
            node: 4,
            address: "127.0.0.1:9000".into(),
        };
        assert_eq!(
            plan,
            MemberPlan::Propose {
                records: vec![record.clone()],
                change: Some(MemberChange::AddLearner(4)),
            }
        );
        metadata.apply(&record).unwrap();
        let m = members(&[1, 2, 3], &[4]);
        let q = quorum(&m, &caught_up);
        let again = join(&metadata, &q, 4, "127.0.0.1:9000");
        let nothing = MemberPlan::Propose {
            records: vec![],
            change: None,
        };
        assert_eq!(again, nothing);
        let moved = join(&metadata, &q, 4, "127.0.0.1:9001");
        assert!(
            matches!(moved, MemberPlan::Propose { records, change: None } if records.len() == 1)
        );
    }

    #[test]
    fn only_a_caught_up_observer_is_promoted() {
        let m = members(&[1], &[2]);
        let behind = |_| Some(10);
        let refused = add_voter(&quorum(&m, &behind), 2).unwrap_err();
        assert!(matches!(
            refused,
            MetadataError::QuorumMemberBehind { matched: 10, .. }
        ));
        let close = |_| Some(450);
        assert_eq!(
            add_voter(&quorum(&m, &close), 2).unwrap(),
            MemberPlan::Propose {
                records: vec![],
                change: Some(MemberChange::AddVoter(2)),
            }
        );
        let stranger = add_voter(&quorum(&m, &close), 7).unwrap_err();
        assert_eq!(stranger, MetadataError::NotQuorumMember(7));
        let silent = |_| None;
        let down = add_voter(&quorum(&m, &silent), 2).unwrap_err().to_string();
        assert!(down.contains("heard from"), "{down}");
    }

    #[test]
    fn demotion_keeps_a_voter_and_moves_leadership_first() {
        let caught_up = |node| Some(if node == 3 { 500 } else { 400 });
        let last = members(&[1], &[2]);
        assert!(remove_voter(&quorum(&last, &caught_up), 1).is_err());
        let m = members(&[1, 2, 3], &[4]);
        let q = quorum(&m, &caught_up);
        assert_eq!(
            remove_voter(&q, 1).unwrap(),
            MemberPlan::TransferFirst { to: 3 },
            "the leader hands over to the voter furthest along"
        );
        let only_two_heard = |node| (node != 3).then_some(400);
        assert_eq!(
            remove_voter(&quorum(&m, &only_two_heard), 1).unwrap(),
            MemberPlan::TransferFirst { to: 2 },
            "never to a voter not heard from"
        );
        assert_eq!(
            remove_voter(&q, 2).unwrap(),
            MemberPlan::Propose {
                records: vec![],
                change: Some(MemberChange::AddLearner(2)),
            }
        );
        assert_eq!(
            remove_voter(&q, 4).unwrap(),
            MemberPlan::Propose {
                records: vec![],
                change: None,
            },
            "an observer is already no voter: asked again, nothing more happens"
        );
        assert_eq!(remove_voter(&q, 9), Err(MetadataError::NotQuorumMember(9)));
        assert!(satisfied(MemberChange::Remove(9), &m));
        assert!(satisfied(MemberChange::AddLearner(4), &m));
        assert!(!satisfied(MemberChange::AddVoter(4), &m));
    }
}
