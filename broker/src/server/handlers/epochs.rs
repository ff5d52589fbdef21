//! OffsetForLeaderEpoch: where a leader epoch ends in a partition's log
//! (a follower, or a consumer validating its position after a leader
//! change, finds where its log and the leader's part).

use std::rc::Rc;

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use storage::LeaderEpoch;

use super::access::Caller;
use super::{in_request_order, respond, HandlerError, Outcome};
use crate::cluster::routing::Route;
use crate::kafka::bounds::check_offset_for_leader_epoch;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::partition::served::{check_leader_epoch, ServedPartition};
use crate::partition::Partitions;
use crate::runtime::sharded::LocalFuture;
use crate::server::shard::Shard;
use control::model::acls::Operation;

/// OffsetForLeaderEpoch versions served.
pub const VERSIONS: (i16, i16) = (2, 4);

/// Kafka's "no such epoch here" answer: (epoch, end offset).
const UNDEFINED: (i32, i64) = (-1, -1);

/// Answers OffsetForLeaderEpoch.
pub async fn handle(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: OffsetForLeaderEpochRequest = checked(request, check_offset_for_leader_epoch)?;
    let asked: Vec<(Route, (i32, i32))> = decoded
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(move |p| {
                let route = shard
                    .cluster
                    .route_by_name(topic.topic.as_str(), p.partition);
                // Followers (the broker's user, a super user) pass; a
                // consumer needs DESCRIBE on the topic.
                let route = caller.topic_route(route, Operation::Describe, Some(&topic.topic));
                (route, (p.current_leader_epoch, p.leader_epoch))
            })
        })
        .collect();
    let work = |_: Rc<Partitions>,
                led: ServedPartition,
                (current, wanted): (i32, i32)|
     -> LocalFuture<_> {
        Box::pin(async move {
            check_leader_epoch(current, led.epoch)?;
            let log = &led.partition.log;
            Ok(log
                .end_offset_for_epoch(LeaderEpoch(wanted))
                .map_or(UNDEFINED, |(epoch, end)| (epoch.0, end.0)))
        })
    };
    let answers = shard.partitions.fan_out(asked, true, work).await;
    let topics = in_request_order(
        &decoded.topics,
        |topic| &topic.partitions,
        answers,
        |p, answer: Result<(i32, i64), Code>| {
            let (error, (epoch, end)) = match answer {
                Ok(found) => (0, found),
                Err(code) => (code, UNDEFINED),
            };
            EpochEndOffset::default()
                .with_partition(p.partition)
                .with_error_code(error)
                .with_leader_epoch(epoch)
                .with_end_offset(end)
        },
        |topic, partitions| {
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic.clone())
                .with_partitions(partitions)
        },
    );
    respond(
        request,
        &OffsetForLeaderEpochResponse::default().with_topics(topics),
    )
}
