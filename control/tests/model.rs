//! The metadata state machine: records apply all-or-nothing, stale and
//! invalid changes are refused, and records and snapshots survive encoding.

use control::model::placement::place;
use control::*;

fn register(metadata: &mut Metadata, id: i32, rack: &str) {
    let incarnation = Incarnation(1);
    metadata
        .apply(&MetadataRecord::RegisterBroker(BrokerRegistration {
            id: BrokerId(id),
            incarnation,
            listener: format!("127.0.0.1:{}", 9092 + id),
            rack: Some(rack.to_string()),
            shards: 2,
        }))
        .unwrap();
    metadata
        .apply(&MetadataRecord::UnfenceBroker {
            id: BrokerId(id),
            incarnation,
        })
        .unwrap();
}

fn cluster(brokers: i32) -> Metadata {
    let mut metadata = Metadata::default();
    for id in 1..=brokers {
        register(&mut metadata, id, &format!("rack-{}", id % 3));
    }
    metadata
}

fn create(
    metadata: &mut Metadata,
    name: &str,
    partitions: usize,
    rf: usize,
    config: TopicConfig,
) -> TopicId {
    let id = TopicId([name.len() as u8; 16].map(|b| b ^ name.as_bytes()[0]));
    let assignments = place(metadata, partitions, rf).unwrap();
    metadata
        .apply(&MetadataRecord::CreateTopic {
            id,
            name: name.to_string(),
            config: Box::new(config),
            partitions: assignments,
        })
        .unwrap();
    id
}

#[test]
fn a_created_topic_has_all_replicas_in_sync_and_its_first_replica_leading() {
    let mut metadata = cluster(3);
    let id = create(&mut metadata, "orders", 4, 3, TopicConfig::default());
    let topic = metadata.topic_by_name("orders").unwrap();
    assert_eq!(topic.id, id);
    for partition in &topic.partitions {
        assert_eq!(partition.isr, partition.replicas);
        assert_eq!(partition.leader, Some(partition.replicas[0]));
        assert_eq!(partition.leader_epoch, LeaderEpoch(0));
    }
    let again = MetadataRecord::CreateTopic {
        id: TopicId([9; 16]),
        name: "orders".into(),
        config: Box::default(),
        partitions: place(&metadata, 1, 1).unwrap(),
    };
    assert_eq!(
        metadata.apply(&again),
        Err(MetadataError::TopicExists("orders".into()))
    );
}

#[test]
fn a_stale_partition_epoch_is_refused_and_changes_nothing() {
    let mut metadata = cluster(3);
    let topic = create(&mut metadata, "t", 1, 3, TopicConfig::default());
    let p = metadata.partition(topic, PartitionId(0)).unwrap().clone();
    let shrink = PartitionChange {
        topic,
        partition: PartitionId(0),
        expected_epoch: p.partition_epoch,
        leader: p.leader,
        isr: vec![p.replicas[0], p.replicas[1]],
        unclean: false,
    };
    metadata
        .apply(&MetadataRecord::ChangePartition(shrink.clone()))
        .unwrap();
    let after = metadata.clone();
    // The same change again names the old epoch.
    assert!(matches!(
        metadata.apply(&MetadataRecord::ChangePartition(shrink)),
        Err(MetadataError::StalePartitionEpoch { .. })
    ));
    assert_eq!(metadata, after);
    let p = metadata.partition(topic, PartitionId(0)).unwrap();
    assert_eq!(p.partition_epoch, PartitionEpoch(1));
    assert_eq!(
        p.leader_epoch,
        LeaderEpoch(0),
        "same leader, same leader epoch"
    );
}

