//! Partition reassignment on real broker processes (three voters and an
//! observer), while an idempotent librdkafka producer writes: a partition
//! whose start DeleteRecords moved moves off its leader to the broker
//! that held none of it (`broker topic reassign --wait`), the new replica
//! starting at the leader's log start and catching up before it counts,
//! the leader handing over and the replica left behind removing its files; a
//! move whose new replica is stalled is listed (`broker topic
//! reassignments`) and cancelled, back to the original replicas. A
//! broker killed is decommissioned (cordoned, every replica moved off; its
//! old copies removed when it comes back) and, back in service, a topic
//! balanced over all brokers again. A move is held to the replication
//! throttle. Nothing acknowledged is lost, every key stays in order.

mod support;

use support::wait_for;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::{Offset, TopicPartitionList};
use support::cluster::Cluster;
use support::keyed_load::{assert_nothing_lost_and_keys_in_order, consume_all, produce_until};

/// Fast failure detection, as in the fault test.
const FAST: [(&str, &str); 3] = [
    ("BROKER_BROKER_SESSION_TIMEOUT_MS", "3000"),
    ("BROKER_BROKER_HEARTBEAT_INTERVAL_MS", "250"),
    ("BROKER_REPLICA_FETCH_WAIT_MAX_MS", "200"),
];
const TOPIC: &str = "moving";
const PARTITIONS: usize = 2;
const BROKERS: i32 = 4;

/// As an operator does when the stalled broker was the active
/// controller: asks again while the answer is a timeout (the metadata
/// quorum electing another leader), at most ten times.
fn cli_retrying(cluster: &Cluster, args: &[&str]) -> String {
    for _ in 0..10 {
        let out = cluster.cli(args);
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout).to_string();
        }
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(stderr.contains("(REQUEST_TIMED_OUT)"), "{args:?}: {out:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("{args:?}: still timing out");
}

/// Partition `index`'s (leader, replicas) from `topic describe`.
fn placement(cluster: &Cluster, index: usize) -> (i32, Vec<i32>) {
    let text = cluster.cli_ok(&["topic", "describe", TOPIC]);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("partition {index} ")))
        .unwrap_or_else(|| panic!("no partition {index}: {text}"));
    let leader = line.split_whitespace().nth(3).unwrap().parse().unwrap();
    let replicas = line.split("replicas [").nth(1).unwrap();
    let replicas = replicas.split(']').next().unwrap();
    let replicas = replicas
        .split(',')
        .map(|b| b.trim().parse().unwrap())
        .collect();
    (leader, replicas)
}

/// Whether broker `id` holds a directory for partition `index` of the topic.
fn holds_files(cluster: &Cluster, id: i32, index: usize) -> bool {
    holds_files_of(cluster, id, TOPIC, index)
}

/// Whether broker `id` holds a directory for partition `index` of `topic`.
fn holds_files_of(cluster: &Cluster, id: i32, topic: &str, index: usize) -> bool {
    let root = cluster.node(id).dir.join("data").join("partitions");
    let Ok(topics) = std::fs::read_dir(&root) else {
        return false;
    };
    topics.flatten().any(|t| {
        let name = t.file_name().to_string_lossy().to_string();
        name.starts_with(&format!("{topic}."))
            && Path::new(&t.path()).join(index.to_string()).exists()
    })
}

/// DeleteRecords of everything in partition `index` so far: its log
/// start, after.
fn delete_all_records(cluster: &Cluster, index: i32) -> i64 {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap())
        .create()
        .unwrap();
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset(TOPIC, index, Offset::End)
        .unwrap();
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(20)));
    let deleted = futures::executor::block_on(admin.delete_records(&offsets, &options))
        .expect("DeleteRecords answered");
    let element = deleted
        .find_partition(TOPIC, index)
        .expect("the partition answered");
    element.error().expect("records deleted");
    match element.offset() {
        Offset::Offset(start) => start,
        other => panic!("log start {other:?}"),
    }
}

