//! Elections beyond failover. Leadership goes back to preferred
//! replicas: by the controller's periodic rebalance once they are live and
//! in sync again, and by an operator's ElectLeaders; never to a fenced or
//! out-of-sync replica. An operator's unclean election gives an offline
//! partition a live replica outside its ISR, whatever its topic allows,
//! and only when no in-sync replica is live.

use control::controller::preferred::{self, NotElected};
use control::controller::unclean;
use control::controller::{AlterIsr, Controller};
use control::*;

const SESSION_MS: u64 = 6_000;
const REBALANCE_MS: u64 = 30_000;

fn apply_all(metadata: &mut Metadata, records: Vec<MetadataRecord>) {
    for record in records {
        metadata
            .apply(&record)
            .unwrap_or_else(|e| panic!("{record:?}: {e}"));
    }
}

fn heartbeat(controller: &mut Controller, metadata: &mut Metadata, ids: &[i32], now: u64) {
    for &id in ids {
        let records = controller
            .heartbeat(metadata, BrokerId(id), Incarnation(1), now)
            .unwrap();
        apply_all(metadata, records);
    }
}

/// Three live brokers on three racks; topics of RF 3 with 6 and 3
/// partitions, their first replicas spread by placement.
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
    }
    heartbeat(controller, &mut metadata, &[1, 2, 3], 0);
    for (id, name, count) in [(1, "six", 6), (2, "three", 3)] {
        let topic = controller
            .create_topic(
                &metadata,
                TopicId([id; 16]),
                name,
                count,
                3,
                TopicConfig::default(),
            )
            .unwrap();
        apply_all(&mut metadata, vec![topic]);
    }
    metadata
}

fn partitions(metadata: &Metadata) -> Vec<(TopicId, PartitionId, Partition)> {
    metadata
        .topics
        .values()
        .flat_map(|t| {
            t.partitions
                .iter()
                .enumerate()
                .map(move |(i, p)| (t.id, PartitionId(i as i32), p.clone()))
        })
        .collect()
}

fn led_by(metadata: &Metadata, broker: i32) -> usize {
    partitions(metadata)
        .iter()
        .filter(|(_, _, p)| p.leader == Some(BrokerId(broker)))
        .count()
}

fn on_preferred(metadata: &Metadata) -> usize {
    partitions(metadata)
        .iter()
        .filter(|(_, _, p)| p.leader.is_some() && p.leader == p.replicas.first().copied())
        .count()
}

/// Brokers 2 and 3 stop (fenced: broker 1 leads everything), come back,
/// and broker 1 takes them into every ISR again, as a leader does once
/// they caught up.
fn restart_two_and_three(controller: &mut Controller, metadata: &mut Metadata) {
    for id in [2, 3] {
        let records =
            control::controller::fence_checked(metadata, BrokerId(id), Incarnation(1)).unwrap();
        apply_all(metadata, records);
    }
    let all = partitions(metadata).len();
    assert_eq!(led_by(metadata, 1), all, "broker 1 leads all while alone");
    heartbeat(controller, metadata, &[1, 2, 3], 1_000);
    for (topic, partition, p) in partitions(metadata) {
        let request = AlterIsr {
            topic,
            partition,
            leader: p.leader.unwrap(),
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            isr: vec![BrokerId(1), BrokerId(2), BrokerId(3)],
        };
        let record = controller.alter_isr(metadata, &request).unwrap();
        apply_all(metadata, vec![record]);
    }
}

#[test]
fn leadership_spreads_back_at_the_first_rebalance_after_the_brokers_return() {
    let mut controller = Controller::new(SESSION_MS).rebalancing_leaders(Some(REBALANCE_MS));
    let mut metadata = cluster(&mut controller);
    assert_eq!(
        on_preferred(&metadata),
        9,
        "placement leads from first replicas"
    );
    assert_eq!(
        controller.tick(&metadata, 0),
        vec![],
        "the first tick starts the interval"
    );
    restart_two_and_three(&mut controller, &mut metadata);
    assert_eq!(
        on_preferred(&metadata),
        3,
        "only broker 1's own are on their preferred"
    );
    let mut rebalanced_at = None;
    for now in (1_000..=REBALANCE_MS + 1_000).step_by(500) {
        heartbeat(&mut controller, &mut metadata, &[1, 2, 3], now);
        let records = controller.tick(&metadata, now);
        if !records.is_empty() {
            rebalanced_at.get_or_insert(now);
        }
        apply_all(&mut metadata, records);
    }
    assert_eq!(
        rebalanced_at,
        Some(REBALANCE_MS),
        "one interval after the first tick"
    );
    assert_eq!(on_preferred(&metadata), 9);
    for broker in 1..=3 {
        assert_eq!(led_by(&metadata, broker), 3, "broker {broker}");
    }
}

