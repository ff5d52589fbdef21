//! The membership calls of a group (JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup) on the partition coordinating it: the group's state machine
//! decides, a settled membership is stored before anyone acts on it.

use std::time::Instant;

use bytes::Bytes;
use futures::channel::oneshot;
use kafka_protocol::ResponseError;

use super::offsets_partition::OffsetsPartition;
use crate::groups::membership::{Join, JoinStep, Joined, MemberId, SyncStep};
use crate::kafka::Code;

/// The protocol type and name a SyncGroup names, if any.
pub type Protocol<'a> = (Option<&'a str>, Option<&'a str>);

impl OffsetsPartition {
    /// JoinGroup: answered when the join phase completes (or at once).
    pub async fn join(&self, group: &str, join: Join) -> Joined {
        let share = (self.groups.borrow().get(group)).is_some_and(|e| e.share.is_some());
        if share {
            // A share group's members heartbeat with ShareGroupHeartbeat.
            let code = ResponseError::InconsistentGroupProtocol.code();
            return Joined::failed(code, &join.member_id);
        }
        if self.serves_classic_as_consumer(group) {
            return self.classic_join_consumer(group, &join).await;
        }
        // An empty consumer group becomes a classic one.
        if let Err(code) = self.end_empty_consumer_group(group).await {
            return Joined::failed(code, &join.member_id);
        }
        // Converted while that waited for the append lock: it joins the
        // consumer group (checked with no await before the join below).
        if self.serves_classic_as_consumer(group) {
            return self.classic_join_consumer(group, &join).await;
        }
        let step = self
            .groups
            .borrow_mut()
            .entry(group)
            .membership
            .join(join.clone(), Instant::now());
        let answer = match step {
            JoinStep::Answer(answer) => answer,
            JoinStep::Wait(member_id) => {
                let (tx, rx) = oneshot::channel();
                self.joins
                    .borrow_mut()
                    .insert((group.to_string(), member_id.clone()), tx);
                self.settle(group);
                rx.await.unwrap_or_else(|_| {
                    Joined::failed(ResponseError::RebalanceInProgress.code(), &member_id)
                })
            }
        };
        self.settle(group);
        if let Err(code) = self.persist_membership(group).await {
            tracing::warn!(group, code, "cannot store a group's membership");
        }
        answer
    }

    /// SyncGroup: the leader's brings the assignment, which is stored
    /// before anyone gets theirs; the others wait for it.
    pub async fn sync(
        &self,
        group: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        (assignments, protocol): (Vec<(MemberId, Bytes)>, Protocol<'_>),
    ) -> (Code, Bytes) {
        if self.serves_classic_as_consumer(group) {
            let member = (member_id, instance_id, generation);
            return self.classic_sync_consumer(group, member, protocol);
        }
        let step = {
            let mut groups = self.groups.borrow_mut();
            let Some(entry) = groups.get_mut(group) else {
                return (ResponseError::UnknownMemberId.code(), Bytes::new());
            };
            entry.membership.sync(
                member_id,
                instance_id,
                generation,
                assignments,
                Instant::now(),
            )
        };
        match step {
            (SyncStep::Wait, _) => {
                let (tx, rx) = oneshot::channel();
                self.syncs
                    .borrow_mut()
                    .insert((group.to_string(), member_id.to_string()), tx);
                self.settle(group);
                rx.await
                    .unwrap_or((ResponseError::RebalanceInProgress.code(), Bytes::new()))
            }
            (SyncStep::Answer(code, mine), released) => {
                // The leader's sync settled the group: store the
                // assignment, then hand it out.
                let stored = if code == 0 {
                    self.persist_membership(group).await
                } else {
                    Ok(())
                };
                // Converted to a consumer group while the assignment was
                // written: it is not theirs any more, they join again.
                let converted =
                    (self.groups.borrow().get(group)).is_some_and(|e| e.consumer.is_some());
                let failed = match converted {
                    true => Some(ResponseError::RebalanceInProgress.code()),
                    false => stored.err(),
                };
                for (member, assignment) in released {
                    if let Some(parked) =
                        self.syncs.borrow_mut().remove(&(group.to_string(), member))
                    {
                        let _ = parked.send(match failed {
                            Some(code) => (code, Bytes::new()),
                            None => (0, assignment),
                        });
                    }
                }
                self.settle(group);
                match failed {
                    Some(code) => (code, Bytes::new()),
                    None => (code, mine),
                }
            }
        }
    }

    /// Heartbeat.
    pub fn heartbeat(
        &self,
        group: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Code {
        if self.serves_classic_as_consumer(group) {
            let member = (member_id, instance_id, generation);
            return self.classic_heartbeat_consumer(group, member);
        }
        let code = match self.groups.borrow_mut().get_mut(group) {
            Some(entry) => {
                entry
                    .membership
                    .heartbeat(member_id, instance_id, generation, Instant::now())
            }
            None => ResponseError::UnknownMemberId.code(),
        };
        self.settle(group);
        code
    }

    /// LeaveGroup for each (member id, instance id).
    pub async fn leave(&self, group: &str, members: Vec<(String, Option<String>)>) -> Vec<Code> {
        if self.serves_classic_as_consumer(group) {
            return self.classic_leave_consumer(group, members).await;
        }
        self.classic_leave(group, members).await
    }

    /// LeaveGroup in a classic group.
    pub(super) async fn classic_leave(
        &self,
        group: &str,
        members: Vec<(String, Option<String>)>,
    ) -> Vec<Code> {
        let codes = {
            let mut groups = self.groups.borrow_mut();
            match groups.get_mut(group) {
                Some(entry) => members
                    .iter()
                    .map(|(m, i)| entry.membership.leave(m, i.as_deref(), Instant::now()))
                    .collect(),
                None => vec![ResponseError::UnknownMemberId.code(); members.len()],
            }
        };
        self.settle(group);
        if let Err(code) = self.persist_membership(group).await {
            tracing::warn!(group, code, "cannot store a group's membership");
        }
        codes
    }
}
