//! What a connection remembers of the share sessions opened over it
//! (KIP-932: a share session lives on its connection): the connection's
//! id, which the sessions name, and their keys, so that closing the
//! connection ends them and gives their members' records back.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::share::sessions::SessionKey;

/// A connection's share sessions.
#[derive(Debug)]
pub struct ShareLink {
    /// The connection's id, unique in the process (it survives moves
    /// between shards).
    pub connection: u64,
    /// The sessions opened over it (some may have closed since).
    pub keys: BTreeSet<SessionKey>,
}

impl Default for ShareLink {
    /// A new connection's: a fresh id, no sessions.
    fn default() -> ShareLink {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        ShareLink {
            connection: NEXT.fetch_add(1, Ordering::Relaxed),
            keys: BTreeSet::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_connection_gets_its_own_id() {
        let (a, b) = (ShareLink::default(), ShareLink::default());
        assert_ne!(a.connection, b.connection);
        assert!(a.keys.is_empty());
    }
}
