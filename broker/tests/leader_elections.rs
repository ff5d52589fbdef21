//! Elections beyond failover, on real broker processes. Leadership goes
//! back to preferred replicas by itself after a whole cluster restarted
//! (the controller's periodic rebalance), and when an operator asks
//! (`broker cluster elect-leaders`, ElectLeaders) while an idempotent
//! librdkafka producer writes: nothing acknowledged is lost, every key
//! stays in order. An operator's unclean election brings back a partition
//! whose in-sync replicas are gone.

mod support;

use support::wait_for;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};

use support::cluster::{counter, gauge, Cluster, FAST};
use support::keyed_load::{
    assert_nothing_lost_and_keys_in_order, consume_all, produce_until, Deliveries,
};

const PARTITIONS: usize = 6;

/// The command line through the first broker that runs (not stopped:
/// the tests stop some).
fn create_topic(cluster: &Cluster, name: &str) {
    create_topic_of(cluster, name, PARTITIONS, 3);
}

fn create_topic_of(cluster: &Cluster, name: &str, partitions: usize, replicas: usize) {
    let (partitions, replicas) = (partitions.to_string(), replicas.to_string());
    let args = ["topic", "create", name, "--partitions", &partitions];
    let out = cluster.cli(&[&args[..], &["--replication-factor", &replicas]].concat());
    assert!(out.status.success(), "{out:?}");
}

/// Each partition's (leader, first replica), from `topic describe`
/// (`partition N leader L epoch E replicas [a, b, c] isr [...]`); None
/// until every partition has a leader.
fn leaders(cluster: &Cluster, topic: &str) -> Option<Vec<(i32, i32)>> {
    let out = cluster.cli(&["topic", "describe", topic]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let rows: Vec<(i32, i32)> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("partition "))
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let leader = words.get(3)?.parse().ok()?;
            let replicas = l.split("replicas [").nth(1)?;
            let first = replicas.split([',', ']']).next()?.trim().parse().ok()?;
            Some((leader, first))
        })
        .collect();
    (rows.len() == PARTITIONS).then_some(rows)
}

fn on_preferred(rows: &[(i32, i32)]) -> usize {
    rows.iter()
        .filter(|(leader, first)| leader == first)
        .count()
}

fn led_by(rows: &[(i32, i32)], broker: i32) -> usize {
    rows.iter().filter(|(leader, _)| *leader == broker).count()
}

