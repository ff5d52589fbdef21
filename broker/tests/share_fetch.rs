//! ShareFetch and ShareAcknowledge (KIP-932) over the wire: members of
//! one share group get different records of one partition, share session
//! epochs are checked, acknowledgements of every kind act (or are
//! refused for records not held), and a closed connection gives its
//! member's records back.

mod support;

use bytes::Bytes;
use client::cluster::Cluster;
use client::connection::Connection;
use client::producer::Producer;
use kafka_protocol::ResponseError;
use support::share_wire::{acknowledge, acquired, fetch, produce_jobs as produce};
use support::{cli, on_glommio, start_broker};

#[test]
fn share_fetch_hands_members_different_records_and_acknowledgements_act() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    cli(&broker.bootstrap(), &["topic", "create", "jobs"]);
    let address = broker.address;
    on_glommio(async move {
        let cluster = Cluster::new(address, "share-fetch-test");
        let topic = cluster.topic_info("jobs", true).await.unwrap().id;
        let mut a = Connection::connect(address, "member-a").await.unwrap();
        let mut b = Connection::connect(address, "member-b").await.unwrap();
        // The first fetch starts the group at the log end (latest).
        let mut first = fetch(topic, ("member-a", 0), 4, &[]);
        first.max_wait_ms = 0;
        let opened = a.call(&first, 1).await.unwrap();
        assert_eq!(acquired(&opened), (vec![], false));
        produce(address, 10).await;
        let got = a
            .call(&fetch(topic, ("member-a", 1), 4, &[]), 1)
            .await
            .unwrap();
        assert_eq!(acquired(&got), (vec![(0, 3, 1)], true));
        assert_eq!(got.acquisition_lock_timeout_ms, 30_000);
        // Another member gets the next ones.
        let got = b
            .call(&fetch(topic, ("member-b", 0), 4, &[]), 1)
            .await
            .unwrap();
        assert_eq!(acquired(&got), (vec![(4, 7, 1)], true));
        // Session epochs: a stale one, a member without a session.
        let stale = a
            .call(&fetch(topic, ("member-a", 1), 4, &[]), 1)
            .await
            .unwrap();
        let invalid = ResponseError::InvalidShareSessionEpoch.code();
        assert_eq!(stale.error_code, invalid);
        let none = a
            .call(&fetch(topic, ("member-x", 3), 4, &[]), 1)
            .await
            .unwrap();
        assert_eq!(none.error_code, ResponseError::ShareSessionNotFound.code());
        // a accepts 0-1 and releases 2-3; b may not acknowledge a's.
        let acks = [(0, 1, 1), (2, 3, 2)];
        let done = a
            .call(&acknowledge(topic, ("member-a", 2), &acks), 1)
            .await
            .unwrap();
        assert_eq!(
            (done.error_code, done.responses[0].partitions[0].error_code),
            (0, 0)
        );
        let theirs = b
            .call(&acknowledge(topic, ("member-b", 1), &[(0, 0, 1)]), 1)
            .await
            .unwrap();
        let code = theirs.responses[0].partitions[0].error_code;
        assert_eq!(code, ResponseError::InvalidRecordState.code());
        // b, rejecting 4 on the way: the released two again, then 8-9.
        let got = b
            .call(&fetch(topic, ("member-b", 2), 10, &[(4, 4, &[3])]), 1)
            .await
            .unwrap();
        assert_eq!(got.responses[0].partitions[0].acknowledge_error_code, 0);
        assert_eq!(acquired(&got), (vec![(2, 3, 2), (8, 9, 1)], true));
        // An acknowledgement batch with neither one type nor one per offset.
        let bad = a
            .call(&fetch(topic, ("member-a", 3), 10, &[(0, 2, &[1, 1])]), 1)
            .await
            .unwrap();
        let code = bad.responses[0].partitions[0].acknowledge_error_code;
        assert_eq!(code, ResponseError::InvalidRequest.code());
        // b's connection closes: what it held (2-3, 5-9) goes to a.
        drop(b);
        let got = a
            .call(&fetch(topic, ("member-a", 4), 10, &[]), 1)
            .await
            .unwrap();
        assert_eq!(acquired(&got), (vec![(2, 3, 3), (5, 9, 2)], true));
        // a closes its session: its records come back for a new session.
        let close = acknowledge(topic, ("member-a", -1), &[(2, 3, 1)]);
        let closed = a.call(&close, 1).await.unwrap();
        assert_eq!(closed.error_code, 0);
        let reopened = a
            .call(&fetch(topic, ("member-a", 0), 10, &[]), 1)
            .await
            .unwrap();
        assert_eq!(acquired(&reopened), (vec![(5, 9, 3)], true));
    });
    // After a restart the share-partition is read back: what was
    // acknowledged or archived (0-4) is not handed out again, what was
    // only acquired (5-9) is, its deliveries counted as written (2, at
    // the last acknowledgement) plus this one.
    let mut broker = broker;
    broker.stop();
    let broker = start_broker(dir.path());
    let address = broker.address;
    on_glommio(async move {
        let cluster = Cluster::new(address, "share-fetch-test");
        let topic = cluster.topic_info("jobs", true).await.unwrap().id;
        let mut a = Connection::connect(address, "member-a").await.unwrap();
        let mut answer = None;
        for _ in 0..100 {
            let got = a
                .call(&fetch(topic, ("member-a", 0), 10, &[]), 1)
                .await
                .unwrap();
            let code = got
                .responses
                .first()
                .map_or(0, |t| t.partitions[0].error_code);
            if got.error_code == 0 && code == 0 {
                answer = Some(got);
                break;
            }
            // The group's coordinator is loading.
            glommio::timer::sleep(std::time::Duration::from_millis(100)).await;
        }
        let answer = answer.expect("the share-partition never came back");
        assert_eq!(acquired(&answer), (vec![(5, 9, 3)], true));
    });
}

