//! Static members (`group.instance.id`): a member that leaves with epoch
//! -2 ([`LEFT_FOR_NOW`]) keeps its partitions, held for it, until its
//! session lapses; a new process under the same instance id (a new
//! member id) takes its place with them, and the group epoch does not
//! move. Kafka's rules (`getOrMaybeSubscribeStaticConsumerGroupMember`):
//! an instance id still held by a live member is UNRELEASED_INSTANCE_ID
//! to a join, and FENCED_INSTANCE_ID to another member id's heartbeat.

use kafka_protocol::ResponseError;

use super::{stored_assignment, ConsumerGroup, Record, Request, LEFT_FOR_NOW};
use super::{Answer, ConsumerKey, ConsumerValue, Decision, MemberState};
use crate::kafka::Code;

impl ConsumerGroup {
    /// The member a static join replaces (its id), or the refusal of a
    /// static heartbeat; None for anything else.
    pub(super) fn static_predecessor(&self, req: &Request) -> Result<Option<String>, Code> {
        let Some(instance) = &req.instance_id else {
            return Ok(None);
        };
        let holder = self
            .members
            .iter()
            .find(|(_, m)| m.metadata.instance_id.as_ref() == Some(instance));
        let code = |e: ResponseError| Err(e.code());
        match (req.member_epoch, holder) {
            (0, None) => Ok(None),
            (0, Some((id, m))) if m.assignment.epoch == LEFT_FOR_NOW => Ok(Some(id.clone())),
            // The same member rejoining after an error starts over.
            (0, Some((id, _))) if *id == req.member_id => Ok(None),
            (0, Some(_)) => code(ResponseError::UnreleasedInstanceId),
            (_, None) => code(ResponseError::UnknownMemberId),
            (_, Some((id, _))) if *id != req.member_id => code(ResponseError::FencedInstanceId),
            _ => Ok(None),
        }
    }

    /// Puts member `new` in the place of `old` (in this copy of the
    /// group): its metadata, partitions and target, at epoch 0 so its
    /// first heartbeat brings it to the target's epoch. The records
    /// remove `old` and write `new`'s metadata and target (its current
    /// assignment follows from the heartbeat).
    pub(super) fn replace_member(&mut self, group_id: &str, old: &str, new: &str) -> Vec<Record> {
        let mut records = self
            .leave(group_id, old, -1)
            .map(|d| d.records)
            .unwrap_or_default();
        // Leaving would bump the group epoch: a replacement does not.
        records.retain(|(key, _)| !matches!(key, ConsumerKey::GroupEpoch { .. }));
        let Some(mut member) = self.members.remove(old) else {
            return records;
        };
        member.assignment.epoch = 0;
        member.assignment.previous_epoch = 0;
        let target = self.targets.remove(old).unwrap_or_default();
        let key = |k: fn(String, String) -> ConsumerKey| k(group_id.into(), new.into());
        records.push((
            key(|group, member| ConsumerKey::Member { group, member }),
            Some(ConsumerValue::Member(member.metadata.clone())),
        ));
        records.push((
            key(|group, member| ConsumerKey::TargetMember { group, member }),
            Some(ConsumerValue::TargetMember(super::by_topic(&target))),
        ));
        self.targets.insert(new.to_string(), target);
        self.members.insert(new.to_string(), member);
        records
    }

    /// A static member leaving for now: stored at epoch -2 with the
    /// partitions it had (held for its return; what it was giving up is
    /// free for the others).
    pub(super) fn leave_for_now(&self, group_id: &str, member_id: &str) -> Result<Decision, Code> {
        let Some(member) = self.members.get(member_id) else {
            return Err(ResponseError::UnknownMemberId.code());
        };
        let mut assignment = member.assignment.clone();
        assignment.epoch = LEFT_FOR_NOW;
        assignment.state = MemberState::Stable;
        assignment.pending_revocation.clear();
        let key = ConsumerKey::CurrentAssignment {
            group: group_id.into(),
            member: member_id.into(),
        };
        let value = ConsumerValue::CurrentAssignment(stored_assignment(&assignment));
        Ok(Decision {
            records: vec![(key, Some(value))],
            answer: Answer {
                member_id: member_id.into(),
                member_epoch: LEFT_FOR_NOW,
                assignment: None,
            },
        })
    }
}
