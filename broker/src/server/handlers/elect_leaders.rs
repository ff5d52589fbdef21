//! ElectLeaders: partitions go back to their preferred replica (the
//! first in their replica list) where it is live and in sync (type
//! PREFERRED, control's `controller::preferred`), or partitions without a
//! leader get one, from outside the ISR if none in it is live (type
//! UNCLEAN, `controller::unclean`: an operator's choice of availability
//! over what the ISR held).
//!
//! Each partition is answered from this broker's view: nothing to do
//! (ELECTION_NOT_NEEDED), no replica to elect (PREFERRED_LEADER_NOT_AVAILABLE,
//! ELIGIBLE_LEADERS_NOT_AVAILABLE), or elected (once this shard's metadata
//! shows it). Asked for every partition (a null list), those that need
//! nothing are left out of the answer, as Kafka does.

use std::rc::Rc;

use control::controller::{preferred, unclean};
use control::model::acls::Operation;
use control::service::ControllerRequest;
use control::{Metadata, Partition, PartitionId, TopicId};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
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
/// ElectionType 1: any live replica of a partition without a leader.
const UNCLEAN: i8 = 1;

/// Which election was asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Preferred,
    Unclean,
}

/// Where a partition stands for an election.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Standing {
    /// It can be elected now.
    Eligible,
    /// Nothing to do: led by its preferred replica, or led at all.
    NotNeeded,
    /// No replica it could go to.
    Unavailable,
    /// No such topic or partition.
    Unknown,
}

impl Kind {
    fn standing(
        self,
        metadata: &Metadata,
        topic: TopicId,
        index: PartitionId,
        p: &Partition,
    ) -> Standing {
        match self {
            Kind::Preferred => match preferred::preferred_election(metadata, topic, index, p) {
                Ok(_) => Standing::Eligible,
                Err(preferred::NotElected::Leads) => Standing::NotNeeded,
                Err(preferred::NotElected::Unavailable) => Standing::Unavailable,
            },
            Kind::Unclean => match unclean::election(metadata, topic, index, p) {
                Ok(_) => Standing::Eligible,
                Err(unclean::NotElected::Led) => Standing::NotNeeded,
                Err(unclean::NotElected::NoLiveReplica) => Standing::Unavailable,
            },
        }
    }

    /// The controller request electing `partitions`.
    fn request(self, partitions: Vec<(String, Vec<i32>)>) -> ControllerRequest {
        match self {
            Kind::Preferred => ControllerRequest::ElectPreferredLeaders { partitions },
            Kind::Unclean => ControllerRequest::ElectUncleanLeaders { partitions },
        }
    }

    /// The answer for a partition with no replica to go to.
    fn unavailable(self) -> Answer {
        match self {
            Kind::Preferred => (
                ResponseError::PreferredLeaderNotAvailable.code(),
                Some("the preferred replica is fenced or not in sync".to_string()),
            ),
            Kind::Unclean => (
                ResponseError::EligibleLeadersNotAvailable.code(),
                Some("no replica of the partition is live".to_string()),
            ),
        }
    }
}

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
    let named = decoded
        .topic_partitions
        .as_ref()
        .map(|topics| distinct(topics));
    let kind = match decoded.election_type {
        PREFERRED => Some(Kind::Preferred),
        UNCLEAN => Some(Kind::Unclean),
        _ => None,
    };
    let refusal = match kind {
        _ if !caller.may_cluster(Operation::Alter) => {
            Some((CLUSTER_DENIED, "not authorized to alter the cluster"))
        }
        None => Some((
            ResponseError::InvalidRequest.code(),
            "election types are 0 (preferred) and 1 (unclean)",
        )),
        Some(_) => None,
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
        None => {
            let kind = kind.expect("refused above");
            (0, elect(shard, kind, named).await)
        }
    };
    let answer = response_of(version, error_code, results);
    Ok(Outcome::Respond(response::encode(
        request.header.correlation_id,
        version,
        &answer,
    )?))
}

/// The partitions named, each once (as Kafka answers them), topics in the
/// order first named.
fn distinct(topics: &[TopicPartitions]) -> Vec<(String, Vec<i32>)> {
    let mut named: Vec<(String, Vec<i32>)> = Vec::new();
    for t in topics {
        let name = t.topic.as_str();
        let index = match named.iter().position(|(n, _)| n == name) {
            Some(index) => index,
            None => {
                named.push((name.to_string(), Vec::new()));
                named.len() - 1
            }
        };
        named[index].1.extend(&t.partitions);
    }
    for (_, ids) in &mut named {
        ids.sort_unstable();
        ids.dedup();
    }
    named
}

