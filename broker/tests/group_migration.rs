//! Groups with members moving online between the classic protocol and
//! KIP-848's (Kafka 4's `group.consumer.migration.policy`): librdkafka's
//! consumers of both protocols in one group, and the policy's refusals.

mod support;

use std::time::Duration;

use client::connection::Connection;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, FindCoordinatorRequest, GroupId, JoinGroupRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use support::{cli, python_script, start_broker, start_broker_with};

/// confluent-kafka (tests/python/group_migration.py): two classic
/// consumers, a third with `group.protocol=consumer` joining (the group
/// upgrades, all three get two partitions) and leaving (it downgrades,
/// the two share the six); every value read, no partition held by two
/// consumers at once.
#[test]
fn librdkafka_consumers_of_both_protocols_share_a_group_that_migrates_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let bootstrap = broker.bootstrap();
    let args = [bootstrap.as_str(), "migrating", "migrating-group"];
    let stdout = python_script("group_migration.py", &args, 400);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[..3],
        ["classic 3 3", "consumer 2 2 2", "classic 3 3"],
        "{stdout}"
    );
    let read = lines[3].split(' ').collect::<Vec<_>>();
    assert!(
        read.len() == 4 && read[1] == read[3] && read[1] != "0",
        "{stdout}"
    );
    // Its state as the broker tells it: classic again.
    let listed = cli(&bootstrap, &["group", "list"]);
    let row = listed.lines().find(|l| l.contains("migrating-group"));
    assert!(row.is_some_and(|r| r.contains("classic")), "{listed}");
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A classic JoinGroup (v3: no MEMBER_ID_REQUIRED round) of group
/// `group`, subscribed to "mig"; the error code once the group's
/// coordinator is up.
async fn classic_join(c: &mut Connection, group: &str) -> i16 {
    let subscription = {
        let mut s = 0i16.to_be_bytes().to_vec();
        s.extend(1i32.to_be_bytes());
        s.extend(3i16.to_be_bytes());
        s.extend(b"mig");
        s.extend((-1i32).to_be_bytes());
        s
    };
    let request = JoinGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(text("range"))
            .with_metadata(subscription.into())]);
    until_coordinated(c, group, async |c: &mut Connection| {
        c.call(&request, 3).await.unwrap().error_code
    })
    .await
}

/// A ConsumerGroupHeartbeat join of group `group` to "mig".
async fn consumer_join(c: &mut Connection, group: &str) -> i16 {
    let request = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_member_id(text("consumer-member"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(text("mig"))]))
        .with_topic_partitions(Some(vec![]));
    until_coordinated(c, group, async |c: &mut Connection| {
        c.call(&request, 1).await.unwrap().error_code
    })
    .await
}

/// `call`'s code once it is not one of a coordinator coming up.
async fn until_coordinated(
    c: &mut Connection,
    group: &str,
    call: impl AsyncFn(&mut Connection) -> i16,
) -> i16 {
    let waiting = [
        ResponseError::CoordinatorNotAvailable.code(),
        ResponseError::CoordinatorLoadInProgress.code(),
        ResponseError::NotCoordinator.code(),
    ];
    let find = FindCoordinatorRequest::default().with_key(text(group));
    for _ in 0..100 {
        let _ = c.call(&find, 3).await.unwrap();
        let code = call(c).await;
        if !waiting.contains(&code) {
            return code;
        }
        glommio::timer::sleep(Duration::from_millis(100)).await;
    }
    panic!("group {group}'s coordinator never came up")
}

/// With `group_consumer_migration_policy = disabled`, as Kafka: a classic
/// member may not join a consumer group with members, nor a consumer
/// protocol member a classic group with members; empty groups still
/// convert.
#[test]
fn a_disabled_migration_policy_keeps_each_group_to_its_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("BROKER_GROUP_CONSUMER_MIGRATION_POLICY", "disabled"),
        ("BROKER_GROUP_INITIAL_REBALANCE_DELAY_MS", "0"),
    ];
    let broker = start_broker_with(dir.path(), &env);
    cli(&broker.bootstrap(), &["topic", "create", "mig"]);
    let address = broker.address;
    support::on_glommio(async move {
        let mut c = Connection::connect(address, "migration-test")
            .await
            .unwrap();
        assert_eq!(consumer_join(&mut c, "new-kind").await, 0);
        assert_eq!(
            classic_join(&mut c, "new-kind").await,
            ResponseError::InconsistentGroupProtocol.code()
        );
        assert_eq!(classic_join(&mut c, "old-kind").await, 0);
        assert_eq!(
            consumer_join(&mut c, "old-kind").await,
            ResponseError::GroupIdNotFound.code()
        );
    });
}