#[test]
fn partitions_move_and_a_move_is_cancelled_under_load_and_nothing_is_lost() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::with_observers(root.path(), 3, 1, &FAST);
    cluster.start();
    cluster.cli_ok(&[
        "topic",
        "create",
        TOPIC,
        "--partitions",
        "2",
        "--replication-factor",
        "3",
    ]);
    let stop = Arc::new(AtomicBool::new(false));
    let producing = std::thread::spawn({
        let (bootstrap, stop) = (cluster.bootstrap(), stop.clone());
        move || produce_until(bootstrap, TOPIC, stop)
    });
    std::thread::sleep(Duration::from_secs(1));

    // Partition 0's start moves up, then it leaves its leader for the
    // broker that held none of it: that one starts at the new log start.
    // (Asked again until the producer has reached partition 0: its first
    // second may go by on a busy machine.)
    let mut log_start = 0;
    wait_for(
        "records deleted from partition 0",
        Duration::from_secs(30),
        || {
            log_start = delete_all_records(&cluster, 0);
            log_start > 0
        },
    );
    let (leader, replicas) = placement(&cluster, 0);
    let outsider = (1..=BROKERS).find(|b| !replicas.contains(b)).unwrap();
    let target: Vec<i32> = (replicas.iter().copied())
        .map(|b| if b == leader { outsider } else { b })
        .collect();
    let list = target
        .iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let moved = cluster.cli_ok(&[
        "topic",
        "reassign",
        TOPIC,
        "--partition",
        "0",
        "--replicas",
        &list,
        "--wait",
    ]);
    assert!(moved.contains("finished"), "{moved}");
    let (new_leader, now) = placement(&cluster, 0);
    assert_eq!(now, target, "{moved}");
    assert!(target.contains(&new_leader), "led by a target replica");
    wait_for(
        "the old leader's files removed",
        Duration::from_secs(20),
        || !holds_files(&cluster, leader, 0),
    );
    assert!(
        holds_files(&cluster, outsider, 0),
        "the new replica has them"
    );
    let log = std::fs::read_to_string(cluster.log_path(outsider)).unwrap();
    assert!(
        log.contains("starting the log over at its local start"),
        "the new replica started at the leader's log start"
    );

    // Partition 1's move to a stalled broker waits, is listed, is cancelled.
    let (_, original) = placement(&cluster, 1);
    let outsider = (1..=BROKERS).find(|b| !original.contains(b)).unwrap();
    let mut target = original.clone();
    *target.last_mut().unwrap() = outsider;
    let list = target
        .iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    cluster.signal(outsider, libc::SIGSTOP);
    // (The stalled broker may be the active controller: the quorum then
    // elects another first.)
    let move_1 = [
        "topic",
        "reassign",
        TOPIC,
        "--partition",
        "1",
        "--replicas",
        &list,
    ];
    cli_retrying(&cluster, &move_1);
    let ongoing = cluster.cli_ok(&["topic", "reassignments"]);
    assert!(
        ongoing.contains(&format!("{TOPIC}-1 "))
            && ongoing.contains(&format!("adding [{outsider}]")),
        "{ongoing}"
    );
    let again = cluster.cli(&move_1);
    assert!(
        !again.status.success(),
        "a second move while one is under way: {again:?}"
    );
    cluster.cli_ok(&["topic", "reassign", TOPIC, "--partition", "1", "--cancel"]);
    cluster.signal(outsider, libc::SIGCONT);
    assert_eq!(
        placement(&cluster, 1).1,
        original,
        "back to the original replicas"
    );
    let none = cluster.cli_ok(&["topic", "reassignments"]);
    assert!(none.contains("no partition is being reassigned"), "{none}");
    wait_for(
        "the cancelled replica's files removed",
        Duration::from_secs(20),
        || !holds_files(&cluster, outsider, 1),
    );

    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let deliveries = producing.join().unwrap();
    let failed = deliveries.failed.lock().unwrap().clone();
    assert!(failed.is_empty(), "deliveries failed: {failed:?}");
    let acked = deliveries.acked.lock().unwrap().clone();
    assert!(acked.len() > 1000, "only {} acknowledged", acked.len());
    // What DeleteRecords removed is not read back.
    let acked: Vec<_> = (acked.into_iter())
        .filter(|(p, o, _, _)| *p != 0 || *o >= log_start)
        .collect();
    let consumed = consume_all(&cluster.bootstrap(), TOPIC, PARTITIONS, &acked);
    assert_nothing_lost_and_keys_in_order(&acked, &consumed);
    println!(
        "{} acknowledged (after the deletion), {} consumed; partition 0 moved to {:?} from log start {log_start}",
        acked.len(),
        consumed.len(),
        placement(&cluster, 0).1
    );
}

