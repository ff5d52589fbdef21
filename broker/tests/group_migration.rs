//! Groups with members moving online between the classic protocol and
//! KIP-848's (Kafka 4's `group.consumer.migration.policy`): librdkafka's
//! consumers of both protocols in one group, and the policy's refusals.

mod support;

use std::time::Duration;

use client::connection::Connection;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, FindCoordinatorRequest, GroupId, HeartbeatRequest,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, SyncGroupRequest, TopicName,
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
    let binary = env!("CARGO_BIN_EXE_broker");
    let args = [bootstrap.as_str(), "migrating", "migrating-group", binary];
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
    // While it was a consumer group: two classic members beside the
    // consumer protocol one, each with two partitions.
    let described: Vec<&str> = lines[4..].to_vec();
    assert!(
        described[0].starts_with("group migrating-group: consumer"),
        "{stdout}"
    );
    let members = described
        .iter()
        .filter(|l| l.trim_start().starts_with("member "));
    let classic = members.clone().filter(|l| l.contains("(classic)")).count();
    assert_eq!((members.count(), classic), (3, 2), "{stdout}");
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
    classic_join_as(c, group, "", 10_000).await.error_code
}

/// The same, as member `member_id` with `rebalance_timeout_ms`: the answer.
async fn classic_join_as(
    c: &mut Connection,
    group: &str,
    member_id: &str,
    rebalance_timeout_ms: i32,
) -> JoinGroupResponse {
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
        .with_member_id(text(member_id))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(rebalance_timeout_ms)
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(text("range"))
            .with_metadata(subscription.into())]);
    let mut answer = None;
    until_coordinated(c, group, async |c: &mut Connection| {
        let joined = c.call(&request, 3).await.unwrap();
        let code = joined.error_code;
        answer = Some(joined);
        code
    })
    .await;
    answer.unwrap()
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
    mut call: impl AsyncFnMut(&mut Connection) -> i16,
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

/// A classic member of a consumer group told to join again (the group
/// moved past its epoch) that keeps heartbeating without joining is
/// removed after its rebalance timeout, as Kafka's join timer removes it;
/// LeaveGroup does not remove a consumer protocol member by its id.
#[test]
fn a_classic_member_that_never_joins_again_is_removed_after_its_rebalance_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("BROKER_GROUP_INITIAL_REBALANCE_DELAY_MS", "0")];
    let broker = start_broker_with(dir.path(), &env);
    cli(
        &broker.bootstrap(),
        &["topic", "create", "mig", "--partitions", "2"],
    );
    let address = broker.address;
    support::on_glommio(async move {
        let mut c = Connection::connect(address, "migration-test")
            .await
            .unwrap();
        // A classic member with both partitions, rebalance timeout 2 s.
        let joined = classic_join_as(&mut c, "stuck", "", 2_000).await;
        assert_eq!(joined.error_code, 0);
        let (member, generation) = (joined.member_id.clone(), joined.generation_id);
        let assignment = {
            let mut a = 0i16.to_be_bytes().to_vec();
            a.extend(1i32.to_be_bytes());
            a.extend(3i16.to_be_bytes());
            a.extend(b"mig");
            a.extend(2i32.to_be_bytes());
            a.extend(0i32.to_be_bytes());
            a.extend(1i32.to_be_bytes());
            a.extend((-1i32).to_be_bytes());
            a
        };
        let sync = SyncGroupRequest::default()
            .with_group_id(GroupId(text("stuck")))
            .with_member_id(member.clone())
            .with_generation_id(generation)
            .with_assignments(vec![SyncGroupRequestAssignment::default()
                .with_member_id(member.clone())
                .with_assignment(assignment.into())]);
        assert_eq!(c.call(&sync, 3).await.unwrap().error_code, 0);
        // A consumer protocol member joins: the group is upgraded, the
        // classic member is told to rebalance.
        assert_eq!(consumer_join(&mut c, "stuck").await, 0);
        let heartbeat = HeartbeatRequest::default()
            .with_group_id(GroupId(text("stuck")))
            .with_member_id(member.clone())
            .with_generation_id(generation);
        let rebalance = ResponseError::RebalanceInProgress.code();
        assert_eq!(c.call(&heartbeat, 3).await.unwrap().error_code, rebalance);
        // LeaveGroup by the consumer protocol member's id: a stranger.
        let leave = LeaveGroupRequest::default()
            .with_group_id(GroupId(text("stuck")))
            .with_members(vec![
                MemberIdentity::default().with_member_id(text("consumer-member"))
            ]);
        let left = c.call(&leave, 3).await.unwrap();
        assert_eq!(
            left.members[0].error_code,
            ResponseError::UnknownMemberId.code()
        );
        // It keeps heartbeating, never joining: removed within its
        // rebalance timeout and a tick.
        let started = std::time::Instant::now();
        let unknown = ResponseError::UnknownMemberId.code();
        let mut code = rebalance;
        while code == rebalance && started.elapsed() < Duration::from_secs(15) {
            glommio::timer::sleep(Duration::from_millis(300)).await;
            code = c.call(&heartbeat, 3).await.unwrap().error_code;
        }
        assert_eq!(code, unknown, "after {:?}", started.elapsed());
        assert!(started.elapsed() >= Duration::from_millis(1_500));
    });
}
