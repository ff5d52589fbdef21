//! The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat) as
//! users turn it on: librdkafka's consumers with `group.protocol=consumer`.

mod support;

use std::time::{Duration, Instant};

use client::cluster::Cluster;
use client::connection::{ClientError, Connection};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, FindCoordinatorRequest, GroupId,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use support::consumer_member::Member;
use support::{python_script, start_broker};

/// confluent-kafka (tests/python/consumer_protocol.py): two consumers
/// share six partitions, partitions move from the first to the second
/// as it joins, every value is read, the commits are stored.
#[test]
fn librdkafka_consumers_share_a_topic_with_the_consumer_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let bootstrap = broker.bootstrap();
    let args = [bootstrap.as_str(), "kip848", "kip848-group", "600"];
    let stdout = python_script("consumer_protocol.py", &args, 120);
    assert!(stdout.contains("seen 600"), "{stdout}");
    assert!(stdout.contains("assigned 3 3"), "{stdout}");
    assert!(stdout.contains("committed"), "{stdout}");
}

/// The scenario with confluent-kafka (tests/python/
/// consumer_protocol_three.py): a producer writes all along; members A
/// and B share six partitions, C joins and everyone has two, B leaves,
/// then three new members resume from the commits. Every value
/// delivered is read, none twice (each member commits before it gives
/// partitions up); while C joins, A and B never drop below the two
/// partitions they keep (no stop-the-world); after the restart only the
/// new values are read.
#[test]
fn three_librdkafka_members_join_leave_and_resume_without_a_pause_or_a_loss() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let bootstrap = broker.bootstrap();
    let args = [bootstrap.as_str(), "three", "three-group"];
    let stdout = python_script("consumer_protocol_three.py", &args, 240);
    println!("{stdout}");
    let line = |prefix: &str| -> Vec<u64> {
        let found = stdout.lines().find(|l| l.starts_with(prefix));
        let found = found.unwrap_or_else(|| panic!("no {prefix:?} in {stdout}"));
        let numbers = found.split_whitespace().filter_map(|w| w.parse().ok());
        numbers.collect()
    };
    assert_eq!(line("join min_assigned"), vec![2, 2], "{stdout}");
    let [seen, delivered, duplicates] = line("seen")[..] else {
        panic!("{stdout}")
    };
    assert!(delivered > 1000, "{stdout}");
    assert_eq!((seen, duplicates), (delivered, 0), "{stdout}");
    assert_eq!(line("resumed"), vec![600, 0], "{stdout}");
}

/// A group moved from the classic protocol to the consumer protocol and
/// back through an empty group (tests/python/group_conversion.py): each
/// consumer resumes exactly where the last one of the other protocol
/// committed.
#[test]
fn a_group_moves_between_the_protocols_through_an_empty_group() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let bootstrap = broker.bootstrap();
    let args = [bootstrap.as_str(), "moving", "moving-group"];
    let stdout = python_script("group_conversion.py", &args, 240);
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["classic 300", "consumer 300", "classic 300"],
        "{stdout}"
    );
    // Classic again: listed as such, its consumer state ended.
    let address = broker.address;
    let (listed, described) = support::on_glommio(async move {
        let cluster = Cluster::new(address, "kip848-moving");
        let listed = cluster.list_groups().await.unwrap();
        (
            listed,
            cluster.describe_consumer_group("moving-group").await,
        )
    });
    let listed = listed.iter().find(|g| g.group == "moving-group").unwrap();
    assert_eq!(listed.group_type, "classic", "{listed:?}");
    assert!(
        matches!(described, Err(ClientError::Broker(c)) if c == ResponseError::GroupIdNotFound.code()),
        "{described:?}"
    );
}

