//! The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat) as
//! users turn it on: librdkafka's consumers with `group.protocol=consumer`.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::start_broker;

/// confluent-kafka (tests/python/consumer_protocol.py): two consumers
/// share six partitions, partitions move from the first to the second
/// as it joins, every value is read, the commits are stored.
#[test]
fn librdkafka_consumers_share_a_topic_with_the_consumer_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let python = std::env::var("KAFKA_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/consumer_protocol.py"
    );
    let bootstrap = broker.bootstrap();
    let output = Command::new("timeout")
        .args([
            "120",
            &python,
            script,
            &bootstrap,
            "kip848",
            "kip848-group",
            "600",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "confluent-kafka consumers (group.protocol=consumer) failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("seen 600"), "{stdout}");
    assert!(stdout.contains("assigned 3 3"), "{stdout}");
    assert!(stdout.contains("committed"), "{stdout}");
}

/// A consumer process (tests/python/consumer_member.py) and the lines it
/// prints, read on a thread of their own.
struct Member {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Member {
    fn start(bootstrap: &str, group: &str) -> Member {
        let python = std::env::var("KAFKA_PYTHON").unwrap_or_else(|_| "python3".into());
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/python/consumer_member.py"
        );
        let mut child = Command::new(&python)
            .args([script, bootstrap, "kip848-crash", group, "90"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{python}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let _ = tx.send(line);
            }
        });
        Member { child, lines }
    }

    /// Waits (at most `limit`) until it reports `count` partitions.
    fn wait_assigned(&self, count: usize, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let wanted = format!("assigned {count}");
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) if line == wanted => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A member killed with SIGKILL stops heartbeating: once its session
/// (`group_consumer_session_timeout_ms`, 3 s here) lapses the broker
/// removes it and its partitions go to the member left.
#[test]
fn a_killed_members_partitions_go_to_the_others_when_its_session_lapses() {
    let dir = tempfile::tempdir().unwrap();
    let settings = [
        ("BROKER_GROUP_CONSUMER_SESSION_TIMEOUT_MS", "3000"),
        ("BROKER_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS", "500"),
    ];
    let broker = support::start_broker_with(dir.path(), &settings);
    let bootstrap = broker.bootstrap();
    let first = Member::start(&bootstrap, "crash-group");
    assert!(
        first.wait_assigned(6, Duration::from_secs(60)),
        "the first member got all six"
    );
    let mut second = Member::start(&bootstrap, "crash-group");
    assert!(
        second.wait_assigned(3, Duration::from_secs(60)),
        "the second took three"
    );
    assert!(
        first.wait_assigned(3, Duration::from_secs(30)),
        "the first gave three up"
    );
    drop(first); // SIGKILL: no leave, no more heartbeats
    let killed = Instant::now();
    assert!(
        second.wait_assigned(6, Duration::from_secs(30)),
        "the survivor got the killed member's partitions"
    );
    let waited = killed.elapsed();
    assert!(
        waited >= Duration::from_secs(2),
        "not before its session lapsed: {waited:?}"
    );
    let _ = second.child.kill();
}
