//! The Kafka API handlers. Each one bounds-checks its request body (see
//! `kafka::bounds`), decodes it, does its work (per partition on the owning
//! shard), and encodes the answer. A request that cannot be answered is an
//! error, and the connection is closed.

pub mod access;
mod acls;
mod broker_configs;
mod cluster;
mod config_changes;
mod configs;
mod consumer_group_describe;
mod consumer_groups;
mod elect_leaders;
mod epochs;
mod fetch;
mod group_admin;
mod group_configs;
mod group_offsets;
mod groups;
mod metadata;
mod offsets;
mod produce;
mod producers;
mod quorum;
mod quotas;
mod reassignments;
mod share_acknowledge;
mod share_fetch;
mod share_group_describe;
mod share_group_offsets;
mod share_groups;
mod share_sessions;
mod share_state;
mod topics;
mod transactions;
mod txn_admin;
mod txn_markers;
mod txn_offsets;
mod users;

use std::rc::Rc;

use kafka_protocol::messages::ApiKey;

use access::Caller;

use crate::kafka::api_versions;
use crate::kafka::bounds::BoundsError;
use crate::kafka::decode::DecodeError;
use crate::kafka::request::Request;
use crate::kafka::response::{EncodeError, Frame};
use crate::server::shard::Shard;

pub use share_sessions::connection_closed;

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

/// Declares each API once, with its versions and its handler, and
/// generates from that one list both what ApiVersions advertises
/// ([`SERVED`]) and the dispatch ([`dispatch`]): an API cannot be
/// advertised without a handler, or handled without being advertised.
/// The second list holds the APIs the connection itself answers (they
/// change its session: see `server::connection::authentication`).
macro_rules! apis {
    (
        handled: { $( $api:ident $versions:expr => |$shard:ident, $request:ident, $caller:ident| $call:expr; )* }
        by_connection: { $( $conn_api:ident $conn_versions:expr; )* }
    ) => {
        /// The APIs served with their versions: what ApiVersions advertises.
        pub const SERVED: &[(ApiKey, (i16, i16))] = &[
            (ApiKey::ApiVersions, api_versions::VERSIONS),
            $( (ApiKey::$api, $versions), )*
            $( (ApiKey::$conn_api, $conn_versions), )*
        ];

        /// Runs the handler of `request`'s API (already checked to be served).
        async fn dispatch(
            shard: &Rc<Shard>,
            request: Request,
            caller: &Caller<'_>,
        ) -> Result<Outcome, HandlerError> {
            let version = request.header.request_api_version;
            match request.api_key {
                $( ApiKey::$api => {
                    let ($shard, $request, $caller) = (shard, request, caller);
                    $call.await
                } )*
                other => Err(HandlerError::NotServed(other, version)),
            }
        }
    };
}