/// DeleteGroups of an empty consumer group ends it for good: not listed,
/// not described, not back after a restart.
#[test]
fn a_deleted_consumer_group_is_gone_also_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let address = broker.address;
    let gone = |address| {
        support::on_glommio(async move {
            let cluster = Cluster::new(address, "kip848-delete");
            let listed = cluster.list_groups().await.unwrap();
            let described = cluster.describe_consumer_group("wire-group").await;
            let not_found = ResponseError::GroupIdNotFound.code();
            let described_gone = matches!(described, Err(ClientError::Broker(c)) if c == not_found);
            (
                listed.iter().all(|g| g.group != "wire-group") && described_gone,
                listed,
            )
        })
    };
    support::on_glommio(async move {
        let cluster = Cluster::new(address, "kip848-delete");
        cluster.create_topic("wire", 2, 1, &[]).await.unwrap();
        let mut c = Connection::connect(address, "kip848-delete").await.unwrap();
        first_join(&mut c, "wire-group", &join("m1")).await;
        let left = c.call(&beat("wire-group", "m1", -1), 1).await.unwrap();
        assert_eq!(left.error_code, 0);
        cluster.delete_group("wire-group").await.unwrap();
    });
    let (is_gone, listed) = gone(address);
    assert!(is_gone, "{listed:?}");
    broker.terminate();
    let broker = start_broker(dir.path());
    let (is_gone, listed) = gone(broker.address);
    assert!(is_gone, "back after a restart: {listed:?}");
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
        ("BROKER_GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS", "1000"),
        ("BROKER_GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS", "100"),
    ];
    let broker = support::start_broker_with(dir.path(), &settings);
    let bootstrap = broker.bootstrap();
    let first = Member::start(&bootstrap, "kip848-crash", "crash-group");
    assert!(
        first.wait_assigned(6, Duration::from_secs(60)),
        "the first member got all six"
    );
    let mut second = Member::start(&bootstrap, "kip848-crash", "crash-group");
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

/// A static member (`group.instance.id`) closed and started again within
/// its session gets the partitions it had, and the other member's
/// assignment never moves: no rebalance.
#[test]
fn a_static_member_restarted_within_its_session_gets_its_partitions_back() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let bootstrap = broker.bootstrap();
    let mut first = Member::start_as(&bootstrap, "kip848-static", "static-group", Some("first"));
    let limit = Duration::from_secs(60);
    assert!(first.owning(6, limit).is_some(), "the first got all six");
    let other = Member::start(&bootstrap, "kip848-static", "static-group");
    let others = other.owning(3, limit).expect("the second took three");
    let held = first.owning(3, limit).expect("the first gave three up");
    first.close();
    let again = Member::start_as(&bootstrap, "kip848-static", "static-group", Some("first"));
    let back = again
        .owning(3, limit)
        .expect("the restarted member got three");
    assert_eq!(back, held, "the same partitions");
    // The other member was never told anything new.
    std::thread::sleep(Duration::from_secs(2));
    let moved: Vec<String> = other.lines.try_iter().collect();
    assert!(moved.is_empty(), "{others} then {moved:?}");
}

/// A member subscribed by regular expression (librdkafka sends it as
/// `subscribed_topic_regex`) gets the topics it matches, and a matching
/// topic created later joins its assignment; one that does not match
/// does not.
#[test]
fn a_regular_expression_subscription_follows_the_topics_it_matches() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let address = broker.address;
    let create = move |name: &'static str, partitions: i32| {
        support::on_glommio(async move {
            let cluster = Cluster::new(address, "kip848-regex");
            cluster
                .create_topic(name, partitions, 1, &[])
                .await
                .unwrap();
        })
    };
    create("orders-eu", 2);
    create("payments", 4);
    let member = Member::start(&broker.bootstrap(), "^orders-.*", "regex-group");
    let limit = Duration::from_secs(60);
    member.owning(2, limit).expect("orders-eu's two partitions");
    create("orders-us", 3);
    member.owning(5, limit).expect("orders-us's three too");
    let described = support::on_glommio(async move {
        let cluster = Cluster::new(address, "kip848-regex");
        cluster
            .describe_consumer_group("regex-group")
            .await
            .unwrap()
    });
    let assigned = &described.members[0].assigned;
    let topics: Vec<&String> = assigned.keys().collect();
    assert_eq!(topics, ["orders-eu", "orders-us"], "{described:?}");
    // librdkafka sends its expressions joined, each in parentheses.
    assert_eq!(
        described.members[0].subscribed_regex.as_deref(),
        Some("(^orders-.*)"),
        "{described:?}"
    );
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// The first join of a group, as clients make it: FindCoordinator first
/// (which makes `__consumer_offsets`), the join retried while the
/// coordinator loads (bounded); its answer.
async fn first_join(
    c: &mut Connection,
    group: &str,
    join: &ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let find = FindCoordinatorRequest::default().with_key(text(group));
    for _ in 0..100 {
        let _ = c.call(&find, 3).await.unwrap();
        let answer = c.call(join, 1).await.unwrap();
        if answer.error_code == 0 {
            return answer;
        }
        glommio::timer::sleep(Duration::from_millis(100)).await;
    }
    panic!("the join of group {group} was never answered")
}