#[test]
fn leaders_come_from_the_isr_unless_the_topic_allows_unclean_election() {
    let mut metadata = cluster(3);
    let strict = create(&mut metadata, "strict", 1, 3, TopicConfig::default());
    let mut lax_config = TopicConfig::default();
    lax_config
        .set("unclean.leader.election.enable", "true")
        .unwrap();
    let lax = create(&mut metadata, "lax", 1, 3, lax_config);
    for topic in [strict, lax] {
        let p = metadata.partition(topic, PartitionId(0)).unwrap().clone();
        let only_leader = PartitionChange {
            topic,
            partition: PartitionId(0),
            expected_epoch: p.partition_epoch,
            leader: p.leader,
            isr: vec![p.leader.unwrap()],
            unclean: false,
        };
        metadata
            .apply(&MetadataRecord::ChangePartition(only_leader))
            .unwrap();
    }
    for topic in [strict, lax] {
        let p = metadata.partition(topic, PartitionId(0)).unwrap().clone();
        let outsider = *p.replicas.iter().find(|b| !p.isr.contains(b)).unwrap();
        let clean = PartitionChange {
            topic,
            partition: PartitionId(0),
            expected_epoch: p.partition_epoch,
            leader: Some(outsider),
            isr: vec![outsider],
            unclean: false,
        };
        assert!(matches!(
            metadata.apply(&MetadataRecord::ChangePartition(clean.clone())),
            Err(MetadataError::InvalidPartitionChange(_))
        ));
        let unclean = PartitionChange {
            unclean: true,
            ..clean
        };
        let result = metadata.apply(&MetadataRecord::ChangePartition(unclean));
        assert_eq!(
            result.is_ok(),
            topic == lax,
            "only the opted-in topic elects uncleanly"
        );
    }
    assert_eq!(metadata.unclean_leader_elections, 1, "counted");
    let p = metadata.partition(lax, PartitionId(0)).unwrap();
    assert_eq!(p.leader_epoch, LeaderEpoch(1));
}

#[test]
fn fenced_brokers_cannot_lead_and_stale_incarnations_are_refused() {
    let mut metadata = cluster(3);
    let topic = create(&mut metadata, "t", 1, 3, TopicConfig::default());
    let p = metadata.partition(topic, PartitionId(0)).unwrap().clone();
    let follower = p.replicas[1];
    metadata
        .apply(&MetadataRecord::FenceBroker {
            id: follower,
            incarnation: Incarnation(1),
        })
        .unwrap();
    let to_fenced = PartitionChange {
        topic,
        partition: PartitionId(0),
        expected_epoch: p.partition_epoch,
        leader: Some(follower),
        isr: p.isr.clone(),
        unclean: false,
    };
    assert!(metadata
        .apply(&MetadataRecord::ChangePartition(to_fenced))
        .is_err());
    // A restart registers a new incarnation; the old one is refused after.
    let restart = BrokerRegistration {
        id: follower,
        incarnation: Incarnation(2),
        listener: "127.0.0.1:1".into(),
        rack: None,
        shards: 1,
    };
    metadata
        .apply(&MetadataRecord::RegisterBroker(restart.clone()))
        .unwrap();
    assert!(matches!(
        metadata.apply(&MetadataRecord::RegisterBroker(restart)),
        Err(MetadataError::StaleIncarnation { .. })
    ));
    assert!(matches!(
        metadata.apply(&MetadataRecord::UnfenceBroker {
            id: follower,
            incarnation: Incarnation(1)
        }),
        Err(MetadataError::StaleIncarnation { .. })
    ));
    assert!(
        metadata.brokers[&follower].fenced,
        "a new life starts fenced"
    );
}

#[test]
fn deleting_and_growing_topics() {
    let mut metadata = cluster(3);
    let topic = create(&mut metadata, "t", 2, 2, TopicConfig::default());
    let more = place(&metadata, 3, 2).unwrap();
    metadata
        .apply(&MetadataRecord::CreatePartitions {
            topic,
            partitions: more,
        })
        .unwrap();
    assert_eq!(metadata.topic(topic).unwrap().partitions.len(), 5);
    metadata
        .apply(&MetadataRecord::DeleteTopic { id: topic })
        .unwrap();
    assert!(metadata.topic_by_name("t").is_err());
    assert!(metadata
        .apply(&MetadataRecord::DeleteTopic { id: topic })
        .is_err());
}

