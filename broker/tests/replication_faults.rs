//! Replication under faults, with real broker processes on loopback: a
//! three-broker cluster (every broker a metadata voter, snapshotting its
//! metadata every 50 entries so the snapshot path is crossed many times),
//! a topic with RF=3 and min.insync.replicas=2. Idempotent producers send
//! unique, sequenced values, up to five batches in flight to a partition,
//! resending every batch not acknowledged (in order, with its sequence)
//! until it is; beside them librdkafka's idempotent producer (acks=all,
//! 5 in flight, unbounded retries) retries as it decides, bumping its
//! epoch when it sees skipped sequences; a consumer reads from the
//! leaders throughout; a nemesis
//! driven by a printed seed SIGKILLs partition leaders and followers,
//! SIGKILLs two brokers at once and restarts both, SIGKILLs the active
//! controller and a second broker during its failover, SIGSTOPs brokers
//! for longer than the session timeout, and restarts what it killed.
//!
//! Then the cluster heals, and it must serve again within a bound: every
//! broker lists the topic, every partition has a leader and a full ISR,
//! and producers are acknowledged again. Every partition is drained and
//! checked: every acknowledged value is at the offset it was acknowledged
//! at (none lost), each producer's values appear in send order within a
//! partition, every value a consumer read during the run is still where it
//! read it (nothing above the high watermark was served), reads never went
//! backwards, nothing is stored twice (idempotence: each duplicate is
//! printed with both copies' offsets and batches, producer id, epoch and
//! sequence, beside the fault timeline), librdkafka reported no delivery
//! error, and the replicas' logs are byte-identical up to the high
//! watermark (`broker dump-log`).
//! The acks=1 run (plain batches: idempotence needs acks=all) reports what
//! it lost and duplicated instead of failing on it.
//!
//! A second acks=all test runs the same on three brokers that follow a
//! quorum of three controller-only nodes as observers
//! (`process_roles`): there the nemesis pauses and kills controllers as
//! well, the active one during its failover with a second node.
//!
//! The acks=all test runs three seeds of 12 faults; `SEED=n` replays one
//! run, `FAULTS=n` changes the number of faults; scripts/soak.sh runs it
//! long (100 faults a seed, several seeds).

mod fault_nemesis;
mod fault_reports;
mod fault_workload;
mod support;

use fault_nemesis::nemesis;
use fault_reports::{describe_batch, report_duplicates, BatchInfo, Timeline};
use fault_workload::{consume, produce, produce_with_librdkafka};

use support::cluster::{counter, Cluster};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use client::connection::Connection;
use client::records::decode_records;
use futures::future::{select, Either};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{FetchRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use rand::rngs::StdRng;
use rand::SeedableRng;

const TOPIC: &str = "faults";
const PARTITIONS: i32 = 3;
const BROKERS: i32 = 3;
const PRODUCERS: usize = 2;
const BATCH_RECORDS: u64 = 5;
const SESSION_TIMEOUT_MS: u64 = 1_500;
/// A call with no answer in this long (a stopped broker) is given up.
const CALL_TIMEOUT: Duration = Duration::from_secs(4);
/// After the last fault, the cluster must serve again within this. It
/// catches a cluster that does not recover (an emptied ISR, a lost
/// election: both seen and fixed). 30 s was also missed by clusters that
/// did recover: a broker restarted by the heal reopening ~100 MB of logs
/// (debug build, two cores shared with the other tests) took its roles
/// and caught up 20-30 s after it went live.
const RECOVERY_MAX: Duration = Duration::from_secs(60);

async fn with_timeout<T>(future: impl std::future::Future<Output = T>) -> Option<T> {
    let timer = glommio::timer::sleep(CALL_TIMEOUT);
    match select(Box::pin(future), Box::pin(timer)).await {
        Either::Left((value, _)) => Some(value),
        Either::Right(_) => None,
    }
}

async fn connect(address: SocketAddr) -> Option<Connection> {
    with_timeout(Connection::connect(address, "fault-test"))
        .await?
        .ok()
}

/// The cached connection to `address`, opened if needed.
async fn connection_to(
    connections: &mut HashMap<SocketAddr, Connection>,
    address: SocketAddr,
) -> Option<&mut Connection> {
    if let std::collections::hash_map::Entry::Vacant(slot) = connections.entry(address) {
        slot.insert(connect(address).await?);
    }
    connections.get_mut(&address)
}

fn topic_name() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

/// A consumer's Fetch (v12) of one partition of the test topic.
fn fetch_request(partition: i32, offset: i64, max_wait_ms: i32, max_bytes: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name())
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(max_bytes)])])
}

