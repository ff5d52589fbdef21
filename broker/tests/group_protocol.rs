//! The group protocol driven raw, through the project's client: a stored
//! group's member carries on at its generation after a broker restart, and
//! a static member's next process returns without a rebalance while its
//! old member id is fenced.

mod support;

use client::cluster::Cluster;
use support::{on_glommio, start_broker_with};

/// Short rebalance delays so the tests do not wait Kafka's 3 s.
const GROUPS: &[(&str, &str)] = &[("BROKER_GROUP_INITIAL_REBALANCE_DELAY_MS", "300")];

/// Session timeout the members ask for (the broker's minimum).
const SESSION_MS: u64 = 6000;

/// JoinGroup (twice: the first answer is MEMBER_ID_REQUIRED for a new
/// dynamic member) and SyncGroup as the leader, through the raw protocol.
async fn join_and_sync(cluster: &Cluster, member: &str, instance: Option<&str>) -> (String, i32) {
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
    use kafka_protocol::messages::{GroupId, JoinGroupRequest, SyncGroupRequest};
    use kafka_protocol::protocol::StrBytes;
    let text = |s: &str| StrBytes::from_string(s.to_string());
    let mut member_id = member.to_string();
    let joined = loop {
        let request = JoinGroupRequest::default()
            .with_group_id(GroupId(text("raw")))
            .with_session_timeout_ms(SESSION_MS as i32)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(text(&member_id))
            .with_group_instance_id(instance.map(text))
            .with_protocol_type(text("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(text("range"))
                .with_metadata(bytes::Bytes::from_static(b"\0\0\0\0\0\0\0\0\0\0"))]);
        let joined = cluster.call_any(&request).await.unwrap();
        if joined.error_code == 79 {
            // MEMBER_ID_REQUIRED: join again with the id given.
            member_id = joined.member_id.to_string();
            continue;
        }
        assert_eq!(joined.error_code, 0, "join");
        break joined;
    };
    let member_id = joined.member_id.to_string();
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(text("raw")))
        .with_generation_id(joined.generation_id)
        .with_member_id(text(&member_id))
        .with_group_instance_id(instance.map(text))
        .with_assignments(if joined.leader == joined.member_id {
            vec![SyncGroupRequestAssignment::default()
                .with_member_id(text(&member_id))
                .with_assignment(bytes::Bytes::from_static(b"mine"))]
        } else {
            vec![]
        });
    let synced = cluster.call_any(&sync).await.unwrap();
    assert_eq!(synced.error_code, 0, "sync");
    assert_eq!(&synced.assignment[..], b"mine");
    (member_id, joined.generation_id)
}

async fn heartbeat(
    cluster: &Cluster,
    member: &str,
    instance: Option<&str>,
    generation: i32,
) -> i16 {
    use kafka_protocol::messages::{GroupId, HeartbeatRequest};
    use kafka_protocol::protocol::StrBytes;
    let text = |s: &str| StrBytes::from_string(s.to_string());
    cluster
        .call_any(
            &HeartbeatRequest::default()
                .with_group_id(GroupId(text("raw")))
                .with_generation_id(generation)
                .with_member_id(text(member))
                .with_group_instance_id(instance.map(text)),
        )
        .await
        .unwrap()
        .error_code
}

#[test]
fn a_stored_group_carries_on_after_a_restart_and_a_static_member_returns_without_a_rebalance() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), GROUPS);
    let address = broker.address;
    let (member, generation) = on_glommio(async move {
        let cluster = Cluster::new(address, "raw-member");
        cluster.find_coordinator("raw").await.unwrap();
        let (member, generation) = join_and_sync(&cluster, "", Some("host-a")).await;
        assert_eq!(
            heartbeat(&cluster, &member, Some("host-a"), generation).await,
            0
        );
        (member, generation)
    });
    // The settled group was stored: after a restart the member's
    // heartbeats at the same generation are still good.
    broker.terminate();
    let broker = start_broker_with(dir.path(), GROUPS);
    let address = broker.address;
    on_glommio(async move {
        let cluster = Cluster::new(address, "raw-member");
        assert_eq!(
            heartbeat(&cluster, &member, Some("host-a"), generation).await,
            0,
            "the member carries on in generation {generation}"
        );
        assert_eq!(
            heartbeat(&cluster, &member, Some("host-a"), generation - 1).await,
            22,
            "an older generation is fenced (ILLEGAL_GENERATION)"
        );
        // The static member restarts (new process, no member id): it gets
        // a new id in the same generation, and its old id is fenced.
        let (new_member, new_generation) = join_and_sync(&cluster, "", Some("host-a")).await;
        assert_ne!(new_member, member);
        assert_eq!(new_generation, generation, "no rebalance");
        assert_eq!(
            heartbeat(&cluster, &member, Some("host-a"), generation).await,
            82,
            "FENCED_INSTANCE_ID"
        );
        assert_eq!(
            heartbeat(&cluster, &new_member, Some("host-a"), generation).await,
            0
        );
    });
}
