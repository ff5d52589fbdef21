//! OffsetCommit, OffsetFetch (one group, or several from v8) and
//! OffsetDelete, run on each group's coordinator shard.

use std::rc::Rc;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::access::{Caller, GROUP_DENIED, TOPIC_DENIED};
use super::{respond, HandlerError, Outcome};
use crate::groups::records::CommittedOffset;
use crate::kafka::bounds;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::server::shard::Shard;
use control::model::acls::Operation;

/// OffsetCommit versions served: v1 read as v2 (`kafka::offset_commit_v1`).
pub const OFFSET_COMMIT_VERSIONS: (i16, i16) = (1, 9);
/// OffsetFetch versions served (several groups from v8).
pub const OFFSET_FETCH_VERSIONS: (i16, i16) = (1, 9);
/// OffsetDelete versions served.
pub const OFFSET_DELETE_VERSIONS: (i16, i16) = (0, 0);

/// Kafka's offset.metadata.max.bytes.
const OFFSET_METADATA_MAX_BYTES: usize = 4096;

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// Whether `topic` has partition `index` (commits to anything else are
/// refused, as Kafka does).
fn partition_exists(shard: &Shard, topic: &str, index: i32) -> bool {
    let view = shard.cluster.view.borrow();
    view.metadata
        .topic_by_name(topic)
        .is_ok_and(|t| index >= 0 && (index as usize) < t.partitions.len())
}

/// Answers OffsetCommit: every valid partition's offset is stored in one
/// record batch, answered once durable.
pub async fn offset_commit(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let as_v2;
    let request = if request.header.request_api_version == 1 {
        as_v2 = v1_as_v2(request)?;
        &as_v2
    } else {
        request
    };
    let version = request.header.request_api_version;
    let decoded: OffsetCommitRequest = checked(request, bounds::check_offset_commit)?;
    let (codes, offsets) = sort_commits(shard, version, &decoded, caller);
    let group_code = if !caller.may_group(Operation::Read, &decoded.group_id) {
        GROUP_DENIED
    } else if decoded.group_id.is_empty() {
        ResponseError::InvalidGroupId.code()
    } else if offsets.is_empty() {
        0
    } else {
        commit_on_coordinator(shard, &decoded, offsets).await
    };
    respond(request, &commit_answer(&decoded, codes, group_code))
}

/// An OffsetCommit v1 request as the same request at v2, whose answer
/// has v1's layout.
fn v1_as_v2(request: &Request) -> Result<Request, HandlerError> {
    let body = crate::kafka::offset_commit_v1::as_v2(&request.body)
        .map_err(|e| HandlerError::Malformed(e.to_string()))?;
    let mut header = request.header.clone();
    header.request_api_version = 2;
    Ok(Request {
        api_key: request.api_key,
        header,
        body,
        frame_bytes: request.frame_bytes,
    })
}

/// An offset to store: topic, partition, what is committed.
pub(super) type ToCommit = (String, i32, CommittedOffset);

/// Sorts a commit's partitions: per partition the code it is refused
/// with up front (0: to store), and the offsets to store.
fn sort_commits(
    shard: &Shard,
    version: i16,
    decoded: &OffsetCommitRequest,
    caller: &Caller<'_>,
) -> (Vec<Vec<Code>>, Vec<ToCommit>) {
    let now = crate::runtime::clock::wall_ms();
    let mut codes = Vec::new();
    let mut offsets = Vec::new();
    for topic in &decoded.topics {
        let mut topic_codes = Vec::new();
        for p in &topic.partitions {
            let asked = AskedOffset {
                topic: topic.name.as_str(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: if version >= 6 {
                    p.committed_leader_epoch
                } else {
                    -1
                },
                metadata: p.committed_metadata.as_deref(),
            };
            topic_codes.push(sort_one(shard, caller, asked, now, &mut offsets));
        }
        codes.push(topic_codes);
    }
    (codes, offsets)
}

/// One partition's offset as a commit (plain or transactional) asks it.
pub(super) struct AskedOffset<'a> {
    /// The topic.
    pub topic: &'a str,
    /// The partition.
    pub partition: i32,
    /// The offset committed.
    pub offset: i64,
    /// Its leader epoch (-1 before the versions that carry it).
    pub leader_epoch: i32,
    /// The client's metadata string.
    pub metadata: Option<&'a str>,
}

/// The code one asked offset is refused with (0: added to `offsets`):
/// READ on the topic, metadata within bounds, a partition that exists.
pub(super) fn sort_one(
    shard: &Shard,
    caller: &Caller<'_>,
    asked: AskedOffset<'_>,
    now: i64,
    offsets: &mut Vec<ToCommit>,
) -> Code {
    let metadata = asked.metadata.unwrap_or_default();
    if !caller.may_topic(Operation::Read, asked.topic) {
        TOPIC_DENIED
    } else if metadata.len() > OFFSET_METADATA_MAX_BYTES {
        ResponseError::OffsetMetadataTooLarge.code()
    } else if !partition_exists(shard, asked.topic, asked.partition) {
        ResponseError::UnknownTopicOrPartition.code()
    } else {
        let committed = CommittedOffset {
            offset: asked.offset,
            leader_epoch: asked.leader_epoch,
            metadata: metadata.to_string(),
            commit_timestamp: now,
        };
        offsets.push((asked.topic.to_string(), asked.partition, committed));
        0
    }
}

