//! Transactions under faults at fixed points of a commit, on three
//! brokers (a topic of 3 partitions, replication factor 3).
//!
//! `transactions.rs` kills brokers at random while transactions run: good
//! at finding surprises, but a given run may never hit the narrow moments
//! where a commit is half done. These tests hit each one on purpose. The
//! brokers run with `BROKER_TEST_MARKER_PAUSE_MS` (the coordinator, once
//! PrepareCommit/PrepareAbort is written and EndTxn answered, writes the
//! markers one partition at a time in partition order, pausing before
//! each), and confluent-kafka's transactional producer is driven one step
//! at a time (`tests/python/txn_steps.py`), so a test knows where the
//! commit stands when it kills something: the coordinator or a
//! partition leader before EndTxn; the coordinator after PrepareCommit
//! and before any marker, or between two markers; a partition leader
//! whose marker is pending; the producer mid-transaction
//! or right after its commit returns; a marker still pending when the
//! producer's next transaction starts; a producer paused past its
//! transaction timeout.
//!
//! After each scenario, over every record: every partition's last stable
//! offset reaches its high watermark, and a read_committed reader sees
//! exactly the committed values, each once and in order: no aborted or
//! torn transaction read, no committed record lost, no duplicate. Each
//! step is printed with its time as it happens (and again on failure).

mod support;

use std::cell::RefCell;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::rc::Rc;
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use client::connection::Connection;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use support::cli;
use support::cluster::{coordinator_of, Cluster};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/txn_steps.py");

const PARTITIONS: usize = 3;

/// The coordinator's pause before each partition's marker (the value of
/// `BROKER_TEST_MARKER_PAUSE_MS` below): partition p's marker comes at
/// least (p + 1) pauses after the commit's answer.
const PAUSE: Duration = Duration::from_millis(3000);

/// The marker pause, and fast failure detection (as the replication
/// tests): a killed broker's leaderships move within 1.5 s.
const ENV: [(&str, &str); 4] = [
    ("BROKER_TEST_MARKER_PAUSE_MS", "3000"),
    ("BROKER_BROKER_SESSION_TIMEOUT_MS", "1500"),
    ("BROKER_BROKER_HEARTBEAT_INTERVAL_MS", "250"),
    ("BROKER_REPLICA_FETCH_WAIT_MAX_MS", "200"),
];

fn python() -> String {
    std::env::var("KAFKA_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Each partition's (high watermark, last stable offset) as its leader
/// answers them (None: no broker answered as its leader).
type Ends = Vec<Option<(i64, i64)>>;

/// What a reader saw: per partition, (offset, value) in offset order.
type Read = Vec<Vec<(i64, String)>>;

/// Whether a partition is stable up to its high watermark. The HW is
/// asked before the LSO, so `lso >= hw` holds only if nothing below that
/// HW was undecided, and `lso < hw` only if something was when the LSO
/// was read.
fn stable(end: &Option<(i64, i64)>) -> bool {
    matches!(end, Some((hw, lso)) if lso >= hw)
}

fn unstable(end: &Option<(i64, i64)>) -> bool {
    matches!(end, Some((hw, lso)) if lso < hw)
}

fn all_stable(ends: &Ends) -> bool {
    ends.iter().all(stable)
}

/// One transaction's values: `count` per partition, `{tag}{p}-{i}`.
fn batch(tag: &str, count: usize) -> Vec<Vec<String>> {
    (0..PARTITIONS)
        .map(|p| (0..count).map(|i| format!("{tag}{p}-{i}")).collect())
        .collect()
}

/// Transactions' values one after the other, per partition.
fn concat(transactions: &[&[Vec<String>]]) -> Vec<Vec<String>> {
    (0..PARTITIONS)
        .map(|p| transactions.iter().flat_map(|t| t[p].clone()).collect())
        .collect()
}

fn values(records: &[(i64, String)]) -> Vec<&str> {
    records.iter().map(|(_, v)| v.as_str()).collect()
}

/// What happened when: printed as it happens, and again if the test
/// fails (by [`Report`]).
#[derive(Clone)]
struct Timeline {
    started: Instant,
    events: Rc<RefCell<Vec<String>>>,
}

impl Timeline {
    fn note(&self, what: impl std::fmt::Display) {
        let at = self.started.elapsed().as_secs_f64();
        let line = format!("{at:7.3}s {what}");
        println!("{line}");
        self.events.borrow_mut().push(line);
    }
}

/// Prints the timeline if dropped in a panic: a field of [`Run`] after
/// its cluster, so it comes after the brokers' logs, not lost above them.
struct Report(Timeline);

impl Drop for Report {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let events = self.0.events.borrow().join("\n");
            eprintln!("--- fault timeline:\n{events}");
        }
    }
}

