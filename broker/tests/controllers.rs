//! Controller-only nodes (`process_roles = "controller"`), as KRaft's
//! separate controllers: three of them are the metadata quorum's voters
//! and three brokers (`process_roles = "broker"`) follow it as observers.
//! The controllers bind no Kafka listener and hold no partitions; their
//! HTTP port answers health and metrics. Under an idempotent librdkafka
//! producer the active controller is SIGKILLed (another controller takes
//! over and topics are still created), then a controller lost for good is
//! replaced by a new one (`broker cluster add-voter`, `remove-voter`) and
//! the rebuilt quorum outlives another controller's loss. Nothing
//! acknowledged is lost, every key stays in order.

mod support;

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::cluster::{try_counter, Cluster, FAST};
use support::keyed_load::{assert_nothing_lost_and_keys_in_order, consume_all, produce_until};
use support::wait_for;

const CONTROLLERS: i32 = 3;
const BROKERS: i32 = 3;
const TOPIC: &str = "controlled";
const PARTITIONS: usize = 6;

/// The metadata quorum's leader as node `id` sees it.
fn leader_seen_by(cluster: &Cluster, id: i32) -> Option<i32> {
    try_counter(cluster.node(id).http, "metadata_leader_id").map(|l| l as i32)
}

/// Creates `topic` with RF 3, asking again while the quorum elects.
fn create_topic(cluster: &Cluster, topic: &str, partitions: usize) {
    let partitions = partitions.to_string();
    let args = [
        "topic",
        "create",
        topic,
        "--partitions",
        &partitions,
        "--replication-factor",
        "3",
    ];
    wait_for(
        &format!("topic {topic} created"),
        Duration::from_secs(20),
        || {
            let out = cluster.cli(&args);
            out.status.success() || String::from_utf8_lossy(&out.stderr).contains("already exists")
        },
    );
}

/// Each partition's leader (-1: none), from `topic describe`.
fn leaders(cluster: &Cluster, topic: &str) -> Vec<i32> {
    let text = cluster.cli_ok(&["topic", "describe", topic]);
    text.lines()
        .filter(|l| l.trim_start().starts_with("partition "))
        .map(|l| l.split_whitespace().nth(3).unwrap().parse().unwrap())
        .collect()
}

/// What a controller serves: no Kafka port, no partitions, health and
/// metrics on its HTTP port and nothing else there.
fn assert_serves_no_data(cluster: &Cluster, id: i32) {
    let node = cluster.node(id);
    assert!(
        TcpStream::connect_timeout(&node.kafka, Duration::from_secs(1)).is_err(),
        "controller {id} has no Kafka listener"
    );
    let (status, body) = support::http(node.http, "GET", "/health", "");
    assert_eq!((status, body.as_str()), (200, "ok\n"), "controller {id}");
    // Its own view of the quorum catches up with the leader's.
    wait_for(
        "the controller sees 3 voters and 3 observers",
        Duration::from_secs(10),
        || {
            let (status, metrics) = support::http(node.http, "GET", "/metrics", "");
            status == 200
                && metrics.contains("\nmetadata_voters 3\n")
                && metrics.contains("\nmetadata_observers 3\n")
        },
    );
    let (_, metrics) = support::http(node.http, "GET", "/metrics", "");
    let (ok, printed) = support::promtool(&["check", "metrics"], &metrics);
    assert!(
        ok && printed.trim().is_empty(),
        "controller {id}: {printed}"
    );
    let (status, body) = support::http(node.http, "GET", "/v1/topics", "");
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("controller only"), "{body}");
    let partitions = node.dir.join("data").join("partitions");
    let held = std::fs::read_dir(&partitions).map_or(0, |d| d.count());
    assert_eq!(held, 0, "controller {id} holds partition data");
}

