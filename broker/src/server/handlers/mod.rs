//! The Kafka API handlers. Each one bounds-checks its request body (see
//! `kafka::bounds`), decodes it, does its work (per partition on the owning
//! shard), and encodes the answer. A request that cannot be answered is an
//! error, and the connection is closed.

pub mod access;
mod acls;
mod cluster;
mod configs;
mod epochs;
mod fetch;
mod group_admin;
mod group_offsets;
mod groups;
mod offsets;
mod produce;
mod producers;
mod quotas;
mod topics;
mod users;

use std::rc::Rc;

use kafka_protocol::messages::ApiKey;

use access::Caller;

use crate::kafka::bounds::BoundsError;
use crate::kafka::decode::DecodeError;
use crate::kafka::request::Request;
use crate::kafka::response::{EncodeError, Frame};
use crate::kafka::{api_versions, metadata};
use crate::server::shard::Shard;

/// What a handler gives back.
pub enum Outcome {
    /// The response frame.
    Respond(Frame),
    /// Nothing is sent (Produce with acks=0).
    NoResponse,
}

/// Why a request could not be answered: the connection is closed.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// A length or count beyond the body.
    #[error(transparent)]
    Bounds(#[from] BoundsError),
    /// The body does not decode.
    #[error("malformed request: {0}")]
    Malformed(String),
    /// The response does not encode.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// A body that does not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// An API (or version) not served: clients only send what ApiVersions
    /// advertised, so this is not a client to keep talking to.
    #[error("{0:?} v{1} is not served")]
    NotServed(ApiKey, i16),
}

/// Lays a fan-out's answers (one per partition, in the order asked) back
/// into the request's shape: for each topic, `answer_topic` of the topic
/// and its partitions' `answer_partition`s. Every per-partition API ends
/// with this step.
pub fn in_request_order<Topic, Partition, Answer, PartitionAnswer, TopicAnswer>(
    topics: &[Topic],
    partitions_of: impl Fn(&Topic) -> &[Partition],
    answers: Vec<Answer>,
    mut answer_partition: impl FnMut(&Partition, Answer) -> PartitionAnswer,
    mut answer_topic: impl FnMut(&Topic, Vec<PartitionAnswer>) -> TopicAnswer,
) -> Vec<TopicAnswer> {
    let mut answers = answers.into_iter();
    topics
        .iter()
        .map(|topic| {
            let partitions = partitions_of(topic)
                .iter()
                .map(|p| answer_partition(p, answers.next().expect("one answer per partition")))
                .collect();
            answer_topic(topic, partitions)
        })
        .collect()
}

/// The answer to `request`, encoded at its version.
pub fn respond<T>(request: &Request, answer: &T) -> Result<Outcome, HandlerError>
where
    T: kafka_protocol::protocol::Encodable + kafka_protocol::protocol::HeaderVersion,
{
    Ok(Outcome::Respond(crate::kafka::response::encode(
        request.header.correlation_id,
        request.header.request_api_version,
        answer,
    )?))
}

/// The APIs served with their versions: what ApiVersions advertises.
pub const SERVED: &[(ApiKey, (i16, i16))] = &[
    (ApiKey::Produce, produce::VERSIONS),
    (ApiKey::Fetch, fetch::VERSIONS),
    (ApiKey::ListOffsets, offsets::LIST_OFFSETS_VERSIONS),
    (ApiKey::Metadata, metadata::VERSIONS),
    (ApiKey::ApiVersions, api_versions::VERSIONS),
    (ApiKey::CreateTopics, topics::CREATE_TOPICS_VERSIONS),
    (ApiKey::DeleteTopics, topics::DELETE_TOPICS_VERSIONS),
    (ApiKey::DeleteRecords, offsets::DELETE_RECORDS_VERSIONS),
    (ApiKey::DescribeConfigs, configs::DESCRIBE_VERSIONS),
    (ApiKey::AlterConfigs, configs::ALTER_VERSIONS),
    (ApiKey::CreatePartitions, topics::CREATE_PARTITIONS_VERSIONS),
    (
        ApiKey::IncrementalAlterConfigs,
        configs::INCREMENTAL_VERSIONS,
    ),
    (ApiKey::DescribeCluster, cluster::DESCRIBE_CLUSTER_VERSIONS),
    (ApiKey::FindCoordinator, groups::FIND_COORDINATOR_VERSIONS),
    (ApiKey::JoinGroup, groups::JOIN_GROUP_VERSIONS),
    (ApiKey::SyncGroup, groups::SYNC_GROUP_VERSIONS),
    (ApiKey::Heartbeat, groups::HEARTBEAT_VERSIONS),
    (ApiKey::LeaveGroup, groups::LEAVE_GROUP_VERSIONS),
    (ApiKey::OffsetCommit, group_offsets::OFFSET_COMMIT_VERSIONS),
    (ApiKey::OffsetFetch, group_offsets::OFFSET_FETCH_VERSIONS),
    (ApiKey::OffsetDelete, group_offsets::OFFSET_DELETE_VERSIONS),
    (ApiKey::ListGroups, group_admin::LIST_GROUPS_VERSIONS),
    (
        ApiKey::DescribeGroups,
        group_admin::DESCRIBE_GROUPS_VERSIONS,
    ),
    (ApiKey::DeleteGroups, group_admin::DELETE_GROUPS_VERSIONS),
    (ApiKey::OffsetForLeaderEpoch, epochs::VERSIONS),
    (ApiKey::InitProducerId, producers::INIT_PRODUCER_ID_VERSIONS),
    (
        ApiKey::DescribeProducers,
        producers::DESCRIBE_PRODUCERS_VERSIONS,
    ),
    (
        ApiKey::DescribeUserScramCredentials,
        users::DESCRIBE_VERSIONS,
    ),
    (ApiKey::AlterUserScramCredentials, users::ALTER_VERSIONS),
    (ApiKey::DescribeClientQuotas, quotas::DESCRIBE_VERSIONS),
    (ApiKey::AlterClientQuotas, quotas::ALTER_VERSIONS),
    (ApiKey::CreateAcls, acls::CREATE_VERSIONS),
    (ApiKey::DescribeAcls, acls::DESCRIBE_VERSIONS),
    (ApiKey::DeleteAcls, acls::DELETE_VERSIONS),
    // Answered by the connection (they change its session): see
    // server::authentication. SaslHandshake v0's exchange follows in bare
    // frames, v1's in SaslAuthenticate requests (librdkafka looks for v0
    // before it uses v1); SaslAuthenticate v1 adds the session lifetime.
    (ApiKey::SaslHandshake, (0, 1)),
    (ApiKey::SaslAuthenticate, (0, 2)),
];

