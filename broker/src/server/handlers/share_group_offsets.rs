//! DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and
//! DeleteShareGroupOffsets (92), v0: a share group's start offsets as
//! its coordinator stores them, reset, or deleted (to be initialized
//! again by `share.auto.offset.reset`), as Kafka's admin client and
//! `kafka-share-groups.sh` use them. The coordinator's rules are in
//! `coordinator::share_offsets`; here the ACLs and the topics' names.
//!
//! ACLs as Kafka: describing needs DESCRIBE on the group and on each
//! topic (a topic not allowed is left out of an "every topic" answer);
//! altering needs READ on both; deleting needs DELETE on the group and
//! READ on each topic.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition as AlteredPartition,
    AlterShareGroupOffsetsResponseTopic as AlteredTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic as DeletedTopic;
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup as DescribeGroup;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup as DescribedGroup,
    DescribeShareGroupOffsetsResponsePartition as DescribedPartition,
    DescribeShareGroupOffsetsResponseTopic as DescribedTopic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse, DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::access::{Caller, GROUP_DENIED, TOPIC_DENIED};
use super::{respond, HandlerError, Outcome};
use crate::coordinator::share_offsets::StartOffset;
use crate::groups::share_state::ShareStateKey;
use crate::kafka::bounds;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::server::shard::Shard;
use control::model::acls::Operation;

/// The versions served (Kafka 4.2's describe has a v1 with each
/// partition's lag; the codec here knows v0).
pub const VERSIONS: (i16, i16) = (0, 0);

const UNKNOWN_TOPIC: Code = ResponseError::UnknownTopicOrPartition.code();

/// The topics as the metadata has them now: name to id and partitions.
struct Topics {
    by_name: HashMap<String, ([u8; 16], i32)>,
    names: HashMap<[u8; 16], String>,
}

impl Topics {
    fn now(shard: &Shard) -> Topics {
        let view = shard.cluster.view.borrow();
        let topics = view.metadata.topics.values();
        let by_name: HashMap<String, ([u8; 16], i32)> = topics
            .map(|t| (t.name.clone(), (t.id.0, t.partitions.len() as i32)))
            .collect();
        let names = by_name
            .iter()
            .map(|(n, (id, _))| (*id, n.clone()))
            .collect();
        Topics { by_name, names }
    }

    /// The key of `group`'s share-partition `partition` of `topic`, if the
    /// partition exists.
    fn key(&self, group: &str, topic: &str, partition: i32) -> Option<ShareStateKey> {
        let &(id, count) = self.by_name.get(topic)?;
        (0..count).contains(&partition).then(|| ShareStateKey {
            group: group.to_string(),
            topic: id,
            partition,
        })
    }
}

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// Answers DescribeShareGroupOffsets.
pub async fn describe(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: DescribeShareGroupOffsetsRequest =
        checked(request, bounds::check_describe_share_group_offsets)?;
    let topics = Topics::now(shard);
    let mut groups = Vec::new();
    for asked in &decoded.groups {
        groups.push(describe_group(shard, caller, &topics, asked).await);
    }
    respond(
        request,
        &DescribeShareGroupOffsetsResponse::default().with_groups(groups),
    )
}

async fn describe_group(
    shard: &Shard,
    caller: &Caller<'_>,
    topics: &Topics,
    asked: &DescribeGroup,
) -> DescribedGroup {
    let group = asked.group_id.to_string();
    let described = DescribedGroup::default().with_group_id(asked.group_id.clone());
    if !caller.may_group(Operation::Describe, &group) {
        return described.with_error_code(GROUP_DENIED);
    }
    // The keys to look up (None: every one the group initialized).
    let keys = asked.topics.as_ref().map(|asked| {
        let each = asked.iter().flat_map(|t| {
            let partitions = t.partitions.iter();
            partitions.filter_map(|&p| topics.key(&group, &t.topic_name, p))
        });
        each.collect::<Vec<_>>()
    });
    let name = group.clone();
    let stored = shard
        .coordinator
        .on_group(&group, Err, move |partition| {
            Box::pin(async move { Ok(partition.share_start_offsets(&name, keys)) })
        })
        .await;
    let stored = match stored {
        Ok(stored) => stored,
        Err(code) => return described.with_error_code(code),
    };
    let described_topics = match &asked.topics {
        Some(asked) => asked_topics(caller, topics, asked, &stored),
        None => every_topic(caller, topics, &stored),
    };
    described.with_topics(described_topics)
}