/// A three-broker cluster with the marker pause, one topic, a timeline.
struct Run {
    cluster: Cluster,
    _report: Report,
    timeline: Timeline,
    topic: &'static str,
    /// Every broker, for the clients.
    bootstrap: String,
    _dir: tempfile::TempDir,
}

impl Run {
    /// Starts the brokers and creates `topic`, waiting until each of its
    /// partitions has a leader (a producer with a 4 s transaction timeout
    /// has no time to wait for elections).
    fn start(topic: &'static str) -> Run {
        let dir = tempfile::tempdir().unwrap();
        let mut cluster = Cluster::new(dir.path(), 3, &ENV);
        cluster.start();
        let first = cluster.node(1).kafka.to_string();
        let create = [
            "topic",
            "create",
            topic,
            "--partitions",
            "3",
            "--replication-factor",
            "3",
        ];
        cli(&first, &create);
        let bootstrap = cluster.bootstrap();
        let timeline = Timeline {
            started: Instant::now(),
            events: Rc::default(),
        };
        let run = Run {
            cluster,
            _report: Report(timeline.clone()),
            timeline,
            topic,
            bootstrap,
            _dir: dir,
        };
        let (led, ends) = run.wait_ends(Duration::from_secs(30), |e| e.iter().all(Option::is_some));
        assert!(led, "{topic} has a partition without a leader: {ends:?}");
        run.note(format!("3 brokers up, {topic} created"));
        run
    }

    fn note(&self, what: impl std::fmt::Display) {
        self.timeline.note(what);
    }

    /// A transactional producer for `id`, initialized.
    fn producer(&self, id: &str, timeout_ms: u32) -> Producer {
        let mut producer = Producer::spawn(&self.bootstrap, id, timeout_ms, &self.timeline);
        producer.ok("init");
        producer
    }

