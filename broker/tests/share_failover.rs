//! A share group (KIP-932) through failovers on a three-broker cluster:
//! the partition's leader is killed with SIGKILL while a member holds
//! records, then the group's coordinator (which keeps the
//! share-partition's state). Acknowledged records are never handed out
//! again, records only acquired are, and none is lost.

mod support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::ops::Range;
use std::time::{Duration, Instant};

use bytes::Bytes;
use client::cluster::Cluster as ClientCluster;
use client::connection::Connection;
use client::producer::Producer;
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatch,
};
use kafka_protocol::messages::share_fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    GroupId, ShareAcknowledgeRequest, ShareFetchRequest, ShareFetchResponse,
};
use kafka_protocol::protocol::StrBytes;
use support::cluster::{coordinator_of_group, Cluster};
use support::on_glommio;

const SETTINGS: [(&str, &str); 3] = [
    ("BROKER_BROKER_SESSION_TIMEOUT_MS", "1500"),
    ("BROKER_BROKER_HEARTBEAT_INTERVAL_MS", "250"),
    ("BROKER_REPLICA_FETCH_WAIT_MAX_MS", "200"),
];

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Who fetches: group, member, the topic's id.
#[derive(Clone)]
struct Member {
    group: String,
    member: String,
    topic: uuid::Uuid,
}

impl Member {
    fn fetch(&self, epoch: i32, max_records: i32) -> ShareFetchRequest {
        ShareFetchRequest::default()
            .with_group_id(Some(GroupId(text(&self.group))))
            .with_member_id(Some(text(&self.member)))
            .with_share_session_epoch(epoch)
            .with_max_wait_ms(500)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_max_records(max_records)
            .with_batch_size(max_records)
            .with_topics(vec![FetchTopic::default()
                .with_topic_id(self.topic)
                .with_partitions(vec![
                    FetchPartition::default().with_partition_index(0)
                ])])
    }

    fn accept(&self, epoch: i32, ranges: &[(i64, i64)]) -> ShareAcknowledgeRequest {
        let batches = (ranges.iter())
            .map(|(first, last)| {
                AckBatch::default()
                    .with_first_offset(*first)
                    .with_last_offset(*last)
                    .with_acknowledge_types(vec![1])
            })
            .collect();
        ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(text(&self.group))))
            .with_member_id(Some(text(&self.member)))
            .with_share_session_epoch(epoch)
            .with_topics(vec![AcknowledgeTopic::default()
                .with_topic_id(self.topic)
                .with_partitions(vec![AcknowledgePartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(batches)])])
    }
}

/// The acquired ranges of an answer (first, last, deliveries), or None
/// when it carries an error.
fn acquired(answer: &ShareFetchResponse) -> Option<Vec<(i64, i64, i16)>> {
    if answer.error_code != 0 {
        return None;
    }
    let Some(partition) = answer.responses.first().map(|t| &t.partitions[0]) else {
        return Some(Vec::new());
    };
    if partition.error_code != 0 {
        return None;
    }
    let ranges = partition.acquired_records.iter();
    Some(
        ranges
            .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
            .collect(),
    )
}

/// What the members were handed and had acknowledged.
#[derive(Default)]
struct Ledger {
    /// Every delivery: (offset, delivery count).
    delivered: Vec<(i64, i16)>,
    /// Offsets whose acknowledgement was answered without an error.
    acked: BTreeSet<i64>,
}

/// The running brokers' Kafka addresses by id.
fn live(cluster: &Cluster) -> Vec<(i32, SocketAddr)> {
    (1..=cluster.size())
        .filter(|b| cluster.is_running(*b))
        .map(|b| (b, cluster.node(b).kafka))
        .collect()
}

/// The leader of `jobs`-0 as the metadata says, once it is one of `live`.
async fn leader(live: &[(i32, SocketAddr)]) -> Option<SocketAddr> {
    let client = ClientCluster::new(live.first()?.1, "share-failover");
    let info = client.topic_info("jobs", true).await.ok()?;
    let id = *info.leaders.first()?;
    live.iter().find(|(b, _)| *b == id).map(|(_, a)| *a)
}

