//! Partition reassignment in the metadata and the controller (KIP-455):
//! a move to new replicas keeps the union until every target replica is
//! in sync, then finishes with a leader among the target; a cancellation
//! goes back; what is refused (another move under way, a different
//! replication factor, a staying replica moved between shards, a stale
//! epoch); a topic deleted mid-move forgets it.

use control::controller::reassign;
use control::controller::{AlterIsr, Controller};
use control::*;

const SESSION_MS: u64 = 6_000;
const TOPIC: TopicId = TopicId([7; 16]);
const P0: PartitionId = PartitionId(0);

fn apply_all(metadata: &mut Metadata, records: Vec<MetadataRecord>) {
    for record in records {
        metadata
            .apply(&record)
            .unwrap_or_else(|e| panic!("{record:?}: {e}"));
    }
}

/// Four live brokers (two shards each) and a topic of RF 3 on 1, 2, 3.
fn cluster(controller: &mut Controller) -> Metadata {
    let mut metadata = Metadata::default();
    for id in 1..=4 {
        let registration = BrokerRegistration {
            id: BrokerId(id),
            incarnation: Incarnation(1),
            listener: format!("127.0.0.1:{}", 9090 + id),
            rack: None,
            shards: 2,
        };
        metadata
            .apply(&MetadataRecord::RegisterBroker(registration))
            .unwrap();
        let records = controller
            .heartbeat(&metadata, BrokerId(id), Incarnation(1), 0)
            .unwrap();
        apply_all(&mut metadata, records);
    }
    let assignment = PartitionAssignment {
        replicas: vec![BrokerId(1), BrokerId(2), BrokerId(3)],
        shards: vec![ShardId(0), ShardId(1), ShardId(0)],
    };
    let create = MetadataRecord::CreateTopic {
        id: TOPIC,
        name: "moving".into(),
        config: Box::new(TopicConfig::default()),
        partitions: vec![assignment],
    };
    metadata.apply(&create).unwrap();
    metadata
}

fn p0(metadata: &Metadata) -> Partition {
    metadata.partition(TOPIC, P0).unwrap().clone()
}

fn ids(brokers: &[i32]) -> Vec<BrokerId> {
    brokers.iter().copied().map(BrokerId).collect()
}

/// The leader's AlterPartition adding `joining` to the ISR.
fn join_isr(controller: &Controller, metadata: &mut Metadata, joining: i32) {
    let p = p0(metadata);
    let mut isr = p.isr.clone();
    isr.push(BrokerId(joining));
    let request = AlterIsr {
        topic: TOPIC,
        partition: P0,
        leader: p.leader.unwrap(),
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        isr,
    };
    let record = controller.alter_isr(metadata, &request).unwrap();
    apply_all(metadata, vec![record]);
}

#[test]
fn a_move_keeps_the_union_until_the_target_is_in_sync_then_leads_from_it() {
    let mut controller = Controller::new(SESSION_MS);
    let mut metadata = cluster(&mut controller);
    let before = p0(&metadata);
    assert_eq!(before.leader, Some(BrokerId(1)));
    let begin = reassign::asked(&metadata, TOPIC, P0, Some(ids(&[2, 3, 4])))
        .unwrap()
        .expect("a move");
    apply_all(&mut metadata, vec![begin]);
    let moving = p0(&metadata);
    assert_eq!(moving.replicas, ids(&[2, 3, 4, 1]), "target, then leaving");
    let grown = controller.create_partitions(&metadata, TOPIC, 2).unwrap();
    let MetadataRecord::CreatePartitions { partitions, .. } = &grown else {
        panic!("{grown:?}")
    };
    assert_eq!(
        partitions[0].replicas.len(),
        3,
        "the topic's factor, not the union's"
    );
    assert_eq!(
        moving.shards[..2],
        [ShardId(1), ShardId(0)],
        "staying shards kept"
    );
    assert_eq!(
        moving.leader,
        Some(BrokerId(1)),
        "the leader stays meanwhile"
    );
    assert_eq!(
        moving.leader_epoch, before.leader_epoch,
        "the same leadership takes its new followers"
    );
    assert!(moving.partition_epoch > before.partition_epoch);
    let state = &metadata.reassignments[&(TOPIC, P0)];
    assert_eq!((state.adding(), state.removing()), (ids(&[4]), ids(&[1])));
    // Not finished while broker 4 catches up.
    assert!(controller.tick(&metadata, 1_000).is_empty());
    let again = reassign::asked(&metadata, TOPIC, P0, Some(ids(&[1, 2, 4])));
    assert!(matches!(
        again,
        Err(MetadataError::ReassignmentInProgress { .. })
    ));

    join_isr(&controller, &mut metadata, 4);
    let finish = controller.tick(&metadata, 2_000);
    assert_eq!(finish.len(), 1, "{finish:?}");
    apply_all(&mut metadata, finish);
    let after = p0(&metadata);
    assert_eq!(after.replicas, ids(&[2, 3, 4]));
    assert_eq!(after.shards.len(), 3);
    assert_eq!(
        after.isr,
        ids(&[2, 3, 4]),
        "the leaving replica left the ISR"
    );
    assert_eq!(
        after.leader,
        Some(BrokerId(2)),
        "the first target replica in sync"
    );
    assert!(
        after.leader_epoch > moving.leader_epoch,
        "a new leader, a new epoch"
    );
    assert!(metadata.reassignments.is_empty());
    assert!(
        controller.tick(&metadata, 3_000).is_empty(),
        "nothing more to do"
    );
}