    /// The broker coordinating transactional id `id` now.
    fn coordinator(&self, id: &str) -> i32 {
        for _ in 0..50 {
            if let Some(coordinator) = coordinator_of(&self.cluster, id) {
                self.note(format!("broker {coordinator} coordinates {id}"));
                return coordinator;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("no broker names a coordinator for {id}");
    }

    /// Each partition's leader as broker 1 describes it.
    fn leaders(&self) -> Vec<Option<i32>> {
        let (address, topic) = (self.cluster.node(1).kafka, self.topic);
        let leaders = support::on_glommio(async move {
            let client = client::cluster::Cluster::new(address, "transaction-points");
            let _ = client.refresh(Some(&[topic]), false).await;
            (0..PARTITIONS as i32)
                .map(|p| client.leader_of(topic, p).filter(|l| *l >= 0))
                .collect::<Vec<_>>()
        });
        self.note(format!("leaders by partition: {leaders:?}"));
        leaders
    }

    fn kill9(&mut self, broker: i32, why: &str) {
        self.note(format!("SIGKILL broker {broker} ({why})"));
        self.cluster.kill9(broker);
    }

    /// Restarts `broker` after a second down.
    fn restart(&mut self, broker: i32) {
        std::thread::sleep(Duration::from_secs(1));
        self.note(format!("restart broker {broker}"));
        self.cluster.restart(broker);
        self.note(format!("broker {broker} is back"));
    }

    fn ends(&self) -> Ends {
        let (addresses, topic) = (self.cluster.addresses(), self.topic);
        support::on_glommio(async move { ends_of(&addresses, topic).await })
    }

    /// Polls [`Run::ends`] until `done` holds of them or `within` passes:
    /// whether it held, and the last ends seen.
    fn wait_ends(&self, within: Duration, done: impl Fn(&Ends) -> bool) -> (bool, Ends) {
        let (addresses, topic) = (self.cluster.addresses(), self.topic);
        support::on_glommio(async move {
            let started = Instant::now();
            loop {
                let ends = ends_of(&addresses, topic).await;
                if done(&ends) || started.elapsed() > within {
                    return (done(&ends), ends);
                }
                glommio::timer::sleep(Duration::from_millis(100)).await;
            }
        })
    }

    /// Every partition read from offset 0 at `isolation` by
    /// `txn_steps.py read` (which fails, for read_committed, unless every
    /// LSO reaches its HW within 60 s).
    fn read(&self, isolation: &str) -> Read {
        let partitions = PARTITIONS.to_string();
        let out = Command::new("timeout")
            .args(["120", &python(), SCRIPT, "read", &self.bootstrap])
            .args([self.topic, &partitions, isolation])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "txn_steps.py read {isolation} failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = stdout.lines().last().unwrap_or_default();
        let json: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        let read: Read = (0..PARTITIONS)
            .map(|p| {
                let records = json[p.to_string().as_str()].as_array();
                let records = records.unwrap_or_else(|| panic!("no partition {p}: {line}"));
                records
                    .iter()
                    .map(|r| (r[0].as_i64().unwrap(), r[1].as_str().unwrap().to_string()))
                    .collect()
            })
            .collect();
        for (p, records) in read.iter().enumerate() {
            let offsets: Vec<i64> = records.iter().map(|(o, _)| *o).collect();
            assert!(
                offsets.windows(2).all(|w| w[0] < w[1]),
                "partition {p} read out of order at {isolation}: {offsets:?}"
            );
        }
        read
    }

    /// The checks after every scenario: every partition's LSO reaches its
    /// HW within 60 s, and read_committed sees exactly `expected` in each
    /// partition (every committed value once, in order, nothing else).
    fn check_committed(&self, expected: &[Vec<String>]) {
        let (settled, ends) = self.wait_ends(Duration::from_secs(60), all_stable);
        self.note(format!("(HW, LSO) by partition: {ends:?}"));
        assert!(settled, "an LSO stayed below its HW for 60 s: {ends:?}");
        let read = self.read("read_committed");
        for (p, (records, want)) in read.iter().zip(expected).enumerate() {
            assert_eq!(values(records), *want, "partition {p}, read_committed");
        }
        self.note("read_committed: every committed value once, nothing else");
    }
}

/// [`Ends`] of `topic`, asking every broker (a killed one refuses the
/// connection; a follower answers NOT_LEADER_OR_FOLLOWER).
async fn ends_of(addresses: &[SocketAddr], topic: &str) -> Ends {
    let mut ends = vec![None; PARTITIONS];
    for address in addresses {
        let Ok(mut c) = Connection::connect(*address, "transaction-points").await else {
            continue;
        };
        let hws = latest(&mut c, topic, 0).await;
        let lsos = latest(&mut c, topic, 1).await;
        for (end, (hw, lso)) in ends.iter_mut().zip(hws.into_iter().zip(lsos)) {
            if let (None, Some(hw), Some(lso)) = (*end, hw, lso) {
                *end = Some((hw, lso));
            }
        }
    }
    ends
}

/// Each partition's latest offset at `isolation` (0: the HW, 1: the LSO)
/// where this broker answers as its leader.
async fn latest(c: &mut Connection, topic: &str, isolation: i8) -> Vec<Option<i64>> {
    let partitions = (0..PARTITIONS as i32)
        .map(|p| {
            ListOffsetsPartition::default()
                .with_partition_index(p)
                .with_timestamp(-1)
        })
        .collect();
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(partitions)]);
    let mut latest = vec![None; PARTITIONS];
    let Ok(answer) = c.call(&request, 5).await else {
        return latest;
    };
    for p in answer.topics.iter().flat_map(|t| &t.partitions) {
        if let Some(slot) = latest.get_mut(p.partition_index as usize) {
            if p.error_code == 0 {
                *slot = Some(p.offset);
            }
        }
    }
    latest
}

