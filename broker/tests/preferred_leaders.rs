//! Leadership goes back to preferred replicas on real broker processes:
//! by itself after a whole cluster restarted (the controller's periodic
//! rebalance), and when an operator asks (`broker cluster elect-leaders`,
//! ElectLeaders) while an idempotent librdkafka producer writes: nothing
//! acknowledged is lost, every key stays in order.

mod support;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Message, Offset, TopicPartitionList};
use support::cluster::{counter, Cluster};

/// Fast failure detection, as in the fault test.
const FAST: [(&str, &str); 3] = [
    ("BROKER_BROKER_SESSION_TIMEOUT_MS", "1500"),
    ("BROKER_BROKER_HEARTBEAT_INTERVAL_MS", "250"),
    ("BROKER_REPLICA_FETCH_WAIT_MAX_MS", "200"),
];

const PARTITIONS: usize = 6;

fn broker_cli(cluster: &Cluster, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(args)
        .args(["--brokers", &cluster.node(1).kafka.to_string()])
        .output()
        .unwrap()
}

fn create_topic(cluster: &Cluster, name: &str) {
    let partitions = PARTITIONS.to_string();
    let out = broker_cli(
        cluster,
        &[
            "topic",
            "create",
            name,
            "--partitions",
            &partitions,
            "--replication-factor",
            "3",
        ],
    );
    assert!(out.status.success(), "{out:?}");
}

/// Each partition's (leader, first replica), from `topic describe`
/// (`partition N leader L epoch E replicas [a, b, c] isr [...]`); None
/// until every partition has a leader.
fn leaders(cluster: &Cluster, topic: &str) -> Option<Vec<(i32, i32)>> {
    let out = broker_cli(cluster, &["topic", "describe", topic]);
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

/// (partition, offset, key, value) of each acknowledged message.
type Acked = Arc<Mutex<Vec<(i32, i64, String, u64)>>>;

#[derive(Clone, Default)]
struct Deliveries {
    acked: Acked,
    failed: Arc<Mutex<Vec<String>>>,
}

impl ClientContext for Deliveries {}
impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(m) => {
                let key = String::from_utf8_lossy(m.key().unwrap_or_default()).to_string();
                let value = String::from_utf8_lossy(m.payload().unwrap_or_default());
                let seq = value.parse().expect("a sequence number");
                self.acked
                    .lock()
                    .unwrap()
                    .push((m.partition(), m.offset(), key, seq));
            }
            Err((e, _)) => self.failed.lock().unwrap().push(e.to_string()),
        }
    }
}

/// Writes keyed sequence numbers with librdkafka's default settings until
/// `stop`, then flushes. Idempotent, as the Java client and kafka-python
/// are by default: without it a retried request may land after a later
/// one (Kafka keeps a key's order across retries only so).
fn produce_until(bootstrap: String, stop: Arc<AtomicBool>) -> Deliveries {
    let deliveries = Deliveries::default();
    let producer: BaseProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("enable.idempotence", "true")
        .create_with_context(deliveries.clone())
        .expect("an rdkafka producer");
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let key = format!("k{}", seq % 12);
        let value = seq.to_string();
        let record = BaseRecord::to("elected").key(&key).payload(&value);
        if producer.send(record).is_ok() {
            seq += 1;
        }
        producer.poll(Duration::from_millis(if seq % 50 == 0 { 5 } else { 0 }));
    }
    producer.flush(Duration::from_secs(60)).expect("flushed");
    deliveries
}

fn consume_all(bootstrap: &str, expected: usize) -> Vec<(i32, i64, String, u64)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "assigned-only")
        .set("enable.auto.commit", "false")
        .create()
        .expect("an rdkafka consumer");
    let mut assignment = TopicPartitionList::new();
    for p in 0..PARTITIONS as i32 {
        assignment
            .add_partition_offset("elected", p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut out = Vec::new();
    let started = Instant::now();
    while out.len() < expected && started.elapsed() < Duration::from_secs(60) {
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            let m = message.expect("consuming");
            let key = String::from_utf8_lossy(m.key().unwrap_or_default()).to_string();
            let seq = String::from_utf8_lossy(m.payload().unwrap_or_default())
                .parse()
                .unwrap();
            out.push((m.partition(), m.offset(), key, seq));
        }
    }
    out
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
    let stop = Arc::new(AtomicBool::new(false));
    let producing = std::thread::spawn({
        let (bootstrap, stop) = (cluster.bootstrap(), stop.clone());
        move || produce_until(bootstrap, stop)
    });
    std::thread::sleep(Duration::from_secs(1));
    let out = broker_cli(&cluster, &["cluster", "elect-leaders"]);
    let printed = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{out:?}");
    let elected = printed.matches("elected its preferred replica").count();
    assert_eq!(elected, PARTITIONS - on_preferred(&before), "{printed}");
    let after = leaders(&cluster, "elected").unwrap();
    assert_eq!(on_preferred(&after), PARTITIONS, "{printed}");
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let deliveries = producing.join().unwrap();
    let again = broker_cli(
        &cluster,
        &["cluster", "elect-leaders", "--topic", "elected"],
    );
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
    let consumed = consume_all(&cluster.bootstrap(), acked.len());
    let at: BTreeMap<(i32, i64), (String, u64)> = consumed
        .iter()
        .map(|(p, o, k, s)| ((*p, *o), (k.clone(), *s)))
        .collect();
    for (p, o, k, s) in &acked {
        assert_eq!(
            at.get(&(*p, *o)),
            Some(&(k.clone(), *s)),
            "acknowledged at {p}/{o}"
        );
    }
    // Per key, sequence numbers only grow along the log.
    let mut last: BTreeMap<&str, u64> = BTreeMap::new();
    for (_, _, key, seq) in &consumed {
        if let Some(previous) = last.insert(key, *seq) {
            assert!(*seq > previous, "key {key}: {seq} after {previous}");
        }
    }
    println!(
        "{} acknowledged, {} consumed, {elected} elected",
        acked.len(),
        consumed.len()
    );
}
