//! A share group's start offsets as an administrator sees and moves them:
//! DescribeShareGroupOffsets, AlterShareGroupOffsets and
//! DeleteShareGroupOffsets (through `broker share-group describe |
//! reset-offsets | delete-offsets` and the client crate), DeleteGroups on
//! a share group, and what members get after each. A new member's
//! session sees a reset at once; a member that left the group but still
//! holds records on its open share session cannot write its old state
//! back over a reset (the state epoch fences it).

mod support;

use std::net::SocketAddr;

use client::cluster::Cluster;
use client::connection::{ClientError, Connection};
use kafka_protocol::messages::DeleteGroupsRequest;
use kafka_protocol::ResponseError;
use support::share_wire::{
    acknowledge, acquired, beat, fetch, heartbeat, produce_jobs as produce, text, GROUP,
};
use support::{cli, on_glommio, start_broker};

const ACCEPT: i8 = 1;

/// The start offset the group stores for partition 0 of "jobs".
async fn start_of(address: SocketAddr) -> Option<i64> {
    let cluster = Cluster::new(address, "share-offsets");
    let starts = cluster.share_group_offsets(GROUP).await.unwrap();
    starts.get(&("jobs".to_string(), 0)).copied()
}

/// The broker's error code of a refused call.
fn refusal(result: Result<(), ClientError>) -> i16 {
    match result {
        Err(ClientError::Broker(code)) => code,
        other => panic!("not refused by the broker: {other:?}"),
    }
}

/// `broker share-group describe` shows start 5 (log end 10), a dry run
/// of a reset to 2 changes nothing, then the reset is made.
fn administrator_resets_to_2(bootstrap: &str) {
    let described = cli(bootstrap, &["share-group", "describe", GROUP]);
    let row = described.lines().find(|l| l.starts_with("jobs "));
    let columns = row.map(|r| r.split_whitespace().collect::<Vec<_>>());
    assert_eq!(columns, Some(vec!["jobs", "0", "5", "10"]), "{described}");
    let reset = [
        "share-group",
        "reset-offsets",
        GROUP,
        "--topic",
        "jobs",
        "--to-offset",
        "2",
    ];
    let dry = cli(bootstrap, &[&reset[..], &["--dry-run"]].concat());
    assert!(dry.contains("dry run: nothing changed"), "{dry}");
    let planned = dry.lines().find(|l| l.starts_with("jobs "));
    let planned = planned.map(|r| r.split_whitespace().collect::<Vec<_>>());
    assert_eq!(planned, Some(vec!["jobs", "0", "5", "2"]), "{dry}");
    let again = cli(bootstrap, &["share-group", "describe", GROUP]);
    assert!(again.contains(row.unwrap()), "{again}");
    let done = cli(bootstrap, &[&reset[..], &["--execute"]].concat());
    assert!(
        done.contains("reset 1 partitions of share group workers"),
        "{done}"
    );
}

