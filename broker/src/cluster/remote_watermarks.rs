//! The log start and high watermark of partitions other brokers lead,
//! asked of their leaders (ListOffsets, earliest and latest, one pair of
//! requests per leader), for what this broker reports about partitions it
//! does not lead: the lag of a group it coordinates on a partition led
//! elsewhere (/metrics). A leader that does not answer in time, or a
//! partition it refuses, is left out: a scrape shows what it could learn.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use futures::future::{join_all, select, Either};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::Cluster;

/// (topic, partition) -> (log start, high watermark).
pub type Watermarks = BTreeMap<(String, i32), (i64, i64)>;

/// The watermarks of `partitions` led by other brokers, each leader asked
/// at once, all within `timeout`; partitions led here or by no one are
/// left out.
pub async fn of_led_elsewhere(
    cluster: &Cluster,
    partitions: impl IntoIterator<Item = (String, i32)>,
    timeout: Duration,
) -> Watermarks {
    let mut by_leader: BTreeMap<SocketAddr, Vec<(String, i32)>> = BTreeMap::new();
    for (topic, partition) in partitions {
        if let Some(leader) = cluster.leader_elsewhere(&topic, partition) {
            by_leader
                .entry(leader)
                .or_default()
                .push((topic, partition));
        }
    }
    let asks = (by_leader.into_iter()).map(|(leader, partitions)| async move {
        let ask = Box::pin(ask_leader(cluster, leader, partitions));
        match select(ask, Box::pin(glommio::timer::sleep(timeout))).await {
            Either::Left((answer, _)) => answer,
            Either::Right(_) => {
                tracing::debug!(%leader, "no watermarks from the leader in time");
                Watermarks::new()
            }
        }
    });
    join_all(asks).await.into_iter().flatten().collect()
}

/// One leader's answer for its partitions (empty if it cannot be asked).
async fn ask_leader(
    cluster: &Cluster,
    leader: SocketAddr,
    partitions: Vec<(String, i32)>,
) -> Watermarks {
    let Ok(mut connection) = cluster.connect_to(leader, "metrics").await else {
        return Watermarks::new();
    };
    let mut starts = BTreeMap::new();
    let mut out = Watermarks::new();
    // -2: the log start, -1: the high watermark.
    for timestamp in [-2i64, -1] {
        let Ok(answer) = connection.call(&request(&partitions, timestamp), 4).await else {
            return Watermarks::new();
        };
        for topic in answer.topics {
            for p in topic.partitions.iter().filter(|p| p.error_code == 0) {
                let key = (topic.name.to_string(), p.partition_index);
                match timestamp {
                    -2 => {
                        starts.insert(key, p.offset);
                    }
                    _ => {
                        if let Some(start) = starts.get(&key) {
                            out.insert(key, (*start, p.offset));
                        }
                    }
                }
            }
        }
    }
    out
}

fn request(partitions: &[(String, i32)], timestamp: i64) -> ListOffsetsRequest {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        by_topic.entry(topic).or_default().push(*partition);
    }
    let topics = (by_topic.into_iter())
        .map(|(topic, indexes)| {
            ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(
                    (indexes.into_iter())
                        .map(|index| {
                            ListOffsetsPartition::default()
                                .with_partition_index(index)
                                .with_timestamp(timestamp)
                        })
                        .collect(),
                )
        })
        .collect();
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(topics)
}
