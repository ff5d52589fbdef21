//! Share sessions (KIP-932), sans I/O: a share consumer's ShareFetch and
//! ShareAcknowledge requests to one broker form a session keyed by
//! (group, member), numbered by an epoch the client and the broker
//! advance together, so a request names only the partitions added to or
//! forgotten from the session since the last one.
//!
//! Epoch 0 opens a session (replacing one the member had: its records are
//! given back), -1 closes it after this request, any other must be the
//! session's current epoch, which each request then advances (past
//! `i32::MAX` to 1), a ShareAcknowledge too: librdkafka advances its own
//! after every answer. A session lives on its connection: when that
//! closes, the session ends and the member's records are given back.
//! Kafka's rules (`SharePartitionManager.newContext`, `ShareSessionCache`).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::ResponseError;

use crate::kafka::Code;

/// A partition of a session: topic id and index.
pub type SessionPartition = ([u8; 16], i32);

/// A session's key: group and member.
pub type SessionKey = (String, String);

/// One session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The epoch the next request must carry.
    pub epoch: i32,
    /// The partitions in it.
    pub partitions: BTreeSet<SessionPartition>,
    /// The connection it lives on.
    pub connection: u64,
}

/// What a request does to its session, once accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A new session over these partitions; `replaced`: the partitions
    /// of the member's earlier session, if it had one (its records there
    /// are to be given back).
    Opened {
        /// The partitions.
        partitions: BTreeSet<SessionPartition>,
        /// The partitions of the session it replaced.
        replaced: Option<BTreeSet<SessionPartition>>,
    },
    /// The session goes on over these partitions.
    Continued(BTreeSet<SessionPartition>),
    /// The session ends with this request, over these partitions: it
    /// acknowledges, acquires nothing (the member's records are to be
    /// given back afterwards).
    Closed(BTreeSet<SessionPartition>),
}

/// The sessions of one broker.
#[derive(Debug, Default)]
pub struct Sessions {
    sessions: BTreeMap<SessionKey, Session>,
    limit: usize,
}

/// The epoch that closes a session.
pub const FINAL_EPOCH: i32 = -1;

impl Sessions {
    /// No sessions; at most `limit` at once (Kafka's
    /// `group.share.max.share.sessions`).
    pub fn new(limit: usize) -> Sessions {
        Sessions {
            sessions: BTreeMap::new(),
            limit,
        }
    }

    /// The session of `key`, if any.
    pub fn get(&self, key: &SessionKey) -> Option<&Session> {
        self.sessions.get(key)
    }

    /// A ShareFetch of `key` at `epoch` on `connection`, adding and
    /// forgetting partitions; `acknowledges`: it carries acknowledgements.
    pub fn fetch(
        &mut self,
        key: &SessionKey,
        (epoch, connection): (i32, u64),
        acknowledges: bool,
        (added, forgotten): (&[SessionPartition], &[SessionPartition]),
    ) -> Result<Step, Code> {
        check_member_id(&key.1)?;
        if epoch == 0 {
            if acknowledges {
                // Nothing can be acknowledged in a session not yet open.
                return Err(ResponseError::InvalidRequest.code());
            }
            let replaced = self.sessions.remove(key).map(|s| s.partitions);
            if self.sessions.len() >= self.limit {
                return Err(ResponseError::ShareSessionLimitReached.code());
            }
            let partitions: BTreeSet<SessionPartition> = added.iter().copied().collect();
            let session = Session {
                epoch: 1,
                partitions: partitions.clone(),
                connection,
            };
            self.sessions.insert(key.clone(), session);
            return Ok(Step::Opened {
                partitions,
                replaced,
            });
        }
        if epoch == FINAL_EPOCH && !added.is_empty() {
            // A closing request only acknowledges (Kafka's FinalContext).
            return Err(ResponseError::InvalidRequest.code());
        }
        let session = self.current(key, epoch)?;
        session.partitions.extend(added.iter().copied());
        for partition in forgotten {
            session.partitions.remove(partition);
        }
        Ok(self.advanced(key, epoch))
    }

    /// A ShareAcknowledge of `key` at `epoch`.
    pub fn acknowledge(&mut self, key: &SessionKey, epoch: i32) -> Result<Step, Code> {
        check_member_id(&key.1)?;
        if epoch == 0 {
            return Err(ResponseError::InvalidShareSessionEpoch.code());
        }
        self.current(key, epoch)?;
        Ok(self.advanced(key, epoch))
    }

    /// The sessions that lived on `connection`, ended, with their
    /// partitions (the members' records there are to be given back).
    pub fn connection_closed(
        &mut self,
        connection: u64,
    ) -> Vec<(SessionKey, BTreeSet<SessionPartition>)> {
        let ended: Vec<SessionKey> = (self.sessions.iter())
            .filter(|(_, s)| s.connection == connection)
            .map(|(k, _)| k.clone())
            .collect();
        let remove = |key: SessionKey| {
            let session = self.sessions.remove(&key).expect("listed above");
            (key, session.partitions)
        };
        ended.into_iter().map(remove).collect()
    }

    /// The session a request at `epoch` (not 0) continues or closes.
    fn current(&mut self, key: &SessionKey, epoch: i32) -> Result<&mut Session, Code> {
        let Some(session) = self.sessions.get_mut(key) else {
            return Err(ResponseError::ShareSessionNotFound.code());
        };
        if epoch != FINAL_EPOCH && epoch != session.epoch {
            return Err(ResponseError::InvalidShareSessionEpoch.code());
        }
        Ok(session)
    }