/// A join of `member` (subscribed to "wire") at `version`.
fn join(member: &str) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text("wire-group")))
        .with_member_id(text(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(text("wire"))]))
        .with_subscribed_topic_regex(Some(text("")))
        .with_topic_partitions(Some(vec![]))
}

/// A steady heartbeat of `member` at `epoch`, owning `owned` of "wire".
fn beat(group: &str, member: &str, epoch: i32) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_member_id(text(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(-1)
        .with_subscribed_topic_names(None)
        .with_subscribed_topic_regex(None)
        .with_topic_partitions(None)
}

/// ConsumerGroupHeartbeat in raw requests: a member's life (join, the
/// acknowledgement, leave) and each refusal with Kafka's error code.
#[test]
fn heartbeats_over_the_wire_join_acknowledge_leave_and_are_refused_as_kafka_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let address = broker.address;
    support::on_glommio(async move {
        let cluster = Cluster::new(address, "kip848-wire");
        cluster.create_topic("wire", 2, 1, &[]).await.unwrap();
        let mut c = Connection::connect(address, "kip848-wire").await.unwrap();
        let joined = first_join(&mut c, "wire-group", &join("m1")).await;
        assert!(joined.member_epoch >= 1);
        assert_eq!(joined.heartbeat_interval_ms, 5_000);
        let assigned = joined
            .assignment
            .expect("a join is answered its assignment");
        let owned: Vec<TopicPartitions> = assigned
            .topic_partitions
            .iter()
            .map(|t| {
                TopicPartitions::default()
                    .with_topic_id(t.topic_id)
                    .with_partitions(t.partitions.clone())
            })
            .collect();
        assert_eq!(owned.iter().map(|t| t.partitions.len()).sum::<usize>(), 2);
        let epoch = joined.member_epoch;
        // Its acknowledgement: nothing changed, so no assignment.
        let ack = beat("wire-group", "m1", epoch).with_topic_partitions(Some(owned));
        let acked = c.call(&ack, 1).await.unwrap();
        assert_eq!((acked.error_code, acked.member_epoch), (0, epoch));
        assert!(acked.assignment.is_none(), "{acked:?}");
        // The refusals, in Kafka's codes.
        let code = |e: ResponseError| e.code();
        let refusals = [
            (
                join("m2").with_rebalance_timeout_ms(-1),
                code(ResponseError::InvalidRequest),
            ),
            (join(""), code(ResponseError::InvalidRequest)),
            (
                join("m2").with_server_assignor(Some(text("sticky"))),
                code(ResponseError::UnsupportedAssignor),
            ),
            (
                join("m2").with_subscribed_topic_regex(Some(text("^w.*("))),
                code(ResponseError::InvalidRegularExpression),
            ),
            (
                beat("wire-group", "stranger", 3),
                code(ResponseError::UnknownMemberId),
            ),
            (
                beat("wire-group", "m1", epoch + 7),
                code(ResponseError::FencedMemberEpoch),
            ),
            (
                beat("no-such-group", "m1", 1),
                code(ResponseError::GroupIdNotFound),
            ),
        ];
        for (request, expected) in refusals {
            let answer = c.call(&request, 1).await.unwrap();
            assert_eq!(answer.error_code, expected, "{request:?}");
        }
        // v0 may join without a member id: the broker makes one.
        let v0 = c
            .call(&join("").with_subscribed_topic_regex(None), 0)
            .await
            .unwrap();
        assert_eq!(v0.error_code, 0);
        let made = v0.member_id.expect("a member id").to_string();
        assert!(!made.is_empty());
        // Leaving: -1 echoed; then the member is unknown.
        let left = c.call(&beat("wire-group", "m1", -1), 1).await.unwrap();
        assert_eq!((left.error_code, left.member_epoch), (0, -1));
        let gone = c.call(&beat("wire-group", "m1", epoch), 1).await.unwrap();
        assert_eq!(gone.error_code, code(ResponseError::UnknownMemberId));
    });
}

/// What `answer` assigned, as a later heartbeat reports it owned.
fn owned_of(answer: &ConsumerGroupHeartbeatResponse) -> Vec<TopicPartitions> {
    let assigned = answer.assignment.as_ref().expect("an assignment");
    let each = assigned.topic_partitions.iter().map(|t| {
        TopicPartitions::default()
            .with_topic_id(t.topic_id)
            .with_partitions(t.partitions.clone())
    });
    each.collect()
}

