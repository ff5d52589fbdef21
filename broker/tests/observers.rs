//! Brokers outside the metadata quorum's voters, on real processes: they
//! join the quorum as observers by themselves, follow the metadata log,
//! hold and lead partitions, and are fenced and unfenced as voters'
//! brokers are, through the loss of the active controller; then an
//! operator rebuilds the quorum around them (`broker cluster add-voter`,
//! `remove-voter`) while an idempotent librdkafka producer writes, and the
//! cluster outlives the first voters' loss. Nothing acknowledged is lost,
//! every key stays in order.

mod support;

use support::wait_for;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::cluster::{counter, try_counter, Cluster, FAST};
use support::keyed_load::{assert_nothing_lost_and_keys_in_order, consume_all, produce_until};

const VOTERS: i32 = 3;
const OBSERVERS: i32 = 2;
const TOPIC: &str = "observed";
const PARTITIONS: usize = 6;

/// Each partition's leader (-1: none), from `topic describe`.
fn leaders(cluster: &Cluster) -> Vec<i32> {
    let text = cluster.cli_ok(&["topic", "describe", TOPIC]);
    text.lines()
        .filter(|l| l.trim_start().starts_with("partition "))
        .map(|l| l.split_whitespace().nth(3).unwrap().parse().unwrap())
        .collect()
}

/// Waits until no running broker reports a partition under-replicated.
fn wait_in_sync(cluster: &Cluster) {
    wait_for("every partition in sync", Duration::from_secs(30), || {
        (1..=cluster.size())
            .filter(|id| cluster.is_running(*id))
            .map(|id| counter(cluster.node(id).http, "under_replicated_partitions"))
            .sum::<u64>()
            == 0
    });
}

/// The metadata quorum's leader as broker `id` sees it.
fn controller_seen_by(cluster: &Cluster, id: i32) -> Option<i32> {
    try_counter(cluster.node(id).http, "metadata_leader_id").map(|l| l as i32)
}

#[test]
fn observer_brokers_serve_and_the_quorum_is_rebuilt_around_them() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::with_observers(root.path(), VOTERS, OBSERVERS, &FAST);
    cluster.start();
    wait_for("the observers joined", Duration::from_secs(20), || {
        cluster
            .quorum_line()
            .ends_with("voters [1, 2, 3] observers [4, 5]")
    });
    cluster.cli_ok(&[
        "topic",
        "create",
        TOPIC,
        "--partitions",
        "6",
        "--replication-factor",
        "3",
    ]);
    let placed = leaders(&cluster);
    let observer_led: Vec<usize> = (0..PARTITIONS).filter(|p| placed[*p] > VOTERS).collect();
    assert!(
        !observer_led.is_empty(),
        "observers lead partitions: {placed:?}"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let producing = std::thread::spawn({
        let (bootstrap, stop) = (cluster.bootstrap(), stop.clone());
        move || produce_until(bootstrap, TOPIC, stop)
    });
    std::thread::sleep(Duration::from_secs(1));

    // The active controller dies: the observers follow the next one and
    // keep their sessions (their partitions stay theirs).
    let controller = controller_seen_by(&cluster, 4).expect("a controller");
    assert!(
        (1..=VOTERS).contains(&controller),
        "a voter leads: {controller}"
    );
    cluster.kill9(controller);
    wait_for(
        "the observers follow a new controller",
        Duration::from_secs(20),
        || {
            [4, 5].iter().all(|id| {
                controller_seen_by(&cluster, *id).is_some_and(|c| c != controller && c > 0)
            })
        },
    );
    std::thread::sleep(Duration::from_secs(3)); // two sessions
    let now = leaders(&cluster);
    for p in &observer_led {
        assert_eq!(
            now[*p], placed[*p],
            "partition {p}: its observer was fenced"
        );
    }
    cluster.restart(controller);

    // An observer dies: fenced, its partitions led elsewhere; back, it
    // registers and serves again.
    cluster.kill9(5);
    wait_for(
        "broker 5's partitions moved",
        Duration::from_secs(20),
        || !leaders(&cluster).contains(&5),
    );
    cluster.restart(5);
    wait_in_sync(&cluster);

    // The quorum is rebuilt around the observers while the producer writes.
    for node in ["4", "5"] {
        cluster.cli_until_ok(&["cluster", "add-voter", node]);
    }
    for node in ["1", "2"] {
        cluster.cli_until_ok(&["cluster", "remove-voter", node]);
    }
    // The status comes from whichever broker the command asks, which may
    // not have applied the last change yet (as in controllers.rs).
    let rebuilt = "voters [3, 4, 5] observers [1, 2]";
    wait_for(
        "the rebuilt quorum in cluster status",
        Duration::from_secs(20),
        || cluster.quorum_line().ends_with(rebuilt),
    );
    let stranger = cluster.cli(&["cluster", "add-voter", "9"]);
    assert!(!stranger.status.success(), "{stranger:?}");
    assert!(
        String::from_utf8_lossy(&stranger.stderr).contains("not a member"),
        "{stranger:?}"
    );
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let deliveries = producing.join().unwrap();
    let failed = deliveries.failed.lock().unwrap().clone();
    assert!(failed.is_empty(), "deliveries failed: {failed:?}");
    let acked = deliveries.acked.lock().unwrap().clone();
    assert!(acked.len() > 1000, "only {} acknowledged", acked.len());
    let consumed = consume_all(&cluster.bootstrap(), TOPIC, PARTITIONS, &acked);
    assert_nothing_lost_and_keys_in_order(&acked, &consumed);

    // The first two voters are lost for good: the quorum of 3, 4 and 5
    // still decides (a topic is created and led).
    cluster.kill9(1);
    cluster.kill9(2);
    cluster.cli_ok(&[
        "topic",
        "create",
        "after",
        "--partitions",
        "3",
        "--replication-factor",
        "3",
    ]);
    let after = cluster.cli_ok(&["topic", "describe", "after"]);
    assert_eq!(after.matches(" leader ").count(), 3, "{after}");
    println!(
        "{} acknowledged, {} consumed; quorum after: {}",
        acked.len(),
        consumed.len(),
        cluster.quorum_line()
    );
}