#[test]
fn a_cancelled_move_goes_back_and_refusals_change_nothing() {
    let mut controller = Controller::new(SESSION_MS);
    let mut metadata = cluster(&mut controller);
    let original = p0(&metadata);
    let refused = |metadata: &Metadata, target: &[i32]| {
        reassign::asked(metadata, TOPIC, P0, Some(ids(target))).unwrap_err()
    };
    assert!(matches!(
        refused(&metadata, &[2, 4]),
        MetadataError::ReassignmentRefused(_)
    ));
    assert!(matches!(
        refused(&metadata, &[2, 9, 4]),
        MetadataError::UnknownBroker(_)
    ));
    assert!(matches!(
        refused(&metadata, &[2, 2, 4]),
        MetadataError::InvalidPartitionChange(_)
    ));
    let cancel_nothing = reassign::asked(&metadata, TOPIC, P0, None).unwrap_err();
    assert!(matches!(
        cancel_nothing,
        MetadataError::NoReassignmentInProgress { .. }
    ));
    assert_eq!(
        reassign::asked(&metadata, TOPIC, P0, Some(ids(&[1, 2, 3]))).unwrap(),
        None,
        "already there"
    );
    // A staying replica moved between shards is refused at validation.
    let shard_moved = MetadataRecord::BeginReassignment {
        topic: TOPIC,
        partition: P0,
        expected_epoch: original.partition_epoch,
        target: PartitionAssignment {
            replicas: ids(&[2, 3, 4]),
            shards: vec![ShardId(0), ShardId(0), ShardId(0)],
        },
    };
    assert!(metadata.validate(&shard_moved).is_err());

    let begin = reassign::asked(&metadata, TOPIC, P0, Some(ids(&[4, 2, 3]))).unwrap();
    let stale = begin.clone().unwrap();
    apply_all(&mut metadata, vec![begin.unwrap()]);
    assert!(metadata.validate(&stale).is_err(), "a stale epoch");
    join_isr(&controller, &mut metadata, 4);
    // Cancelled before the tick finishes it: back to 1, 2, 3, led by 1.
    let cancel = reassign::asked(&metadata, TOPIC, P0, None)
        .unwrap()
        .unwrap();
    apply_all(&mut metadata, vec![cancel]);
    let back = p0(&metadata);
    assert_eq!(back.replicas, original.replicas);
    assert_eq!(back.shards, original.shards);
    assert_eq!(
        back.isr, original.isr,
        "broker 4 left the ISR with the move"
    );
    assert_eq!(back.leader, Some(BrokerId(1)));
    assert!(
        back.leader_epoch > original.leader_epoch,
        "broker 4 left: a new leader epoch, though broker 1 still leads"
    );
    assert!(metadata.reassignments.is_empty());

    // A single replica does not move.
    let single = MetadataRecord::CreateTopic {
        id: TopicId([8; 16]),
        name: "single".into(),
        config: Box::new(TopicConfig::default()),
        partitions: vec![PartitionAssignment {
            replicas: ids(&[1]),
            shards: vec![ShardId(0)],
        }],
    };
    apply_all(&mut metadata, vec![single]);
    let alone = reassign::asked(&metadata, TopicId([8; 16]), P0, Some(ids(&[2])));
    assert!(
        matches!(alone, Err(MetadataError::ReassignmentRefused(_))),
        "{alone:?}"
    );

    // A topic deleted mid-move forgets the move.
    let begin = reassign::asked(&metadata, TOPIC, P0, Some(ids(&[2, 3, 4]))).unwrap();
    apply_all(&mut metadata, vec![begin.unwrap()]);
    apply_all(
        &mut metadata,
        vec![MetadataRecord::DeleteTopic { id: TOPIC }],
    );
    assert!(metadata.reassignments.is_empty());
}

#[test]
fn an_unclean_election_mid_move_prefers_the_original_replicas() {
    let mut controller = Controller::new(SESSION_MS);
    let mut metadata = cluster(&mut controller);
    // Moving 1, 2, 3 to 4, 2, 3: replicas meanwhile 4, 2, 3, 1.
    let begin = reassign::asked(&metadata, TOPIC, P0, Some(ids(&[4, 2, 3]))).unwrap();
    apply_all(&mut metadata, vec![begin.unwrap()]);
    assert_eq!(
        p0(&metadata).replicas[0],
        BrokerId(4),
        "the new replica first"
    );
    // Broker 1 falls out of the ISR and comes back; then every in-sync
    // replica is lost. Left live: 1 (out of sync) and 4 (being added).
    let fence = control::controller::fence(&metadata, BrokerId(1), Incarnation(1));
    apply_all(&mut metadata, fence);
    let back = MetadataRecord::UnfenceBroker {
        id: BrokerId(1),
        incarnation: Incarnation(1),
    };
    apply_all(&mut metadata, vec![back]);
    for broker in [2, 3] {
        let fence = control::controller::fence(&metadata, BrokerId(broker), Incarnation(1));
        apply_all(&mut metadata, fence);
    }
    let p = p0(&metadata);
    assert_eq!(p.leader, None, "no in-sync replica left");
    let elected = control::controller::unclean::election(&metadata, TOPIC, P0, &p).unwrap();
    let MetadataRecord::ElectUnclean(change) = elected else {
        panic!("{elected:?}")
    };
    assert_eq!(
        change.leader,
        Some(BrokerId(1)),
        "the replica that fell out of sync, not the one still empty"
    );
}