#[test]
fn a_preferred_replica_out_of_sync_or_fenced_is_not_elected() {
    let mut controller = Controller::new(SESSION_MS).rebalancing_leaders(Some(REBALANCE_MS));
    let mut metadata = cluster(&mut controller);
    controller.tick(&metadata, 0);
    for id in [2, 3] {
        let records =
            control::controller::fence_checked(&metadata, BrokerId(id), Incarnation(1)).unwrap();
        apply_all(&mut metadata, records);
    }
    // Broker 2 is back but not in any ISR yet; broker 3 stays fenced.
    heartbeat(&mut controller, &mut metadata, &[1, 2], 1_000);
    heartbeat(&mut controller, &mut metadata, &[1, 2], REBALANCE_MS);
    let records = controller.tick(&metadata, REBALANCE_MS);
    assert!(
        records
            .iter()
            .all(|r| !matches!(r, MetadataRecord::ChangePartition(_))),
        "{records:?}"
    );
    for (topic, index, p) in partitions(&metadata) {
        let outcome = preferred::preferred_election(&metadata, topic, index, &p);
        let expected = if p.replicas[0] == BrokerId(1) {
            NotElected::Leads
        } else {
            NotElected::Unavailable
        };
        assert_eq!(
            outcome,
            Err(expected),
            "{index:?} replicas {:?}",
            p.replicas
        );
    }
}

#[test]
fn without_rebalancing_only_an_operator_moves_leadership_back() {
    let mut controller = Controller::new(SESSION_MS);
    let mut metadata = cluster(&mut controller);
    restart_two_and_three(&mut controller, &mut metadata);
    for now in (1_000..=10 * REBALANCE_MS).step_by(5_000) {
        heartbeat(&mut controller, &mut metadata, &[1, 2, 3], now);
        let records = controller.tick(&metadata, now);
        apply_all(&mut metadata, records);
    }
    assert_eq!(on_preferred(&metadata), 3, "nothing moved by itself");
    // The operator names partitions 0-5 of "six" (one twice) and some
    // that do not exist.
    let asked = vec![
        ("six".to_string(), vec![0, 1, 2, 3, 4, 5, 5, 99, -1]),
        ("nosuch".to_string(), vec![0]),
    ];
    let records = preferred::asked(&metadata, &asked);
    let six = &metadata.topic_by_name("six").unwrap().partitions;
    let waiting = six
        .iter()
        .filter(|p| p.leader != Some(p.replicas[0]))
        .count();
    assert_eq!(records.len(), waiting, "each of six's, once");
    apply_all(&mut metadata, records);
    let six = &metadata.topic_by_name("six").unwrap().partitions;
    assert!(six.iter().all(|p| p.leader == Some(p.replicas[0])));
    assert_eq!(on_preferred(&metadata), 6 + 1, "three's left alone");
}

#[test]
fn a_rebalance_at_its_maximum_goes_on_at_the_next_tick() {
    use control::controller::REBALANCE_ELECTIONS_MAX;
    let mut controller = Controller::new(SESSION_MS).rebalancing_leaders(Some(REBALANCE_MS));
    let mut metadata = cluster(&mut controller);
    let many = controller
        .create_topic(
            &metadata,
            TopicId([3; 16]),
            "many",
            1_800,
            3,
            TopicConfig::default(),
        )
        .unwrap();
    apply_all(&mut metadata, vec![many]);
    controller.tick(&metadata, 0);
    restart_two_and_three(&mut controller, &mut metadata);
    let waiting = partitions(&metadata).len() - on_preferred(&metadata);
    assert!(waiting > REBALANCE_ELECTIONS_MAX, "{waiting} waiting");
    let mut made = Vec::new();
    for now in (REBALANCE_MS..=REBALANCE_MS + 2_000).step_by(500) {
        heartbeat(&mut controller, &mut metadata, &[1, 2, 3], now);
        let records = controller.tick(&metadata, now);
        made.push(records.len());
        apply_all(&mut metadata, records);
    }
    assert_eq!(
        made,
        [
            REBALANCE_ELECTIONS_MAX,
            waiting - REBALANCE_ELECTIONS_MAX,
            0,
            0,
            0
        ]
    );
    assert_eq!(on_preferred(&metadata), partitions(&metadata).len());
}

#[test]
fn a_rebalance_makes_at_most_its_maximum_of_elections() {
    let mut controller = Controller::new(SESSION_MS);
    let mut metadata = cluster(&mut controller);
    restart_two_and_three(&mut controller, &mut metadata);
    let waiting = 9 - on_preferred(&metadata);
    assert_eq!(preferred::rebalance(&metadata, 2).len(), 2);
    assert_eq!(preferred::rebalance(&metadata, 100).len(), waiting);
}