/// Each partition's (leader id, leader address, leader epoch, ISR), from
/// whichever broker answers first, starting at `first`.
async fn metadata(
    addresses: &[SocketAddr],
    first: usize,
) -> Option<Vec<(i32, Option<SocketAddr>, i32, Vec<i32>)>> {
    for i in 0..addresses.len() {
        let address = addresses[(first + i) % addresses.len()];
        let Some(mut connection) = connect(address).await else {
            continue;
        };
        let request = MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic_name())),
        ]));
        let Some(Ok(response)) = with_timeout(connection.call(&request, 9)).await else {
            continue;
        };
        let brokers: HashMap<i32, SocketAddr> = response
            .brokers
            .iter()
            .filter_map(|b| {
                format!("{}:{}", b.host.as_str(), b.port)
                    .parse()
                    .ok()
                    .map(|a| (b.node_id.0, a))
            })
            .collect();
        let Some(topic) = response.topics.first().filter(|t| t.error_code == 0) else {
            continue;
        };
        let mut partitions = vec![(-1, None, -1, vec![]); PARTITIONS as usize];
        for p in &topic.partitions {
            if let Some(slot) = partitions.get_mut(p.partition_index as usize) {
                *slot = (
                    p.leader_id.0,
                    brokers.get(&p.leader_id.0).copied(),
                    p.leader_epoch,
                    p.isr_nodes.iter().map(|b| b.0).collect(),
                );
            }
        }
        return Some(partitions);
    }
    None
}

/// What the producers and the consumer saw.
#[derive(Default)]
struct Observed {
    /// (producer, seq) -> (partition, offset) of each acknowledged value.
    acked: BTreeMap<(usize, u64), (i32, i64)>,
    /// (partition, broker that acknowledged, when).
    ack_times: Vec<(i32, i32, Instant)>,
    /// (producer, seq) -> (broker that acknowledged, when, the batch's
    /// first sequence), for the project's producers (librdkafka does not
    /// say which broker answered).
    acked_by: HashMap<(usize, u64), (i32, Instant, i32)>,
    /// (partition, offset) -> value, as a consumer read it during the run.
    consumed: BTreeMap<(i32, i64), Bytes>,
    /// Records a fetch returned below the offset asked for, or out of
    /// order within the response.
    nonmonotonic: usize,
    /// librdkafka's delivery reports that were errors (a fatal
    /// idempotence error, a timed-out message): when, the partition, the
    /// error.
    delivery_errors: Vec<(Instant, i32, String)>,
}

fn value(producer: usize, seq: u64) -> Bytes {
    Bytes::from(format!("{producer}:{seq}"))
}

fn parse_value(value: &[u8]) -> Option<(usize, u64)> {
    let text = std::str::from_utf8(value).ok()?;
    let (producer, seq) = text.split_once(':')?;
    Some((producer.parse().ok()?, seq.parse().ok()?))
}

/// The counts the run prints.
#[derive(Debug, Default)]
struct Verdict {
    acked: usize,
    lost: usize,
    duplicated: usize,
    reordered: usize,
    phantom_reads: usize,
    nonmonotonic: usize,
    divergent: usize,
    /// librdkafka's delivery reports that were errors.
    delivery_errors: usize,
    /// From the end of the last fault until the cluster served again
    /// (every broker lists the topic, leaders and full ISRs, a produce
    /// acknowledged).
    recovery: Duration,
}

