//! The Kafka API handlers. Each one bounds-checks its request body (see
//! `kafka::bounds`), decodes it, does its work (per partition on the owning
//! shard), and encodes the answer. A request that cannot be answered is an
//! error, and the connection is closed.

mod cluster;
mod configs;
mod fetch;
mod offsets;
mod produce;
pub mod routing;
mod topics;

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;

use crate::kafka::bounds::BoundsError;
use crate::kafka::decode::DecodeError;
use crate::kafka::request::Request;
use crate::kafka::response::EncodeError;
use crate::kafka::{api_versions, metadata};
use crate::server::shard::Shard;

/// What a handler gives back.
pub enum Outcome {
    /// The response frame body.
    Respond(Bytes),
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
];

/// Answers one request.
pub async fn handle(shard: &Rc<Shard>, request: &Request) -> Result<Outcome, HandlerError> {
    let api = request.api_key;
    let version = request.header.request_api_version;
    if api == ApiKey::ApiVersions {
        // Answers even a too-new version (with error 35), as Kafka does.
        return Ok(Outcome::Respond(api_versions::answer(request, SERVED)));
    }
    let served = SERVED
        .iter()
        .find(|(key, _)| *key == api)
        .is_some_and(|(_, (min, max))| (*min..=*max).contains(&version));
    if !served {
        return Err(HandlerError::NotServed(api, version));
    }
    match api {
        ApiKey::Produce => produce::handle(shard, request).await,
        ApiKey::Fetch => fetch::handle(shard, request).await,
        ApiKey::ListOffsets => offsets::list_offsets(shard, request).await,
        ApiKey::Metadata => cluster::metadata(shard, request).await,
        ApiKey::CreateTopics => topics::create_topics(shard, request).await,
        ApiKey::DeleteTopics => topics::delete_topics(shard, request).await,
        ApiKey::DeleteRecords => offsets::delete_records(shard, request).await,
        ApiKey::DescribeConfigs => configs::describe(shard, request).await,
        ApiKey::AlterConfigs => configs::alter(shard, request).await,
        ApiKey::CreatePartitions => topics::create_partitions(shard, request).await,
        ApiKey::IncrementalAlterConfigs => configs::incremental_alter(shard, request).await,
        ApiKey::DescribeCluster => cluster::describe_cluster(shard, request).await,
        other => Err(HandlerError::NotServed(other, version)),
    }
}