/// A share group's own configs (IncrementalAlterConfigs on resource type
/// GROUP): earliest, a 1 s lock and a delivery limit of 2 apply to its
/// share-partitions; values outside their kind are refused.
#[test]
fn a_share_groups_own_configs_apply_to_its_records() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    cli(&broker.bootstrap(), &["topic", "create", "jobs"]);
    let address = broker.address;
    on_glommio(async move {
        let mut c = Connection::connect(address, "member-a").await.unwrap();
        let invalid = ResponseError::InvalidConfig.code();
        for (key, value, expected) in [
            ("share.auto.offset.reset", "by_duration:PT1H", invalid),
            ("share.delivery.count.limit", "11", invalid),
            ("share.record.lock.duration.ms", "10", invalid),
            ("share.auto.offset.reset", "earliest", 0),
            ("share.delivery.count.limit", "2", 0),
            ("share.record.lock.duration.ms", "1000", 0),
        ] {
            let answered = support::alter_group_config(&mut c, "workers", key, Some(value)).await;
            assert_eq!(answered, expected, "{key}={value}");
        }
        // Records before the group's first fetch: earliest hands them out.
        produce(address, 3).await;
        let cluster = Cluster::new(address, "share-fetch-test");
        let topic = cluster.topic_info("jobs", true).await.unwrap().id;
        let got = c
            .call(&fetch(topic, ("member-a", 0), 10, &[]), 1)
            .await
            .unwrap();
        assert_eq!(acquired(&got), (vec![(0, 2, 1)], true));
        assert_eq!(got.acquisition_lock_timeout_ms, 1_000);
        // Not acknowledged: back after the lock, then archived at 2.
        let got = c
            .call(&fetch(topic, ("member-a", 1), 10, &[]), 1)
            .await
            .unwrap();
        assert_eq!(
            acquired(&got),
            (vec![(0, 2, 2)], true),
            "after the 1 s lock"
        );
        glommio::timer::sleep(std::time::Duration::from_millis(1_500)).await;
        let mut last = fetch(topic, ("member-a", 2), 10, &[]);
        last.max_wait_ms = 500;
        let got = c.call(&last, 1).await.unwrap();
        assert_eq!(
            acquired(&got),
            (vec![], false),
            "archived at the delivery limit"
        );
    });
    // /metrics: six deliveries, three of them again, three archived at
    // the limit; nothing held or in flight, no lag left.
    let gauge = |name: &str| support::cluster::gauge(broker.http, name);
    assert_eq!(gauge("share_records_acquired_total"), 6.0);
    assert_eq!(gauge("share_records_redelivered_total"), 3.0);
    assert_eq!(
        gauge("share_records_archived_total{reason=\"delivery_limit\"}"),
        3.0
    );
    assert_eq!(
        gauge("share_records_archived_total{reason=\"rejected\"}"),
        0.0
    );
    let labels = "{group=\"workers\",topic=\"jobs\",partition=\"0\"}";
    for name in [
        "share_group_records_acquired",
        "share_group_records_in_flight",
        "share_group_lag_messages",
    ] {
        assert_eq!(gauge(&format!("{name}{labels}")), 0.0, "{name}");
    }
}

