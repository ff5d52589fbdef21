//! Transaction administration, the calls Kafka's admin client makes for
//! `kafka-transactions.sh`: list the transactions every coordinator holds
//! (ListTransactions, sent to every broker, since each answers only for
//! the transactional ids it coordinates), describe one at its coordinator
//! (FindCoordinator with key type 1, `find_transaction_coordinator` in
//! groups.rs, then DescribeTransactions), read a
//! partition's producers and their open transactions at its leader
//! (DescribeProducers), and end a hanging transaction by writing the
//! ABORT marker its coordinator never wrote (WriteTxnMarkers at the
//! partition's leader). Broker error codes become errors that carry
//! Kafka's name for them (TRANSACTIONAL_ID_NOT_FOUND), the name operators
//! search for.

use std::time::Duration;

use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::describe_producers_response::{PartitionResponse, ProducerState};
use kafka_protocol::messages::describe_transactions_response::TransactionState as Described;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, DescribeTransactionsRequest,
    ListTransactionsRequest, ProducerId, TopicName, TransactionalId, WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::{Request, StrBytes};
use kafka_protocol::ResponseError;

use crate::cluster::Cluster;
pub use crate::connection::error_name;
use crate::connection::ClientError;

/// A transaction as its coordinator lists it (ListTransactions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionListing {
    /// The transactional id.
    pub transactional_id: String,
    /// The broker coordinating it (the one that listed it).
    pub coordinator: i32,
    /// The producer id it has now.
    pub producer_id: i64,
    /// Its state, as Kafka names it (Ongoing, PrepareCommit, ...).
    pub state: String,
}

/// A transaction as its coordinator describes it (DescribeTransactions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionDescription {
    /// The transactional id.
    pub transactional_id: String,
    /// The broker coordinating it.
    pub coordinator: i32,
    /// Its state, as Kafka names it (Ongoing, PrepareCommit, ...).
    pub state: String,
    /// How long a transaction of this id may stay open, in ms.
    pub timeout_ms: i32,
    /// When the open transaction started, ms since the epoch (-1: none open).
    pub start_time_ms: i64,
    /// The producer id it has now.
    pub producer_id: i64,
    /// That producer's epoch.
    pub producer_epoch: i16,
    /// The partitions in the open transaction, as (topic, partition); while
    /// it commits or aborts, only those still without their marker.
    pub partitions: Vec<(String, i32)>,
}

/// One producer's state in a partition, as its leader describes it
/// (DescribeProducers), with what an abort needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionProducer {
    /// The producer id.
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i32,
    /// Its last record's sequence (-1: none).
    pub last_sequence: i32,
    /// Its last batch's largest timestamp, ms since the epoch.
    pub last_timestamp: i64,
    /// The epoch of the coordinator that last wrote a marker for it (-1:
    /// none has).
    pub coordinator_epoch: i32,
    /// The first offset of its open transaction here (-1: none open).
    pub current_txn_start_offset: i64,
}

/// A transaction open in one partition: the partition and its producer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenTransaction {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The producer whose transaction it is, as the leader describes it.
    pub producer: PartitionProducer,
}

/// How many times a call is sent while its answer says to ask again (the
/// coordinator or leader moved, or is loading).
const ATTEMPTS: usize = 10;

/// How long to wait before asking again.
const BACKOFF: Duration = Duration::from_millis(200);

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A broker's error code as an error naming it, with the broker's message
/// (or ours) after the name when there is one.
pub fn named_error(code: i16, message: Option<&str>) -> ClientError {
    let name = error_name(code);
    ClientError::Refused(
        code,
        match message {
            Some(m) if !m.is_empty() => format!("{name}: {m}"),
            _ => name,
        },
    )
}

/// Coordinator errors worth asking again for (it moved, or is loading).
fn coordinator_moved(code: i16) -> bool {
    [
        ResponseError::NotCoordinator,
        ResponseError::CoordinatorNotAvailable,
        ResponseError::CoordinatorLoadInProgress,
    ]
    .iter()
    .any(|e| e.code() == code)
}

/// Partition errors worth asking again for, of the leader known after a
/// metadata refresh (an election moved or is moving it).
fn leader_moved(code: i16) -> bool {
    [
        ResponseError::NotLeaderOrFollower,
        ResponseError::LeaderNotAvailable,
    ]
    .iter()
    .any(|e| e.code() == code)
}

impl Cluster {
    /// The transactions every broker coordinates, sorted by transactional
    /// id: those in one of `states` (Kafka's names; empty: any) of one of
    /// `producer_ids` (empty: any). Each broker answers for its own ids, so
    /// all are asked, as Kafka's admin client does; one that cannot answer
    /// fails the listing rather than leaving its transactions out unseen.
    pub async fn list_transactions(
        &self,
        states: &[String],
        producer_ids: &[i64],
    ) -> Result<Vec<TransactionListing>, ClientError> {
        self.refresh(Some(&[]), false).await?;
        let request = ListTransactionsRequest::default()
            .with_state_filters(states.iter().map(|s| text(s.as_str())).collect())
            .with_producer_id_filters(producer_ids.iter().map(|id| ProducerId(*id)).collect());
        let mut listed = Vec::new();
        for broker in self.brokers() {
            listed.extend(self.list_transactions_at(broker.id, &request).await?);
        }
        listed.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok(listed)
    }

