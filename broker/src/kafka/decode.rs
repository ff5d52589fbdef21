//! Decoding a request body: first the bounds walk (every count and length
//! backed by bytes, see `bounds`), then the codec. The one way handlers
//! decode, and what the fuzz target drives for every API served.

use kafka_protocol::messages::{
    AddRaftVoterRequest, AlterClientQuotasRequest, AlterConfigsRequest,
    AlterPartitionReassignmentsRequest, AlterShareGroupOffsetsRequest,
    AlterUserScramCredentialsRequest, ApiKey, ApiVersionsRequest, ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest, CreateAclsRequest, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteAclsRequest, DeleteGroupsRequest, DeleteRecordsRequest, DeleteShareGroupOffsetsRequest,
    DeleteTopicsRequest, DescribeAclsRequest, DescribeClientQuotasRequest, DescribeClusterRequest,
    DescribeConfigsRequest, DescribeGroupsRequest, DescribeProducersRequest, DescribeQuorumRequest,
    DescribeShareGroupOffsetsRequest, DescribeUserScramCredentialsRequest, ElectLeadersRequest,
    FetchRequest, FindCoordinatorRequest, HeartbeatRequest, IncrementalAlterConfigsRequest,
    InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest,
    ListOffsetsRequest, ListPartitionReassignmentsRequest, MetadataRequest, OffsetCommitRequest,
    OffsetDeleteRequest, OffsetFetchRequest, OffsetForLeaderEpochRequest, ProduceRequest,
    ReadShareGroupStateRequest, RemoveRaftVoterRequest, SaslAuthenticateRequest,
    SaslHandshakeRequest, ShareAcknowledgeRequest, ShareFetchRequest, ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest, SyncGroupRequest, WriteShareGroupStateRequest,
};
use kafka_protocol::protocol::Decodable;

use super::bounds::{self, BoundsError};
use super::request::Request;

/// Why a body does not decode.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// A length or count beyond the body.
    #[error(transparent)]
    Bounds(#[from] BoundsError),
    /// The codec refused it.
    #[error("malformed request: {0}")]
    Malformed(String),
    /// No walker vouches for this API at this version.
    #[error("{0:?} v{1} has no bounds walker")]
    NoWalker(ApiKey, i16),
}

/// A bounds walker for one API.
pub type Walk = fn(&[u8], i16) -> Result<(), BoundsError>;

/// Walks, then decodes, the request's body as `T`.
pub fn checked<T: Decodable>(request: &Request, walk: Walk) -> Result<T, DecodeError> {
    let version = request.header.request_api_version;
    walk(&request.body, version)?;
    T::decode(&mut request.body.clone(), version).map_err(|e| DecodeError::Malformed(e.to_string()))
}

fn no_arrays(_: &[u8], _: i16) -> Result<(), BoundsError> {
    Ok(())
}