/// A run on `BROKERS` brokers that are the metadata quorum's voters too,
/// or (`controllers` > 0) that follow a quorum of that many controller-only
/// nodes as observers (ids after the brokers').
fn run(acks: i16, faults: usize, seed: u64, controllers: i32) -> Verdict {
    println!("SEED={seed} controllers={controllers}");
    let mut rng = StdRng::seed_from_u64(seed);
    let root = tempfile::tempdir().unwrap();
    let session = SESSION_TIMEOUT_MS.to_string();
    let env = [
        ("BROKER_BROKER_SESSION_TIMEOUT_MS", session.as_str()),
        ("BROKER_BROKER_HEARTBEAT_INTERVAL_MS", "250"),
        ("BROKER_REPLICA_LAG_TIME_MAX_MS", "3000"),
        ("BROKER_REPLICA_FETCH_WAIT_MAX_MS", "200"),
        ("BROKER_METADATA_SNAPSHOT_EVERY_ENTRIES", "50"),
    ];
    let mut cluster = if controllers > 0 {
        Cluster::with_controllers(root.path(), controllers, BROKERS, &env)
    } else {
        Cluster::new(root.path(), BROKERS, &env)
    };
    cluster.start();
    let created = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(["topic", "create", TOPIC, "--partitions"])
        .arg(PARTITIONS.to_string())
        .args(["--replication-factor", "3"])
        .args(["--config", "min.insync.replicas=2"])
        .args(["--brokers", &cluster.node(1).kafka.to_string()])
        .output()
        .unwrap();
    assert!(created.status.success(), "{created:?}");

    let observed = Arc::new(Mutex::new(Observed::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let stop_consumer = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for producer in 0..PRODUCERS {
        let (addresses, observed, stop) = (cluster.addresses(), observed.clone(), stop.clone());
        workers.push(std::thread::spawn(move || {
            produce(producer, acks, addresses, observed, stop)
        }));
    }
    if acks == -1 {
        let bootstrap = cluster.bootstrap();
        let (observed, stop) = (observed.clone(), stop.clone());
        workers.push(std::thread::spawn(move || {
            produce_with_librdkafka(PRODUCERS, bootstrap, observed, stop)
        }));
    }
    let consumer = {
        let (addresses, observed, stop) =
            (cluster.addresses(), observed.clone(), stop_consumer.clone());
        std::thread::spawn(move || consume(addresses, observed, stop))
    };

    std::thread::sleep(Duration::from_secs(2));
    let mut counts = BTreeMap::new();
    let mut timeline = Timeline::new();
    let leader_kills = nemesis(&mut cluster, &mut rng, faults, &mut counts, &mut timeline);
    timeline.note("faults end: heal".into());

    // Heal: the cluster must serve again within RECOVERY_MAX (every
    // broker lists the topic, every partition has a leader and a full ISR,
    // producers are acknowledged), then producing stops.
    let faults_ended = Instant::now();
    cluster.heal();
    let addresses = cluster.addresses();
    let recovery = loop {
        let lists_topic = (0..addresses.len())
            .all(|i| support::on_glommio(metadata(&addresses[i..=i], 0)).is_some());
        let full = support::on_glommio(metadata(&addresses, 0)).is_some_and(|l| {
            l.iter()
                .all(|(leader, _, _, isr)| *leader > 0 && isr.len() == BROKERS as usize)
        });
        let acknowledged = observed
            .lock()
            .unwrap()
            .ack_times
            .iter()
            .any(|(_, _, at)| *at > faults_ended);
        if lists_topic && full && acknowledged {
            break faults_ended.elapsed();
        }
        if faults_ended.elapsed() >= RECOVERY_MAX {
            // What each broker believes, and the files, for the post-mortem.
            for i in 0..addresses.len() {
                let view = support::on_glommio(metadata(&addresses[i..=i], 0));
                println!("broker {} sees (leader, _, epoch, isr): {view:?}", i + 1);
            }
            let kept = root.keep();
            panic!(
                "seed {seed}: the cluster did not serve again within {RECOVERY_MAX:?} after the \
                 last fault: every broker lists the topic {lists_topic}, leaders and full ISRs \
                 {full}, produce acknowledged {acknowledged} (logs and data kept in {})",
                kept.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_secs(1));
    // Rejoining the ISR went through the leaders' AlterIsr requests.
    let expands: u64 = (1..=BROKERS)
        .map(|id| counter(cluster.node(id).http, "isr_expands_total"))
        .sum();
    let shrinks: u64 = (1..=BROKERS)
        .map(|id| counter(cluster.node(id).http, "isr_shrinks_total"))
        .sum();
    println!("ISR changes seen by the live leaders: {shrinks} shrinks, {expands} expands");
    assert!(
        expands >= 1,
        "followers rejoined the ISR without an expansion counted"
    );
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().unwrap();
    }

    // Drain every partition from its leader, up to the high watermark.
    let (logs, high_watermarks, batches) = support::on_glommio(drain(addresses.clone()));
    stop_consumer.store(true, Ordering::Relaxed);
    consumer.join().unwrap();
    let observed = observed.lock().unwrap();
    let mut verdict = Verdict {
        acked: observed.acked.len(),
        nonmonotonic: observed.nonmonotonic,
        recovery,
        ..Verdict::default()
    };
    let mut occurrences: HashMap<Bytes, Vec<(i32, i64)>> = HashMap::new();
    for (partition, log) in logs.iter().enumerate() {
        for (offset, value) in log {
            occurrences
                .entry(value.clone())
                .or_default()
                .push((partition as i32, *offset));
        }
    }
    verdict.duplicated = occurrences.values().map(|at| at.len() - 1).sum();
    report_duplicates(&occurrences, &batches);
    for ((producer, seq), (partition, offset)) in &observed.acked {
        let want = value(*producer, *seq);
        let stored = logs[*partition as usize].get(offset);
        // librdkafka acknowledges a batch whose own answer was lost once a
        // later batch of the same producer is acknowledged, its offset
        // unknown (-1001): such a record must be in that partition (once:
        // duplicates are counted above).
        let in_partition = || {
            occurrences
                .get(&want)
                .is_some_and(|at| at.iter().any(|(p, _)| p == partition))
        };
        let kept = match *offset < 0 {
            true => in_partition(),
            false => stored == Some(&want),
        };
        if !kept {
            verdict.lost += 1;
            if verdict.lost <= 50 {
                let found = occurrences.get(&want).cloned().unwrap_or_default();
                let batch = describe_batch(&batches, *partition, *offset);
                let by = observed
                    .acked_by
                    .get(&(*producer, *seq))
                    .map(|(b, at, first)| {
                        let t = at.saturating_duration_since(timeline.started).as_secs_f64();
                        format!("by broker {b} at {t:.3}s, batch from sequence {first}")
                    });
                println!(
                    "LOST {want:?}: acknowledged at partition {partition} offset {offset} \
                     ({}; high watermark at the drain {}); stored there: {stored:?} in {batch}; \
                     the value is at {found:?}",
                    by.unwrap_or_else(|| "by librdkafka's leader".into()),
                    high_watermarks[*partition as usize]
                );
            }
        }
    }
    // Send order: acknowledged values of one producer in one partition,
    // by their first appearance.
    let acked: HashSet<(usize, u64)> = observed.acked.keys().copied().collect();
    for log in &logs {
        let mut last: HashMap<usize, u64> = HashMap::new();
        let mut seen = HashSet::new();
        for value in log.values() {
            let Some((producer, seq)) = parse_value(value) else {
                continue;
            };
            if !acked.contains(&(producer, seq)) || !seen.insert((producer, seq)) {
                continue;
            }
            if last.get(&producer).is_some_and(|l| *l > seq) {
                verdict.reordered += 1;
            }
            last.insert(producer, seq);
        }
    }
    for ((partition, offset), value) in &observed.consumed {
        let stored = logs[*partition as usize].get(offset);
        if stored != Some(value) {
            verdict.phantom_reads += 1;
            if verdict.phantom_reads <= 10 {
                println!("phantom read: partition {partition} offset {offset}: read {value:?}, stored {stored:?}");
            }
        }
    }

    // Failover: from a leader's SIGKILL to the first acknowledgement of
    // that partition by another broker.
    let mut failovers: Vec<u128> = leader_kills
        .iter()
        .filter_map(|(killed_at, partition, victim)| {
            observed
                .ack_times
                .iter()
                .filter(|(p, by, at)| p == partition && by != victim && at > killed_at)
                .map(|(_, _, at)| (*at - *killed_at).as_millis())
                .min()
        })
        .collect();
    failovers.sort_unstable();

    // Replicas byte-identical up to the high watermark.
    cluster.stop();
    for partition in 0..PARTITIONS {
        let dumps: Vec<Vec<String>> = (1..=BROKERS)
            .map(|id| {
                dump(&cluster.node(id).dir, partition)
                    .into_iter()
                    .filter(|line| {
                        let last: i64 = line.split(' ').nth(1).unwrap().parse().unwrap();
                        last < high_watermarks[partition as usize]
                    })
                    .collect()
            })
            .collect();
        if dumps.windows(2).any(|w| w[0] != w[1]) {
            verdict.divergent += 1;
            for (id, dump) in dumps.iter().enumerate() {
                println!("partition {partition} replica {}: {dump:?}", id + 1);
            }
        }
    }
    println!("fault timeline (seed {seed}):");
    for event in &timeline.events {
        println!("  {event}");
    }
    let mut errors: BTreeMap<(i32, String), (usize, f64, f64)> = BTreeMap::new();
    for (at, partition, error) in &observed.delivery_errors {
        let t = at.saturating_duration_since(timeline.started).as_secs_f64();
        let entry = errors
            .entry((*partition, error.clone()))
            .or_insert((0, t, t));
        *entry = (entry.0 + 1, entry.1.min(t), entry.2.max(t));
    }
    for ((partition, error), (count, first, last)) in &errors {
        println!(
            "librdkafka delivery errors: {count} x partition {partition} {error:?}, at {first:.3}s to {last:.3}s"
        );
    }
    verdict.delivery_errors = observed.delivery_errors.len();
    let p50 = failovers.get(failovers.len() / 2).copied();
    println!(
        "acks={acks} seed={seed} faults {counts:?}: acked {} lost {} duplicated {} reordered {} \
         phantom_reads {} nonmonotonic {} divergent {} delivery_errors {}; served again {:?} \
         after the last fault; failover after a leader kill (ms): p50 {p50:?} max {:?} over {} \
         kills {failovers:?}",
        verdict.acked,
        verdict.lost,
        verdict.duplicated,
        verdict.reordered,
        verdict.phantom_reads,
        verdict.nonmonotonic,
        verdict.divergent,
        verdict.delivery_errors,
        verdict.recovery,
        failovers.last(),
        failovers.len(),
    );
    assert_eq!(counts.values().sum::<usize>(), faults);
    assert!(
        verdict.acked >= 500,
        "too little was acknowledged to judge: {verdict:?}"
    );
    // What fails the run (acks=1 is allowed to lose and duplicate).
    let inconsistent = verdict.phantom_reads + verdict.nonmonotonic + verdict.divergent;
    let failed = match acks {
        -1 => {
            inconsistent
                + verdict.lost
                + verdict.duplicated
                + verdict.reordered
                + verdict.delivery_errors
        }
        _ => inconsistent,
    };
    if failed > 0 {
        let kept = root.keep();
        println!("the brokers' data and logs are kept in {}", kept.display());
    }
    verdict
}

/// Each partition's records (offset -> value) read from its leader up to
/// its high watermark, the high watermarks, and the batches read.
async fn drain(
    addresses: Vec<SocketAddr>,
) -> (Vec<BTreeMap<i64, Bytes>>, Vec<i64>, Vec<Vec<BatchInfo>>) {
    let mut batches = vec![Vec::new(); PARTITIONS as usize];
    let mut logs = vec![BTreeMap::new(); PARTITIONS as usize];
    let mut high_watermarks = vec![-1i64; PARTITIONS as usize];
    let mut positions = vec![0i64; PARTITIONS as usize];
    let started = Instant::now();
    // Until every partition is read up to a high watermark that has not
    // moved for a second: after a leader change the new leader's high
    // watermark catches up only once its followers fetch.
    let mut last_change = Instant::now();
    loop {
        let behind = (0..PARTITIONS as usize)
            .any(|p| high_watermarks[p] < 0 || positions[p] < high_watermarks[p]);
        if !behind {
            if last_change.elapsed() > Duration::from_secs(1) {
                break;
            }
            glommio::timer::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "draining did not finish"
        );
        let leaders = metadata(&addresses, 0).await.expect("metadata");
        for partition in 0..PARTITIONS {
            let p = partition as usize;
            let Some(address) = leaders[p].1 else {
                continue;
            };
            let Some(mut connection) = connect(address).await else {
                continue;
            };
            let request = fetch_request(partition, positions[p], 0, 4 << 20);
            let Some(Ok(response)) = with_timeout(connection.call(&request, 12)).await else {
                continue;
            };
            let data = &response.responses[0].partitions[0];
            if data.error_code != 0 {
                continue;
            }
            if high_watermarks[p] != data.high_watermark {
                high_watermarks[p] = data.high_watermark;
                last_change = Instant::now();
            }
            let records = data.records.clone().unwrap_or_default();
            let decoded = decode_records(partition, &records, positions[p]).unwrap();
            for batch in BatchInfo::all_in(&records) {
                if batches[p]
                    .last()
                    .is_none_or(|b: &BatchInfo| b.base_offset < batch.base_offset)
                {
                    batches[p].push(batch);
                }
            }
            for record in decoded.records {
                assert!(
                    record.offset < data.high_watermark,
                    "read above the high watermark"
                );
                logs[p].insert(record.offset, record.value.unwrap_or_default());
            }
            if let Some(next) = decoded.next_offset {
                positions[p] = next;
            }
        }
    }
    (logs, high_watermarks, batches)
}

/// `broker dump-log` of one replica, a line per batch.
fn dump(node_dir: &Path, partition: i32) -> Vec<String> {
    let partitions = node_dir.join("data").join("partitions");
    let topic_dir = std::fs::read_dir(&partitions)
        .unwrap()
        .flatten()
        .find(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{TOPIC}."))
        })
        .expect("the topic's directory")
        .path();
    let out = Command::new(env!("CARGO_BIN_EXE_broker"))
        .arg("dump-log")
        .arg(topic_dir.join(partition.to_string()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .skip(1) // log start and end
        .map(str::to_string)
        .collect()
}

fn faults(default: usize) -> usize {
    std::env::var("FAULTS")
        .ok()
        .and_then(|f| f.parse().ok())
        .unwrap_or(default)
}

/// The seeds to run: `SEED` alone if given, else `runs` from the clock.
fn seeds(runs: u64) -> Vec<u64> {
    if std::env::var("SEED").is_ok() {
        return vec![support::seed()];
    }
    let base = support::seed();
    (0..runs).map(|i| base.wrapping_add(i * 7919)).collect()
}

#[test]
fn acks_all_loses_nothing_acknowledged_through_kills_and_pauses() {
    // Three seeds of 12 faults in the test command (scripts/soak.sh: 100).
    for seed in seeds(3) {
        let verdict = run(-1, faults(12), seed, 0);
        assert_acks_all_verdict(seed, &verdict);
    }
}

#[test]
fn acks_all_loses_nothing_with_separate_controllers() {
    // Three brokers following three controller-only nodes: the nemesis
    // kills and pauses controllers too (the active one in failover).
    for seed in seeds(1) {
        let verdict = run(-1, faults(12), seed, 3);
        assert_acks_all_verdict(seed, &verdict);
    }
}

/// What acks=all promises, checked.
fn assert_acks_all_verdict(seed: u64, verdict: &Verdict) {
    assert_eq!(verdict.lost, 0, "seed {seed}: {verdict:?}");
    assert_eq!(
        verdict.duplicated, 0,
        "seed {seed}: idempotent: {verdict:?}"
    );
    assert_eq!(verdict.reordered, 0, "seed {seed}: {verdict:?}");
    assert_eq!(verdict.phantom_reads, 0, "seed {seed}: {verdict:?}");
    assert_eq!(verdict.nonmonotonic, 0, "seed {seed}: {verdict:?}");
    assert_eq!(verdict.divergent, 0, "seed {seed}: {verdict:?}");
    assert_eq!(verdict.delivery_errors, 0, "seed {seed}: {verdict:?}");
}

#[test]
fn acks_1_reports_what_leader_kills_lose() {
    // The trade-off acks=1 makes: an answer after the leader's own append,
    // so a leader killed before its followers copied loses acknowledged
    // values. Reported, not failed; logs still never diverge.
    let seed = seeds(1)[0];
    let verdict = run(1, faults(10), seed, 0);
    println!(
        "acks=1 lost {} of {} acknowledged",
        verdict.lost, verdict.acked
    );
    assert_eq!(verdict.phantom_reads, 0, "{verdict:?}");
    assert_eq!(verdict.nonmonotonic, 0, "{verdict:?}");
    assert_eq!(verdict.divergent, 0, "{verdict:?}");
}