    /// The transactions `broker` coordinates that `request` selects,
    /// asking again while its coordinator is loading.
    async fn list_transactions_at(
        &self,
        broker: i32,
        request: &ListTransactionsRequest,
    ) -> Result<Vec<TransactionListing>, ClientError> {
        let mut last = 0;
        for _ in 0..ATTEMPTS {
            let connection = self.broker(broker).await?;
            let response = self.call_on(&connection, request).await?;
            match response.error_code {
                0 => {
                    return Ok(response
                        .transaction_states
                        .into_iter()
                        .map(|t| TransactionListing {
                            transactional_id: t.transactional_id.as_str().to_string(),
                            coordinator: broker,
                            producer_id: t.producer_id.0,
                            state: t.transaction_state.as_str().to_string(),
                        })
                        .collect());
                }
                code if coordinator_moved(code) => last = code,
                code => return Err(named_error(code, None)),
            }
            glommio::timer::sleep(BACKOFF).await;
        }
        Err(named_error(last, None))
    }

    /// One transactional id's transaction, at its coordinator (found
    /// again while the answer says it moved). An unknown id is
    /// TRANSACTIONAL_ID_NOT_FOUND.
    pub async fn describe_transaction(
        &self,
        transactional_id: &str,
    ) -> Result<TransactionDescription, ClientError> {
        let request = DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(text(transactional_id))]);
        let mut last = 0;
        for _ in 0..ATTEMPTS {
            let coordinator = self.find_transaction_coordinator(transactional_id).await?;
            let connection = self.broker(coordinator).await?;
            let response = self.call_on(&connection, &request).await?;
            let state = response
                .transaction_states
                .into_iter()
                .find(|s| s.transactional_id.as_str() == transactional_id)
                .ok_or_else(|| {
                    ClientError::Protocol(format!(
                        "DescribeTransactions did not answer for {transactional_id}"
                    ))
                })?;
            match state.error_code {
                0 => return Ok(described(coordinator, state)),
                code if coordinator_moved(code) => last = code,
                code => return Err(named_error(code, None)),
            }
            glommio::timer::sleep(BACKOFF).await;
        }
        Err(named_error(last, None))
    }

    /// Each transactional id's transaction or why it could not be
    /// described, in the order given (one failing does not hide the others).
    pub async fn describe_transactions(
        &self,
        transactional_ids: &[String],
    ) -> Vec<(String, Result<TransactionDescription, ClientError>)> {
        let mut described = Vec::with_capacity(transactional_ids.len());
        for id in transactional_ids {
            described.push((id.clone(), self.describe_transaction(id).await));
        }
        described
    }

    /// A partition's producers, as its leader describes them
    /// (DescribeProducers): epochs, last timestamp, coordinator epoch and
    /// the start of each one's open transaction.
    pub async fn partition_producers(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Vec<PartitionProducer>, ClientError> {
        let request = DescribeProducersRequest::default()
            .with_topics(vec![TopicRequest::default()
                .with_name(TopicName(text(topic)))
                .with_partition_indexes(vec![partition])]);
        let (_, response) = self
            .on_leader(topic, partition, &request, |r| {
                producers_answer(r, topic, partition).map_or(0, |p| p.error_code)
            })
            .await?;
        let answer = producers_answer(&response, topic, partition).ok_or_else(|| {
            ClientError::Protocol(format!(
                "DescribeProducers did not answer for {topic}-{partition}"
            ))
        })?;
        if answer.error_code != 0 {
            return Err(named_error(
                answer.error_code,
                answer.error_message.as_deref(),
            ));
        }
        Ok(answer.active_producers.iter().map(producer).collect())
    }

    /// Every transaction open in a partition of `topic` (a producer whose
    /// current transaction has a start offset there), partition by
    /// partition, each asked of its leader.
    pub async fn open_transactions(
        &self,
        topic: &str,
    ) -> Result<Vec<OpenTransaction>, ClientError> {
        let info = self.topic_info(topic, false).await?;
        let mut open = Vec::new();
        for partition in 0..info.leaders.len() as i32 {
            for producer in self.partition_producers(topic, partition).await? {
                if producer.current_txn_start_offset >= 0 {
                    open.push(OpenTransaction {
                        topic: topic.to_string(),
                        partition,
                        producer,
                    });
                }
            }
        }
        Ok(open)
    }

    /// Writes an ABORT marker for `producer_id` at `producer_epoch` in one
    /// partition, at its leader (WriteTxnMarkers v1, transaction_result
    /// false), as `kafka-transactions.sh abort` does to end a transaction
    /// its coordinator will never end. `coordinator_epoch` must not be
    /// below the last marker's. The caller needs CLUSTER_ACTION on the
    /// cluster, as coordinators have. Returns the leader that wrote it.
    pub async fn write_abort_marker(
        &self,
        topic: &str,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
    ) -> Result<i32, ClientError> {
        let marker = WritableTxnMarker::default()
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch)
            // false: ABORT (true commits).
            .with_transaction_result(false)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(TopicName(text(topic)))
                .with_partition_indexes(vec![partition])])
            .with_coordinator_epoch(coordinator_epoch);
        let request = WriteTxnMarkersRequest::default().with_markers(vec![marker]);
        let (leader, response) = self
            .on_leader(topic, partition, &request, |r| {
                marker_code(r, topic, partition)
            })
            .await?;
        match marker_code(&response, topic, partition) {
            0 => Ok(leader),
            code => Err(named_error(code, None)),
        }
    }

    /// A partition's leader as known (learning its topic if not yet); -1
    /// while it has none.
    async fn partition_leader(&self, topic: &str, partition: i32) -> Result<i32, ClientError> {
        let info = self.topic_info(topic, false).await?;
        usize::try_from(partition)
            .ok()
            .and_then(|i| info.leaders.get(i).copied())
            .ok_or_else(|| {
                named_error(
                    ResponseError::UnknownTopicOrPartition.code(),
                    Some(format!("{topic} has no partition {partition}").as_str()),
                )
            })
    }

    /// Calls `request` on the leader of `topic`-`partition`; `code_of`
    /// picks the partition's error from the answer. While there is no
    /// leader or the answer says it moved, the topic's metadata is read
    /// again and the request sent to the new leader. Returns the leader
    /// that answered, and its answer.
    async fn on_leader<R: Request>(
        &self,
        topic: &str,
        partition: i32,
        request: &R,
        code_of: impl Fn(&R::Response) -> i16,
    ) -> Result<(i32, R::Response), ClientError> {
        let mut last = ResponseError::LeaderNotAvailable.code();
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                glommio::timer::sleep(BACKOFF).await;
                self.refresh(Some(&[topic]), false).await?;
            }
            let leader = self.partition_leader(topic, partition).await?;
            if leader < 0 {
                continue;
            }
            let connection = self.broker(leader).await?;
            let response = self.call_on(&connection, request).await?;
            let code = code_of(&response);
            if !leader_moved(code) {
                return Ok((leader, response));
            }
            last = code;
        }
        Err(named_error(last, None))
    }
}