/// A consumer group as ConsumerGroupDescribe, ListGroups, DescribeGroups
/// and `broker group list|describe` show it while a partition moves from
/// one member to another: the second member's target before it owns it,
/// Reconciling until the move is done, then Stable.
#[test]
fn a_consumer_group_is_listed_and_described_with_its_epochs_and_targets() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let address = broker.address;
    let bootstrap = broker.bootstrap();
    let http = broker.http;
    support::on_glommio(async move {
        let cluster = Cluster::new(address, "kip848-describe");
        cluster.create_topic("wire", 2, 1, &[]).await.unwrap();
        let mut c = Connection::connect(address, "kip848-describe")
            .await
            .unwrap();
        let first = first_join(&mut c, "wire-group", &join("m1")).await;
        let e1 = first.member_epoch;
        let both = owned_of(&first);
        let described = cluster.describe_consumer_group("wire-group").await.unwrap();
        assert_eq!(described.state, "Stable");
        assert_eq!((described.epoch, described.assignment_epoch), (e1, e1));
        assert_eq!(described.assignor, "uniform");
        let m1 = &described.members[0];
        assert_eq!((m1.member_id.as_str(), m1.member_epoch), ("m1", e1));
        assert_eq!(m1.subscribed_topics, vec!["wire".to_string()]);
        assert_eq!(m1.assigned["wire"], vec![0, 1]);
        // A second member: its target is one partition m1 still owns.
        let second = c.call(&join("m2"), 1).await.unwrap();
        assert_eq!(second.error_code, 0);
        let described = cluster.describe_consumer_group("wire-group").await.unwrap();
        assert_eq!(described.state, "Reconciling");
        assert!(described.epoch > e1);
        let m2 = described.members.iter().find(|m| m.member_id == "m2");
        let m2 = m2.expect("m2 is described");
        assert!(m2.assigned.is_empty(), "{m2:?}");
        assert_eq!(m2.target["wire"].len(), 1, "{m2:?}");
        let shown = support::cli(&bootstrap, &["group", "describe", "wire-group"]);
        assert!(
            shown.contains("wire-group: consumer, Reconciling, 2 members"),
            "{shown}"
        );
        assert!(shown.contains("target wire["), "{shown}");
        // m1 gives its partition up; m2 then gets it.
        let revoke = c
            .call(
                &beat("wire-group", "m1", e1).with_topic_partitions(Some(both)),
                1,
            )
            .await
            .unwrap();
        let kept = owned_of(&revoke);
        let moved = c
            .call(
                &beat("wire-group", "m1", e1).with_topic_partitions(Some(kept)),
                1,
            )
            .await
            .unwrap();
        let e2 = moved.member_epoch;
        assert!(e2 > e1, "{moved:?}");
        let got = c
            .call(&beat("wire-group", "m2", second.member_epoch), 1)
            .await
            .unwrap();
        assert_eq!(got.member_epoch, e2);
        let _ = c
            .call(
                &beat("wire-group", "m2", e2).with_topic_partitions(Some(owned_of(&got))),
                1,
            )
            .await
            .unwrap();
        let described = cluster.describe_consumer_group("wire-group").await.unwrap();
        assert_eq!(described.state, "Stable", "{described:?}");
        let mut owned: Vec<i32> = described
            .members
            .iter()
            .flat_map(|m| m.assigned["wire"].clone())
            .collect();
        owned.sort();
        assert_eq!(owned, vec![0, 1]);
        // ListGroups names its type; DescribeGroups (classic) does not
        // describe it, as Kafka's; the CLI shows both.
        let listed = cluster.list_groups().await.unwrap();
        let listed = listed.iter().find(|g| g.group == "wire-group").unwrap();
        assert_eq!(
            (listed.group_type.as_str(), listed.state.as_str()),
            ("consumer", "Stable")
        );
        let classic = cluster.describe_group("wire-group").await.unwrap();
        assert_eq!(classic.state, "Dead");
        let list = support::cli(&bootstrap, &["group", "list"]);
        let row = list.lines().find(|l| l.starts_with("wire-group"));
        let row: Vec<&str> = row.expect("listed").split_whitespace().collect();
        assert_eq!(row[1..3], ["consumer", "Stable"], "{list}");
        let shown = support::cli(&bootstrap, &["group", "describe", "wire-group"]);
        assert!(shown.contains("consumer, Stable, 2 members"), "{shown}");
        // /metrics: the group's type, epoch and members, and the assignor's
        // time (a target per epoch: the first join, the second, none since).
        let labels = "{group=\"wire-group\",type=\"consumer\"}";
        let sample = |name: &str| support::cluster::gauge(http, &format!("{name}{labels}"));
        assert_eq!(sample("rebalances_total"), f64::from(described.epoch));
        assert_eq!(sample("group_members"), 2.0);
        let assignments = support::cluster::gauge(http, "consumer_group_assignment_seconds_count");
        assert_eq!(assignments, 2.0);
        assert!(!shown.contains("target"), "{shown}");
        // A classic-only name is not a consumer group.
        let none = cluster.describe_consumer_group("no-such").await;
        assert!(
            matches!(none, Err(ClientError::Broker(c)) if c == ResponseError::GroupIdNotFound.code()),
            "{none:?}"
        );
    });
}

