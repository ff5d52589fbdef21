//! A consumer group of the KIP-848 protocol when its coordinator dies: on
//! a three-broker cluster, two confluent-kafka members (tests/python/
//! consumer_member.py) share six partitions and commit what they read;
//! the coordinator is killed with SIGKILL; the new leader of the group's
//! `__consumer_offsets` partition loads the group from its records, and
//! the members carry on with it at the same epochs and partitions.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use client::cluster::Cluster as ClientCluster;
use client::producer::Producer;
use support::cluster::Cluster;
use support::consumer_member::Member;
use support::on_glommio;

const SETTINGS: [(&str, &str); 7] = [
    ("BROKER_BROKER_SESSION_TIMEOUT_MS", "1500"),
    ("BROKER_BROKER_HEARTBEAT_INTERVAL_MS", "250"),
    ("BROKER_REPLICA_FETCH_WAIT_MAX_MS", "200"),
    ("BROKER_GROUP_CONSUMER_SESSION_TIMEOUT_MS", "4000"),
    ("BROKER_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS", "500"),
    ("BROKER_GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS", "1000"),
    ("BROKER_GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS", "100"),
];

/// Retries `call` until it succeeds (the coordinator moves after the
/// kill): at most a minute.
fn eventually<T, E: std::fmt::Debug>(what: &str, call: impl FnMut() -> Result<T, E>) -> T {
    support::eventually(what, Duration::from_secs(60), call)
}

#[test]
fn consumer_group_members_keep_their_partitions_and_offsets_when_the_coordinator_dies() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::new(root.path(), 3, &SETTINGS);
    cluster.start();
    let addresses = cluster.addresses();
    // A live broker's address: any but broker `not`.
    let any = move |not: i32| addresses[if not == 1 { 1 } else { 0 }];
    let first = any(0);
    on_glommio(async move {
        let client = ClientCluster::new(first, "failover");
        client.create_topic("jobs", 6, 3, &[]).await.unwrap();
        let producer = Producer::new(client, Default::default());
        let mut acks = Vec::new();
        for i in 0..600u32 {
            let key = Bytes::from((i % 6).to_string());
            let sent = producer.send("jobs", Some(key), Some(Bytes::from_static(b"job")));
            acks.push(sent.await.unwrap());
        }
        for ack in acks {
            ack.await.unwrap();
        }
    });
    let bootstrap = cluster.bootstrap();
    let members = [
        Member::start(&bootstrap, "jobs", "workers"),
        Member::start(&bootstrap, "jobs", "workers"),
    ];
    let limit = Duration::from_secs(90);
    let owned: Vec<String> = members
        .iter()
        .map(|m| m.owning(3, limit).expect("three partitions each"))
        .collect();
    let committed = |via: std::net::SocketAddr| {
        on_glommio(async move {
            let client = ClientCluster::new(via, "failover");
            client.committed_offsets("workers", None).await
        })
    };
    let total = |offsets: &BTreeMap<(String, i32), i64>| offsets.values().sum::<i64>();
    eventually("every record committed", || match committed(any(0)) {
        Ok(offsets) if total(&offsets) == 600 => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let describe = |via: std::net::SocketAddr| {
        on_glommio(async move {
            let client = ClientCluster::new(via, "failover");
            client.describe_consumer_group("workers").await
        })
    };
    let before = eventually("describing the group", || describe(any(0)));
    let coordinator = eventually("finding the coordinator", || {
        support::cluster::coordinator_of_group(&cluster, "workers").ok_or("none")
    });
    cluster.kill9(coordinator);
    let killed = Instant::now();
    let via = any(coordinator);
    let moved = eventually(
        "a new coordinator",
        || match support::cluster::coordinator_of_group(&cluster, "workers") {
            Some(c) if c != coordinator => Ok(c),
            other => Err(format!("{other:?}")),
        },
    );
    let found_after = killed.elapsed();
    // Heartbeats (every 500 ms) reach the new coordinator for twice the
    // session (4 s): members it did not hear from would be removed.
    std::thread::sleep(Duration::from_secs(8));
    let after = eventually("describing the group at its new coordinator", || {
        describe(via)
    });
    println!(
        "coordinator {coordinator} -> {moved} found {found_after:?} after the kill; epoch {} -> {}",
        before.epoch, after.epoch
    );
    assert_eq!(after.epoch, before.epoch, "no new group epoch: {after:?}");
    assert_eq!(after.members.len(), 2, "{after:?}");
    for (member, owned) in members.iter().zip(&owned) {
        let told: Vec<String> = member.lines.try_iter().collect();
        assert!(
            told.is_empty(),
            "a member was told something new: {owned} then {told:?}"
        );
    }
    let mut shares: Vec<usize> = after
        .members
        .iter()
        .map(|m| m.assigned["jobs"].len())
        .collect();
    shares.sort();
    assert_eq!(shares, vec![3, 3], "{after:?}");
    let offsets = committed(via).unwrap();
    assert_eq!(
        total(&offsets),
        600,
        "the commits moved with the group: {offsets:?}"
    );
}