/// Decodes the body of any request this broker serves, at its version
/// (Produce v0-2 excepted: see `produce_legacy`). For the fuzz target.
///
/// Long by nature: one arm per API served, pairing its type with its
/// walker; a table read down the page is clearer split in no way.
pub fn decode_any(request: &Request) -> Result<(), DecodeError> {
    let version = request.header.request_api_version;
    let valid = request.api_key.valid_versions();
    if version < valid.min || version > valid.max {
        return Err(DecodeError::NoWalker(request.api_key, version));
    }
    match request.api_key {
        ApiKey::Produce => checked::<ProduceRequest>(request, bounds::check_produce).map(drop),
        ApiKey::Fetch => checked::<FetchRequest>(request, bounds::check_fetch).map(drop),
        ApiKey::ListOffsets => {
            checked::<ListOffsetsRequest>(request, bounds::check_list_offsets).map(drop)
        }
        ApiKey::Metadata => checked::<MetadataRequest>(request, bounds::check_metadata).map(drop),
        ApiKey::ApiVersions => checked::<ApiVersionsRequest>(request, no_arrays).map(drop),
        ApiKey::CreateTopics => {
            checked::<CreateTopicsRequest>(request, bounds::check_create_topics).map(drop)
        }
        ApiKey::DeleteTopics => {
            checked::<DeleteTopicsRequest>(request, bounds::check_delete_topics).map(drop)
        }
        ApiKey::DeleteRecords => {
            checked::<DeleteRecordsRequest>(request, bounds::check_delete_records).map(drop)
        }
        ApiKey::DescribeConfigs => {
            checked::<DescribeConfigsRequest>(request, bounds::check_describe_configs).map(drop)
        }
        ApiKey::AlterConfigs => {
            checked::<AlterConfigsRequest>(request, bounds::check_alter_configs).map(drop)
        }
        ApiKey::CreatePartitions => {
            checked::<CreatePartitionsRequest>(request, bounds::check_create_partitions).map(drop)
        }
        ApiKey::ElectLeaders => {
            checked::<ElectLeadersRequest>(request, bounds::check_elect_leaders).map(drop)
        }
        ApiKey::AlterPartitionReassignments => checked::<AlterPartitionReassignmentsRequest>(
            request,
            bounds::check_alter_partition_reassignments,
        )
        .map(drop),
        ApiKey::ListPartitionReassignments => checked::<ListPartitionReassignmentsRequest>(
            request,
            bounds::check_list_partition_reassignments,
        )
        .map(drop),
        ApiKey::DescribeQuorum => {
            checked::<DescribeQuorumRequest>(request, bounds::check_describe_quorum).map(drop)
        }
        ApiKey::AddRaftVoter => {
            checked::<AddRaftVoterRequest>(request, bounds::check_add_raft_voter).map(drop)
        }
        ApiKey::RemoveRaftVoter => {
            checked::<RemoveRaftVoterRequest>(request, bounds::check_remove_raft_voter).map(drop)
        }
        ApiKey::IncrementalAlterConfigs => checked::<IncrementalAlterConfigsRequest>(
            request,
            bounds::check_incremental_alter_configs,
        )
        .map(drop),
        ApiKey::DescribeCluster => {
            checked::<DescribeClusterRequest>(request, bounds::check_describe_cluster).map(drop)
        }
        ApiKey::FindCoordinator => {
            checked::<FindCoordinatorRequest>(request, bounds::check_find_coordinator).map(drop)
        }
        ApiKey::JoinGroup => {
            checked::<JoinGroupRequest>(request, bounds::check_join_group).map(drop)
        }
        ApiKey::SyncGroup => {
            checked::<SyncGroupRequest>(request, bounds::check_sync_group).map(drop)
        }
        ApiKey::Heartbeat => {
            checked::<HeartbeatRequest>(request, bounds::check_heartbeat).map(drop)
        }
        ApiKey::LeaveGroup => {
            checked::<LeaveGroupRequest>(request, bounds::check_leave_group).map(drop)
        }
        ApiKey::OffsetCommit => {
            checked::<OffsetCommitRequest>(request, bounds::check_offset_commit).map(drop)
        }
        ApiKey::OffsetFetch => {
            checked::<OffsetFetchRequest>(request, bounds::check_offset_fetch).map(drop)
        }
        ApiKey::OffsetDelete => {
            checked::<OffsetDeleteRequest>(request, bounds::check_offset_delete).map(drop)
        }
        ApiKey::ListGroups => {
            checked::<ListGroupsRequest>(request, bounds::check_list_groups).map(drop)
        }
        ApiKey::DescribeGroups => {
            checked::<DescribeGroupsRequest>(request, bounds::check_describe_groups).map(drop)
        }
        ApiKey::DeleteGroups => {
            checked::<DeleteGroupsRequest>(request, bounds::check_delete_groups).map(drop)
        }
        ApiKey::OffsetForLeaderEpoch => {
            checked::<OffsetForLeaderEpochRequest>(request, bounds::check_offset_for_leader_epoch)
                .map(drop)
        }
        ApiKey::InitProducerId => {
            checked::<InitProducerIdRequest>(request, bounds::check_init_producer_id).map(drop)
        }
        ApiKey::DescribeProducers => {
            checked::<DescribeProducersRequest>(request, bounds::check_describe_producers).map(drop)
        }
        ApiKey::SaslHandshake => {
            checked::<SaslHandshakeRequest>(request, bounds::check_sasl_handshake).map(drop)
        }
        ApiKey::SaslAuthenticate => {
            checked::<SaslAuthenticateRequest>(request, bounds::check_sasl_authenticate).map(drop)
        }
        ApiKey::DescribeUserScramCredentials => checked::<DescribeUserScramCredentialsRequest>(
            request,
            bounds::check_describe_user_scram_credentials,
        )
        .map(drop),
        ApiKey::AlterUserScramCredentials => checked::<AlterUserScramCredentialsRequest>(
            request,
            bounds::check_alter_user_scram_credentials,
        )
        .map(drop),
        ApiKey::CreateAcls => {
            checked::<CreateAclsRequest>(request, bounds::check_create_acls).map(drop)
        }
        ApiKey::DescribeAcls => {
            checked::<DescribeAclsRequest>(request, bounds::check_describe_acls).map(drop)
        }
        ApiKey::DeleteAcls => {
            checked::<DeleteAclsRequest>(request, bounds::check_delete_acls).map(drop)
        }
        ApiKey::DescribeClientQuotas => {
            checked::<DescribeClientQuotasRequest>(request, bounds::check_describe_client_quotas)
                .map(drop)
        }
        ApiKey::AlterClientQuotas => {
            checked::<AlterClientQuotasRequest>(request, bounds::check_alter_client_quotas)
                .map(drop)
        }
        ApiKey::ConsumerGroupHeartbeat => checked::<ConsumerGroupHeartbeatRequest>(
            request,
            bounds::check_consumer_group_heartbeat,
        )
        .map(drop),
        ApiKey::ShareGroupHeartbeat => {
            checked::<ShareGroupHeartbeatRequest>(request, bounds::check_share_group_heartbeat)
                .map(drop)
        }
        ApiKey::ShareFetch => {
            checked::<ShareFetchRequest>(request, bounds::check_share_fetch).map(drop)
        }
        ApiKey::ShareAcknowledge => {
            checked::<ShareAcknowledgeRequest>(request, bounds::check_share_acknowledge).map(drop)
        }
        ApiKey::ReadShareGroupState => {
            checked::<ReadShareGroupStateRequest>(request, bounds::check_read_share_group_state)
                .map(drop)
        }
        ApiKey::WriteShareGroupState => {
            checked::<WriteShareGroupStateRequest>(request, bounds::check_write_share_group_state)
                .map(drop)
        }
        ApiKey::DescribeShareGroupOffsets => checked::<DescribeShareGroupOffsetsRequest>(
            request,
            bounds::check_describe_share_group_offsets,
        )
        .map(drop),
        ApiKey::AlterShareGroupOffsets => checked::<AlterShareGroupOffsetsRequest>(
            request,
            bounds::check_alter_share_group_offsets,
        )
        .map(drop),
        ApiKey::DeleteShareGroupOffsets => checked::<DeleteShareGroupOffsetsRequest>(
            request,
            bounds::check_delete_share_group_offsets,
        )
        .map(drop),
        ApiKey::ShareGroupDescribe => {
            checked::<ShareGroupDescribeRequest>(request, bounds::check_share_group_describe)
                .map(drop)
        }
        ApiKey::ConsumerGroupDescribe => {
            checked::<ConsumerGroupDescribeRequest>(request, bounds::check_consumer_group_describe)
                .map(drop)
        }
        other => Err(DecodeError::NoWalker(other, version)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::request::parse;

    /// The fuzzer's seeds are valid requests: each walks and decodes (a
    /// seed that does not would only exercise the error paths).
    #[test]
    fn every_fuzz_seed_decodes() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/request_decoder");
        let mut checked_seeds = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let frame = bytes::Bytes::from(std::fs::read(&path).unwrap());
            let request = parse(frame).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            let legacy_produce =
                request.api_key == ApiKey::Produce && request.header.request_api_version < 3;
            if !legacy_produce {
                decode_any(&request).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            }
            checked_seeds += 1;
        }
        assert!(checked_seeds >= 28, "{checked_seeds} seeds");
    }
}
