//! The metadata quorum's members, as Kafka's KIP-853 tools see them:
//! DescribeQuorum (the leader, its term, the voters and observers),
//! AddRaftVoter (an observer becomes a voter) and RemoveRaftVoter (a voter
//! becomes an observer, still following the metadata log). Any broker answers, through
//! its own metadata node, which forwards changes to the active controller.
//!
//! A voter added here must already be an observer: a broker outside
//! `controller_quorum_voters` joins as one by itself and records its
//! metadata listener then, so the listeners an AddRaftVoter carries are
//! not needed (and not checked); nor are directory ids, which this quorum
//! does not have.

use std::rc::Rc;
use std::time::{Duration, Instant};

use control::model::acls::Operation;
use control::service::{ControllerError, ControllerRequest, QuorumStatus};
use kafka_protocol::messages::describe_quorum_response::{PartitionData, ReplicaState, TopicData};
use kafka_protocol::messages::{
    AddRaftVoterRequest, AddRaftVoterResponse, BrokerId, DescribeQuorumRequest,
    DescribeQuorumResponse, RemoveRaftVoterRequest, RemoveRaftVoterResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::access::{Caller, CLUSTER_DENIED};
use super::{HandlerError, Outcome};
use crate::cluster::controller::controller_error;
use crate::kafka::bounds::{check_add_raft_voter, check_describe_quorum, check_remove_raft_voter};
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::server::shard::Shard;

/// DescribeQuorum v0-2 (flexible throughout; v2 adds the nodes).
pub const DESCRIBE_VERSIONS: (i16, i16) = (0, 2);
/// AddRaftVoter v0.
pub const ADD_VERSIONS: (i16, i16) = (0, 0);
/// RemoveRaftVoter v0.
pub const REMOVE_VERSIONS: (i16, i16) = (0, 0);

/// The metadata log's name in Kafka's tools.
const METADATA_TOPIC: &str = "__cluster_metadata";
/// How long a removal may wait for the leadership hand-over it needs.
const REMOVE_WAIT_MAX: Duration = Duration::from_secs(10);
/// Between two attempts of a change the controller asked to retry.
const RETRY_EVERY: Duration = Duration::from_millis(100);

/// Answers DescribeQuorum from this broker's metadata node.
pub async fn describe(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let _: DescribeQuorumRequest = checked(request, check_describe_quorum)?;
    if !caller.may_cluster(Operation::Describe) {
        let refused = DescribeQuorumResponse::default().with_error_code(CLUSTER_DENIED);
        return super::respond(request, &refused);
    }
    let answer = match shard.cluster.quorum_status().await {
        Some(status) => described(&status),
        None => DescribeQuorumResponse::default()
            .with_error_code(ResponseError::BrokerNotAvailable.code())
            .with_error_message(Some(StrBytes::from_static_str("the broker is stopping"))),
    };
    super::respond(request, &answer)
}

/// The quorum as DescribeQuorum carries it: the term is the leader epoch,
/// the commit index the high watermark, a member's matched index (known
/// only on the leader, else -1) its log end.
fn described(status: &QuorumStatus) -> DescribeQuorumResponse {
    let replica = |id: &u64| {
        let matched = status.matched.get(id).map_or(-1, |&m| m as i64);
        ReplicaState::default()
            .with_replica_id(BrokerId(*id as i32))
            .with_log_end_offset(matched)
            .with_last_fetch_timestamp(-1)
            .with_last_caught_up_timestamp(-1)
    };
    let partition = PartitionData::default()
        .with_partition_index(0)
        .with_leader_id(BrokerId(status.leader.map_or(-1, |l| l as i32)))
        .with_leader_epoch(status.term as i32)
        .with_high_watermark(status.committed as i64)
        .with_current_voters(status.members.voters.iter().map(replica).collect())
        .with_observers(status.members.learners.iter().map(replica).collect());
    let topic = TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
        .with_partitions(vec![partition]);
    DescribeQuorumResponse::default().with_topics(vec![topic])
}

/// Answers AddRaftVoter: the observer named becomes a voter once it has
/// caught up (waiting up to the request's timeout for it to).
pub async fn add(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: AddRaftVoterRequest = checked(request, check_add_raft_voter)?;
    let (code, message) = match refusal(shard, caller, decoded.cluster_id.as_deref()) {
        Some(refused) => refused,
        None if decoded.voter_id < 0 => invalid_voter(decoded.voter_id),
        None => {
            let node = decoded.voter_id as u64;
            let wait = Duration::from_millis(decoded.timeout_ms.clamp(0, 60_000) as u64);
            change(shard, ControllerRequest::AddVoter { node }, wait).await
        }
    };
    let answer = AddRaftVoterResponse::default()
        .with_error_code(code)
        .with_error_message(message.map(StrBytes::from_string));
    super::respond(request, &answer)
}

/// Answers RemoveRaftVoter: the voter named becomes an observer (the
/// leader hands its leadership over first); an observer named is left as
/// it is.
pub async fn remove(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: RemoveRaftVoterRequest = checked(request, check_remove_raft_voter)?;
    let (code, message) = match refusal(shard, caller, decoded.cluster_id.as_deref()) {
        Some(refused) => refused,
        None => {
            let node = decoded.voter_id.max(0) as u64;
            change(
                shard,
                ControllerRequest::RemoveVoter { node },
                REMOVE_WAIT_MAX,
            )
            .await
        }
    };
    let answer = RemoveRaftVoterResponse::default()
        .with_error_code(code)
        .with_error_message(message.map(StrBytes::from_string));
    super::respond(request, &answer)
}

fn invalid_voter(id: i32) -> (Code, Option<String>) {
    (
        ResponseError::InvalidRequest.code(),
        Some(format!("voter id {id} is negative")),
    )
}

/// Why a change is refused before it is tried: not authorized, or meant
/// for another cluster.
fn refusal(
    shard: &Shard,
    caller: &Caller<'_>,
    cluster_id: Option<&str>,
) -> Option<(Code, Option<String>)> {
    if !caller.may_cluster(Operation::Alter) {
        return Some((
            CLUSTER_DENIED,
            Some("not authorized to alter the cluster".into()),
        ));
    }
    let ours = crate::server::cluster_id(&shard.cluster.view.borrow().metadata);
    match cluster_id {
        // Kafka's tools send none; an empty one is none too.
        Some(theirs) if !theirs.is_empty() && theirs != ours => Some((
            ResponseError::InconsistentClusterId.code(),
            Some(format!("this is cluster {ours}, not {theirs}")),
        )),
        _ => None,
    }
}

/// Asks the controller for a membership change, again while it answers
/// "not yet" (a leadership hand-over under way, an observer catching up),
/// for at most `wait`.
async fn change(
    shard: &Shard,
    request: ControllerRequest,
    wait: Duration,
) -> (Code, Option<String>) {
    let started = Instant::now();
    loop {
        let outcome = shard.cluster.call_controller(request.clone()).await;
        let retry = matches!(
            outcome,
            Err(ControllerError::Superseded
                | ControllerError::NotController { .. }
                | ControllerError::Refused(control::MetadataError::QuorumMemberBehind { .. }))
        );
        match outcome {
            Ok(()) => return (0, None),
            Err(e) if !retry || started.elapsed() >= wait => {
                let (code, message) = controller_error(&e);
                return (code, Some(message));
            }
            Err(_) => glommio::timer::sleep(RETRY_EVERY).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use control::raft::node::Members;

    #[test]
    fn the_quorum_is_described_as_kafka_tools_read_it() {
        let status = QuorumStatus {
            leader: Some(2),
            term: 7,
            committed: 120,
            members: Members {
                voters: vec![1, 2, 3],
                learners: vec![4],
            },
            matched: [(1, 120), (2, 120), (3, 118), (4, 90)].into(),
        };
        let answer = described(&status);
        let partition = &answer.topics[0].partitions[0];
        assert_eq!(answer.topics[0].topic_name.as_str(), METADATA_TOPIC);
        assert_eq!(
            (
                partition.leader_id.0,
                partition.leader_epoch,
                partition.high_watermark
            ),
            (2, 7, 120)
        );
        let ends: Vec<(i32, i64)> = partition
            .current_voters
            .iter()
            .map(|r| (r.replica_id.0, r.log_end_offset))
            .collect();
        assert_eq!(ends, vec![(1, 120), (2, 120), (3, 118)]);
        assert_eq!(partition.observers[0].replica_id.0, 4);
        let follower = described(&QuorumStatus {
            matched: Default::default(),
            leader: None,
            ..status
        });
        let partition = &follower.topics[0].partitions[0];
        assert_eq!(partition.leader_id.0, -1, "no leader known");
        assert_eq!(partition.current_voters[0].log_end_offset, -1, "unknown");
    }
}