#[test]
fn controllers_run_the_quorum_for_brokers_and_a_lost_one_is_replaced() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::with_controllers(root.path(), CONTROLLERS, BROKERS, &FAST);
    cluster.start();
    wait_for(
        "the brokers joined as observers",
        Duration::from_secs(20),
        || {
            cluster
                .quorum_line()
                .ends_with("voters [4, 5, 6] observers [1, 2, 3]")
        },
    );
    let status = cluster.cli_ok(&["cluster", "status"]);
    let registered: Vec<&str> = (status.lines())
        .filter(|l| l.trim_start().starts_with("broker "))
        .collect();
    assert_eq!(registered.len(), BROKERS as usize, "{status}");
    create_topic(&cluster, TOPIC, PARTITIONS);
    for leader in leaders(&cluster, TOPIC) {
        assert!((1..=BROKERS).contains(&leader), "led by a broker: {leader}");
    }
    for id in BROKERS + 1..=BROKERS + CONTROLLERS {
        assert_serves_no_data(&cluster, id);
    }

    let stop = Arc::new(AtomicBool::new(false));
    let producing = std::thread::spawn({
        let (bootstrap, stop) = (cluster.bootstrap(), stop.clone());
        move || produce_until(bootstrap, TOPIC, stop)
    });
    std::thread::sleep(Duration::from_secs(1));

    // The active controller is SIGKILLed: another controller leads, and
    // the brokers keep serving and creating topics through it.
    let active = leader_seen_by(&cluster, 1).expect("broker 1 knows the active controller");
    assert!(active > BROKERS, "a controller leads the quorum: {active}");
    cluster.kill9(active);
    wait_for("another controller leads", Duration::from_secs(10), || {
        leader_seen_by(&cluster, 1).is_some_and(|l| l > BROKERS && l != active)
    });
    create_topic(&cluster, "during-failover", 3);
    assert!(!leaders(&cluster, "during-failover").contains(&-1));
    cluster.restart(active);

    // Controller 6 is lost for good; controller 7 is started in its place
    // (it joins as an observer) and the quorum is rebuilt around it.
    cluster.kill9(6);
    let replacement = cluster.add_controller();
    cluster.spawn(replacement);
    cluster.wait_listening(replacement, 0);
    wait_for("the new controller joined", Duration::from_secs(20), || {
        cluster.quorum_line().contains("observers [1, 2, 3, 7]")
    });
    cluster.cli_until_ok(&["cluster", "add-voter", "7"]);
    cluster.cli_until_ok(&["cluster", "remove-voter", "6"]);
    wait_for("the quorum rebuilt", Duration::from_secs(10), || {
        cluster.quorum_line().contains("voters [4, 5, 7]")
    });

    // With controller 4 lost too, controllers 5 and 7 still decide.
    cluster.kill9(4);
    create_topic(&cluster, "after", 3);
    assert!(!leaders(&cluster, "after").contains(&-1));

    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let deliveries = producing.join().unwrap();
    let failed = deliveries.failed.lock().unwrap().clone();
    assert!(failed.is_empty(), "deliveries failed: {failed:?}");
    let acked = deliveries.acked.lock().unwrap().clone();
    assert!(acked.len() > 1000, "only {} acknowledged", acked.len());
    let consumed = consume_all(&cluster.bootstrap(), TOPIC, PARTITIONS, &acked);
    assert_nothing_lost_and_keys_in_order(&acked, &consumed);
    println!(
        "{} acknowledged, {} consumed; quorum after: {}",
        acked.len(),
        consumed.len(),
        cluster.quorum_line()
    );
    // A controller stops on SIGTERM, cleanly (exit 0).
    cluster.terminate(5);
}

#[test]
fn a_brokers_data_directory_is_refused_as_a_controllers() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::with_controllers(root.path(), 1, 1, &FAST);
    let leftover = cluster
        .node(2)
        .dir
        .join("data")
        .join("partitions")
        .join("t-0");
    std::fs::create_dir_all(&leftover).unwrap();
    cluster.spawn(2);
    let exited = cluster.wait_exit(2);
    assert!(!exited.success(), "{exited}");
    let log = std::fs::read_to_string(cluster.log_path(2)).unwrap();
    assert!(
        log.contains("this node was a broker; decommission it"),
        "{log}"
    );
}