/// The topics asked for, each partition with its start offset (-1: none
/// stored, or no such topic or partition, as Kafka answers).
fn asked_topics(
    caller: &Caller<'_>,
    topics: &Topics,
    asked: &[kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestTopic],
    stored: &[(ShareStateKey, StartOffset)],
) -> Vec<DescribedTopic> {
    let start_of = |id: [u8; 16], partition: i32| {
        let found = stored
            .iter()
            .find(|(k, _)| k.topic == id && k.partition == partition);
        found.map_or((-1, -1), |(_, start)| *start)
    };
    let each = asked.iter().map(|t| {
        let name = t.topic_name.to_string();
        let allowed = caller.may_topic(Operation::Describe, &name);
        let id = topics.by_name.get(&name).map(|(id, _)| *id);
        let partitions = t.partitions.iter().map(|&p| {
            let (start, epoch) = id.map_or((-1, -1), |id| start_of(id, p));
            let partition = described_partition(p, (start, epoch));
            match allowed {
                true => partition,
                false => described_partition(p, (-1, -1)).with_error_code(TOPIC_DENIED),
            }
        });
        DescribedTopic::default()
            .with_topic_name(t.topic_name.clone())
            .with_topic_id(uuid::Uuid::from_bytes(id.unwrap_or_default()))
            .with_partitions(partitions.collect())
    });
    each.collect()
}

/// Every topic the group initialized that the caller may describe (and
/// that still exists).
fn every_topic(
    caller: &Caller<'_>,
    topics: &Topics,
    stored: &[(ShareStateKey, StartOffset)],
) -> Vec<DescribedTopic> {
    let mut by_topic: BTreeMap<&str, ([u8; 16], Vec<DescribedPartition>)> = BTreeMap::new();
    for (key, start) in stored {
        let Some(name) = topics.names.get(&key.topic) else {
            continue;
        };
        if !caller.may_topic(Operation::Describe, name) {
            continue;
        }
        let entry = by_topic.entry(name).or_insert((key.topic, Vec::new()));
        entry.1.push(described_partition(key.partition, *start));
    }
    let each = by_topic.into_iter().map(|(name, (id, partitions))| {
        DescribedTopic::default()
            .with_topic_name(TopicName(text(name)))
            .with_topic_id(uuid::Uuid::from_bytes(id))
            .with_partitions(partitions)
    });
    each.collect()
}

fn described_partition(partition: i32, (start, leader_epoch): StartOffset) -> DescribedPartition {
    DescribedPartition::default()
        .with_partition_index(partition)
        .with_start_offset(start)
        .with_leader_epoch(leader_epoch)
}

