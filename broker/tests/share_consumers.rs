//! Share groups (KIP-932) consumed as users consume them: confluent-kafka's
//! `ShareConsumer` (librdkafka's share consumer) against a broker whose
//! record locks last 3 s (tests/python/share_consumers.py).

mod support;

use support::{python_script, start_broker_with, Broker};

/// A broker with 3 s record locks.
fn broker(dir: &std::path::Path) -> Broker {
    start_broker_with(
        dir,
        &[("BROKER_GROUP_SHARE_RECORD_LOCK_DURATION_MS", "3000")],
    )
}

/// Runs a case of the script; its output's lines.
fn case(broker: &Broker, case: &str, topic: &str) -> Vec<String> {
    let bootstrap = broker.bootstrap();
    let group = format!("{topic}-group");
    let stdout = python_script(
        "share_consumers.py",
        &[&bootstrap, case, topic, &group],
        150,
    );
    stdout.lines().map(str::to_string).collect()
}

/// Four consumers on one partition (a consumer group could keep only one
/// busy): each gets records, every record is delivered once.
#[test]
fn four_share_consumers_on_one_partition_each_get_records_and_every_record_once() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    let lines = case(&broker, "four", "queue4");
    assert_eq!(
        lines,
        ["four 400 400 0 4"],
        "records, distinct, duplicates, busy consumers"
    );
}

/// Explicit acknowledgement: a released record comes back with its
/// delivery count up, until the delivery limit (5) archives it; a
/// rejected one never comes back; accepted ones are done.
#[test]
fn released_records_come_back_until_the_delivery_limit_and_rejected_ones_never() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    let lines = case(&broker, "explicit", "explicit");
    let expected = [
        "0:1,2,3,4,5",
        "1:1,2",
        "2:1,2",
        "3:1",
        "4:1",
        "5:1",
        "6:1",
        "7:1",
        "8:1",
        "9:1",
    ];
    assert_eq!(
        lines, expected,
        "offset: the delivery counts it was seen with"
    );
}

/// Two members take records and never acknowledge them: one is stopped
/// (its connection stays: its records come back when their locks expire),
/// one killed (its connection closes). A third member gets every record,
/// those two held with a delivery count of 2; none is lost.
#[test]
fn records_of_a_stopped_or_killed_member_go_to_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    let lines = case(&broker, "holders", "held");
    let fields: Vec<&str> = lines[0].split(' ').collect();
    assert_eq!(fields[0], "holders", "{lines:?}");
    let held: usize = fields[1].parse().unwrap();
    assert!(held > 0, "the holders took nothing: {lines:?}");
    assert_eq!(fields[2..4], ["100", "100"], "every record once: {lines:?}");
    assert_eq!(
        fields[4],
        held.to_string(),
        "the held ones redelivered: {lines:?}"
    );
    assert_eq!(
        fields[5], "True",
        "the stopped member's locks had to expire: {lines:?}"
    );
}
