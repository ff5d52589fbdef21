//! Share groups (KIP-932) over the wire, as far as they are built:
//! ShareGroupHeartbeat membership (docs/queues.md, "Status").

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use client::cluster::Cluster;
use client::connection::Connection;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, DeleteGroupsRequest, DescribeGroupsRequest,
    FindCoordinatorRequest, GroupId, ShareGroupDescribeRequest, ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use support::{cli, on_glommio, start_broker};

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn beat(member: &str, epoch: i32) -> ShareGroupHeartbeatRequest {
    let mut request = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text("queue")))
        .with_member_id(text(member))
        .with_member_epoch(epoch);
    if epoch == 0 {
        request = request.with_subscribed_topic_names(Some(vec![TopicName(text("jobs"))]));
    }
    request
}

/// `request`'s answer once the group's coordinator is up.
async fn coordinated(
    c: &mut Connection,
    request: &ShareGroupHeartbeatRequest,
) -> ShareGroupHeartbeatResponse {
    let waiting = [
        ResponseError::CoordinatorNotAvailable.code(),
        ResponseError::CoordinatorLoadInProgress.code(),
        ResponseError::NotCoordinator.code(),
    ];
    let find = FindCoordinatorRequest::default().with_key(text("queue"));
    for _ in 0..100 {
        let _ = c.call(&find, 3).await.unwrap();
        let answer = c.call(request, 1).await.unwrap();
        if !waiting.contains(&answer.error_code) {
            return answer;
        }
        glommio::timer::sleep(Duration::from_millis(100)).await;
    }
    panic!("the share group's coordinator never came up")
}

/// The partitions an answer assigns (None: not told).
fn assigned(answer: &ShareGroupHeartbeatResponse) -> Option<Vec<i32>> {
    let assignment = answer.assignment.as_ref()?;
    Some(
        assignment
            .topic_partitions
            .iter()
            .flat_map(|t| t.partitions.clone())
            .collect(),
    )
}

/// The share group as ListGroups lists it: (type, protocol type, state).
async fn listed(address: SocketAddr) -> (String, String, String) {
    let cluster = Cluster::new(address, "share-test");
    let groups = cluster.list_groups().await.unwrap();
    let group = groups
        .into_iter()
        .find(|g| g.group == "queue")
        .expect("listed");
    (group.group_type, group.protocol_type, group.state)
}

