//! Every broker serves the whole HTTP API: a request for a partition led
//! by another broker is carried to that broker over the Kafka protocol
//! (Produce, ListOffsets, Fetch), as any Kafka client would send it.

use std::net::SocketAddr;
use std::time::Duration;

use crate::cluster::Cluster;
use bytes::Bytes;
use client::connection::Connection;
use futures::future::{select, Either};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{FetchRequest, ListOffsetsRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::kafka::Code;

/// Calls to another broker give up after this long beyond their own wait.
const CALL_MARGIN: Duration = Duration::from_secs(5);

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

async fn bounded<T>(
    wait: Duration,
    call: impl std::future::Future<Output = Result<T, Code>>,
) -> Result<T, Code> {
    let timer = glommio::timer::sleep(wait + CALL_MARGIN);
    match select(Box::pin(call), Box::pin(timer)).await {
        Either::Left((result, _)) => result,
        Either::Right(_) => Err(ResponseError::RequestTimedOut.code()),
    }
}

async fn connect(cluster: &Cluster, address: SocketAddr) -> Result<Connection, Code> {
    cluster.connect_to(address, "http-api").await.map_err(|e| {
        tracing::warn!(%address, error = %e, "cannot forward to the partition's leader");
        ResponseError::NotLeaderOrFollower.code()
    })
}

/// Produce of one partition's batch at the leader: (error, base offset).
pub async fn produce(
    cluster: &Cluster,
    address: SocketAddr,
    topic: &str,
    partition: i32,
    records: Bytes,
    acks: i16,
    timeout: Duration,
) -> (Code, i64) {
    let request = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(timeout.as_millis() as i32)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])]);
    let call = async {
        let mut connection = connect(cluster, address).await?;
        if acks == 0 {
            connection
                .send_only(&request, 9)
                .await
                .map_err(|_| ResponseError::NetworkException.code())?;
            return Ok((0, -1));
        }
        let response = connection
            .call(&request, 9)
            .await
            .map_err(|_| ResponseError::NetworkException.code())?;
        let p = response
            .responses
            .first()
            .and_then(|t| t.partition_responses.first())
            .ok_or(ResponseError::UnknownServerError.code())?;
        Ok((p.error_code, p.base_offset))
    };
    bounded(timeout, call)
        .await
        .unwrap_or_else(|code| (code, -1))
}

/// The log start and high watermark at the leader (ListOffsets).
pub async fn watermarks(
    cluster: &Cluster,
    address: SocketAddr,
    topic: &str,
    partition: i32,
) -> Result<(i64, i64), Code> {
    let ask = |timestamp: i64| {
        ListOffsetsRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_timestamp(timestamp)])])
    };
    let call = async {
        let mut connection = connect(cluster, address).await?;
        let mut ends = [0i64; 2];
        // -2: earliest, -1: latest (the high watermark).
        for (slot, timestamp) in ends.iter_mut().zip([-2i64, -1]) {
            let response = connection
                .call(&ask(timestamp), 4)
                .await
                .map_err(|_| ResponseError::NetworkException.code())?;
            let p = response
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .ok_or(ResponseError::UnknownServerError.code())?;
            if p.error_code != 0 {
                return Err(p.error_code);
            }
            *slot = p.offset;
        }
        Ok((ends[0], ends[1]))
    };
    bounded(Duration::ZERO, call).await
}

/// A consumer's fetch at the leader: the batches and the high watermark.
pub async fn fetch(
    cluster: &Cluster,
    address: SocketAddr,
    topic: &str,
    partition: i32,
    offset: i64,
    wait: Duration,
    max_bytes: usize,
) -> Result<(Bytes, i64), Code> {
    let request = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(wait.as_millis() as i32)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes as i32)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(max_bytes as i32)])]);
    let call = async {
        let mut connection = connect(cluster, address).await?;
        let response = connection
            .call(&request, 12)
            .await
            .map_err(|_| ResponseError::NetworkException.code())?;
        let p = response
            .responses
            .first()
            .and_then(|t| t.partitions.first())
            .ok_or(ResponseError::UnknownServerError.code())?;
        if p.error_code != 0 {
            return Err(p.error_code);
        }
        Ok((p.records.clone().unwrap_or_default(), p.high_watermark))
    };
    bounded(wait, call).await
}
