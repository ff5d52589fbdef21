//! ConsumerGroupDescribe (KIP-848): each consumer group as its coordinator
//! shard holds it, its epochs, and each member's assignment beside its
//! target, topics named as the metadata names them now. DESCRIBE on the
//! group, and on every topic it shows (TOPIC_AUTHORIZATION_FAILED else).

use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::access::{Caller, GROUP_DENIED, TOPIC_DENIED};
use super::{respond, HandlerError, Outcome};
use crate::groups::modern::consumer::{self, ConsumerGroup, Partition, TopicId};
use crate::kafka::bounds;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::server::shard::Shard;
use control::model::acls::Operation;

/// ConsumerGroupDescribe versions served (v1: each member's type).
pub const DESCRIBE_VERSIONS: (i16, i16) = (0, 1);

/// "Authorized operations not requested".
const OPERATIONS_UNKNOWN: i32 = i32::MIN;

/// Kafka's member type of a member that joined by ConsumerGroupHeartbeat.
const CONSUMER_MEMBER: i8 = 1;
/// And of one that joined by JoinGroup (a classic member of the group).
const CLASSIC_MEMBER: i8 = 0;

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// Answers ConsumerGroupDescribe.
pub async fn describe(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: ConsumerGroupDescribeRequest =
        checked(request, bounds::check_consumer_group_describe)?;
    let names = topic_names(shard);
    let mut described = Vec::new();
    for group in &decoded.group_ids {
        let id = group.to_string();
        let found: Result<ConsumerGroup, Code> = if !caller.may_group(Operation::Describe, &id) {
            Err(GROUP_DENIED)
        } else {
            let key = id.clone();
            shard
                .coordinator
                .on_group(&key, Err, move |partition| {
                    Box::pin(async move { partition.describe_consumer(&id) })
                })
                .await
        };
        let entry = DescribedGroup::default()
            .with_group_id(group.clone())
            .with_authorized_operations(OPERATIONS_UNKNOWN);
        let hidden = |consumer: &ConsumerGroup| {
            let mut topics = topics_named(consumer, &names);
            topics.any(|t| !caller.may_topic(Operation::Describe, t))
        };
        described.push(match found {
            Err(code) => entry.with_error_code(code),
            // As Kafka's: a group showing a topic the caller may not see
            // is not described.
            Ok(consumer) if hidden(&consumer) => entry.with_error_code(TOPIC_DENIED),
            Ok(consumer) => described_group(entry, &consumer, &names),
        });
    }
    respond(
        request,
        &ConsumerGroupDescribeResponse::default().with_groups(described),
    )
}

/// The topics the group's description names: subscribed by name, and
/// those its members own or are to own.
fn topics_named<'a>(
    group: &'a ConsumerGroup,
    names: &'a HashMap<TopicId, String>,
) -> impl Iterator<Item = &'a String> {
    let subscribed = (group.members.values()).flat_map(|m| &m.metadata.subscribed_topic_names);
    let owned = group.members.values().flat_map(|m| &m.assignment.assigned);
    let targets = group.targets.values().flatten();
    let assigned = owned.chain(targets).filter_map(|(id, _)| names.get(id));
    subscribed.chain(assigned)
}

/// Every topic's name by id.
pub(super) fn topic_names(shard: &Shard) -> HashMap<TopicId, String> {
    let view = shard.cluster.view.borrow();
    let topics = view.metadata.topics.values();
    topics.map(|t| (t.id.0, t.name.clone())).collect()
}

fn described_group(
    entry: DescribedGroup,
    group: &ConsumerGroup,
    names: &HashMap<TopicId, String>,
) -> DescribedGroup {
    let members = group.members.iter().map(|(id, m)| {
        let meta = &m.metadata;
        let empty = BTreeSet::new();
        let target = group.targets.get(id).unwrap_or(&empty);
        Member::default()
            .with_member_id(text(id.as_str()))
            .with_instance_id(meta.instance_id.clone().map(text))
            .with_rack_id(meta.rack_id.clone().map(text))
            .with_member_epoch(m.assignment.epoch)
            .with_client_id(text(meta.client_id.as_str()))
            .with_client_host(text(meta.client_host.as_str()))
            .with_subscribed_topic_names(
                (meta.subscribed_topic_names.iter())
                    .map(|n| TopicName(text(n.as_str())))
                    .collect(),
            )
            .with_subscribed_topic_regex(meta.subscribed_topic_regex.clone().map(text))
            .with_assignment(assignment(&m.assignment.assigned, names))
            .with_target_assignment(assignment(target, names))
            .with_member_type(match meta.classic {
                Some(_) => CLASSIC_MEMBER,
                None => CONSUMER_MEMBER,
            })
    });
    entry
        .with_group_state(text(group.state().name()))
        .with_group_epoch(group.epoch)
        .with_assignment_epoch(group.assignment_epoch)
        .with_assignor_name(text(group.preferred_assignor()))
        .with_members(members.collect())
}

/// Partitions by topic, each topic named; topics deleted since are left
/// out, as Kafka's.
fn assignment(partitions: &BTreeSet<Partition>, names: &HashMap<TopicId, String>) -> Assignment {
    let topics = consumer::by_topic(partitions).into_iter().filter_map(|t| {
        let name = names.get(&t.topic_id)?.clone();
        let topic = TopicPartitions::default()
            .with_topic_id(uuid::Uuid::from_bytes(t.topic_id))
            .with_topic_name(TopicName(text(name)))
            .with_partitions(t.partitions);
        Some(topic)
    });
    Assignment::default().with_topic_partitions(topics.collect())
}