/// Waits (bounded) until no leader reports a replica out of sync.
fn wait_in_sync(cluster: &Cluster, limit: Duration) {
    let started = Instant::now();
    let under = || {
        (1..=3)
            .map(|id| counter(cluster.node(id).http, "under_replicated_partitions"))
            .sum::<u64>()
    };
    while under() > 0 {
        assert!(
            started.elapsed() < limit,
            "still under-replicated after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn after_the_whole_cluster_restarts_leadership_spreads_back_by_itself() {
    let root = tempfile::tempdir().unwrap();
    let mut env = FAST.to_vec();
    env.push(("BROKER_LEADER_IMBALANCE_CHECK_INTERVAL_MS", "1000"));
    let mut cluster = Cluster::new(root.path(), 3, &env);
    cluster.start();
    create_topic(&cluster, "spread");
    let placed = leaders(&cluster, "spread").expect("every partition led");
    assert_eq!(
        on_preferred(&placed),
        PARTITIONS,
        "placement leads from first replicas"
    );
    cluster.stop_all();
    // Brokers 1 and 2 are a quorum and lead everything; broker 3 comes
    // back last, out of every ISR.
    cluster.restart_all(&[1, 2]);
    let started = Instant::now();
    let alone = loop {
        if let Some(rows) = leaders(&cluster, "spread").filter(|r| led_by(r, 3) == 0) {
            break rows;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no leaders");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        on_preferred(&alone) < PARTITIONS,
        "broker 3's partitions led by others"
    );
    cluster.restart(3);
    let back = Instant::now();
    loop {
        let rows = leaders(&cluster, "spread");
        if rows
            .as_deref()
            .is_some_and(|r| on_preferred(r) == PARTITIONS)
        {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(30),
            "leadership did not spread back: {rows:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    println!(
        "every partition on its preferred replica {:?} after broker 3 restarted",
        back.elapsed()
    );
    for broker in 1..=3 {
        assert_eq!(
            led_by(&placed, broker),
            led_by(&leaders(&cluster, "spread").unwrap(), broker)
        );
    }
}

#[test]
fn an_operator_elects_preferred_leaders_under_load_and_nothing_is_lost() {
    let root = tempfile::tempdir().unwrap();
    let mut env = FAST.to_vec();
    env.push(("BROKER_AUTO_LEADER_REBALANCE_ENABLE", "false"));
    let mut cluster = Cluster::new(root.path(), 3, &env);
    cluster.start();
    create_topic(&cluster, "elected");
    cluster.terminate(3);
    cluster.restart(3);
    wait_in_sync(&cluster, Duration::from_secs(30));
    let before = leaders(&cluster, "elected").expect("every partition led");
    assert_eq!(
        led_by(&before, 3),
        0,
        "no rebalance by itself: broker 3 leads nothing"
    );
    let imbalance = |c: &Cluster| gauge(c.node(1).http, "preferred_leader_imbalance_partitions");
    assert_eq!(
        imbalance(&cluster) as usize,
        PARTITIONS - on_preferred(&before)
    );
    let stop = Arc::new(AtomicBool::new(false));
    let producing = std::thread::spawn({
        let (bootstrap, stop) = (cluster.bootstrap(), stop.clone());
        move || produce_until(bootstrap, "elected", stop)
    });
    std::thread::sleep(Duration::from_secs(1));
    let out = cluster.cli(&["cluster", "elect-leaders"]);
    let printed = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{out:?}");
    let elected = printed.matches(": elected").count();
    assert_eq!(elected, PARTITIONS - on_preferred(&before), "{printed}");
    let after = leaders(&cluster, "elected").unwrap();
    assert_eq!(on_preferred(&after), PARTITIONS, "{printed}");
    // The gauge is broker 1's own view: bounded wait, not a race.
    wait_for("the imbalance gauge at 0", Duration::from_secs(5), || {
        imbalance(&cluster) == 0.0
    });
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let deliveries = producing.join().unwrap();
    let again = cluster.cli(&["cluster", "elect-leaders", "--topic", "elected"]);
    let printed = String::from_utf8_lossy(&again.stdout).to_string();
    assert!(again.status.success(), "{again:?}");
    assert_eq!(
        printed.matches("ELECTION_NOT_NEEDED").count(),
        PARTITIONS,
        "{printed}"
    );

    let failed = deliveries.failed.lock().unwrap().clone();
    assert!(failed.is_empty(), "deliveries failed: {failed:?}");
    let acked = deliveries.acked.lock().unwrap().clone();
    assert!(acked.len() > 1000, "only {} acknowledged", acked.len());
    let consumed = consume_all(&cluster.bootstrap(), "elected", PARTITIONS, &acked);
    assert_nothing_lost_and_keys_in_order(&acked, &consumed);
    println!(
        "{} acknowledged, {} consumed, {elected} elected",
        acked.len(),
        consumed.len()
    );
}

/// Partition 0's (leader, ISR) from `topic describe` (leader -1: none).
fn leader_and_isr(cluster: &Cluster, topic: &str) -> (i32, Vec<i32>) {
    let out = cluster.cli(&["topic", "describe", topic]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("partition 0 "))
        .unwrap_or_else(|| panic!("no partition 0: {text}"));
    let leader = line.split_whitespace().nth(3).unwrap().parse().unwrap();
    let isr = line.rsplit("isr [").next().unwrap().trim_end_matches(']');
    let isr = isr
        .split(',')
        .filter_map(|b| b.trim().parse().ok())
        .collect();
    (leader, isr)
}

#[test]
fn an_operators_unclean_election_brings_back_a_partition_whose_in_sync_replicas_are_gone() {
    // Five voters: the metadata quorum outlives two brokers gone.
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::new(root.path(), 5, &FAST);
    cluster.start();
    create_topic_of(&cluster, "offline", 1, 2);
    let (leader, isr) = leader_and_isr(&cluster, "offline");
    let follower = *isr.iter().find(|b| **b != leader).expect("two in sync");
    let deliveries = {
        let producer: BaseProducer<Deliveries> = ClientConfig::new()
            .set("bootstrap.servers", cluster.bootstrap())
            .create_with_context(Deliveries::default())
            .expect("an rdkafka producer");
        for seq in 0..50u64 {
            let value = seq.to_string();
            let record = BaseRecord::to("offline").key("k").payload(&value);
            producer.send(record).expect("queued");
        }
        producer.flush(Duration::from_secs(30)).expect("flushed");
        producer.context().clone()
    };
    assert_eq!(deliveries.acked.lock().unwrap().len(), 50);
    // The follower stalls and leaves the ISR; then the leader dies.
    cluster.signal(follower, libc::SIGSTOP);
    wait_for(
        "the ISR shrinks to the leader",
        Duration::from_secs(20),
        || leader_and_isr(&cluster, "offline").1 == [leader],
    );
    cluster.kill9(leader);
    cluster.signal(follower, libc::SIGCONT);
    wait_for("the leader is fenced", Duration::from_secs(20), || {
        leader_and_isr(&cluster, "offline").0 == -1
    });
    // The follower is back and live, but not in sync: the partition waits
    // for its last in-sync replica (the topic does not allow unclean
    // elections).
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(leader_and_isr(&cluster, "offline"), (-1, vec![leader]));
    let preferred = cluster.cli(&["cluster", "elect-leaders", "--topic", "offline"]);
    assert!(!preferred.status.success(), "{preferred:?}");
    // Its preferred replica is fenced (the old leader) or out of sync.
    let said = String::from_utf8_lossy(&preferred.stderr);
    assert!(
        said.contains("PREFERRED_LEADER_NOT_AVAILABLE"),
        "{preferred:?}"
    );
    let out = cluster.cli(&[
        "cluster",
        "elect-leaders",
        "--unclean",
        "--topic",
        "offline",
        "--partition",
        "0",
    ]);
    let printed = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{out:?}");
    assert!(
        printed.contains("offline partition 0: elected"),
        "{printed}"
    );
    assert_eq!(
        leader_and_isr(&cluster, "offline"),
        (follower, vec![follower])
    );
    // Counted in the metadata every broker follows (the new leader's view
    // may trail the broker that answered).
    let http = cluster.node(follower).http;
    wait_for(
        "the unclean election counted",
        Duration::from_secs(5),
        || counter(http, "unclean_leader_elections_total") == 1,
    );
    // Caught up when it stalled, the new leader has every acknowledged
    // record.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap())
        .set("group.id", "assigned-only")
        .create()
        .expect("an rdkafka consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset("offline", 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).unwrap();
    let mut seen = Vec::new();
    let mut errors = Vec::new();
    let started = Instant::now();
    while seen.len() < 50 && started.elapsed() < Duration::from_secs(30) {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                seen.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string())
            }
            // librdkafka reports the killed broker of its bootstrap list
            // (transport failures) and carries on.
            Some(Err(e)) => errors.push(e.to_string()),
            None => {}
        }
    }
    let expected: Vec<String> = (0..50).map(|n: u64| n.to_string()).collect();
    assert_eq!(seen, expected, "errors on the way: {errors:?}");
    // A second ask has nothing to do.
    // Never cluster-wide by default: unclean elections lose what the ISR
    // held.
    let bare = cluster.cli(&["cluster", "elect-leaders", "--unclean"]);
    assert!(!bare.status.success(), "{bare:?}");
    let again = cluster.cli(&["cluster", "elect-leaders", "--unclean", "--all"]);
    let printed = String::from_utf8_lossy(&again.stdout).to_string();
    assert!(again.status.success(), "{again:?}");
    assert!(
        printed.contains("every partition has a leader"),
        "{printed}"
    );
}