#[test]
fn invalid_names_and_assignments_are_refused() {
    let mut metadata = cluster(2);
    for name in ["", ".", "..", "a/b", &"x".repeat(250)] {
        let record = MetadataRecord::CreateTopic {
            id: TopicId([1; 16]),
            name: name.to_string(),
            config: Box::default(),
            partitions: place(&metadata, 1, 1).unwrap(),
        };
        assert!(
            matches!(
                metadata.apply(&record),
                Err(MetadataError::InvalidTopicName(_))
            ),
            "{name:?}"
        );
    }
    let bad = [
        PartitionAssignment {
            replicas: vec![BrokerId(1), BrokerId(1)],
            shards: vec![ShardId(0), ShardId(0)],
        },
        PartitionAssignment {
            replicas: vec![BrokerId(7)],
            shards: vec![ShardId(0)],
        },
        PartitionAssignment {
            replicas: vec![BrokerId(1)],
            shards: vec![ShardId(5)],
        },
        PartitionAssignment {
            replicas: vec![BrokerId(1)],
            shards: vec![],
        },
    ];
    for assignment in bad {
        let record = MetadataRecord::CreateTopic {
            id: TopicId([1; 16]),
            name: "ok".into(),
            config: Box::default(),
            partitions: vec![assignment.clone()],
        };
        assert!(metadata.apply(&record).is_err(), "{assignment:?}");
    }
    assert!(metadata.topics.is_empty());
}

#[test]
fn records_and_snapshots_round_trip_and_garbage_is_an_error() {
    let mut metadata = cluster(3);
    let topic = create(&mut metadata, "t", 3, 3, TopicConfig::default());
    let record = MetadataRecord::ChangePartition(PartitionChange {
        topic,
        partition: PartitionId(2),
        expected_epoch: PartitionEpoch(0),
        leader: Some(BrokerId(2)),
        isr: vec![BrokerId(2), BrokerId(3)],
        unclean: false,
    });
    let bytes = record.encode();
    assert_eq!(MetadataRecord::decode(&bytes).unwrap(), record);
    // Odd alignment of the input is fine.
    let mut shifted = vec![0u8];
    shifted.extend_from_slice(&bytes);
    assert_eq!(MetadataRecord::decode(&shifted[1..]).unwrap(), record);
    let snapshot = metadata.encode();
    assert_eq!(Metadata::decode(&snapshot).unwrap(), metadata);
    // Damaged or truncated input is a typed error, never a panic.
    let mut seed = 1u64;
    for _ in 0..2000 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut damaged = snapshot.clone();
        let at = (seed >> 33) as usize % damaged.len();
        damaged[at] ^= (seed >> 20) as u8 | 1;
        let cut = (seed >> 40) as usize % (damaged.len() + 1);
        let _ = Metadata::decode(&damaged[..cut]);
        let _ = MetadataRecord::decode(&damaged[..cut.min(bytes.len())]);
    }
    assert!(MetadataRecord::decode(&[]).is_err());
}

/// Producer id blocks follow one another: a block that repeats, skips or
/// is out of bounds is refused and changes nothing, and the next free id
/// survives a snapshot (so ids are never handed out twice after a restart).
#[test]
fn producer_id_blocks_follow_one_another_and_survive_a_snapshot() {
    let mut metadata = cluster(2);
    let block = |broker: i32, first: i64, size: i64| MetadataRecord::AllocateProducerIds {
        broker: BrokerId(broker),
        first,
        size,
    };
    metadata.apply(&block(1, 0, 1000)).unwrap();
    metadata.apply(&block(2, 1000, 1000)).unwrap();
    let before = metadata.clone();
    for (refused, why) in [
        (block(1, 1000, 1000), "repeats"),
        (block(1, 2500, 1000), "skips"),
        (block(1, 2000, 0), "empty"),
        (block(1, 2000, -5), "negative"),
        (block(9, 2000, 1000), "unknown broker"),
    ] {
        assert!(metadata.apply(&refused).is_err(), "{why}");
        assert_eq!(metadata, before, "{why}: nothing changed");
    }
    assert!(matches!(
        metadata.apply(&block(1, 1000, 1000)),
        Err(MetadataError::InvalidProducerIdBlock { next: 2000, .. })
    ));
    let restored = Metadata::decode(&metadata.encode()).unwrap();
    assert_eq!(restored.next_producer_id, 2000);
    assert_eq!(restored.producer_id_blocks, metadata.producer_id_blocks);
}