/// Stores `offsets` on the group's coordinator, as the member the
/// request names: the group's code.
async fn commit_on_coordinator(
    shard: &Shard,
    decoded: &OffsetCommitRequest,
    offsets: Vec<ToCommit>,
) -> Code {
    let group = decoded.group_id.to_string();
    let member = decoded.member_id.to_string();
    let instance = decoded.group_instance_id.as_ref().map(|i| i.to_string());
    let generation = decoded.generation_id_or_member_epoch;
    let key = group.clone();
    shard
        .coordinator
        .on_group(
            &key,
            |code| code,
            move |partition| {
                Box::pin(async move {
                    partition
                        .commit(&group, (&member, instance.as_deref(), generation), offsets)
                        .await
                })
            },
        )
        .await
}

/// The OffsetCommit answer: each partition's own code, else the group's.
fn commit_answer(
    decoded: &OffsetCommitRequest,
    codes: Vec<Vec<Code>>,
    group_code: Code,
) -> OffsetCommitResponse {
    let topics = decoded
        .topics
        .iter()
        .zip(codes)
        .map(|(topic, topic_codes)| {
            let partitions = topic
                .partitions
                .iter()
                .zip(topic_codes)
                .map(|(p, code)| {
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(if code == 0 { group_code } else { code })
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

/// One committed offset asked for: topic, partition, the offset (None:
/// none), and the partition's code (UNSTABLE_OFFSET_COMMIT or 0).
type Row = (String, i32, Option<CommittedOffset>, Code);

/// One group's committed offsets, or the group's error.
type Fetched = Result<Vec<Row>, Code>;

/// `require_stable` (v7+, what read_committed consumers ask): while a
/// transaction not yet decided holds one of the offsets asked for, that
/// partition answers UNSTABLE_OFFSET_COMMIT (retriable: the client asks
/// again once the marker has decided it), as Kafka's; the Java client
/// takes only a partition's, not the group's.
async fn fetch_group(
    shard: &Rc<Shard>,
    group: String,
    wanted: Wanted,
    require_stable: bool,
) -> Fetched {
    if group.is_empty() {
        return Err(ResponseError::InvalidGroupId.code());
    }
    let key = group.clone();
    shard
        .coordinator
        .on_group(&key, Err, move |partition| {
            Box::pin(async move {
                let rows =
                    partition
                        .fetch(&group, wanted)
                        .into_iter()
                        .map(|(topic, index, offset)| {
                            let unstable = require_stable
                                && partition.has_pending_offset(&group, &topic, index);
                            match unstable {
                                true => (
                                    topic,
                                    index,
                                    None,
                                    ResponseError::UnstableOffsetCommit.code(),
                                ),
                                false => (topic, index, offset, 0),
                            }
                        });
                Ok(rows.collect())
            })
        })
        .await
}

/// A topic's committed offsets: (partition, offset if any, code).
type TopicOffsets = (String, Vec<(i32, Option<CommittedOffset>, Code)>);

/// Groups fetched rows by topic, keeping the first-seen topic order.
fn by_topic(rows: Vec<Row>) -> Vec<TopicOffsets> {
    let mut topics: Vec<TopicOffsets> = Vec::new();
    for (topic, partition, committed, code) in rows {
        match topics.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, partitions)) => partitions.push((partition, committed, code)),
            None => topics.push((topic, vec![(partition, committed, code)])),
        }
    }
    topics
}

/// The topics asked for in one group's part of an OffsetFetch (None: all).
type Wanted = Option<Vec<(String, Vec<i32>)>>;

/// Answers OffsetFetch: -1 for partitions without a committed offset.
/// Up to v7 a request names one group, from v8 a list of groups; both
/// are read as a list and the answer laid out for the version.
pub async fn offset_fetch(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: OffsetFetchRequest = checked(request, bounds::check_offset_fetch)?;
    let mut answers = Vec::new();
    for (group, wanted) in groups_asked(version, &decoded) {
        if !caller.may_group(Operation::Describe, &group) {
            answers.push((group, Err(GROUP_DENIED)));
            continue;
        }
        let require_stable = version >= 7 && decoded.require_stable;
        let mut fetched = fetch_group(shard, group.to_string(), wanted, require_stable).await;
        // Topics the caller may not see are left out.
        if let Ok(offsets) = &mut fetched {
            offsets.retain(|(topic, _, _, _)| caller.may_topic(Operation::Describe, topic));
        }
        answers.push((group, fetched.map(by_topic)));
    }
    let answer = if version <= 7 {
        one_group_layout(version, answers)
    } else {
        groups_layout(answers)
    };
    respond(request, &answer)
}

/// The groups an OffsetFetch asks for, with their topics.
fn groups_asked(version: i16, decoded: &OffsetFetchRequest) -> Vec<(GroupId, Wanted)> {
    fn wanted<'a>(
        names: impl Iterator<Item = (&'a TopicName, &'a Vec<i32>)>,
    ) -> Vec<(String, Vec<i32>)> {
        names
            .map(|(name, partitions)| (name.to_string(), partitions.clone()))
            .collect()
    }
    if version <= 7 {
        let topics = decoded
            .topics
            .as_ref()
            .map(|topics| wanted(topics.iter().map(|t| (&t.name, &t.partition_indexes))));
        return vec![(decoded.group_id.clone(), topics)];
    }
    decoded
        .groups
        .iter()
        .map(|group| {
            let topics = group
                .topics
                .as_ref()
                .map(|topics| wanted(topics.iter().map(|t| (&t.name, &t.partition_indexes))));
            (group.group_id.clone(), topics)
        })
        .collect()
}

/// One group's answer: its topics' committed offsets, or its error.
type GroupAnswer = (GroupId, Result<Vec<TopicOffsets>, Code>);

/// The v1-v7 layout: one group, its error at the top (from v2).
fn one_group_layout(version: i16, answers: Vec<GroupAnswer>) -> OffsetFetchResponse {
    let mut answer = OffsetFetchResponse::default();
    let Some((_, fetched)) = answers.into_iter().next() else {
        return answer;
    };
    match fetched {
        Err(code) if version >= 2 => answer.error_code = code,
        Err(_) => {}
        Ok(topics) => {
            answer.topics = topics
                .into_iter()
                .map(|(topic, partitions)| {
                    let partitions = partitions
                        .into_iter()
                        .map(|(index, committed, code)| {
                            let (offset, epoch, metadata) = parts(committed);
                            let mut p = OffsetFetchResponsePartition::default()
                                .with_partition_index(index)
                                .with_error_code(code)
                                .with_committed_offset(offset)
                                .with_metadata(Some(StrBytes::from_string(metadata)));
                            if version >= 5 {
                                p = p.with_committed_leader_epoch(epoch);
                            }
                            p
                        })
                        .collect();
                    OffsetFetchResponseTopic::default()
                        .with_name(topic_name(&topic))
                        .with_partitions(partitions)
                })
                .collect();
        }
    }
    answer
}

/// The v8+ layout: a list of groups, each with its own error.
fn groups_layout(answers: Vec<GroupAnswer>) -> OffsetFetchResponse {
    let groups = answers
        .into_iter()
        .map(|(group, fetched)| {
            let entry = OffsetFetchResponseGroup::default().with_group_id(group);
            match fetched {
                Err(code) => entry.with_error_code(code),
                Ok(topics) => entry.with_topics(topics.into_iter().map(topics_entry).collect()),
            }
        })
        .collect();
    OffsetFetchResponse::default().with_groups(groups)
}

/// One topic of the v8+ layout.
fn topics_entry((topic, partitions): TopicOffsets) -> OffsetFetchResponseTopics {
    let partitions = partitions
        .into_iter()
        .map(|(index, committed, code)| {
            let (offset, epoch, metadata) = parts(committed);
            OffsetFetchResponsePartitions::default()
                .with_partition_index(index)
                .with_error_code(code)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(epoch)
                .with_metadata(Some(StrBytes::from_string(metadata)))
        })
        .collect();
    OffsetFetchResponseTopics::default()
        .with_name(topic_name(&topic))
        .with_partitions(partitions)
}

/// (offset, leader epoch, metadata) of a committed offset, or Kafka's
/// "none" values.
fn parts(committed: Option<CommittedOffset>) -> (i64, i32, String) {
    match committed {
        Some(c) => (c.offset, c.leader_epoch, c.metadata),
        None => (-1, -1, String::new()),
    }
}

/// Answers OffsetDelete.
pub async fn offset_delete(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: OffsetDeleteRequest = checked(request, bounds::check_offset_delete)?;
    let group = decoded.group_id.to_string();
    if !caller.may_group(Operation::Delete, &group) {
        let refused = OffsetDeleteResponse::default().with_error_code(GROUP_DENIED);
        return respond(request, &refused);
    }
    // Partitions of topics the caller may not read are refused; the rest
    // go to the coordinator.
    let readable = |topic: &str| caller.may_topic(Operation::Read, topic);
    let partitions: Vec<(String, i32)> = decoded
        .topics
        .iter()
        .filter(|t| readable(&t.name))
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.to_string(), p.partition_index))
        })
        .collect();
    let count = partitions.len();
    let key = group.clone();
    let (group_code, mut codes) = shard
        .coordinator
        .on_group(
            &key,
            |code| (code, vec![]),
            move |partition| {
                Box::pin(async move { partition.delete_offsets(&group, partitions).await })
            },
        )
        .await;
    if codes.len() != count {
        codes = vec![group_code; count];
    }
    let mut codes = codes.into_iter();
    let topics = decoded
        .topics
        .iter()
        .map(|t| {
            let allowed = readable(&t.name);
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let code = match allowed {
                        true => codes.next().unwrap_or(group_code),
                        false => TOPIC_DENIED,
                    };
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            OffsetDeleteResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    respond(
        request,
        &OffsetDeleteResponse::default()
            .with_error_code(group_code)
            .with_topics(topics),
    )
}