/// A share group reading committed (`share.isolation.level`
/// read_committed): a committed transaction's records are handed out, an
/// aborted one's never (archived), and nothing at or past an open
/// transaction until it commits. Transaction markers are handed out with
/// the records (a share consumer acknowledges them as gaps).
#[test]
fn a_share_group_reading_committed_gets_committed_transactions_only() {
    use client::producer::ProducerConfig;
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    cli(&broker.bootstrap(), &["topic", "create", "jobs"]);
    let address = broker.address;
    on_glommio(async move {
        let mut c = Connection::connect(address, "member-a").await.unwrap();
        for (key, value) in [
            ("share.isolation.level", "read_committed"),
            ("share.auto.offset.reset", "earliest"),
        ] {
            let answered = support::alter_group_config(&mut c, "workers", key, Some(value)).await;
            assert_eq!(answered, 0, "{key}={value}");
        }
        let config = ProducerConfig {
            transactional_id: Some("share-tx".into()),
            ..ProducerConfig::default()
        };
        let producer = Producer::new(Cluster::new(address, "share-tx"), config);
        producer.init_transactions().await.unwrap();
        // 0-4 committed (marker 5), 6-10 aborted (marker 11), 12-14 open.
        for (records, end) in [(5, Some(true)), (5, Some(false)), (3, None)] {
            producer.begin_transaction().unwrap();
            let mut sent = Vec::new();
            for i in 0..records {
                let value = Some(Bytes::from(format!("tx-{i}")));
                sent.push(producer.send("jobs", None, value).await.unwrap());
            }
            producer.flush().await;
            for delivery in sent {
                delivery.await.unwrap();
            }
            match end {
                Some(true) => producer.commit_transaction().await.unwrap(),
                Some(false) => producer.abort_transaction().await.unwrap(),
                None => {}
            }
        }
        let cluster = Cluster::new(address, "share-fetch-test");
        let topic = cluster.topic_info("jobs", true).await.unwrap().id;
        let mut first = fetch(topic, ("member-a", 0), 100, &[]);
        first.max_wait_ms = 200;
        let got = c.call(&first, 1).await.unwrap();
        assert_eq!(acquired(&got), (vec![(0, 5, 1), (11, 11, 1)], true));
        // Nothing more while the transaction is open.
        let mut next = fetch(topic, ("member-a", 1), 100, &[]);
        next.max_wait_ms = 200;
        assert_eq!(acquired(&c.call(&next, 1).await.unwrap()).0, vec![]);
        producer.commit_transaction().await.unwrap();
        let got = c.call(&fetch(topic, ("member-a", 2), 100, &[]), 1).await;
        assert_eq!(acquired(&got.unwrap()).0, vec![(12, 15, 1)]);
    });
}