    /// After an accepted request at `epoch`: the session closed (-1) or
    /// at its next epoch.
    fn advanced(&mut self, key: &SessionKey, epoch: i32) -> Step {
        if epoch == FINAL_EPOCH {
            let session = self.sessions.remove(key).expect("checked by current");
            return Step::Closed(session.partitions);
        }
        let session = self.sessions.get_mut(key).expect("checked by current");
        session.epoch = match session.epoch {
            i32::MAX => 1,
            e => e + 1,
        };
        Step::Continued(session.partitions.clone())
    }
}

/// A share consumer's member id: not empty, at most 36 characters
/// (Kafka's check; librdkafka's are 22).
fn check_member_id(member_id: &str) -> Result<(), Code> {
    match member_id.is_empty() || member_id.len() > 36 {
        true => Err(ResponseError::InvalidRequest.code()),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P0: SessionPartition = ([1; 16], 0);
    const P1: SessionPartition = ([1; 16], 1);

    fn key(member: &str) -> SessionKey {
        ("g".into(), member.into())
    }

    #[test]
    fn a_session_opens_goes_on_epoch_by_epoch_and_closes() {
        let mut s = Sessions::new(10);
        let k = key("m");
        let opened = s.fetch(&k, (0, 7), false, (&[P0], &[])).unwrap();
        let only_p0 = BTreeSet::from([P0]);
        assert_eq!(
            opened,
            Step::Opened {
                partitions: only_p0.clone(),
                replaced: None
            }
        );
        // The next request adds P1; the one after forgets P0.
        let both = BTreeSet::from([P0, P1]);
        assert_eq!(
            s.fetch(&k, (1, 7), true, (&[P1], &[])),
            Ok(Step::Continued(both))
        );
        assert_eq!(
            s.acknowledge(&k, 2),
            Ok(Step::Continued(BTreeSet::from([P0, P1])))
        );
        assert_eq!(
            s.fetch(&k, (3, 7), false, (&[], &[P0])),
            Ok(Step::Continued(BTreeSet::from([P1])))
        );
        // A stale or early epoch, or a session that does not exist.
        let invalid = Err(ResponseError::InvalidShareSessionEpoch.code());
        assert_eq!(s.fetch(&k, (3, 7), false, (&[], &[])), invalid);
        assert_eq!(s.acknowledge(&k, 9), invalid);
        assert_eq!(s.acknowledge(&k, 0), invalid, "never at 0");
        let not_found = Err(ResponseError::ShareSessionNotFound.code());
        assert_eq!(s.fetch(&key("x"), (4, 7), false, (&[], &[])), not_found);
        // -1 closes it after this request.
        assert_eq!(
            s.acknowledge(&k, FINAL_EPOCH),
            Ok(Step::Closed(BTreeSet::from([P1])))
        );
        assert_eq!(s.get(&k), None);
        assert_eq!(s.fetch(&k, (FINAL_EPOCH, 7), false, (&[], &[])), not_found);
        // A closing fetch may not add partitions to fetch from.
        s.fetch(&k, (0, 7), false, (&[P0], &[])).unwrap();
        assert_eq!(
            s.fetch(&k, (FINAL_EPOCH, 7), true, (&[P1], &[])),
            Err(ResponseError::InvalidRequest.code())
        );
    }

    #[test]
    fn opening_replaces_a_members_session_within_the_limit() {
        let mut s = Sessions::new(1);
        s.fetch(&key("a"), (0, 1), false, (&[P0], &[])).unwrap();
        let replaced = s.fetch(&key("a"), (0, 2), false, (&[], &[])).unwrap();
        assert_eq!(
            replaced,
            Step::Opened {
                partitions: BTreeSet::new(),
                replaced: Some(BTreeSet::from([P0]))
            }
        );
        assert_eq!(
            s.fetch(&key("b"), (0, 3), false, (&[], &[])),
            Err(ResponseError::ShareSessionLimitReached.code())
        );
        // Acknowledgements in a request opening a session.
        assert_eq!(
            s.fetch(&key("a"), (0, 2), true, (&[], &[])),
            Err(ResponseError::InvalidRequest.code())
        );
        // Member ids Kafka refuses.
        let long = "m".repeat(37);
        for member in ["", long.as_str()] {
            assert_eq!(
                s.fetch(&key(member), (0, 1), false, (&[], &[])),
                Err(ResponseError::InvalidRequest.code())
            );
        }
    }

    #[test]
    fn the_epoch_wraps_to_one_and_a_closed_connection_ends_its_sessions() {
        let mut s = Sessions::new(10);
        s.fetch(&key("a"), (0, 1), false, (&[], &[])).unwrap();
        s.fetch(&key("b"), (0, 2), false, (&[], &[])).unwrap();
        s.sessions.get_mut(&key("a")).unwrap().epoch = i32::MAX;
        s.acknowledge(&key("a"), i32::MAX).unwrap();
        assert_eq!(s.get(&key("a")).unwrap().epoch, 1);
        assert_eq!(s.connection_closed(1), [(key("a"), BTreeSet::new())]);
        assert!(s.get(&key("a")).is_none() && s.get(&key("b")).is_some());
    }
}
