//! ElectLeaders (preferred): partitions go back to their preferred
//! replica (the first in their replica list) where it is live and in sync
//! (control's `controller::preferred`).
//!
//! Each partition is answered from this broker's view: already led by its
//! preferred replica (ELECTION_NOT_NEEDED), the replica fenced or out of
//! sync (PREFERRED_LEADER_NOT_AVAILABLE), or elected (once this shard's
//! metadata shows it). Asked for every partition (a null list), those
//! that need nothing are left out of the answer, as Kafka does.

use std::rc::Rc;

use control::controller::preferred::{preferred_election, NotElected};
use control::model::acls::Operation;
use control::service::ControllerRequest;
use control::{Metadata, PartitionId};
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::access::{Caller, CLUSTER_DENIED};
use super::{HandlerError, Outcome};
use crate::cluster::controller::controller_error;
use crate::kafka::bounds::check_elect_leaders;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::{response, Code};
use crate::server::shard::Shard;

/// v0-2 (flexible from v2; v1 adds the election type and a top-level error).
pub const VERSIONS: (i16, i16) = (0, 2);

/// ElectionType 0: the preferred replica.
const PREFERRED: i8 = 0;

/// One partition's answer: its error code and why.
type Answer = (Code, Option<String>);

/// Answers ElectLeaders.
pub async fn handle(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: ElectLeadersRequest = checked(request, check_elect_leaders)?;
    let named = decoded.topic_partitions.as_ref().map(|topics| {
        topics
            .iter()
            .map(|t| (t.topic.as_str().to_string(), t.partitions.clone()))
            .collect::<Vec<_>>()
    });
    let refusal = if !caller.may_cluster(Operation::Alter) {
        Some((CLUSTER_DENIED, "not authorized to alter the cluster"))
    } else if decoded.election_type != PREFERRED {
        Some((
            ResponseError::InvalidRequest.code(),
            "only preferred elections are served; a topic allows unclean ones with \
             unclean.leader.election.enable",
        ))
    } else {
        None
    };
    let (error_code, results) = match refusal {
        Some((code, why)) => {
            let answer = (code, Some(why.to_string()));
            let results = named
                .unwrap_or_default()
                .into_iter()
                .map(|(topic, partitions)| {
                    let answers = partitions
                        .into_iter()
                        .map(|p| (p, answer.clone()))
                        .collect();
                    (topic, answers)
                })
                .collect();
            (code, results)
        }
        None => (0, elect_preferred(shard, named).await),
    };
    let answer = ElectLeadersResponse::default()
        .with_error_code(error_code)
        .with_replica_election_results(encode_results(results));
    Ok(Outcome::Respond(response::encode(
        request.header.correlation_id,
        version,
        &answer,
    )?))
}

/// Per topic, each partition's answer.
type Results = Vec<(String, Vec<(i32, Answer)>)>;

/// Elects the eligible partitions of those `named` (None: all) and
/// answers each.
async fn elect_preferred(shard: &Rc<Shard>, named: Option<Vec<(String, Vec<i32>)>>) -> Results {
    let every = named.is_none();
    let wanted = named.unwrap_or_else(|| every_partition(&shard.cluster.view.borrow().metadata));
    let before = classify(&shard.cluster.view.borrow().metadata, &wanted);
    let eligible: Vec<(String, Vec<i32>)> = before
        .iter()
        .map(|(topic, answers)| {
            let ids = answers
                .iter()
                .filter(|(_, outcome)| outcome.is_ok())
                .map(|(id, _)| *id)
                .collect();
            (topic.clone(), ids)
        })
        .filter(|(_, ids): &(String, Vec<i32>)| !ids.is_empty())
        .collect();
    let called = if eligible.is_empty() {
        Ok(())
    } else {
        let request = ControllerRequest::ElectPreferredLeaders {
            partitions: Some(eligible.clone()),
        };
        shard.cluster.call_controller(request).await
    };
    if called.is_ok() {
        shard
            .cluster
            .catch_up(|m| classify(m, &eligible).iter().all(all_led_by_preferred))
            .await;
    }
    let after = classify(&shard.cluster.view.borrow().metadata, &wanted);
    before
        .into_iter()
        .zip(after)
        .map(|((topic, was), (_, now))| {
            let answers = was
                .into_iter()
                .zip(now)
                .filter_map(|((id, was), (_, now))| {
                    let answer = answer_for(was, now, &called)?;
                    // Asked for all, only what needed an election is told.
                    let not_needed = answer.0 == ResponseError::ElectionNotNeeded.code();
                    (!(every && not_needed)).then_some((id, answer))
                })
                .collect();
            (topic, answers)
        })
        .filter(|(_, answers): &(String, Vec<_>)| !every || !answers.is_empty())
        .collect()
}