#[test]
fn start_offsets_are_shown_reset_and_deleted_and_members_get_records_from_there() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let bootstrap = broker.bootstrap();
    cli(&bootstrap, &["topic", "create", "jobs"]);
    let address = broker.address;
    let administrator = bootstrap.clone();
    let topic = on_glommio(async move {
        let cluster = Cluster::new(address, "share-offsets");
        let topic = cluster.topic_info("jobs", true).await.unwrap().id;
        // Neither the group nor its offsets exist yet.
        let plan = [(("jobs".to_string(), 0), 0)].into_iter().collect();
        let missing = cluster.alter_share_group_offsets(GROUP, &plan).await;
        assert_eq!(refusal(missing), ResponseError::GroupIdNotFound.code());
        assert_eq!(start_of(address).await, None);
        // a joins, starts the group at the log end (latest), takes
        // records 0-9 and accepts 0-4.
        let mut a = Connection::connect(address, "member-a").await.unwrap();
        assert_eq!(
            heartbeat(&mut a, &beat("jobs", "member-a", 0))
                .await
                .error_code,
            0
        );
        let mut first = fetch(topic, ("member-a", 0), 10, &[]);
        first.max_wait_ms = 0;
        a.call(&first, 1).await.unwrap();
        produce(address, 10).await;
        let got = a.call(&fetch(topic, ("member-a", 1), 10, &[]), 1).await;
        assert_eq!(acquired(&got.unwrap()).0, vec![(0, 9, 1)]);
        let accept = acknowledge(topic, ("member-a", 2), &[(0, 4, ACCEPT)]);
        assert_eq!(a.call(&accept, 1).await.unwrap().error_code, 0);
        assert_eq!(start_of(address).await, Some(5));
        // With a member in the group its offsets stay.
        let busy = cluster.alter_share_group_offsets(GROUP, &plan).await;
        assert_eq!(refusal(busy), ResponseError::NonEmptyGroup.code());
        // a leaves the group but keeps its share session, holding 5-9.
        assert_eq!(
            heartbeat(&mut a, &beat("jobs", "member-a", -1))
                .await
                .error_code,
            0
        );
        administrator_resets_to_2(&administrator);
        assert_eq!(start_of(address).await, Some(2));
        // b's new session gets 2-9 from the reset state at once, though a
        // still holds 5-9 in the old one (first deliveries: the reset
        // state has nothing in flight); a no longer holds them.
        let mut b = Connection::connect(address, "member-b").await.unwrap();
        assert_eq!(
            heartbeat(&mut b, &beat("jobs", "member-b", 0))
                .await
                .error_code,
            0
        );
        let got = b.call(&fetch(topic, ("member-b", 0), 20, &[]), 1).await;
        assert_eq!(acquired(&got.unwrap()).0, vec![(2, 9, 1)]);
        let late = acknowledge(topic, ("member-a", 3), &[(5, 9, ACCEPT)]);
        let late = a.call(&late, 1).await.unwrap();
        let code = late.responses[0].partitions[0].error_code;
        assert_eq!(code, ResponseError::InvalidRecordState.code(), "{late:?}");
        // b accepts 2-5, leaves the group holding 6-9 on its session; a
        // reset to 0 then fences its old state: its acknowledgement is
        // refused, not written over the reset.
        let accept = acknowledge(topic, ("member-b", 1), &[(2, 5, ACCEPT)]);
        assert_eq!(b.call(&accept, 1).await.unwrap().error_code, 0);
        assert_eq!(start_of(address).await, Some(6));
        assert_eq!(
            heartbeat(&mut b, &beat("jobs", "member-b", -1))
                .await
                .error_code,
            0
        );
        cluster
            .alter_share_group_offsets(GROUP, &plan)
            .await
            .unwrap();
        let late = acknowledge(topic, ("member-b", 2), &[(6, 9, ACCEPT)]);
        let late = b.call(&late, 1).await.unwrap();
        let code = late.responses[0].partitions[0].error_code;
        assert_eq!(code, ResponseError::NotLeaderOrFollower.code(), "{late:?}");
        assert_eq!(start_of(address).await, Some(0), "not written back");
        // c gets everything from 0.
        let mut c = Connection::connect(address, "member-c").await.unwrap();
        assert_eq!(
            heartbeat(&mut c, &beat("jobs", "member-c", 0))
                .await
                .error_code,
            0
        );
        let got = c.call(&fetch(topic, ("member-c", 0), 20, &[]), 1).await;
        assert_eq!(acquired(&got.unwrap()).0, vec![(0, 9, 1)]);
        let accept = acknowledge(topic, ("member-c", 1), &[(0, 9, ACCEPT)]);
        assert_eq!(c.call(&accept, 1).await.unwrap().error_code, 0);
        assert_eq!(start_of(address).await, Some(10));
        assert_eq!(
            heartbeat(&mut c, &beat("jobs", "member-c", -1))
                .await
                .error_code,
            0
        );
        // 10-14 produced, then the offsets deleted while c's session (and
        // the share-partition in memory, at 10) stays: d's new session
        // starts as share.auto.offset.reset says (latest: 15), not at 10.
        produce(address, 5).await;
        let deleted = cli(
            &administrator,
            &["share-group", "delete-offsets", GROUP, "--topic", "jobs"],
        );
        assert!(deleted.contains("deleted the start offsets"), "{deleted}");
        assert_eq!(start_of(address).await, None);
        let mut d = Connection::connect(address, "member-d").await.unwrap();
        assert_eq!(
            heartbeat(&mut d, &beat("jobs", "member-d", 0))
                .await
                .error_code,
            0
        );
        let mut first = fetch(topic, ("member-d", 0), 10, &[]);
        first.max_wait_ms = 0;
        assert_eq!(acquired(&d.call(&first, 1).await.unwrap()).0, vec![]);
        assert_eq!(start_of(address).await, Some(15));
        produce(address, 1).await;
        let got = d.call(&fetch(topic, ("member-d", 1), 10, &[]), 1).await;
        assert_eq!(acquired(&got.unwrap()).0, vec![(15, 15, 1)]);
        // d leaves holding 15; one more record, then the group is deleted.
        produce(address, 1).await;
        assert_eq!(
            heartbeat(&mut d, &beat("jobs", "member-d", -1))
                .await
                .error_code,
            0
        );
        drop(d);
        let delete = DeleteGroupsRequest::default()
            .with_groups_names(vec![kafka_protocol::messages::GroupId(text(GROUP))]);
        let mut admin = Connection::connect(address, "admin").await.unwrap();
        let answer = admin.call(&delete, 2).await.unwrap();
        assert_eq!(answer.results[0].error_code, 0);
        assert_eq!(start_of(address).await, None);
        let gone = cluster
            .delete_share_group_offsets(GROUP, &["jobs".into()])
            .await;
        assert_eq!(refusal(gone), ResponseError::GroupIdNotFound.code());
        topic
    });
    // The deletion outlives a restart: a group of the same name starts
    // afresh, at the log end (17).
    let mut broker = broker;
    broker.stop();
    let broker = start_broker(dir.path());
    let address = broker.address;
    on_glommio(async move {
        assert_eq!(start_of(address).await, None);
        let mut e = Connection::connect(address, "member-e").await.unwrap();
        assert_eq!(
            heartbeat(&mut e, &beat("jobs", "member-e", 0))
                .await
                .error_code,
            0
        );
        let mut first = fetch(topic, ("member-e", 0), 10, &[]);
        first.max_wait_ms = 0;
        assert_eq!(acquired(&e.call(&first, 1).await.unwrap()).0, vec![]);
        assert_eq!(start_of(address).await, Some(17));
    });
}