/// Replicas per broker over the topic's partitions, from `topic describe`.
fn replicas_per_broker(cluster: &Cluster, topic: &str, partitions: usize) -> Vec<usize> {
    let text = cluster.cli_ok(&["topic", "describe", topic]);
    let mut load = vec![0; BROKERS as usize + 1];
    let rows = text
        .lines()
        .filter(|l| l.trim_start().starts_with("partition "));
    for line in rows.clone() {
        let replicas = line.split("replicas [").nth(1).unwrap();
        for b in replicas.split(']').next().unwrap().split(',') {
            load[b.trim().parse::<usize>().unwrap()] += 1;
        }
    }
    assert_eq!(rows.count(), partitions, "{text}");
    load
}

#[test]
fn a_broker_is_decommissioned_and_the_topic_balanced_back_under_load() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::with_observers(root.path(), 3, 1, &FAST);
    cluster.start();
    let topic = "drained";
    cluster.cli_ok(&[
        "topic",
        "create",
        topic,
        "--partitions",
        "4",
        "--replication-factor",
        "2",
    ]);
    assert!(
        replicas_per_broker(&cluster, topic, 4)[1] > 0,
        "broker 1 holds replicas"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let producing = std::thread::spawn({
        let (bootstrap, stop) = (cluster.bootstrap(), stop.clone());
        move || produce_until(bootstrap, topic, stop)
    });
    std::thread::sleep(Duration::from_secs(1));

    // Broker 1's machine is gone: it is decommissioned while down, and
    // its copies, moved away meanwhile, are removed when it comes back.
    cluster.kill9(1);
    // (If it was the active controller, the quorum elects another first.)
    wait_for("a live controller", Duration::from_secs(20), || {
        support::cluster::try_counter(cluster.node(2).http, "metadata_leader_id")
            .is_some_and(|c| c != 1 && c > 0)
    });
    let drained = cluster.cli_ok(&["cluster", "decommission", "1", "--wait"]);
    assert!(drained.contains("finished"), "{drained}");
    let load = replicas_per_broker(&cluster, topic, 4);
    assert_eq!(load[1], 0, "nothing left on broker 1: {load:?}\n{drained}");
    assert_eq!(load.iter().sum::<usize>(), 8, "the replication factor kept");
    assert!(
        (0..4).any(|p| holds_files_of(&cluster, 1, topic, p)),
        "its old copies, while down"
    );
    cluster.restart(1);
    wait_for("broker 1's files removed", Duration::from_secs(20), || {
        (0..4).all(|p| !holds_files_of(&cluster, 1, topic, p))
    });
    let status = cluster.cli_ok(&["cluster", "status"]);
    assert!(
        status.contains("broker 1 at") && status.contains("cordoned"),
        "{status}"
    );

    // Back in service: the balance spreads the topic over all four again.
    cluster.cli_ok(&["cluster", "uncordon", "1"]);
    let balanced = cluster.cli_ok(&["topic", "reassign", topic, "--balance", "--wait"]);
    let load = replicas_per_broker(&cluster, topic, 4);
    assert_eq!(&load[1..], &[2, 2, 2, 2], "{balanced}");
    let again = cluster.cli_ok(&["topic", "reassign", topic, "--balance"]);
    assert!(again.contains("nothing to move"), "{again}");

    stop.store(true, Ordering::Relaxed);
    let deliveries = producing.join().unwrap();
    let failed = deliveries.failed.lock().unwrap().clone();
    assert!(failed.is_empty(), "deliveries failed: {failed:?}");
    let acked = deliveries.acked.lock().unwrap().clone();
    assert!(acked.len() > 1000, "only {} acknowledged", acked.len());
    let consumed = consume_all(&cluster.bootstrap(), topic, 4, &acked);
    assert_nothing_lost_and_keys_in_order(&acked, &consumed);
    println!("{} acknowledged, {} consumed", acked.len(), consumed.len());
}