/// Broker 1 alone in every ISR (2 and 3 fenced, then back), then broker 1
/// fenced: every partition offline, waiting for it.
fn offline_waiting_for_broker_1(controller: &mut Controller) -> Metadata {
    let mut metadata = cluster(controller);
    for id in [2, 3, 1] {
        let records =
            control::controller::fence_checked(&metadata, BrokerId(id), Incarnation(1)).unwrap();
        apply_all(&mut metadata, records);
        if id == 3 {
            heartbeat(controller, &mut metadata, &[2, 3], 1_000);
        }
    }
    for (_, _, p) in partitions(&metadata) {
        assert_eq!((p.leader, p.isr.clone()), (None, vec![BrokerId(1)]));
    }
    metadata
}

#[test]
fn an_operators_unclean_election_brings_an_offline_partition_back_whatever_its_topic_allows() {
    let mut controller = Controller::new(SESSION_MS);
    let mut metadata = offline_waiting_for_broker_1(&mut controller);
    // The controller's own ticks wait for broker 1 (the topics do not
    // allow unclean elections).
    heartbeat(&mut controller, &mut metadata, &[2, 3], 2_000);
    assert!(controller.tick(&metadata, 2_000).is_empty());
    let records = unclean::asked(&metadata, &[("six".to_string(), vec![0, 1, 1])]);
    assert_eq!(records.len(), 2, "partitions 0 and 1, once each");
    let six = metadata.topic_by_name("six").unwrap().partitions.clone();
    apply_all(&mut metadata, records);
    for (index, before) in six.iter().enumerate().take(2) {
        let after = &metadata.topic_by_name("six").unwrap().partitions[index];
        let first_live = *before.replicas.iter().find(|b| b.0 != 1).unwrap();
        assert_eq!(after.leader, Some(first_live), "partition {index}");
        assert_eq!(after.isr, vec![first_live]);
        assert!(after.leader_epoch > before.leader_epoch);
    }
    assert_eq!(metadata.unclean_leader_elections, 2, "counted");
    let third = &metadata.topic_by_name("six").unwrap().partitions[2];
    assert_eq!(third.leader, None, "partitions not named stay offline");
}

#[test]
fn an_unclean_election_prefers_a_live_in_sync_replica_and_refuses_a_led_partition() {
    let mut controller = Controller::new(SESSION_MS);
    let metadata = cluster(&mut controller);
    for (topic, index, p) in partitions(&metadata) {
        assert_eq!(
            unclean::election(&metadata, topic, index, &p),
            Err(unclean::NotElected::Led)
        );
    }
    // Offline, but broker 1 (its last in-sync replica) is back: a clean
    // election of it, not an unclean one.
    let mut metadata = offline_waiting_for_broker_1(&mut controller);
    let (topic, index, p) = partitions(&metadata).remove(0);
    metadata
        .apply(&MetadataRecord::UnfenceBroker {
            id: BrokerId(1),
            incarnation: Incarnation(1),
        })
        .unwrap();
    let record = unclean::election(&metadata, topic, index, &p).unwrap();
    let MetadataRecord::ChangePartition(change) = record else {
        panic!("{record:?}");
    };
    assert_eq!((change.leader, change.unclean), (Some(BrokerId(1)), false));
    // No live replica at all: nothing to elect.
    let mut metadata = offline_waiting_for_broker_1(&mut controller);
    for id in [2, 3] {
        let records =
            control::controller::fence_checked(&metadata, BrokerId(id), Incarnation(1)).unwrap();
        apply_all(&mut metadata, records);
    }
    let (topic, index, p) = partitions(&metadata).remove(0);
    assert_eq!(
        unclean::election(&metadata, topic, index, &p),
        Err(unclean::NotElected::NoLiveReplica)
    );
}

#[test]
fn the_model_refuses_an_unclean_election_of_a_led_partition_or_a_fenced_leader() {
    let mut controller = Controller::new(SESSION_MS);
    let metadata = cluster(&mut controller);
    let (topic, index, p) = partitions(&metadata).remove(0);
    let other = *p.replicas.iter().find(|b| Some(**b) != p.leader).unwrap();
    let change = PartitionChange {
        topic,
        partition: index,
        expected_epoch: p.partition_epoch,
        leader: Some(other),
        isr: vec![other],
        unclean: true,
    };
    let refused = metadata.validate(&MetadataRecord::ElectUnclean(change));
    assert!(refused.is_err(), "a led partition: {refused:?}");
    let metadata = offline_waiting_for_broker_1(&mut controller);
    let (topic, index, p) = partitions(&metadata).remove(0);
    let change = PartitionChange {
        topic,
        partition: index,
        expected_epoch: p.partition_epoch,
        leader: Some(BrokerId(1)),
        isr: vec![BrokerId(1)],
        unclean: true,
    };
    let refused = metadata.validate(&MetadataRecord::ElectUnclean(change));
    assert!(refused.is_err(), "a fenced leader: {refused:?}");
}