/// Where each partition named stands: Ok if its preferred replica can be
/// elected now, else why not (None: no such partition).
type Standing = Result<(), Option<NotElected>>;

fn classify(
    metadata: &Metadata,
    wanted: &[(String, Vec<i32>)],
) -> Vec<(String, Vec<(i32, Standing)>)> {
    wanted
        .iter()
        .map(|(name, ids)| {
            let topic = metadata.topic_by_name(name).ok();
            let standings = ids
                .iter()
                .map(|&id| {
                    let partition = topic.and_then(|t| {
                        let p = usize::try_from(id).ok().and_then(|i| t.partitions.get(i))?;
                        Some((t.id, p))
                    });
                    let standing = match partition {
                        None => Err(None),
                        Some((topic, p)) => preferred_election(metadata, topic, PartitionId(id), p)
                            .map(drop)
                            .map_err(Some),
                    };
                    (id, standing)
                })
                .collect();
            (name.clone(), standings)
        })
        .collect()
}

fn all_led_by_preferred((_, standings): &(String, Vec<(i32, Standing)>)) -> bool {
    standings
        .iter()
        .all(|(_, s)| *s == Err(Some(NotElected::Leads)))
}

/// A partition's answer from where it stood before the election and after.
fn answer_for(
    was: Standing,
    now: Standing,
    called: &Result<(), control::service::ControllerError>,
) -> Option<Answer> {
    let message = |code: Code, why: &str| Some((code, Some(why.to_string())));
    match (was, now) {
        (Err(None), _) => message(
            ResponseError::UnknownTopicOrPartition.code(),
            "no such topic or partition",
        ),
        (Err(Some(NotElected::Leads)), _) => Some((ResponseError::ElectionNotNeeded.code(), None)),
        (Err(Some(NotElected::Unavailable)), _) => message(
            ResponseError::PreferredLeaderNotAvailable.code(),
            "the preferred replica is fenced or not in sync",
        ),
        (Ok(()), Err(Some(NotElected::Leads))) => Some((0, None)),
        (Ok(()), _) => match called {
            Err(e) => {
                let (code, why) = controller_error(e);
                Some((code, Some(why)))
            }
            Ok(()) => message(
                ResponseError::PreferredLeaderNotAvailable.code(),
                "not elected: the partition changed before the election (try again)",
            ),
        },
    }
}

/// Every partition this broker knows, by topic.
fn every_partition(metadata: &Metadata) -> Vec<(String, Vec<i32>)> {
    metadata
        .topics
        .values()
        .map(|t| (t.name.clone(), (0..t.partitions.len() as i32).collect()))
        .collect()
}

fn encode_results(results: Results) -> Vec<ReplicaElectionResult> {
    results
        .into_iter()
        .map(|(topic, answers)| {
            let partitions = answers
                .into_iter()
                .map(|(id, (code, message))| {
                    PartitionResult::default()
                        .with_partition_id(id)
                        .with_error_code(code)
                        .with_error_message(message.map(StrBytes::from_string))
                })
                .collect();
            ReplicaElectionResult::default()
                .with_topic(TopicName(StrBytes::from_string(topic)))
                .with_partition_result(partitions)
        })
        .collect()
}