/// Produces `count` records of `size` bytes to partition 0 of `topic`
/// (acks=all) and waits for them all.
fn fill(cluster: &Cluster, topic: &str, count: usize, size: usize) {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap())
        .set("linger.ms", "5")
        .create()
        .unwrap();
    let value = vec![b'x'; size];
    for _ in 0..count {
        let mut record = BaseRecord::<(), [u8]>::to(topic)
            .payload(&value[..])
            .partition(0);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((_, back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(10));
                }
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(60)).expect("flushed");
}

#[test]
fn the_replication_throttle_holds_a_move_to_its_rate() {
    let root = tempfile::tempdir().unwrap();
    let mut env = FAST.to_vec();
    // 1 MB/s for the replicas a move adds.
    env.push(("BROKER_FOLLOWER_REPLICATION_THROTTLED_RATE", "1000000"));
    let mut cluster = Cluster::with_observers(root.path(), 3, 1, &env);
    cluster.start();
    let topic = "throttled";
    cluster.cli_ok(&[
        "topic",
        "create",
        topic,
        "--partitions",
        "1",
        "--replication-factor",
        "2",
    ]);
    // 5 MB in place, copied by the existing follower unthrottled.
    fill(&cluster, topic, 5_000, 1_000);
    let text = cluster.cli_ok(&["topic", "describe", topic]);
    let line = text.lines().find(|l| l.contains("partition 0 ")).unwrap();
    let replicas = line.split("replicas [").nth(1).unwrap();
    let replicas: Vec<i32> = (replicas.split(']').next().unwrap().split(','))
        .map(|b| b.trim().parse().unwrap())
        .collect();
    let outsider = (1..=BROKERS).find(|b| !replicas.contains(b)).unwrap();
    let target = format!("{},{}", replicas[0], outsider);
    let leader: i32 = line.split_whitespace().nth(3).unwrap().parse().unwrap();
    let started = Instant::now();
    cluster.cli_ok(&[
        "topic",
        "reassign",
        topic,
        "--partition",
        "0",
        "--replicas",
        &target,
    ]);
    // While the new replica copies, the partition is no less replicated
    // than before: the leader does not count it under-replicated.
    let ongoing = cluster.cli_ok(&["topic", "reassignments"]);
    assert!(
        ongoing.contains(&format!("adding [{outsider}]")),
        "{ongoing}"
    );
    let under = support::cluster::gauge(cluster.node(leader).http, "under_replicated_partitions");
    assert_eq!(
        under, 0.0,
        "a move's new replica is not missing from the ISR"
    );
    wait_for("the move to finish", Duration::from_secs(60), || {
        cluster
            .cli_ok(&["topic", "reassignments"])
            .contains("no partition is being reassigned")
    });
    let took = started.elapsed();
    // A bucket of one second's rate, then 1 MB/s, and the last fetch's
    // debt never waited for (a fetch is at most 1 MiB): at least
    // (5 - 1 - 1.05) MB at 1 MB/s, 2.9 s. An upper bound would measure
    // this machine, not the throttle.
    println!("5 MB moved at a 1 MB/s throttle in {took:?}");
    assert!(
        took >= Duration::from_millis(2_900),
        "the move took {took:?}"
    );
}