/// Whether `api` is served at `version`.
pub fn is_served(api: ApiKey, version: i16) -> bool {
    SERVED
        .iter()
        .find(|(key, _)| *key == api)
        .is_some_and(|(_, (min, max))| (*min..=*max).contains(&version))
}

/// Answers one request from `caller`. Produce takes the request over
/// (its records become the log's batches, `kafka::record_sets`).
pub async fn handle(
    shard: &Rc<Shard>,
    request: Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let api = request.api_key;
    let version = request.header.request_api_version;
    if api == ApiKey::ApiVersions {
        // Answers even a too-new version (with error 35), as Kafka does.
        let body = api_versions::answer(&request, SERVED);
        return Ok(Outcome::Respond(Frame::of_body(&body)));
    }
    if !is_served(api, version) {
        return Err(HandlerError::NotServed(api, version));
    }
    match api {
        ApiKey::Produce => produce::handle(shard, request, caller).await,
        ApiKey::Fetch => fetch::handle(shard, &request, caller).await,
        ApiKey::ListOffsets => offsets::list_offsets(shard, &request, caller).await,
        ApiKey::Metadata => cluster::metadata(shard, &request, caller).await,
        ApiKey::CreateTopics => topics::create_topics(shard, &request, caller).await,
        ApiKey::DeleteTopics => topics::delete_topics(shard, &request, caller).await,
        ApiKey::DeleteRecords => offsets::delete_records(shard, &request, caller).await,
        ApiKey::DescribeConfigs => configs::describe(shard, &request, caller).await,
        ApiKey::AlterConfigs => configs::alter(shard, &request, caller).await,
        ApiKey::CreatePartitions => topics::create_partitions(shard, &request, caller).await,
        ApiKey::IncrementalAlterConfigs => {
            configs::incremental_alter(shard, &request, caller).await
        }
        ApiKey::DescribeCluster => cluster::describe_cluster(shard, &request, caller).await,
        ApiKey::FindCoordinator => groups::find_coordinator(shard, &request, caller).await,
        ApiKey::JoinGroup => groups::join_group(shard, &request, caller).await,
        ApiKey::SyncGroup => groups::sync_group(shard, &request, caller).await,
        ApiKey::Heartbeat => groups::heartbeat(shard, &request, caller).await,
        ApiKey::LeaveGroup => groups::leave_group(shard, &request, caller).await,
        ApiKey::OffsetCommit => group_offsets::offset_commit(shard, &request, caller).await,
        ApiKey::OffsetFetch => group_offsets::offset_fetch(shard, &request, caller).await,
        ApiKey::OffsetDelete => group_offsets::offset_delete(shard, &request, caller).await,
        ApiKey::ListGroups => group_admin::list_groups(shard, &request, caller).await,
        ApiKey::DescribeGroups => group_admin::describe_groups(shard, &request, caller).await,
        ApiKey::DeleteGroups => group_admin::delete_groups(shard, &request, caller).await,
        ApiKey::OffsetForLeaderEpoch => epochs::handle(shard, &request, caller).await,
        ApiKey::InitProducerId => producers::init_producer_id(shard, &request, caller).await,
        ApiKey::DescribeProducers => producers::describe_producers(shard, &request, caller).await,
        ApiKey::DescribeUserScramCredentials => users::describe(shard, &request, caller).await,
        ApiKey::AlterUserScramCredentials => users::alter(shard, &request, caller).await,
        ApiKey::DescribeClientQuotas => quotas::describe(shard, &request, caller).await,
        ApiKey::AlterClientQuotas => quotas::alter(shard, &request, caller).await,
        ApiKey::CreateAcls => acls::create(shard, &request, caller).await,
        ApiKey::DescribeAcls => acls::describe(shard, &request, caller).await,
        ApiKey::DeleteAcls => acls::delete(shard, &request, caller).await,
        other => Err(HandlerError::NotServed(other, version)),
    }
}