/// `txn_steps.py`: confluent-kafka's transactional producer, one command
/// at a time, each answered by one line.
struct Producer {
    child: Child,
    stdin: ChildStdin,
    replies: Receiver<String>,
    name: String,
    timeline: Timeline,
    killed: bool,
}

impl Producer {
    fn spawn(bootstrap: &str, id: &str, timeout_ms: u32, timeline: &Timeline) -> Producer {
        let mut child = Command::new("timeout")
            .args(["300", &python(), SCRIPT, bootstrap, id])
            .arg(timeout_ms.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // `timeout` and python in a process group of their own: a
            // signal to the group reaches python, not only `timeout`.
            .process_group(0)
            .spawn()
            .expect("start txn_steps.py");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, replies) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Producer {
            child,
            stdin,
            replies,
            name: format!("producer {id}"),
            timeline: timeline.clone(),
            killed: false,
        }
    }

    /// Sends `command`; its answer (`ok CMD` or `error CMD ...`).
    fn step(&mut self, command: &str) -> String {
        self.timeline.note(format!("{}: {command}", self.name));
        let sent = writeln!(self.stdin, "{command}").and_then(|_| self.stdin.flush());
        sent.unwrap_or_else(|e| panic!("{}: cannot send {command:?}: {e}", self.name));
        // Bounded: init retries for 60 s, commit and abort wait 60 s.
        let reply = self
            .replies
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|e| panic!("{}: no answer to {command:?} ({e})", self.name));
        self.timeline.note(format!("{}: {reply}", self.name));
        reply
    }

    /// [`Producer::step`], which must succeed.
    fn ok(&mut self, command: &str) {
        let reply = self.step(command);
        let verb = command.split_whitespace().next().unwrap_or_default();
        assert_eq!(reply, format!("ok {verb}"), "{}: {command}", self.name);
    }

    /// Sends `values[p]` to partition p of `topic`, for every p.
    fn send_all(&mut self, topic: &str, values: &[Vec<String>]) {
        for (p, list) in values.iter().enumerate() {
            self.ok(&format!("send {topic} {p} {}", list.join(" ")));
        }
    }

    fn signal(&self, signal: i32) {
        unsafe {
            libc::kill(-(self.child.id() as i32), signal);
        }
    }

    fn kill9(&mut self) {
        self.timeline.note(format!("SIGKILL {}", self.name));
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
        self.killed = true;
    }

    fn stop(&self) {
        self.timeline.note(format!("SIGSTOP {}", self.name));
        self.signal(libc::SIGSTOP);
    }

    fn cont(&self) {
        self.timeline.note(format!("SIGCONT {}", self.name));
        self.signal(libc::SIGCONT);
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        if !self.killed {
            self.signal(libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// A producer with a transaction of 3 values in every partition, open:
/// the producer, the values, and its coordinator.
fn open_transaction(run: &Run, id: &str, tag: &str) -> (Producer, Vec<Vec<String>>, i32) {
    let mut producer = run.producer(id, 60_000);
    let values = batch(tag, 3);
    producer.ok("begin");
    producer.send_all(run.topic, &values);
    let coordinator = run.coordinator(id);
    (producer, values, coordinator)
}

/// Before EndTxn: the coordinator dies while the transaction is open
/// (its partitions added, its records acknowledged). The broker taking
/// over loads it as ongoing, and the producer's commit goes there.
#[test]
fn the_coordinator_killed_before_end_txn() {
    let mut run = Run::start("points-e");
    let (mut producer, sent, coordinator) = open_transaction(&run, "tp-e", "e");
    run.kill9(coordinator, "the coordinator, transaction open");
    run.restart(coordinator);
    producer.ok("commit");
    run.check_committed(&sent);
}

/// Before EndTxn: a partition's leader dies with the transaction's
/// records acknowledged there (acks=all: on every in-sync replica). Its
/// marker must land on the next leader, over those same records.
#[test]
fn a_partition_leader_killed_before_end_txn() {
    let mut run = Run::start("points-f");
    let (mut producer, sent, coordinator) = open_transaction(&run, "tp-f", "f");
    let leaders = run.leaders();
    let victim = leaders
        .iter()
        .flatten()
        .copied()
        .find(|l| *l != coordinator)
        .unwrap_or(coordinator);
    run.kill9(victim, "a partition leader, transaction open");
    run.restart(victim);
    producer.ok("commit");
    run.check_committed(&sent);
}

/// The coordinator dies with PrepareCommit in its log and no marker
/// written: the broker that takes over its `__transaction_state`
/// partition must finish the commit from the log alone.
#[test]
fn the_coordinator_killed_after_prepare_commit_before_any_marker() {
    let mut run = Run::start("points-a");
    let (mut producer, sent, coordinator) = open_transaction(&run, "tp-a", "a");
    producer.ok("commit");
    let answered = Instant::now();
    let ends = run.ends();
    let in_time = answered.elapsed() < PAUSE - Duration::from_millis(500);
    run.note(format!("right after the commit, (HW, LSO): {ends:?}"));
    // Within the pause no marker can be written: every LSO still holds.
    if in_time {
        assert!(
            ends.iter().all(unstable),
            "a partition was stable before its marker's pause ended: {ends:?}"
        );
    } else {
        run.note("(asked too late to tell whether a marker came early)");
    }
    run.kill9(coordinator, "the coordinator, before any marker");
    run.restart(coordinator);
    run.check_committed(&sent);
}

/// The coordinator dies after partition 0's marker and before partition
/// 2's: the commit must be finished, not left half visible.
#[test]
fn the_coordinator_killed_between_two_markers() {
    let mut run = Run::start("points-b");
    let (mut producer, sent, coordinator) = open_transaction(&run, "tp-b", "b");
    producer.ok("commit");
    // Partition 0's marker comes a pause after the answer (3 s),
    // partition 2's three pauses after it (9 s).
    let (marked, ends) = run.wait_ends(Duration::from_secs(8), |e| stable(&e[0]));
    run.note(format!("(HW, LSO): {ends:?}"));
    assert!(marked, "partition 0 got no marker in time: {ends:?}");
    assert!(unstable(&ends[2]), "partition 2 already marked: {ends:?}");
    run.kill9(coordinator, "the coordinator, between markers");
    run.restart(coordinator);
    run.check_committed(&sent);
}

/// A partition's leader dies while the coordinator still has its marker
/// to write: the marker must reach the partition's next leader.
#[test]
fn a_partition_leader_killed_while_its_marker_is_pending() {
    let mut run = Run::start("points-c");
    let (mut producer, sent, coordinator) = open_transaction(&run, "tp-c", "c");
    let leaders = run.leaders();
    // The last partition another broker leads: its marker goes over
    // WriteTxnMarkers, and comes latest.
    let other = (0..PARTITIONS)
        .rev()
        .find_map(|p| leaders[p].filter(|l| *l != coordinator).map(|l| (p, l)));
    producer.ok("commit");
    match other {
        Some((p, leader)) => run.kill9(leader, &format!("leader of partition {p}, marker pending")),
        None => run.kill9(
            coordinator,
            "the coordinator leads every partition: killed instead",
        ),
    }
    let victim = other.map_or(coordinator, |(_, leader)| leader);
    run.restart(victim);
    run.check_committed(&sent);
}

/// A commit's markers still being written when the same producer starts
/// its next transaction: the next transaction's records must wait for
/// them (AddPartitionsToTxn answers CONCURRENT_TRANSACTIONS until the
/// commit completes; the client retries), or the old commit's marker
/// would commit them too.
#[test]
fn a_marker_delayed_past_the_producers_next_transaction() {
    let run = Run::start("points-d");
    let mut producer = run.producer("tp-d", 60_000);
    let (a, b, c) = (batch("A", 3), batch("B", 3), batch("C", 3));
    producer.ok("begin");
    producer.send_all(run.topic, &a);
    producer.ok("commit");
    let committed = Instant::now();
    producer.ok("begin");
    producer.send_all(run.topic, &b);
    let waited = committed.elapsed().as_secs_f64();
    run.note(format!(
        "the second transaction's records sent {waited:.1} s after the commit"
    ));
    producer.ok("abort");
    producer.ok("begin");
    producer.send_all(run.topic, &c);
    producer.ok("commit");
    run.check_committed(&concat(&[&a, &c]));
    // Every record is in the log, each transaction after the previous
    // one's marker (an offset between its last record and the next's first).
    let all = run.read("read_uncommitted");
    let everything = concat(&[&a, &b, &c]);
    for (p, records) in all.iter().enumerate() {
        assert_eq!(values(records), everything[p], "partition {p}");
        let offset = |value: &String| records.iter().find(|(_, v)| v == value).unwrap().0;
        for (before, after, what) in [(&a, &b, "commit"), (&b, &c, "abort")] {
            let (last, first) = (offset(before[p].last().unwrap()), offset(&after[p][0]));
            assert!(
                first > last + 1,
                "partition {p}: no {what} marker between offsets {last} and {first}"
            );
        }
    }
}

/// The producer dies mid-transaction: the coordinator aborts it at its
/// timeout, and a new instance of the transactional id works as usual.
#[test]
fn a_producer_killed_mid_transaction_is_aborted_at_its_timeout() {
    let run = Run::start("points-e");
    let mut producer = run.producer("tp-e", 4_000);
    let lost = batch("lost", 3);
    producer.ok("begin");
    producer.send_all(run.topic, &lost);
    producer.kill9();
    // The timeout (4 s, checked every second), then 3 markers 3 s apart.
    let (settled, ends) = run.wait_ends(Duration::from_secs(30), all_stable);
    run.note(format!("(HW, LSO): {ends:?}"));
    assert!(
        settled,
        "the abandoned transaction still holds an LSO: {ends:?}"
    );
    let all = run.read("read_uncommitted");
    for (p, records) in all.iter().enumerate() {
        assert_eq!(values(records), lost[p], "partition {p}: in the log");
    }
    let mut next = run.producer("tp-e", 60_000);
    let kept = batch("kept", 3);
    next.ok("begin");
    next.send_all(run.topic, &kept);
    next.ok("commit");
    run.check_committed(&kept);
}

/// The producer dies as soon as its commit returns, with every marker
/// still to come: the commit is the coordinator's to finish.
#[test]
fn a_producer_killed_right_after_its_commit_returns_stays_committed() {
    let run = Run::start("points-e2");
    let (mut producer, sent, _) = open_transaction(&run, "tp-e2", "k");
    producer.ok("commit");
    producer.kill9();
    run.note(format!("(HW, LSO): {:?}", run.ends()));
    run.check_committed(&sent);
}

/// A producer paused (SIGSTOP) past its transaction timeout: the
/// coordinator aborts the transaction and fences the producer, which,
/// resumed, cannot commit it.
#[test]
fn a_producer_paused_past_its_timeout_cannot_commit() {
    let run = Run::start("points-f");
    let mut producer = run.producer("tp-f", 4_000);
    let sent = batch("f", 3);
    producer.ok("begin");
    producer.send_all(run.topic, &sent);
    producer.stop();
    let (settled, ends) = run.wait_ends(Duration::from_secs(30), all_stable);
    producer.cont();
    run.note(format!("(HW, LSO): {ends:?}"));
    assert!(
        settled,
        "the timed-out transaction still holds an LSO: {ends:?}"
    );
    let reply = producer.step("commit");
    assert!(
        reply.starts_with("error commit "),
        "a commit after the timeout's abort: {reply}"
    );
    run.check_committed(&[vec![], vec![], vec![]]);
    let all = run.read("read_uncommitted");
    for (p, records) in all.iter().enumerate() {
        assert_eq!(values(records), sent[p], "partition {p}: in the log");
    }
    producer.kill9();
}

/// The project's producer in transaction.version 2 (an epoch bump per
/// transaction, partitions added by their leaders): the coordinator dies
/// with PrepareCommit (at the bumped epoch) in its log and no marker
/// written. The broker taking over must write the markers at that epoch,
/// and the producer, going on with the epoch EndTxn answered, must commit
/// its next transaction through the new coordinator.
#[test]
fn transaction_version_2_the_coordinator_killed_after_prepare_commit() {
    use bytes::Bytes;
    use client::producer::{Producer, ProducerConfig};
    let mut run = Run::start("points-v2");
    let id = "tp-v2";
    let coordinator = run.coordinator(id);
    let address = run.cluster.node(1).kafka;
    let topic = run.topic;
    let (first, second) = (batch("v2a", 3), batch("v2b", 3));
    let (sent_first, sent_second) = (first.clone(), second.clone());
    // The client runs on this thread's executor; the brokers are killed
    // and restarted from it between its calls.
    let run = support::on_glommio(async move {
        let cluster = client::cluster::Cluster::new(address, "transaction-points-v2");
        let config = ProducerConfig {
            transactional_id: Some(id.into()),
            ..ProducerConfig::default()
        };
        let producer = Producer::new(cluster, config);
        producer.init_transactions().await.unwrap();
        // A key for each partition, so each value lands where `batch` says.
        let keys: Vec<Bytes> = (0..PARTITIONS as u32)
            .map(|p| {
                (0..)
                    .map(|k| format!("key-{k}"))
                    .find(|k| client::partitioner::partition_for_key(k.as_bytes(), 3) == p)
                    .map(Bytes::from)
                    .unwrap()
            })
            .collect();
        let send = |values: Vec<Vec<String>>| {
            let (producer, keys) = (&producer, &keys);
            async move {
                producer.begin_transaction().unwrap();
                let mut acks = Vec::new();
                for (p, values) in values.iter().enumerate() {
                    for value in values {
                        let value = Some(Bytes::from(value.clone()));
                        let ack = producer.send(topic, Some(keys[p].clone()), value).await;
                        acks.push(ack.unwrap());
                    }
                }
                producer.flush().await;
                for ack in acks {
                    ack.await.unwrap();
                }
                producer.commit_transaction().await.unwrap();
            }
        };
        send(first).await;
        run.note("v2 commit answered (PrepareCommit written, markers held)");
        run.kill9(coordinator, "the coordinator, before any marker");
        run.restart(coordinator);
        send(second).await;
        run.note("the next transaction committed through the new coordinator");
        let admin = client::cluster::Cluster::new(address, "transaction-points-admin");
        let described = admin.describe_transaction(id).await.unwrap();
        // init gave epoch 0; each commit bumped it once.
        assert_eq!(described.producer_epoch, 2, "{described:?}");
        run
    });
    run.check_committed(&concat(&[&sent_first, &sent_second]));
}