apis! {
    handled: {
        // Produce takes the request over (its records become the log's
        // batches, `kafka::record_sets`).
        Produce produce::VERSIONS => |s, r, c| produce::handle(s, r, c);
        Fetch fetch::VERSIONS => |s, r, c| fetch::handle(s, &r, c);
        ListOffsets offsets::LIST_OFFSETS_VERSIONS => |s, r, c| offsets::list_offsets(s, &r, c);
        Metadata metadata::VERSIONS => |s, r, c| metadata::metadata(s, &r, c);
        CreateTopics topics::CREATE_TOPICS_VERSIONS => |s, r, c| topics::create_topics(s, &r, c);
        DeleteTopics topics::DELETE_TOPICS_VERSIONS => |s, r, c| topics::delete_topics(s, &r, c);
        DeleteRecords offsets::DELETE_RECORDS_VERSIONS => |s, r, c| offsets::delete_records(s, &r, c);
        DescribeConfigs configs::DESCRIBE_VERSIONS => |s, r, c| configs::describe(s, &r, c);
        AlterConfigs configs::ALTER_VERSIONS => |s, r, c| configs::alter(s, &r, c);
        CreatePartitions topics::CREATE_PARTITIONS_VERSIONS
            => |s, r, c| topics::create_partitions(s, &r, c);
        IncrementalAlterConfigs configs::INCREMENTAL_VERSIONS
            => |s, r, c| configs::incremental_alter(s, &r, c);
        ElectLeaders elect_leaders::VERSIONS => |s, r, c| elect_leaders::handle(s, &r, c);
        DescribeQuorum quorum::DESCRIBE_VERSIONS => |s, r, c| quorum::describe(s, &r, c);
        AddRaftVoter quorum::ADD_VERSIONS => |s, r, c| quorum::add(s, &r, c);
        RemoveRaftVoter quorum::REMOVE_VERSIONS => |s, r, c| quorum::remove(s, &r, c);
        AlterPartitionReassignments reassignments::ALTER_VERSIONS
            => |s, r, c| reassignments::alter(s, &r, c);
        ListPartitionReassignments reassignments::LIST_VERSIONS
            => |s, r, c| reassignments::list(s, &r, c);
        DescribeCluster cluster::DESCRIBE_CLUSTER_VERSIONS
            => |s, r, c| cluster::describe_cluster(s, &r, c);
        FindCoordinator groups::FIND_COORDINATOR_VERSIONS
            => |s, r, c| groups::find_coordinator(s, &r, c);
        JoinGroup groups::JOIN_GROUP_VERSIONS => |s, r, c| groups::join_group(s, &r, c);
        SyncGroup groups::SYNC_GROUP_VERSIONS => |s, r, c| groups::sync_group(s, &r, c);
        Heartbeat groups::HEARTBEAT_VERSIONS => |s, r, c| groups::heartbeat(s, &r, c);
        LeaveGroup groups::LEAVE_GROUP_VERSIONS => |s, r, c| groups::leave_group(s, &r, c);
        ConsumerGroupHeartbeat consumer_groups::HEARTBEAT_VERSIONS
            => |s, r, c| consumer_groups::heartbeat(s, &r, c);
        ConsumerGroupDescribe consumer_group_describe::DESCRIBE_VERSIONS
            => |s, r, c| consumer_group_describe::describe(s, &r, c);
        ShareGroupHeartbeat share_groups::HEARTBEAT_VERSIONS
            => |s, r, c| share_groups::heartbeat(s, &r, c);
        ShareFetch share_fetch::VERSIONS => |s, r, c| share_fetch::handle(s, &r, c);
        ShareAcknowledge share_acknowledge::VERSIONS => |s, r, c| share_acknowledge::handle(s, &r, c);
        ReadShareGroupState share_state::VERSIONS => |s, r, c| share_state::read(s, &r, c);
        WriteShareGroupState share_state::VERSIONS => |s, r, c| share_state::write(s, &r, c);
        ShareGroupDescribe share_group_describe::DESCRIBE_VERSIONS
            => |s, r, c| share_group_describe::describe(s, &r, c);
        DescribeShareGroupOffsets share_group_offsets::VERSIONS
            => |s, r, c| share_group_offsets::describe(s, &r, c);
        AlterShareGroupOffsets share_group_offsets::VERSIONS
            => |s, r, c| share_group_offsets::alter(s, &r, c);
        DeleteShareGroupOffsets share_group_offsets::VERSIONS
            => |s, r, c| share_group_offsets::delete(s, &r, c);
        OffsetCommit group_offsets::OFFSET_COMMIT_VERSIONS
            => |s, r, c| group_offsets::offset_commit(s, &r, c);
        OffsetFetch group_offsets::OFFSET_FETCH_VERSIONS
            => |s, r, c| group_offsets::offset_fetch(s, &r, c);
        OffsetDelete group_offsets::OFFSET_DELETE_VERSIONS
            => |s, r, c| group_offsets::offset_delete(s, &r, c);
        ListGroups group_admin::LIST_GROUPS_VERSIONS => |s, r, c| group_admin::list_groups(s, &r, c);
        DescribeGroups group_admin::DESCRIBE_GROUPS_VERSIONS
            => |s, r, c| group_admin::describe_groups(s, &r, c);
        DeleteGroups group_admin::DELETE_GROUPS_VERSIONS
            => |s, r, c| group_admin::delete_groups(s, &r, c);
        OffsetForLeaderEpoch epochs::VERSIONS => |s, r, c| epochs::handle(s, &r, c);
        InitProducerId producers::INIT_PRODUCER_ID_VERSIONS
            => |s, r, c| producers::init_producer_id(s, &r, c);
        DescribeProducers producers::DESCRIBE_PRODUCERS_VERSIONS
            => |s, r, c| producers::describe_producers(s, &r, c);
        AddPartitionsToTxn transactions::ADD_PARTITIONS_VERSIONS
            => |s, r, c| transactions::add_partitions(s, &r, c);
        AddOffsetsToTxn transactions::ADD_OFFSETS_VERSIONS
            => |s, r, c| transactions::add_offsets(s, &r, c);
        EndTxn transactions::END_TXN_VERSIONS => |s, r, c| transactions::end_txn(s, &r, c);
        WriteTxnMarkers txn_markers::VERSIONS => |s, r, c| txn_markers::handle(s, &r, c);
        TxnOffsetCommit txn_offsets::VERSIONS => |s, r, c| txn_offsets::handle(s, &r, c);
        ListTransactions txn_admin::LIST_VERSIONS => |s, r, c| txn_admin::list(s, &r, c);
        DescribeTransactions txn_admin::DESCRIBE_VERSIONS
            => |s, r, c| txn_admin::describe(s, &r, c);
        DescribeUserScramCredentials users::DESCRIBE_VERSIONS => |s, r, c| users::describe(s, &r, c);
        AlterUserScramCredentials users::ALTER_VERSIONS => |s, r, c| users::alter(s, &r, c);
        DescribeClientQuotas quotas::DESCRIBE_VERSIONS => |s, r, c| quotas::describe(s, &r, c);
        AlterClientQuotas quotas::ALTER_VERSIONS => |s, r, c| quotas::alter(s, &r, c);
        CreateAcls acls::CREATE_VERSIONS => |s, r, c| acls::create(s, &r, c);
        DescribeAcls acls::DESCRIBE_VERSIONS => |s, r, c| acls::describe(s, &r, c);
        DeleteAcls acls::DELETE_VERSIONS => |s, r, c| acls::delete(s, &r, c);
    }
    by_connection: {
        // SaslHandshake v0's exchange follows in bare frames, v1's in
        // SaslAuthenticate requests (librdkafka looks for v0 before it
        // uses v1); SaslAuthenticate v1 adds the session lifetime.
        SaslHandshake (0, 1);
        SaslAuthenticate (0, 2);
    }
}

/// Whether `api` is served at `version`.
pub fn is_served(api: ApiKey, version: i16) -> bool {
    SERVED
        .iter()
        .find(|(key, _)| *key == api)
        .is_some_and(|(_, (min, max))| (*min..=*max).contains(&version))
}

/// Answers one request from `caller`.
pub async fn handle(
    shard: &Rc<Shard>,
    request: Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let api = request.api_key;
    let version = request.header.request_api_version;
    if api == ApiKey::ApiVersions {
        // Answers even a too-new version (with error 35), as Kafka does.
        let level = shard.cluster.config.transaction_version;
        let body = api_versions::answer(&request, SERVED, level);
        return Ok(Outcome::Respond(Frame::of_body(&body)));
    }
    if !is_served(api, version) {
        return Err(HandlerError::NotServed(api, version));
    }
    dispatch(shard, request, caller).await
}
