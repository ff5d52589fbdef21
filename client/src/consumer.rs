//! A consumer of assigned partitions: positions resolved with ListOffsets
//! (earliest, latest, by timestamp), one Fetch per leader broker per poll,
//! records decoded and positions advanced. Consumer groups (assignment by
//! a coordinator, committed offsets) build on this.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, ListOffsetsRequest, TopicName};
use kafka_protocol::ResponseError;

use crate::cluster::Cluster;
use crate::connection::ClientError;
use crate::records::{decode_committed, ConsumedRecord};

/// Where to start reading a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    /// The log start.
    Earliest,
    /// The high watermark (only new records).
    Latest,
    /// The first record at or after this timestamp (ms).
    Timestamp(i64),
    /// This offset.
    Offset(i64),
}

/// How a consumer fetches.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// The longest a fetch waits for data.
    pub max_wait: Duration,
    /// The fewest bytes a fetch waits for.
    pub min_bytes: i32,
    /// The most bytes a response carries.
    pub max_bytes: i32,
    /// The most bytes per partition.
    pub partition_max_bytes: i32,
    /// 0: read_uncommitted (up to the high watermark, aborted records
    /// included); 1: read_committed (up to the last stable offset,
    /// aborted transactions left out).
    pub isolation_level: i8,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            max_wait: Duration::from_millis(500),
            min_bytes: 1,
            max_bytes: 50 << 20,
            partition_max_bytes: 1 << 20,
            isolation_level: 0,
        }
    }
}

/// A consumer of one topic's assigned partitions.
pub struct Consumer {
    cluster: Rc<Cluster>,
    topic: String,
    config: ConsumerConfig,
    /// partition -> next offset to read.
    positions: BTreeMap<i32, i64>,
}

/// Resolves `start` for `partitions` of `topic` with ListOffsets:
/// partition -> offset (-1 when no record matches a timestamp).
pub async fn list_offsets(
    cluster: &Cluster,
    topic: &str,
    partitions: &[i32],
    start: StartAt,
) -> Result<BTreeMap<i32, i64>, ClientError> {
    let timestamp = match start {
        StartAt::Earliest => -2,
        StartAt::Latest => -1,
        StartAt::Timestamp(t) => t,
        StartAt::Offset(o) => return Ok(partitions.iter().map(|p| (*p, o)).collect()),
    };
    let info = cluster.topic_info(topic, false).await?;
    let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for p in partitions {
        let leader = info.leaders.get(*p as usize).copied().unwrap_or(-1);
        by_leader.entry(leader).or_default().push(*p);
    }
    let mut out = BTreeMap::new();
    for (leader, partitions) in by_leader {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(topic.to_string().into()))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|p| {
                            ListOffsetsPartition::default()
                                .with_partition_index(*p)
                                .with_timestamp(timestamp)
                        })
                        .collect(),
                )]);
        let connection = cluster.broker(leader).await?;
        let response = cluster.call_on(&connection, &request).await?;
        for t in response.topics {
            for p in t.partitions {
                if p.error_code != 0 {
                    return Err(ClientError::Broker(p.error_code));
                }
                out.insert(p.partition_index, p.offset);
            }
        }
    }
    Ok(out)
}

impl Consumer {
    /// A consumer of `partitions` of `topic`, starting at `start`.
    pub async fn assign(
        cluster: Rc<Cluster>,
        topic: &str,
        partitions: &[i32],
        start: StartAt,
        config: ConsumerConfig,
    ) -> Result<Consumer, ClientError> {
        cluster.refresh(Some(&[topic]), false).await?;
        let mut positions = list_offsets(&cluster, topic, partitions, start).await?;
        // No record at or after the timestamp: start at the end.
        if positions.values().any(|o| *o < 0) {
            let ends = list_offsets(&cluster, topic, partitions, StartAt::Latest).await?;
            for (p, o) in positions.iter_mut() {
                if *o < 0 {
                    *o = ends[p];
                }
            }
        }
        Ok(Consumer {
            cluster,
            topic: topic.to_string(),
            config,
            positions,
        })
    }

    /// A consumer of `topic` starting at the given offset of each partition.
    pub async fn assign_at(
        cluster: Rc<Cluster>,
        topic: &str,
        positions: BTreeMap<i32, i64>,
        config: ConsumerConfig,
    ) -> Result<Consumer, ClientError> {
        cluster.refresh(Some(&[topic]), false).await?;
        Ok(Consumer {
            cluster,
            topic: topic.to_string(),
            config,
            positions,
        })
    }

    /// The next offset to read of each partition.
    pub fn positions(&self) -> &BTreeMap<i32, i64> {
        &self.positions
    }

    /// Fetches once from every leader (waiting up to max_wait for data)
    /// and returns the records, in offset order per partition.
    pub async fn poll(&mut self) -> Result<Vec<ConsumedRecord>, ClientError> {
        let info = self.cluster.topic_info(&self.topic, false).await?;
        let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for p in self.positions.keys() {
            let leader = info.leaders.get(*p as usize).copied().unwrap_or(-1);
            by_leader.entry(leader).or_default().push(*p);
        }
        let mut records = Vec::new();
        for (leader, partitions) in by_leader {
            let request = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(self.config.max_wait.as_millis() as i32)
                .with_min_bytes(self.config.min_bytes)
                .with_max_bytes(self.config.max_bytes)
                .with_isolation_level(self.config.isolation_level)
                .with_session_epoch(-1)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(TopicName(self.topic.clone().into()))
                    .with_topic_id(info.id)
                    .with_partitions(
                        partitions
                            .iter()
                            .map(|p| {
                                FetchPartition::default()
                                    .with_partition(*p)
                                    .with_fetch_offset(self.positions[p])
                                    .with_partition_max_bytes(self.config.partition_max_bytes)
                            })
                            .collect(),
                    )]);
            let response = match self.cluster.broker(leader).await {
                Ok(connection) => self.cluster.call_on(&connection, &request).await,
                Err(e) => Err(e),
            };
            let response = match response {
                Ok(response) => response,
                Err(ClientError::Io(e)) => {
                    self.cluster.drop_connection(Some(leader));
                    return Err(ClientError::Io(e));
                }
                Err(e) => return Err(e),
            };
            if response.error_code != 0 {
                return Err(ClientError::Broker(response.error_code));
            }
            for topic in response.responses {
                for p in topic.partitions {
                    if p.error_code == ResponseError::NotLeaderOrFollower.code()
                        || p.error_code == ResponseError::UnknownTopicOrPartition.code()
                    {
                        self.cluster
                            .refresh(Some(&[self.topic.as_str()]), false)
                            .await?;
                        continue;
                    }
                    if p.error_code != 0 {
                        return Err(ClientError::Broker(p.error_code));
                    }
                    let Some(from) = self.positions.get(&p.partition_index).copied() else {
                        continue;
                    };
                    let bytes = p.records.unwrap_or_default();
                    let aborted: Vec<(i64, i64)> = p
                        .aborted_transactions
                        .iter()
                        .flatten()
                        .map(|t| (t.producer_id.0, t.first_offset))
                        .collect();
                    let decoded = decode_committed(p.partition_index, &bytes, from, &aborted)?;
                    if let Some(next) = decoded.next_offset {
                        self.positions.insert(p.partition_index, next.max(from));
                    }
                    records.extend(decoded.records);
                }
            }
        }
        Ok(records)
    }
}