/// SCRAM credentials: set (and replaced) per user and mechanism, removed
/// one mechanism at a time (the user goes with its last), an unknown one
/// or a malformed one refused changing nothing, and all of it kept by a
/// snapshot and by the record's own encoding.
#[test]
fn scram_credentials_are_set_replaced_deleted_and_survive_a_snapshot() {
    let mut metadata = cluster(1);
    let credential = |user: &str, mechanism: ScramMechanism, iterations: u32| ScramCredential {
        user: user.into(),
        mechanism,
        salt: vec![7; 24],
        iterations,
        stored_key: vec![1; mechanism.key_len()],
        server_key: vec![2; mechanism.key_len()],
    };
    let set = |c: ScramCredential| MetadataRecord::SetScramCredential(c);
    let delete = |user: &str, mechanism| MetadataRecord::DeleteScramCredential {
        user: user.into(),
        mechanism,
    };
    metadata
        .apply(&set(credential("alice", ScramMechanism::Sha256, 4096)))
        .unwrap();
    metadata
        .apply(&set(credential("alice", ScramMechanism::Sha512, 4096)))
        .unwrap();
    metadata
        .apply(&set(credential("alice", ScramMechanism::Sha512, 8192)))
        .unwrap();
    let alice = metadata
        .scram_credential("alice", ScramMechanism::Sha512)
        .unwrap();
    assert_eq!(alice.iterations, 8192, "replaced");
    let before = metadata.clone();
    for (refused, why) in [
        (delete("bob", ScramMechanism::Sha256), "unknown user"),
        (
            set(credential("bob", ScramMechanism::Sha256, 100)),
            "too few iterations",
        ),
        (set(credential("", ScramMechanism::Sha256, 4096)), "no name"),
    ] {
        assert!(metadata.apply(&refused).is_err(), "{why}");
        assert_eq!(metadata, before, "{why}: nothing changed");
    }
    let record = delete("alice", ScramMechanism::Sha256);
    assert_eq!(MetadataRecord::decode(&record.encode()).unwrap(), record);
    metadata.apply(&record).unwrap();
    assert!(metadata.apply(&record).is_err(), "deleted already");
    let restored = Metadata::decode(&metadata.encode()).unwrap();
    assert_eq!(restored.scram_credentials, metadata.scram_credentials);
    assert!(restored
        .scram_credential("alice", ScramMechanism::Sha256)
        .is_err());
    metadata
        .apply(&delete("alice", ScramMechanism::Sha512))
        .unwrap();
    assert!(metadata.scram_credentials.is_empty(), "the user is gone");
}

