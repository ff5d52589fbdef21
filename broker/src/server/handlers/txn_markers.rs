//! WriteTxnMarkers: a transaction coordinator (of this broker or another)
//! asks the leader of each partition in a decided transaction to append
//! its COMMIT or ABORT marker. Only brokers may (CLUSTER_ACTION); each
//! partition answers on its own (the coordinator retries the failed ones).

use std::rc::Rc;

use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};

use super::access::{Caller, CLUSTER_DENIED};
use super::{respond, HandlerError, Outcome};
use crate::kafka::bounds;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::partition::markers::MarkerToWrite;
use crate::server::shard::Shard;
use control::model::acls::Operation;

/// WriteTxnMarkers versions served (v0 is gone since Kafka 4.0; v2 is
/// transaction.version 2's).
pub const VERSIONS: (i16, i16) = (1, 1);

/// Answers WriteTxnMarkers.
pub async fn handle(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: WriteTxnMarkersRequest = checked(request, bounds::check_write_txn_markers)?;
    let allowed = caller.may_cluster(Operation::ClusterAction);
    let mut results = Vec::new();
    for asked in &decoded.markers {
        let partitions: Vec<(String, i32)> = asked
            .topics
            .iter()
            .flat_map(|t| t.partition_indexes.iter().map(|p| (t.name.to_string(), *p)))
            .collect();
        let codes = match allowed {
            true => {
                let marker = MarkerToWrite {
                    producer_id: asked.producer_id.0,
                    epoch: asked.producer_epoch,
                    commit: asked.transaction_result,
                    coordinator_epoch: asked.coordinator_epoch,
                };
                shard
                    .partitions
                    .write_marker(marker, partitions.clone())
                    .await
            }
            false => vec![CLUSTER_DENIED; partitions.len()],
        };
        let topics = asked
            .topics
            .iter()
            .map(|topic| {
                let answered = topic.partition_indexes.iter().map(|index| {
                    let at = partitions
                        .iter()
                        .position(|(t, p)| t.as_str() == topic.name.as_str() && p == index);
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(*index)
                        .with_error_code(at.map_or(0, |i| codes[i]))
                });
                WritableTxnMarkerTopicResult::default()
                    .with_name(topic.name.clone())
                    .with_partitions(answered.collect())
            })
            .collect();
        results.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(asked.producer_id)
                .with_topics(topics),
        );
    }
    respond(
        request,
        &WriteTxnMarkersResponse::default().with_markers(results),
    )
}
