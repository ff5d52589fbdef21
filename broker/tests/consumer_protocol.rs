//! The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat) as
//! users turn it on: librdkafka's consumers with `group.protocol=consumer`.

mod support;

use std::process::Command;

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