/// Answers AlterShareGroupOffsets: the partitions named are reset
/// together (a start offset of -1: initialized again as the group's
/// `share.auto.offset.reset` says), or none is.
pub async fn alter(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: AlterShareGroupOffsetsRequest =
        checked(request, bounds::check_alter_share_group_offsets)?;
    let group = decoded.group_id.to_string();
    let topics = Topics::now(shard);
    let may_group = caller.may_group(Operation::Read, &group);
    // Each partition's own refusal, or its reset.
    let mut checked_topics = Vec::new();
    let mut resets = Vec::new();
    for t in &decoded.topics {
        let allowed = caller.may_topic(Operation::Read, &t.topic_name);
        let partitions = (t.partitions.iter()).map(|p| {
            let key = topics.key(&group, &t.topic_name, p.partition_index);
            let refused = match (allowed, key, p.start_offset) {
                (false, _, _) => Err(TOPIC_DENIED),
                (true, None, _) => Err(UNKNOWN_TOPIC),
                (true, Some(_), start) if start < -1 => Err(ResponseError::InvalidRequest.code()),
                (true, Some(key), start) => {
                    resets.push((key, (start >= 0).then_some(start)));
                    Ok(())
                }
            };
            (p.partition_index, refused)
        });
        checked_topics.push((t.topic_name.clone(), partitions.collect::<Vec<_>>()));
    }
    // (The group is checked even with nothing valid to reset.)
    let outcome = match may_group {
        false => Err(GROUP_DENIED),
        true => {
            let name = group.clone();
            shard
                .coordinator
                .on_group(&group, Err, move |partition| {
                    Box::pin(async move { partition.reset_share_states(&name, resets).await })
                })
                .await
        }
    };
    let group_code = outcome.err().unwrap_or(0);
    let responses = checked_topics.into_iter().map(|(name, partitions)| {
        let id = topics.by_name.get(name.as_str()).map(|(id, _)| *id);
        let partitions = partitions.into_iter().map(|(index, refused)| {
            AlteredPartition::default()
                .with_partition_index(index)
                .with_error_code(refused.err().unwrap_or(group_code))
        });
        AlteredTopic::default()
            .with_topic_name(name)
            .with_topic_id(uuid::Uuid::from_bytes(id.unwrap_or_default()))
            .with_partitions(partitions.collect())
    });
    let response = AlterShareGroupOffsetsResponse::default()
        .with_error_code(group_code)
        .with_responses(responses.collect());
    respond(request, &response)
}

/// Answers DeleteShareGroupOffsets: the group's states of the topics
/// named are deleted together (its next members start as
/// `share.auto.offset.reset` says), or none is.
pub async fn delete(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: DeleteShareGroupOffsetsRequest =
        checked(request, bounds::check_delete_share_group_offsets)?;
    let group = decoded.group_id.to_string();
    let topics = Topics::now(shard);
    let may_group = caller.may_group(Operation::Delete, &group);
    let ids: Vec<Result<[u8; 16], Code>> = (decoded.topics.iter())
        .map(|t| match caller.may_topic(Operation::Read, &t.topic_name) {
            false => Err(TOPIC_DENIED),
            true => (topics.by_name.get(t.topic_name.as_str()))
                .map(|(id, _)| *id)
                .ok_or(UNKNOWN_TOPIC),
        })
        .collect();
    let wanted: Vec<[u8; 16]> = ids.iter().filter_map(|id| id.ok()).collect();
    // (The group is checked even with no topic to delete.)
    let outcome = match may_group {
        false => Err(GROUP_DENIED),
        true => {
            let (name, wanted) = (group.clone(), wanted.clone());
            shard
                .coordinator
                .on_group(&group, Err, move |partition| {
                    Box::pin(async move { partition.delete_share_states(&name, wanted).await })
                })
                .await
        }
    };
    let group_code = outcome.as_ref().err().copied().unwrap_or(0);
    let had = |id: &[u8; 16]| {
        let at = wanted.iter().position(|w| w == id);
        let had = outcome.as_ref().ok().and_then(|had| had.get(at?).copied());
        had.unwrap_or(false)
    };
    let responses = (decoded.topics.iter()).zip(&ids).map(|(t, id)| {
        let code = match id {
            Err(code) => *code,
            Ok(_) if group_code != 0 => group_code,
            Ok(id) if had(id) => 0,
            // Nothing stored for the topic to delete.
            Ok(_) => UNKNOWN_TOPIC,
        };
        DeletedTopic::default()
            .with_topic_name(t.topic_name.clone())
            .with_topic_id(uuid::Uuid::from_bytes(*id.as_ref().unwrap_or(&[0; 16])))
            .with_error_code(code)
    });
    let response = DeleteShareGroupOffsetsResponse::default()
        .with_error_code(group_code)
        .with_responses(responses.collect());
    respond(request, &response)
}
