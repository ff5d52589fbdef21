//! ShareGroupDescribe (KIP-932): each share group as its coordinator shard
//! holds it: its epochs and each member's partitions, topics named as
//! the metadata names them now. DESCRIBE on the group, and on every
//! topic it shows (TOPIC_AUTHORIZATION_FAILED else), as
//! ConsumerGroupDescribe.

use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{ShareGroupDescribeRequest, ShareGroupDescribeResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::access::{Caller, GROUP_DENIED, TOPIC_DENIED};
use super::consumer_group_describe::topic_names;
use super::{respond, HandlerError, Outcome};
use crate::groups::modern::consumer::{by_topic, Partition, TopicId};
use crate::groups::modern::share_group::ShareGroup;
use crate::kafka::bounds;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::server::shard::Shard;
use control::model::acls::Operation;

/// ShareGroupDescribe versions served (v1: Kafka 4.2's).
pub const DESCRIBE_VERSIONS: (i16, i16) = (1, 1);

/// "Authorized operations not requested".
const OPERATIONS_UNKNOWN: i32 = i32::MIN;

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// Answers ShareGroupDescribe.
pub async fn describe(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: ShareGroupDescribeRequest = checked(request, bounds::check_share_group_describe)?;
    let names = topic_names(shard);
    let mut described = Vec::new();
    for group in &decoded.group_ids {
        let id = group.to_string();
        let found: Result<ShareGroup, Code> = if !caller.may_group(Operation::Describe, &id) {
            Err(GROUP_DENIED)
        } else {
            let key = id.clone();
            shard
                .coordinator
                .on_group(&key, Err, move |partition| {
                    Box::pin(async move { partition.describe_share(&id) })
                })
                .await
        };
        let entry = DescribedGroup::default()
            .with_group_id(group.clone())
            .with_authorized_operations(OPERATIONS_UNKNOWN);
        let hidden = |share: &ShareGroup| {
            let mut topics = topics_named(share, &names);
            topics.any(|t| !caller.may_topic(Operation::Describe, t))
        };
        described.push(match found {
            Err(code) => entry.with_error_code(code),
            Ok(share) if hidden(&share) => entry.with_error_code(TOPIC_DENIED),
            Ok(share) => described_group(entry, &share, &names),
        });
    }
    respond(
        request,
        &ShareGroupDescribeResponse::default().with_groups(described),
    )
}

/// The topics the description names: subscribed, and assigned.
fn topics_named<'a>(
    group: &'a ShareGroup,
    names: &'a HashMap<TopicId, String>,
) -> impl Iterator<Item = &'a String> {
    let subscribed = (group.members.values()).flat_map(|m| &m.metadata.subscribed_topic_names);
    let assigned = group.members.values().flat_map(|m| &m.assigned);
    subscribed.chain(assigned.filter_map(|(id, _)| names.get(id)))
}

fn described_group(
    entry: DescribedGroup,
    group: &ShareGroup,
    names: &HashMap<TopicId, String>,
) -> DescribedGroup {
    let members = group.members.iter().map(|(id, m)| {
        let meta = &m.metadata;
        let subscribed = meta.subscribed_topic_names.iter();
        Member::default()
            .with_member_id(text(id.as_str()))
            .with_rack_id(meta.rack_id.clone().map(text))
            .with_member_epoch(m.epoch)
            .with_client_id(text(meta.client_id.as_str()))
            .with_client_host(text(meta.client_host.as_str()))
            .with_subscribed_topic_names(subscribed.map(|n| TopicName(text(n.as_str()))).collect())
            .with_assignment(assignment(&m.assigned, names))
    });
    let state = if group.members.is_empty() {
        "Empty"
    } else {
        "Stable"
    };
    entry
        .with_group_state(text(state))
        .with_group_epoch(group.epoch)
        .with_assignment_epoch(group.assignment_epoch)
        .with_assignor_name(text("simple"))
        .with_members(members.collect())
}

/// Partitions by topic, each topic named; deleted topics left out.
fn assignment(partitions: &BTreeSet<Partition>, names: &HashMap<TopicId, String>) -> Assignment {
    let topics = by_topic(partitions).into_iter().filter_map(|t| {
        let name = names.get(&t.topic_id)?.clone();
        let topic = TopicPartitions::default()
            .with_topic_id(uuid::Uuid::from_bytes(t.topic_id))
            .with_topic_name(TopicName(text(name)))
            .with_partitions(t.partitions);
        Some(topic)
    });
    Assignment::default().with_topic_partitions(topics.collect())
}