/// `member` fetches from the partition's leader wherever it is and
/// accepts what it gets until every offset of `wanted` is acknowledged
/// (a minute at most), checking on every delivery that no acknowledged
/// offset comes back.
fn drain(cluster: &Cluster, member: &Member, wanted: Range<i64>, ledger: &mut Ledger) {
    let live = live(cluster);
    let member = member.clone();
    let (delivered, acked) = (std::mem::take(&mut ledger.delivered), ledger.acked.clone());
    let (delivered, acked) = on_glommio(async move {
        let (mut delivered, mut acked) = (delivered, acked);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !wanted.clone().all(|o| acked.contains(&o)) {
            assert!(
                Instant::now() < deadline,
                "not all of {wanted:?} acknowledged: {acked:?}"
            );
            glommio::timer::sleep(Duration::from_millis(200)).await;
            let Some(address) = leader(&live).await else {
                continue;
            };
            let Ok(mut c) = Connection::connect(address, "share-failover").await else {
                continue;
            };
            let mut epoch = 0;
            loop {
                let Ok(answer) = c.call(&member.fetch(epoch, 50), 1).await else {
                    break;
                };
                let Some(ranges) = acquired(&answer) else {
                    break;
                };
                epoch += 1;
                for (first, last, count) in &ranges {
                    for offset in *first..=*last {
                        assert!(
                            !acked.contains(&offset),
                            "acknowledged offset {offset} handed out again (delivery {count})"
                        );
                        delivered.push((offset, *count));
                    }
                }
                if ranges.is_empty() {
                    if wanted.clone().all(|o| acked.contains(&o)) {
                        break;
                    }
                    continue;
                }
                let pairs: Vec<(i64, i64)> = ranges.iter().map(|(f, l, _)| (*f, *l)).collect();
                let Ok(done) = c.call(&member.accept(epoch, &pairs), 1).await else {
                    break;
                };
                epoch += 1;
                let ok = done.error_code == 0
                    && done
                        .responses
                        .first()
                        .is_some_and(|t| t.partitions[0].error_code == 0);
                if !ok {
                    // Refused (the state could not be written): these
                    // are handed out again; start a new session.
                    break;
                }
                acked.extend(pairs.iter().flat_map(|(f, l)| *f..=*l));
            }
        }
        (delivered, acked)
    });
    ledger.delivered = delivered;
    ledger.acked = acked;
}

fn produce(cluster: &Cluster, values: Range<u32>) {
    let (_, address) = live(cluster)[0];
    on_glommio(async move {
        let client = ClientCluster::new(address, "share-failover");
        let producer = Producer::new(client, Default::default());
        let mut sent = Vec::new();
        for i in values {
            let value = Bytes::from(format!("job-{i}"));
            sent.push(producer.send("jobs", None, Some(value)).await.unwrap());
        }
        for delivery in sent {
            delivery.await.unwrap();
        }
    });
}