/// (leader, leader epoch, replicas) of partition 0 of `topic`.
fn leadership(cluster: &Cluster, topic: &str) -> (i32, i32, Vec<i32>) {
    let text = cluster.cli_ok(&["topic", "describe", topic]);
    let line = text.lines().find(|l| l.contains("partition 0 ")).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    let replicas = line.split("replicas [").nth(1).unwrap();
    let replicas = (replicas.split(']').next().unwrap().split(','))
        .map(|b| b.trim().parse().unwrap())
        .collect();
    (
        words[3].parse().unwrap(),
        words[5].parse().unwrap(),
        replicas,
    )
}

#[test]
fn a_move_that_keeps_its_leader_fails_none_of_its_produces() {
    // A finished move that removes a replica starts a new leader epoch.
    // The leader stays: the acks=all produces waiting on it are answered
    // in the new epoch, not failed (the client would resend them after a
    // metadata refresh: a stall of about a second in scripts/
    // bench-reassign.sh before this was kept).
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::with_observers(root.path(), 3, 1, &FAST);
    cluster.start();
    let topic = "kept";
    cluster.cli_ok(&[
        "topic",
        "create",
        topic,
        "--partitions",
        "1",
        "--replication-factor",
        "3",
        "--config",
        "min.insync.replicas=2",
    ]);
    let (leader, epoch, replicas) = leadership(&cluster, topic);
    let outsider = (1..=BROKERS).find(|b| !replicas.contains(b)).unwrap();
    let kept: Vec<String> = (replicas.iter())
        .filter(|b| **b == leader)
        .chain(replicas.iter().filter(|b| **b != leader).take(1))
        .map(|b| b.to_string())
        .chain([outsider.to_string()])
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let producing = std::thread::spawn({
        let (bootstrap, stop) = (cluster.bootstrap(), stop.clone());
        move || produce_until(bootstrap, topic, stop)
    });
    let failed_produces = || {
        support::cluster::gauge(
            cluster.node(leader).http,
            "request_errors_total{api=\"Produce\"}",
        )
    };
    // The counter shows once the leader has served a Produce: wait for
    // the producer's first (a fixed second was not always enough in CI).
    let started = Instant::now();
    let served_produce = || {
        support::cluster::try_counter(
            cluster.node(leader).http,
            "request_errors_total{api=\"Produce\"}",
        )
        .is_some()
    };
    while !served_produce() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the leader served no Produce in 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(1));
    let failed_before = failed_produces();
    cluster.cli_ok(&[
        "topic",
        "reassign",
        topic,
        "--partition",
        "0",
        "--replicas",
        &kept.join(","),
        "--wait",
    ]);
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let deliveries = producing.join().unwrap();
    let (after_leader, after_epoch, after_replicas) = leadership(&cluster, topic);
    assert_eq!(after_leader, leader, "the leader stays");
    assert!(
        after_epoch > epoch,
        "a new leader epoch: {epoch} -> {after_epoch}"
    );
    assert!(after_replicas.contains(&outsider), "{after_replicas:?}");
    assert_eq!(
        failed_produces(),
        failed_before,
        "produces answered with an error on the leader across the move"
    );
    let failed = deliveries.failed.lock().unwrap().clone();
    assert!(failed.is_empty(), "deliveries failed: {failed:?}");
    let acked = deliveries.acked.lock().unwrap().clone();
    let consumed = consume_all(&cluster.bootstrap(), topic, 1, &acked);
    assert_nothing_lost_and_keys_in_order(&acked, &consumed);
}
