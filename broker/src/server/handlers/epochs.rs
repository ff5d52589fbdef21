//! OffsetForLeaderEpoch: where a leader epoch ends in a partition's log
//! (a follower, or a consumer validating its position after a leader
//! change, finds where its log and the leader's part).

use std::rc::Rc;

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use storage::LeaderEpoch;

use super::routing::{check_leader_epoch, on_led_partition, route_by_name, Code};
use super::{respond, HandlerError, Outcome};
use crate::kafka::bounds::check_offset_for_leader_epoch;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::server::shard::Shard;

/// OffsetForLeaderEpoch versions served.
pub const VERSIONS: (i16, i16) = (2, 4);

/// Kafka's "no such epoch here" answer.
const UNDEFINED: (i32, i64) = (-1, -1);

/// (error, epoch, end offset) of one partition.
type Answer = (Code, i32, i64);

/// Answers OffsetForLeaderEpoch.
pub async fn handle(shard: &Rc<Shard>, request: &Request) -> Result<Outcome, HandlerError> {
    let decoded: OffsetForLeaderEpochRequest = checked(request, check_offset_for_leader_epoch)?;
    let mut pending = Vec::new();
    for topic in &decoded.topics {
        for p in &topic.partitions {
            let route = route_by_name(shard, topic.topic.as_str(), p.partition);
            let (shard, current, wanted) = (shard.clone(), p.current_leader_epoch, p.leader_epoch);
            pending.push(async move {
                on_led_partition(
                    &shard,
                    route,
                    |code| (code, UNDEFINED.0, UNDEFINED.1),
                    move |_, led| {
                        Box::pin(async move {
                            if let Err(code) = check_leader_epoch(current, led.epoch) {
                                return (code, UNDEFINED.0, UNDEFINED.1);
                            }
                            match led.partition.log.end_offset_for_epoch(LeaderEpoch(wanted)) {
                                Some((epoch, end)) => (0, epoch.0, end.0),
                                None => (0, UNDEFINED.0, UNDEFINED.1),
                            }
                        })
                    },
                )
                .await
            });
        }
    }
    let mut answers: std::vec::IntoIter<Answer> =
        futures::future::join_all(pending).await.into_iter();
    let topics = decoded
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let (error, epoch, end) = answers.next().expect("one answer per partition");
                    EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_error_code(error)
                        .with_leader_epoch(epoch)
                        .with_end_offset(end)
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic.clone())
                .with_partitions(partitions)
        })
        .collect();
    respond(
        request,
        &OffsetForLeaderEpochResponse::default().with_topics(topics),
    )
}