/// The response: the top-level error only from v1 (v0 has no such field:
/// a refusal there is in each partition's answer alone).
fn response_of(version: i16, error_code: Code, results: Results) -> ElectLeadersResponse {
    ElectLeadersResponse::default()
        .with_error_code(if version >= 1 { error_code } else { 0 })
        .with_replica_election_results(encode_results(results))
}

/// Per topic, each partition's answer.
type Results = Vec<(String, Vec<(i32, Answer)>)>;

/// Elects the eligible partitions of those `named` (None: all) and
/// answers each.
async fn elect(shard: &Rc<Shard>, kind: Kind, named: Option<Vec<(String, Vec<i32>)>>) -> Results {
    let every = named.is_none();
    let wanted = named.unwrap_or_else(|| every_partition(&shard.cluster.view.borrow().metadata));
    let before = classify(&shard.cluster.view.borrow().metadata, kind, &wanted);
    let eligible: Vec<(String, Vec<i32>)> = before
        .iter()
        .map(|(topic, standings)| {
            let ids = standings
                .iter()
                .filter(|(_, s)| *s == Standing::Eligible)
                .map(|(id, _)| *id)
                .collect();
            (topic.clone(), ids)
        })
        .filter(|(_, ids): &(String, Vec<i32>)| !ids.is_empty())
        .collect();
    let called = if eligible.is_empty() {
        Ok(())
    } else {
        shard
            .cluster
            .call_controller(kind.request(eligible.clone()))
            .await
    };
    if called.is_ok() {
        shard
            .cluster
            .catch_up(|m| {
                classify(m, kind, &eligible)
                    .iter()
                    .flat_map(|(_, standings)| standings)
                    .all(|(_, s)| *s == Standing::NotNeeded)
            })
            .await;
    }
    let after = classify(&shard.cluster.view.borrow().metadata, kind, &wanted);
    before
        .into_iter()
        .zip(after)
        .map(|((topic, was), (_, now))| {
            let answers = was
                .into_iter()
                .zip(now)
                .filter(|((_, was), _)| !(every && *was == Standing::NotNeeded))
                .map(|((id, was), (_, now))| (id, answer_for(kind, was, now, &called)))
                .collect();
            (topic, answers)
        })
        .filter(|(_, answers): &(String, Vec<_>)| !every || !answers.is_empty())
        .collect()
}

/// Where each partition named stands.
fn classify(
    metadata: &Metadata,
    kind: Kind,
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
                        None => Standing::Unknown,
                        Some((topic, p)) => kind.standing(metadata, topic, PartitionId(id), p),
                    };
                    (id, standing)
                })
                .collect();
            (name.clone(), standings)
        })
        .collect()
}

/// A partition's answer from where it stood before the election and after.
fn answer_for(
    kind: Kind,
    was: Standing,
    now: Standing,
    called: &Result<(), control::service::ControllerError>,
) -> Answer {
    match (was, now) {
        (Standing::Unknown, _) => (
            ResponseError::UnknownTopicOrPartition.code(),
            Some("no such topic or partition".to_string()),
        ),
        (Standing::NotNeeded, _) => (ResponseError::ElectionNotNeeded.code(), None),
        (Standing::Unavailable, _) => kind.unavailable(),
        (Standing::Eligible, Standing::NotNeeded) => (0, None),
        (Standing::Eligible, _) => match called {
            Err(e) => {
                let (code, why) = controller_error(e);
                (code, Some(why))
            }
            Ok(()) => (
                kind.unavailable().0,
                Some("not elected: the partition changed before the election (try again)".into()),
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

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use kafka_protocol::protocol::Encodable;

    use super::*;

    #[test]
    fn a_refusal_encodes_at_every_version_and_names_each_partition() {
        let answer = (CLUSTER_DENIED, Some("not authorized".to_string()));
        let results = vec![("orders".to_string(), vec![(0, answer.clone()), (3, answer)])];
        for version in 0..=2 {
            let response = response_of(version, CLUSTER_DENIED, results.clone());
            let mut out = BytesMut::new();
            response
                .encode(&mut out, version)
                .unwrap_or_else(|e| panic!("v{version}: {e}"));
            let partitions = &response.replica_election_results[0].partition_result;
            assert!(partitions.iter().all(|p| p.error_code == CLUSTER_DENIED));
        }
    }

    #[test]
    fn partitions_named_twice_are_answered_once() {
        let topic = |name: &'static str, ids: Vec<i32>| {
            TopicPartitions::default()
                .with_topic(TopicName(StrBytes::from_static_str(name)))
                .with_partitions(ids)
        };
        let named = distinct(&[
            topic("a", vec![3, 1, 3]),
            topic("b", vec![0]),
            topic("a", vec![1, 2]),
        ]);
        assert_eq!(
            named,
            vec![("a".to_string(), vec![1, 2, 3]), ("b".to_string(), vec![0])]
        );
    }
}