/// The description in a DescribeTransactions answer without an error.
fn described(coordinator: i32, state: Described) -> TransactionDescription {
    let partitions = state
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic.as_str().to_string(), *p))
        })
        .collect();
    TransactionDescription {
        transactional_id: state.transactional_id.as_str().to_string(),
        coordinator,
        state: state.transaction_state.as_str().to_string(),
        timeout_ms: state.transaction_timeout_ms,
        start_time_ms: state.transaction_start_time_ms,
        producer_id: state.producer_id.0,
        producer_epoch: state.producer_epoch,
        partitions,
    }
}

/// A producer in a DescribeProducers answer.
fn producer(state: &ProducerState) -> PartitionProducer {
    PartitionProducer {
        producer_id: state.producer_id.0,
        producer_epoch: state.producer_epoch,
        last_sequence: state.last_sequence,
        last_timestamp: state.last_timestamp,
        coordinator_epoch: state.coordinator_epoch,
        current_txn_start_offset: state.current_txn_start_offset,
    }
}

/// The one partition asked about in a DescribeProducers answer.
fn producers_answer<'a>(
    response: &'a DescribeProducersResponse,
    topic: &str,
    partition: i32,
) -> Option<&'a PartitionResponse> {
    response
        .topics
        .iter()
        .filter(|t| t.name.as_str() == topic)
        .flat_map(|t| &t.partitions)
        .find(|p| p.partition_index == partition)
}

/// The error code a WriteTxnMarkers answer gives the one partition asked
/// about (UNKNOWN_SERVER_ERROR if it does not name it).
fn marker_code(response: &WriteTxnMarkersResponse, topic: &str, partition: i32) -> i16 {
    response
        .markers
        .iter()
        .flat_map(|m| &m.topics)
        .filter(|t| t.name.as_str() == topic)
        .flat_map(|t| &t.partitions)
        .find(|p| p.partition_index == partition)
        .map_or(ResponseError::UnknownServerError.code(), |p| p.error_code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_are_named_as_kafka_names_them() {
        assert_eq!(error_name(105), "TRANSACTIONAL_ID_NOT_FOUND");
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(30_000), "UNKNOWN_ERROR_CODE_30000");
        let error = named_error(48, Some("no open transaction"));
        assert_eq!(
            error.to_string(),
            "broker error code 48: INVALID_TXN_STATE: no open transaction"
        );
    }
}
