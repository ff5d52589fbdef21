//! Sending a decided transaction's markers to every partition in it: one
//! WriteTxnMarkers per leader broker (this broker's own partitions are
//! appended to directly), retried at the current leaders until each
//! partition has its marker. A coordinator that has lost its partition
//! stops (the new one sends them again after loading), and so does one
//! told it is fenced (Kafka gives up the same way: a newer coordinator
//! or producer epoch owns the transaction now).

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;

use control::BrokerId;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{ProducerId, TopicName, WriteTxnMarkersRequest};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::cluster::peers::{PeerConnections, Purpose};
use crate::kafka::Code;
use crate::partition::markers::MarkerToWrite;
use crate::partition::Partitions;
use crate::transactions::metadata::TopicPartition;

/// The pause between rounds while some partitions still lack a marker.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Why markers stopped before every partition had one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abandoned {
    /// This broker no longer coordinates the transaction.
    NotCoordinator,
    /// A leader refused the marker as stale (an older producer epoch or
    /// coordinator than its log has seen).
    Fenced,
}

/// What a leader's answer for one partition means.
enum Outcome {
    Written,
    Retry,
    Fenced,
}

fn outcome(code: Code) -> Outcome {
    let fenced = [
        ResponseError::InvalidProducerEpoch.code(),
        ResponseError::TransactionCoordinatorFenced.code(),
    ];
    // A leader that cannot store markers will never take it. (A deleted
    // topic is dropped from the coordinator's own view, in `by_leader`:
    // a leader's UNKNOWN_TOPIC_OR_PARTITION may only mean its view lags.)
    let gone = [
        ResponseError::UnsupportedForMessageFormat.code(),
        ResponseError::UnsupportedVersion.code(),
    ];
    match code {
        0 => Outcome::Written,
        c if fenced.contains(&c) => Outcome::Fenced,
        c if gone.contains(&c) => Outcome::Written,
        _ => Outcome::Retry,
    }
}

/// Writes `marker` to every partition of `targets`, for as long as
/// `still_coordinator` holds.
pub async fn write_all(
    partitions: &Rc<Partitions>,
    peers: &PeerConnections,
    marker: MarkerToWrite,
    targets: &BTreeSet<TopicPartition>,
    still_coordinator: impl Fn() -> bool,
) -> Result<(), Abandoned> {
    let pause = partitions.cluster.config.test_marker_pause_ms;
    if pause == 0 {
        return write_rounds(partitions, peers, marker, targets, &still_coordinator).await;
    }
    // Testing only (`test_marker_pause_ms`): one partition at a time, in
    // order, each after the pause, so a test can act between two markers.
    for target in targets {
        glommio::timer::sleep(Duration::from_millis(pause)).await;
        let one = BTreeSet::from([target.clone()]);
        write_rounds(partitions, peers, marker, &one, &still_coordinator).await?;
    }
    Ok(())
}

/// Rounds of sends to the current leaders until every partition of
/// `targets` has `marker`.
async fn write_rounds(
    partitions: &Rc<Partitions>,
    peers: &PeerConnections,
    marker: MarkerToWrite,
    targets: &BTreeSet<TopicPartition>,
    still_coordinator: &impl Fn() -> bool,
) -> Result<(), Abandoned> {
    let mut remaining = targets.clone();
    loop {
        if !still_coordinator() {
            return Err(Abandoned::NotCoordinator);
        }
        let (by_leader, gone) = by_leader(partitions, &remaining);
        for written in gone {
            remaining.remove(&written);
        }
        let sends = by_leader.into_iter().map(|(leader, list)| async move {
            let codes = send(partitions, peers, leader, marker, &list).await;
            (list, codes)
        });
        for (list, codes) in futures::future::join_all(sends).await {
            for (partition, code) in list.into_iter().zip(codes) {
                match outcome(code) {
                    Outcome::Written => {
                        remaining.remove(&partition);
                    }
                    Outcome::Fenced => {
                        tracing::warn!(topic = %partition.0, partition = partition.1, code, producer_id = marker.producer_id, "a transaction marker was refused as stale: leaving it to the newer coordinator");
                        return Err(Abandoned::Fenced);
                    }
                    Outcome::Retry => {}
                }
            }
        }
        if remaining.is_empty() {
            return Ok(());
        }
        glommio::timer::sleep(RETRY_PAUSE).await;
    }
}