#[test]
fn share_group_acknowledgements_survive_leader_and_coordinator_failovers() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::new(root.path(), 3, &SETTINGS);
    cluster.start();
    let first = live(&cluster)[0].1;
    let topic = on_glommio(async move {
        let client = ClientCluster::new(first, "share-failover");
        client.create_topic("jobs", 1, 3, &[]).await.unwrap();
        client.topic_info("jobs", true).await.unwrap().id
    });
    let eventually = |what: &str, call: &mut dyn FnMut() -> Result<i32, String>| {
        support::eventually(what, Duration::from_secs(60), call)
    };
    let leader_id = |cluster: &Cluster| {
        let address = on_glommio({
            let live = live(cluster);
            async move { leader(&live).await }
        });
        let live = live(cluster);
        address.and_then(|a| live.iter().find(|(_, l)| *l == a).map(|(b, _)| *b))
    };
    let old_leader = eventually("a leader", &mut || leader_id(&cluster).ok_or("none".into()));
    // A group whose coordinator is not the partition's leader, so the
    // two fail over apart.
    let (group, coordinator) = (0..)
        .map(|i| format!("workers-{i}"))
        .find_map(|group| {
            let c = eventually("a coordinator", &mut || {
                coordinator_of_group(&cluster, &group).ok_or("none".into())
            });
            (c != old_leader).then_some((group, c))
        })
        .unwrap();
    let a = Member {
        group: group.clone(),
        member: "member-a".into(),
        topic,
    };
    let address = cluster.node(old_leader).kafka;
    on_glommio({
        let a = a.clone();
        async move {
            let mut c = Connection::connect(address, "share-failover")
                .await
                .unwrap();
            // The first fetch starts the share-partition at the log end
            // (0), once the group's coordinator has it written.
            let started = Instant::now();
            loop {
                let answer = c.call(&a.fetch(0, 30), 1).await.unwrap();
                if acquired(&answer) == Some(vec![]) {
                    break;
                }
                assert!(started.elapsed() < Duration::from_secs(30), "{answer:?}");
                glommio::timer::sleep(Duration::from_millis(100)).await;
            }
        }
    });
    // The session above ended with its connection; a new one takes 0-29
    // and acknowledges 0-19, holding 20-29 when the leader dies.
    produce(&cluster, 0..100);
    let mut ledger = Ledger::default();
    on_glommio({
        let a = a.clone();
        async move {
            let mut c = Connection::connect(address, "share-failover")
                .await
                .unwrap();
            let answer = c.call(&a.fetch(0, 30), 1).await.unwrap();
            assert_eq!(acquired(&answer), Some(vec![(0, 29, 1)]), "{answer:?}");
            let done = c.call(&a.accept(1, &[(0, 19)]), 1).await.unwrap();
            assert_eq!(done.responses[0].partitions[0].error_code, 0, "{done:?}");
            // The connection (and so the session holding 20-29) stays
            // open until the leader is killed: leaked, for this test.
            std::mem::forget(c);
        }
    });
    ledger.acked.extend(0..20);
    cluster.kill9(old_leader);
    let killed = Instant::now();
    let b = Member {
        member: "member-b".into(),
        ..a.clone()
    };
    drain(&cluster, &b, 20..100, &mut ledger);
    println!(
        "leader {old_leader} killed: 20..100 acknowledged at the new leader {:?} later",
        killed.elapsed()
    );
    let redelivered: Vec<i16> = (ledger.delivered.iter())
        .filter(|(o, _)| (20..30).contains(o))
        .map(|(_, count)| *count)
        .collect();
    assert!(
        redelivered.len() >= 10 && redelivered.iter().all(|c| *c >= 2),
        "20-29 were handed out again, their first delivery counted: {redelivered:?}"
    );
    // The old leader returns; the coordinator holding the state dies.
    cluster.restart(old_leader);
    cluster.kill9(coordinator);
    let killed = Instant::now();
    // (The coordinator may have led the partition too by now.)
    eventually("a live leader", &mut || {
        leader_id(&cluster).ok_or("none".into())
    });
    produce(&cluster, 100..150);
    let c = Member {
        member: "member-c".into(),
        ..a.clone()
    };
    drain(&cluster, &c, 100..150, &mut ledger);
    println!(
        "coordinator {coordinator} killed: 100..150 acknowledged {:?} later",
        killed.elapsed()
    );
    assert!((0..150).all(|o| ledger.acked.contains(&o)), "none lost");
    let offsets: BTreeSet<i64> = ledger.delivered.iter().map(|(o, _)| *o).collect();
    assert!(
        offsets.iter().all(|o| (20..150).contains(o)),
        "only records never acknowledged were handed out after the first member"
    );
}
