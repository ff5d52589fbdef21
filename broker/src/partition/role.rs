//! This broker's role for one partition, as the metadata last gave it:
//! none, leader (with the replication crate's [`LeaderState`] of its
//! followers), or follower of some broker in some epoch.

use control::BrokerId;
use replication::leader::LeaderState;
use storage::LeaderEpoch;

/// What this broker is for one partition.
#[derive(Debug, Default)]
pub enum Role {
    /// Not (yet) given a role: no leader, or the metadata not applied yet.
    #[default]
    None,
    /// It leads.
    Leader(Box<Leading>),
    /// It copies `leader`'s log, as of `epoch`.
    Follower {
        /// The leader it fetches from.
        leader: BrokerId,
        /// The leader epoch it follows.
        epoch: LeaderEpoch,
    },
}

/// A leadership.
#[derive(Debug)]
pub struct Leading {
    /// The replication crate's view of the followers.
    pub state: LeaderState,
    /// More than one replica: the high watermark follows the ISR, not the
    /// leader's own flushes.
    pub replicated: bool,
    /// A replica counts only what it fdatasync'd (`fsync.before.ack`).
    pub fsync_before_ack: bool,
    /// An ISR change asked of the controller and not yet answered.
    pub isr_change_in_flight: bool,
    /// The epoch this broker's unbroken leadership began in. A leadership
    /// that goes on into a later epoch (a finished move that removed
    /// replicas bumps it) keeps its log as it was: what it appended in an
    /// earlier epoch of it is still there to acknowledge.
    pub led_since: LeaderEpoch,
}

impl Role {
    /// The leader epoch if this broker leads.
    pub fn leader_epoch(&self) -> Option<LeaderEpoch> {
        match self {
            Role::Leader(leading) => Some(leading.state.epoch()),
            _ => None,
        }
    }
}