/// The partitions grouped by their current leader, and those whose topic
/// no longer exists (nothing to mark). Leaderless ones wait.
fn by_leader(
    partitions: &Partitions,
    remaining: &BTreeSet<TopicPartition>,
) -> (BTreeMap<BrokerId, Vec<TopicPartition>>, Vec<TopicPartition>) {
    let view = partitions.cluster.view.borrow();
    let mut grouped: BTreeMap<BrokerId, Vec<TopicPartition>> = BTreeMap::new();
    let mut gone = Vec::new();
    for partition in remaining {
        let Ok(topic) = view.metadata.topic_by_name(&partition.0) else {
            gone.push(partition.clone());
            continue;
        };
        let leader = usize::try_from(partition.1)
            .ok()
            .and_then(|i| topic.partitions.get(i))
            .and_then(|p| p.leader);
        if let Some(leader) = leader {
            grouped.entry(leader).or_default().push(partition.clone());
        }
    }
    (grouped, gone)
}

/// One leader's answers, a code per partition of `list` in order.
async fn send(
    partitions: &Rc<Partitions>,
    peers: &PeerConnections,
    leader: BrokerId,
    marker: MarkerToWrite,
    list: &[TopicPartition],
) -> Vec<Code> {
    if leader == partitions.cluster.me {
        return partitions.write_marker(marker, list.to_vec()).await;
    }
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![request_marker(marker, list)]);
    let failed = |code: Code| vec![code; list.len()];
    let to = (leader, Purpose::Markers);
    let answer = match peers.call(&partitions.cluster, to, &request, 1).await {
        Ok(answer) => answer,
        Err(code) => return failed(code),
    };
    let Some(result) = answer.markers.first() else {
        return failed(ResponseError::UnknownServerError.code());
    };
    let code_of = |(topic, index): &TopicPartition| {
        result
            .topics
            .iter()
            .filter(|t| t.name.as_str() == topic)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == *index)
            .map_or(ResponseError::UnknownServerError.code(), |p| p.error_code)
    };
    list.iter().map(code_of).collect()
}

fn request_marker(marker: MarkerToWrite, list: &[TopicPartition]) -> WritableTxnMarker {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, index) in list {
        topics.entry(topic).or_default().push(*index);
    }
    let topics = topics
        .into_iter()
        .map(|(name, indexes)| {
            WritableTxnMarkerTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.to_string())))
                .with_partition_indexes(indexes)
        })
        .collect();
    WritableTxnMarker::default()
        .with_producer_id(ProducerId(marker.producer_id))
        .with_producer_epoch(marker.epoch)
        .with_transaction_result(marker.commit)
        .with_coordinator_epoch(marker.coordinator_epoch)
        .with_topics(topics)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(error: ResponseError) -> &'static str {
        match outcome(error.code()) {
            Outcome::Written => "written",
            Outcome::Retry => "retry",
            Outcome::Fenced => "fenced",
        }
    }

    #[test]
    fn a_leaders_answer_is_written_retried_or_fenced() {
        assert!(matches!(outcome(0), Outcome::Written));
        assert_eq!(of(ResponseError::UnsupportedForMessageFormat), "written");
        assert_eq!(of(ResponseError::InvalidProducerEpoch), "fenced");
        assert_eq!(of(ResponseError::TransactionCoordinatorFenced), "fenced");
        for retried in [
            ResponseError::UnknownTopicOrPartition,
            ResponseError::NotLeaderOrFollower,
            ResponseError::NotEnoughReplicas,
            ResponseError::NotEnoughReplicasAfterAppend,
            ResponseError::RequestTimedOut,
            ResponseError::KafkaStorageError,
            ResponseError::NetworkException,
        ] {
            assert_eq!(of(retried), "retry", "{retried:?}");
        }
    }
}