/// Client quotas: set, replaced and removed per entity and key; the most
/// specific entity applies (Kafka's precedence); kept by a snapshot.
#[test]
fn client_quotas_apply_most_specific_first_and_survive_a_snapshot() {
    use control::model::quotas::{EntityName, QuotaEntity, PRODUCER_BYTE_RATE};
    let mut metadata = cluster(1);
    let named = |s: &str| Some(EntityName::Named(s.into()));
    let set = |user, client_id, value| MetadataRecord::SetClientQuota {
        entity: QuotaEntity { user, client_id },
        key: PRODUCER_BYTE_RATE.into(),
        value,
    };
    metadata
        .apply(&set(Some(EntityName::Default), None, Some(1000)))
        .unwrap();
    assert_eq!(
        metadata.client_quota("bob", "app", PRODUCER_BYTE_RATE),
        Some(1000)
    );
    metadata
        .apply(&set(named("alice"), None, Some(500)))
        .unwrap();
    metadata
        .apply(&set(named("alice"), named("app"), Some(200)))
        .unwrap();
    assert_eq!(
        metadata.client_quota("alice", "app", PRODUCER_BYTE_RATE),
        Some(200)
    );
    assert_eq!(
        metadata.client_quota("alice", "other", PRODUCER_BYTE_RATE),
        Some(500)
    );
    assert_eq!(
        metadata.client_quota("alice", "app", "consumer_byte_rate"),
        None
    );
    let restored = Metadata::decode(&metadata.encode()).unwrap();
    assert_eq!(restored.client_quotas, metadata.client_quotas);
    metadata
        .apply(&set(named("alice"), named("app"), None))
        .unwrap();
    assert_eq!(
        metadata.client_quota("alice", "app", PRODUCER_BYTE_RATE),
        Some(500)
    );
    let before = metadata.clone();
    assert!(metadata.apply(&set(None, None, Some(1))).is_err());
    assert_eq!(metadata, before);
}

#[test]
fn a_brokers_listeners_belong_to_its_life_and_are_checked() {
    let mut metadata = cluster(2);
    let endpoint = |listener: &str, address: &str| BrokerEndpoint {
        listener: listener.into(),
        address: address.into(),
    };
    let set =
        |incarnation: u64, endpoints: Vec<BrokerEndpoint>| MetadataRecord::SetBrokerEndpoints {
            id: BrokerId(1),
            incarnation: Incarnation(incarnation),
            endpoints,
        };
    // No endpoints yet: the registration's listener serves every name.
    let broker = metadata.brokers[&BrokerId(1)].clone();
    assert_eq!(metadata.endpoint(&broker, "ANY"), Some("127.0.0.1:9093"));
    let both = vec![
        endpoint("INTERNAL", "10.0.0.1:9092"),
        endpoint("EXTERNAL", "broker1.example:9093"),
    ];
    metadata.apply(&set(1, both.clone())).unwrap();
    assert_eq!(
        metadata.endpoint(&broker, "EXTERNAL"),
        Some("broker1.example:9093")
    );
    assert_eq!(
        metadata.endpoint(&broker, "INTERNAL"),
        Some("10.0.0.1:9092")
    );
    assert_eq!(metadata.endpoint(&broker, "OTHER"), None);
    // Another life's, a repeated name, a bad address, none: refused.
    let before = metadata.clone();
    assert!(matches!(
        metadata.apply(&set(2, both.clone())),
        Err(MetadataError::StaleIncarnation { .. })
    ));
    for bad in [
        vec![endpoint("A", "h:1"), endpoint("A", "h:2")],
        vec![endpoint("A", "no-port")],
        vec![endpoint("A", ":9092")],
        vec![endpoint("A B", "h:1")],
        vec![],
    ] {
        let refused = metadata.apply(&set(1, bad.clone()));
        assert!(
            matches!(refused, Err(MetadataError::InvalidEndpoints(_))),
            "{bad:?}: {refused:?}"
        );
    }
    assert_eq!(metadata, before);
    // They survive a snapshot; a new life starts without them.
    assert_eq!(Metadata::decode(&metadata.encode()).unwrap(), metadata);
    metadata
        .apply(&MetadataRecord::FenceBroker {
            id: BrokerId(1),
            incarnation: Incarnation(1),
        })
        .unwrap();
    metadata
        .apply(&MetadataRecord::RegisterBroker(BrokerRegistration {
            incarnation: Incarnation(2),
            ..broker.registration.clone()
        }))
        .unwrap();
    assert!(!metadata.broker_endpoints.contains_key(&BrokerId(1)));
}