/// A member told to give a partition up that keeps it (still saying it
/// owns it) past its rebalance timeout (2 s here) is removed, as Kafka
/// fences it: its next heartbeat is UNKNOWN_MEMBER_ID, and the member
/// waiting for the partition gets it.
#[test]
fn a_member_keeping_revoked_partitions_past_its_rebalance_timeout_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let address = broker.address;
    support::on_glommio(async move {
        let cluster = Cluster::new(address, "kip848-timeout");
        cluster.create_topic("wire", 2, 1, &[]).await.unwrap();
        let mut c = Connection::connect(address, "kip848-timeout")
            .await
            .unwrap();
        let slow_join = join("slow").with_rebalance_timeout_ms(2_000);
        let first = first_join(&mut c, "wire-group", &slow_join).await;
        let (epoch, both) = (first.member_epoch, owned_of(&first));
        let waiting = c.call(&join("waiting"), 1).await.unwrap();
        assert_eq!(waiting.error_code, 0);
        // Told to give one up, it keeps saying it owns both.
        let stubborn = beat("wire-group", "slow", epoch).with_topic_partitions(Some(both));
        let told = c.call(&stubborn, 1).await.unwrap();
        assert_eq!(
            owned_of(&told)
                .iter()
                .map(|t| t.partitions.len())
                .sum::<usize>(),
            1
        );
        let started = Instant::now();
        let mut removed = None;
        while started.elapsed() < Duration::from_secs(30) {
            glommio::timer::sleep(Duration::from_millis(250)).await;
            let answer = c.call(&stubborn, 1).await.unwrap();
            if answer.error_code != 0 {
                removed = Some((answer.error_code, started.elapsed()));
                break;
            }
        }
        let (code, after) = removed.expect("the slow member was never removed");
        assert_eq!(code, ResponseError::UnknownMemberId.code());
        assert!(
            after >= Duration::from_millis(1_500),
            "not before: {after:?}"
        );
        let mut got = Vec::new();
        let mut epoch = waiting.member_epoch;
        for _ in 0..20 {
            let answer = c
                .call(&beat("wire-group", "waiting", epoch), 1)
                .await
                .unwrap();
            assert_eq!(answer.error_code, 0, "{answer:?}");
            epoch = answer.member_epoch;
            if let Some(assignment) = answer.assignment {
                got = assignment
                    .topic_partitions
                    .iter()
                    .flat_map(|t| t.partitions.clone())
                    .collect();
                if got.len() == 2 {
                    break;
                }
            }
            glommio::timer::sleep(Duration::from_millis(100)).await;
        }
        got.sort();
        assert_eq!(got, vec![0, 1], "the waiting member gets both");
    });
}

