//! The controller's decisions: fencing on missed heartbeats with leaders
//! re-elected from the ISR only, unclean election only by opt-in (counted),
//! ISR changes only at the current epochs, controlled shutdown.

use control::controller::{AlterIsr, Controller};
use control::*;

const SESSION_MS: u64 = 6_000;

fn apply_all(metadata: &mut Metadata, records: Vec<MetadataRecord>) {
    for record in records {
        metadata
            .apply(&record)
            .unwrap_or_else(|e| panic!("{record:?}: {e}"));
    }
}

/// Three live brokers on three racks, and two topics of RF 3 (one of them
/// allowing unclean election).
fn cluster(controller: &mut Controller) -> Metadata {
    let mut metadata = Metadata::default();
    for id in 1..=3 {
        let registration = BrokerRegistration {
            id: BrokerId(id),
            incarnation: Incarnation(1),
            listener: format!("127.0.0.1:{}", 9090 + id),
            rack: Some(format!("rack-{id}")),
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
    let strict = controller
        .create_topic(
            &metadata,
            TopicId([1; 16]),
            "strict",
            6,
            3,
            TopicConfig::default(),
        )
        .unwrap();
    apply_all(&mut metadata, vec![strict]);
    let mut lax = TopicConfig::default();
    lax.set("unclean.leader.election.enable", "true").unwrap();
    let lax = controller
        .create_topic(&metadata, TopicId([2; 16]), "lax", 3, 3, lax)
        .unwrap();
    apply_all(&mut metadata, vec![lax]);
    metadata
}

fn led_by(metadata: &Metadata, broker: BrokerId) -> usize {
    metadata
        .topics
        .values()
        .flat_map(|t| &t.partitions)
        .filter(|p| p.leader == Some(broker))
        .count()
}

#[test]
fn a_silent_broker_is_fenced_within_the_session_and_loses_its_leaderships() {
    let mut controller = Controller::new(SESSION_MS);
    let mut metadata = cluster(&mut controller);
    assert!(led_by(&metadata, BrokerId(1)) > 0);
    let epochs_before: Vec<LeaderEpoch> = metadata
        .topics
        .values()
        .flat_map(|t| &t.partitions)
        .map(|p| p.leader_epoch)
        .collect();
    // Brokers 2 and 3 keep heartbeating; broker 1 goes silent at t=0.
    let mut fenced_at = None;
    for now in (0..=SESSION_MS + 1_000).step_by(500) {
        for id in [2, 3] {
            let records = controller
                .heartbeat(&metadata, BrokerId(id), Incarnation(1), now)
                .unwrap();
            apply_all(&mut metadata, records);
        }
        let records = controller.tick(&metadata, now);
        apply_all(&mut metadata, records);
        if fenced_at.is_none() && metadata.brokers[&BrokerId(1)].fenced {
            fenced_at = Some(now);
        }
    }
    let fenced_at = fenced_at.expect("broker 1 was fenced");
    assert!(
        (SESSION_MS..=SESSION_MS + 500).contains(&fenced_at),
        "fenced at {fenced_at}"
    );
    assert_eq!(led_by(&metadata, BrokerId(1)), 0);
    let partitions: Vec<&Partition> = metadata
        .topics
        .values()
        .flat_map(|t| &t.partitions)
        .collect();
    for (p, before) in partitions.iter().zip(epochs_before) {
        let leader = p.leader.expect("another in-sync replica leads");
        assert!(p.isr.contains(&leader) && !p.isr.contains(&BrokerId(1)));
        assert!(p.leader_epoch >= before);
    }
    assert_eq!(
        metadata.unclean_leader_elections, 0,
        "the ISR had other members"
    );
    assert!(!metadata.brokers[&BrokerId(2)].fenced && !metadata.brokers[&BrokerId(3)].fenced);
}

#[test]
fn with_no_other_in_sync_replica_only_an_opted_in_topic_elects_uncleanly() {
    let mut controller = Controller::new(SESSION_MS);
    let mut metadata = cluster(&mut controller);
    // Shrink every ISR to its leader, then fence every leader's broker.
    let requests: Vec<AlterIsr> = metadata
        .topics
        .values()
        .flat_map(|t| {
            t.partitions
                .iter()
                .enumerate()
                .map(move |(i, p)| (t.id, i, p))
        })
        .map(|(topic, i, p)| AlterIsr {
            topic,
            partition: PartitionId(i as i32),
            leader: p.leader.unwrap(),
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            isr: vec![p.leader.unwrap()],
        })
        .collect();
    for request in requests {
        let record = controller.alter_isr(&metadata, &request).unwrap();
        metadata.apply(&record).unwrap();
    }
    let first_leader = metadata.topic_by_name("strict").unwrap().partitions[0]
        .leader
        .unwrap();
    let led_before: Vec<(String, usize)> = metadata
        .topics
        .values()
        .flat_map(|t| t.partitions.iter().enumerate().map(move |(i, p)| (t, i, p)))
        .filter(|(_, _, p)| p.leader == Some(first_leader))
        .map(|(t, i, _)| (t.name.clone(), i))
        .collect();
    assert!(
        led_before.iter().any(|(n, _)| n == "strict") && led_before.iter().any(|(n, _)| n == "lax")
    );
    let records = controller
        .controlled_shutdown(&metadata, first_leader, Incarnation(1))
        .unwrap();
    apply_all(&mut metadata, records);
    let mut unclean = 0;
    for (name, index) in &led_before {
        let p = &metadata.topic_by_name(name).unwrap().partitions[*index];
        if name == "lax" {
            let leader = p.leader.expect("the opted-in topic elects uncleanly");
            assert!(
                leader != first_leader && p.isr == vec![leader],
                "{name}-{index}: {p:?}"
            );
            unclean += 1;
        } else {
            assert_eq!(
                p.leader, None,
                "{name}-{index}: offline rather than unclean"
            );
            assert_eq!(
                p.isr,
                vec![first_leader],
                "the last in-sync replica is remembered"
            );
        }
    }
    assert_eq!(
        metadata.unclean_leader_elections, unclean,
        "every unclean election is counted"
    );
    // The broker comes back: it leads its offline partitions again, cleanly.
    let records = controller
        .heartbeat(&metadata, first_leader, Incarnation(1), 10)
        .unwrap();
    apply_all(&mut metadata, records);
    assert!(metadata
        .topic_by_name("strict")
        .unwrap()
        .partitions
        .iter()
        .all(|p| p.leader.is_some()));
}

#[test]
fn stale_and_foreign_isr_changes_are_refused() {
    let mut controller = Controller::new(SESSION_MS);
    let mut metadata = cluster(&mut controller);
    let topic = metadata.topic_by_name("strict").unwrap().id;
    let p = metadata.partition(topic, PartitionId(0)).unwrap().clone();
    let leader = p.leader.unwrap();
    let follower = *p.replicas.iter().find(|b| **b != leader).unwrap();
    let shrink = AlterIsr {
        topic,
        partition: PartitionId(0),
        leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        isr: vec![leader, follower],
    };
    let record = controller.alter_isr(&metadata, &shrink).unwrap();
    metadata.apply(&record).unwrap();
    assert!(matches!(
        controller.alter_isr(&metadata, &shrink),
        Err(MetadataError::StalePartitionEpoch { .. })
    ));
    let current = metadata
        .partition(topic, PartitionId(0))
        .unwrap()
        .partition_epoch;
    let foreign = AlterIsr {
        leader: follower,
        partition_epoch: current,
        ..shrink.clone()
    };
    assert!(matches!(
        controller.alter_isr(&metadata, &foreign),
        Err(MetadataError::InvalidPartitionChange(_))
    ));
    let drops_leader = AlterIsr {
        partition_epoch: current,
        isr: vec![follower],
        ..shrink
    };
    assert!(controller.alter_isr(&metadata, &drops_leader).is_err());
}

#[test]
fn a_deposed_leaders_isr_change_is_refused_as_stale() {
    // A leader whose earlier request may have committed (its answer lost)
    // asks again after it was deposed. "Not the leader" would read as
    // "nothing changed" and let it stop counting the members it asked
    // for; the partition changed since its view, and the answer says so.
    let mut controller = Controller::new(SESSION_MS);
    let mut metadata = cluster(&mut controller);
    let topic = metadata.topic_by_name("strict").unwrap().id;
    let before = metadata.partition(topic, PartitionId(0)).unwrap().clone();
    let deposed = before.leader.unwrap();
    let incarnation = metadata.brokers[&deposed].registration.incarnation;
    for record in control::controller::fence(&metadata, deposed, incarnation) {
        metadata.apply(&record).unwrap();
    }
    let after = metadata.partition(topic, PartitionId(0)).unwrap();
    assert_ne!(after.leader, Some(deposed), "fencing moved the leadership");
    let again = AlterIsr {
        topic,
        partition: PartitionId(0),
        leader: deposed,
        leader_epoch: before.leader_epoch,
        partition_epoch: before.partition_epoch,
        isr: before.replicas.clone(),
    };
    assert!(matches!(
        controller.alter_isr(&metadata, &again),
        Err(MetadataError::StalePartitionEpoch { .. })
    ));
}

#[test]
fn a_fenced_broker_cannot_rejoin_the_isr() {
    let mut controller = Controller::new(SESSION_MS);
    let mut metadata = cluster(&mut controller);
    let topic = metadata.topic_by_name("strict").unwrap().id;
    let p = metadata.partition(topic, PartitionId(0)).unwrap().clone();
    let leader = p.leader.unwrap();
    let others: Vec<BrokerId> = p
        .replicas
        .iter()
        .copied()
        .filter(|b| *b != leader)
        .collect();
    let (follower, stopped) = (others[0], others[1]);
    let incarnation = metadata.brokers[&stopped].registration.incarnation;
    for record in control::controller::fence(&metadata, stopped, incarnation) {
        metadata.apply(&record).unwrap();
    }
    let p = metadata.partition(topic, PartitionId(0)).unwrap().clone();
    assert!(!p.isr.contains(&stopped), "fencing drops it from the ISR");
    // Its leader still thinks it caught up: asking it back is refused.
    let expand = AlterIsr {
        topic,
        partition: PartitionId(0),
        leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        isr: vec![leader, follower, stopped],
    };
    assert!(matches!(
        controller.alter_isr(&metadata, &expand),
        Err(MetadataError::InvalidPartitionChange(_))
    ));
    // Once it is live again, it may.
    let unfence = controller
        .heartbeat(&metadata, stopped, incarnation, 1)
        .unwrap();
    for record in unfence {
        metadata.apply(&record).unwrap();
    }
    assert!(controller.alter_isr(&metadata, &expand).is_ok());
}

#[test]
fn controlled_shutdown_moves_leadership_before_fencing() {
    let mut controller = Controller::new(SESSION_MS);
    let mut metadata = cluster(&mut controller);
    let records = controller
        .controlled_shutdown(&metadata, BrokerId(2), Incarnation(1))
        .unwrap();
    assert!(
        matches!(records.last(), Some(MetadataRecord::FenceBroker { .. })),
        "fenced last"
    );
    apply_all(&mut metadata, records);
    assert_eq!(led_by(&metadata, BrokerId(2)), 0);
    assert!(metadata.brokers[&BrokerId(2)].fenced);
    assert!(metadata
        .topics
        .values()
        .flat_map(|t| &t.partitions)
        .all(|p| p.leader.is_some()));
    assert!(
        controller
            .controlled_shutdown(&metadata, BrokerId(2), Incarnation(7))
            .is_err(),
        "stale incarnation"
    );
}

#[test]
fn partitions_only_grow() {
    let mut controller = Controller::new(SESSION_MS);
    let mut metadata = cluster(&mut controller);
    let topic = metadata.topic_by_name("lax").unwrap().id;
    assert!(controller.create_partitions(&metadata, topic, 3).is_err());
    let record = controller.create_partitions(&metadata, topic, 5).unwrap();
    metadata.apply(&record).unwrap();
    let partitions = &metadata.topic(topic).unwrap().partitions;
    assert_eq!(partitions.len(), 5);
    assert!(partitions.iter().all(|p| p.replicas.len() == 3));
}

#[test]
fn a_partition_left_leaderless_with_a_live_in_sync_replica_gets_it_as_leader() {
    let mut controller = Controller::new(SESSION_MS);
    let mut metadata = cluster(&mut controller);
    // Partition 0 of "strict" ends without a leader while broker 2, in its
    // ISR, is live (the state an election refused at apply leaves).
    let topic = metadata.topics[&TopicId([1; 16])].clone();
    let partition = &topic.partitions[0];
    let offline = MetadataRecord::ChangePartition(PartitionChange {
        topic: topic.id,
        partition: PartitionId(0),
        expected_epoch: partition.partition_epoch,
        leader: None,
        isr: vec![BrokerId(2)],
        unclean: false,
    });
    apply_all(&mut metadata, vec![offline]);
    for id in 1..=3 {
        let records = controller
            .heartbeat(&metadata, BrokerId(id), Incarnation(1), 100)
            .unwrap();
        assert!(records.is_empty(), "broker {id} was live already");
    }
    let records = controller.tick(&metadata, 100);
    assert_eq!(records.len(), 1, "{records:?}");
    // Until it applies, the next ticks do not ask again.
    assert!(controller.tick(&metadata, 200).is_empty());
    apply_all(&mut metadata, records);
    let partition = &metadata.topics[&topic.id].partitions[0];
    assert_eq!(partition.leader, Some(BrokerId(2)));
    assert_eq!(partition.isr, vec![BrokerId(2)]);
    assert!(controller.tick(&metadata, 300).is_empty());
    assert_eq!(metadata.unclean_leader_elections, 0);
}

#[test]
fn fencing_the_last_in_sync_replica_of_a_leaderless_partition_keeps_it_on_record() {
    // Found by a fault test: a partition without a leader, waiting for
    // broker 2 (its only in-sync replica), lost broker 2 from its ISR
    // when broker 2 was fenced again before it led: an empty ISR, offline
    // for good without an unclean election.
    let mut controller = Controller::new(SESSION_MS);
    let mut metadata = cluster(&mut controller);
    let topic = metadata.topics[&TopicId([1; 16])].clone();
    let offline = MetadataRecord::ChangePartition(PartitionChange {
        topic: topic.id,
        partition: PartitionId(0),
        expected_epoch: topic.partitions[0].partition_epoch,
        leader: None,
        isr: vec![BrokerId(2)],
        unclean: false,
    });
    apply_all(&mut metadata, vec![offline]);
    let fencing = control::controller::fence(&metadata, BrokerId(2), Incarnation(1));
    apply_all(&mut metadata, fencing);
    let partition = &metadata.topics[&topic.id].partitions[0];
    assert_eq!(partition.leader, None);
    assert_eq!(partition.isr, vec![BrokerId(2)], "the one to wait for");
    // Its next life leads it again once unfenced.
    let registration = BrokerRegistration {
        incarnation: Incarnation(2),
        ..metadata.brokers[&BrokerId(2)].registration.clone()
    };
    apply_all(
        &mut metadata,
        vec![MetadataRecord::RegisterBroker(registration)],
    );
    let records = controller
        .heartbeat(&metadata, BrokerId(2), Incarnation(2), 100)
        .unwrap();
    apply_all(&mut metadata, records);
    assert_eq!(
        metadata.topics[&topic.id].partitions[0].leader,
        Some(BrokerId(2))
    );
}

#[test]
fn leading_again_in_a_later_term_gives_every_broker_a_full_session() {
    // This node led in term 1, then another node led (the heartbeats went
    // there) for longer than a session; it leads again in term 3.
    let mut controller = Controller::new(SESSION_MS);
    controller.lead_in(1);
    let metadata = cluster(&mut controller);
    assert!(controller.tick(&metadata, 1_000).is_empty());
    let back = 1_000 + 3 * SESSION_MS;
    controller.lead_in(3);
    let records = controller.tick(&metadata, back);
    assert!(records.is_empty(), "fenced live brokers: {records:?}");
    // A broker that stays silent through its new session is fenced.
    for now in [back + SESSION_MS / 2, back + SESSION_MS] {
        for id in [1, 2] {
            let records = controller
                .heartbeat(&metadata, BrokerId(id), Incarnation(1), now)
                .unwrap();
            assert!(records.is_empty());
        }
    }
    let records = controller.tick(&metadata, back + SESSION_MS);
    assert!(
        records
            .iter()
            .any(|r| matches!(r, MetadataRecord::FenceBroker { id, .. } if *id == BrokerId(3))),
        "{records:?}"
    );
}