/// Two members share one partition (both are assigned it), the group is
/// listed as a share group, kept across a restart, and refused to the
/// other protocols; a member leaves.
#[test]
fn share_group_members_share_a_partition_and_the_group_outlives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    cli(&broker.bootstrap(), &["topic", "create", "jobs"]);
    let address = broker.address;
    on_glommio(async move {
        let mut c = Connection::connect(address, "share-test").await.unwrap();
        let a = coordinated(&mut c, &beat("member-a", 0)).await;
        assert_eq!(
            (a.error_code, a.member_epoch, assigned(&a)),
            (0, 1, Some(vec![0]))
        );
        let b = coordinated(&mut c, &beat("member-b", 0)).await;
        assert_eq!(
            (b.error_code, b.member_epoch, assigned(&b)),
            (0, 2, Some(vec![0]))
        );
        // a catches up with the epoch; its partition is unchanged.
        let a = coordinated(&mut c, &beat("member-a", 1)).await;
        assert_eq!((a.error_code, a.member_epoch, assigned(&a)), (0, 2, None));
        let fenced = coordinated(&mut c, &beat("member-a", 9)).await;
        assert_eq!(fenced.error_code, ResponseError::FencedMemberEpoch.code());
        let kind = listed(address).await;
        assert_eq!(kind, ("share".into(), "share".into(), "Stable".into()));
        // Not a consumer group.
        let consumer = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(text("queue")))
            .with_member_id(text("consumer-member"))
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(text("jobs"))]))
            .with_topic_partitions(Some(vec![]));
        let refused = c.call(&consumer, 1).await.unwrap();
        assert_eq!(refused.error_code, ResponseError::GroupIdNotFound.code());
        // Nor does it keep committed offsets.
        use kafka_protocol::messages::offset_commit_request::{
            OffsetCommitRequestPartition, OffsetCommitRequestTopic,
        };
        let commit = kafka_protocol::messages::OffsetCommitRequest::default()
            .with_group_id(GroupId(text("queue")))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(text("jobs")))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(5)])]);
        let committed = c.call(&commit, 8).await.unwrap();
        let code = committed.topics[0].partitions[0].error_code;
        assert_eq!(code, ResponseError::GroupIdNotFound.code());
    });
    // `broker share-group`: listed, and described with both members on
    // the one partition.
    let list = cli(&broker.bootstrap(), &["share-group", "list"]);
    let row = list.lines().find(|l| l.starts_with("queue "));
    assert!(row.is_some_and(|r| r.ends_with("Stable")), "{list}");
    let described = cli(&broker.bootstrap(), &["share-group", "describe", "queue"]);
    assert!(
        described.starts_with("share group queue: Stable, epoch 2"),
        "{described}"
    );
    assert_eq!(described.matches("jobs: [0]").count(), 2, "{described}");
    // A restart: the group and its members are read back.
    let mut broker = broker;
    broker.stop();
    let broker = start_broker(dir.path());
    let address = broker.address;
    on_glommio(async move {
        let mut c = Connection::connect(address, "share-test").await.unwrap();
        let a = coordinated(&mut c, &beat("member-a", 2)).await;
        assert_eq!((a.error_code, a.member_epoch), (0, 2), "{a:?}");
        let b = coordinated(&mut c, &beat("member-b", -1)).await;
        assert_eq!((b.error_code, b.member_epoch), (0, -1));
        let gone = coordinated(&mut c, &beat("member-b", 2)).await;
        assert_eq!(gone.error_code, ResponseError::UnknownMemberId.code());
        assert_eq!(listed(address).await.0, "share");
        // ShareGroupDescribe: the epochs and a's partition, named.
        let describe =
            ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(text("queue"))]);
        let described = c.call(&describe, 1).await.unwrap().groups.remove(0);
        assert_eq!(described.error_code, 0);
        assert_eq!(
            (described.group_state.as_str(), described.group_epoch),
            ("Stable", 3)
        );
        assert_eq!(described.assignor_name.as_str(), "simple");
        let member = &described.members[0];
        assert_eq!(
            (member.member_id.as_str(), member.member_epoch),
            ("member-a", 2)
        );
        let topic = &member.assignment.topic_partitions[0];
        assert_eq!(
            (topic.topic_name.as_str(), topic.partitions.clone()),
            ("jobs", vec![0])
        );
        // DescribeGroups says Dead, as Kafka for a group of another kind.
        let classic = DescribeGroupsRequest::default().with_groups(vec![GroupId(text("queue"))]);
        let classic = c.call(&classic, 5).await.unwrap().groups.remove(0);
        assert_eq!(classic.group_state.as_str(), "Dead");
        // a leaves; the empty group is deleted, and stays deleted.
        let a = coordinated(&mut c, &beat("member-a", -1)).await;
        assert_eq!(a.error_code, 0);
        let delete = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(text("queue"))]);
        let deleted = c.call(&delete, 2).await.unwrap();
        assert_eq!(deleted.results[0].error_code, 0);
    });
    let mut broker = broker;
    broker.stop();
    let broker = start_broker(dir.path());
    let address = broker.address;
    on_glommio(async move {
        // Once its coordinator is up, the group is unknown to a heartbeat
        // (a rejoin at 0 would make a new one).
        let mut c = Connection::connect(address, "share-test").await.unwrap();
        let gone = coordinated(&mut c, &beat("member-a", 1)).await;
        assert_eq!(gone.error_code, ResponseError::GroupIdNotFound.code());
        let cluster = Cluster::new(address, "share-test");
        let groups = cluster.list_groups().await.unwrap();
        assert!(groups.iter().all(|g| g.group != "queue"), "{groups:?}");
    });
}