/// A group's configs (IncrementalAlterConfigs and DescribeConfigs on
/// resource type GROUP, as `kafka-configs --entity-type groups`): within
/// the broker's bounds, told to the group's members, kept in the
/// metadata across a restart, removed back to the broker's.
#[test]
fn a_groups_own_timeouts_are_set_checked_applied_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let address = broker.address;
    let (interval, session) = (
        "consumer.heartbeat.interval.ms",
        "consumer.session.timeout.ms",
    );
    support::on_glommio(async move {
        let mut c = Connection::connect(address, "kip848-configs")
            .await
            .unwrap();
        assert_eq!(
            describe_group_config(&mut c, "cfg").await,
            [("5000", 5), ("45000", 5)]
        );
        let code = |e: ResponseError| e.code();
        let cases = [
            (interval, Some("7000"), 0),
            (session, Some("1000"), code(ResponseError::InvalidConfig)), // below 45 s
            (interval, Some("50000"), code(ResponseError::InvalidConfig)), // above 15 s
            (
                "consumer.max.size",
                Some("3"),
                code(ResponseError::InvalidConfig),
            ),
        ];
        for (key, value, expected) in cases {
            let answered = support::alter_group_config(&mut c, "cfg", key, value).await;
            assert_eq!(answered, expected, "{key}={value:?}");
        }
        assert_eq!(
            describe_group_config(&mut c, "cfg").await,
            [("7000", 8), ("45000", 5)]
        );
        let cluster = Cluster::new(address, "kip848-configs");
        cluster.create_topic("wire", 2, 1, &[]).await.unwrap();
        let join = join("m1").with_group_id(GroupId(text("cfg")));
        let told = first_join(&mut c, "cfg", &join).await.heartbeat_interval_ms;
        assert_eq!(told, 7000, "members are told the group's interval");
    });
    broker.terminate();
    let broker = start_broker(dir.path());
    let address = broker.address;
    support::on_glommio(async move {
        let mut c = Connection::connect(address, "kip848-configs")
            .await
            .unwrap();
        let kept = describe_group_config(&mut c, "cfg").await;
        assert_eq!(kept, [("7000", 8), ("45000", 5)], "kept in the metadata");
        assert_eq!(
            support::alter_group_config(&mut c, "cfg", interval, None).await,
            0
        );
        assert_eq!(
            describe_group_config(&mut c, "cfg").await,
            [("5000", 5), ("45000", 5)]
        );
    });
}

/// Group `group`'s (heartbeat interval, session timeout) as DescribeConfigs
/// answers them: each value and its source.
async fn describe_group_config(c: &mut Connection, group: &str) -> Vec<(&'static str, i8)> {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::DescribeConfigsRequest;
    let resource = DescribeConfigsResource::default()
        .with_resource_type(32)
        .with_resource_name(text(group));
    let request = DescribeConfigsRequest::default().with_resources(vec![resource]);
    let answer = c.call(&request, 4).await.unwrap();
    let result = &answer.results[0];
    assert_eq!(result.error_code, 0, "{result:?}");
    let value = |key: &str| {
        let config = result
            .configs
            .iter()
            .find(|c| c.name.as_str() == key)
            .unwrap_or_else(|| panic!("{key} not in {result:?}"));
        let value = config.value.as_ref().unwrap().to_string();
        (&*value.leak(), config.config_source)
    };
    vec![
        value("consumer.heartbeat.interval.ms"),
        value("consumer.session.timeout.ms"),
    ]
}

/// Rack-aware assignment: on a broker in rack "a", of two members that
/// subscribed before their topic existed, the one in rack "a" gets the
/// first partitions the uniform assignor hands out (without racks the
/// first member in order, in rack "b", would).
#[test]
fn partitions_go_first_to_members_in_their_replicas_rack() {
    let dir = tempfile::tempdir().unwrap();
    let broker = support::start_broker_with(dir.path(), &[("BROKER_RACK", "a")]);
    let address = broker.address;
    support::on_glommio(async move {
        let cluster = Cluster::new(address, "kip848-racks");
        let mut c = Connection::connect(address, "kip848-racks").await.unwrap();
        let group = || GroupId(text("rack-group"));
        let joining = |member: &str, rack: &str| {
            join(member)
                .with_group_id(group())
                .with_rack_id(Some(text(rack)))
                .with_subscribed_topic_names(Some(vec![TopicName(text("late"))]))
        };
        let first = first_join(&mut c, "rack-group", &joining("m1", "b")).await;
        let second = c.call(&joining("m2", "a"), 1).await.unwrap();
        assert_eq!(second.error_code, 0);
        cluster.create_topic("late", 4, 1, &[]).await.unwrap();
        // Heartbeats until both have their two partitions.
        let mut epochs = [first.member_epoch, second.member_epoch];
        let mut owned: [Vec<i32>; 2] = [vec![], vec![]];
        for _ in 0..50 {
            for (i, member) in ["m1", "m2"].into_iter().enumerate() {
                let answer = c
                    .call(&beat("rack-group", member, epochs[i]), 1)
                    .await
                    .unwrap();
                assert_eq!(answer.error_code, 0, "{answer:?}");
                epochs[i] = answer.member_epoch;
                if let Some(assignment) = answer.assignment {
                    let each = assignment.topic_partitions.iter();
                    owned[i] = each.flat_map(|t| t.partitions.clone()).collect();
                    owned[i].sort();
                }
            }
            if owned.iter().all(|o| o.len() == 2) {
                break;
            }
            glommio::timer::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(owned, [vec![2, 3], vec![0, 1]], "rack a's member first");
    });
}
