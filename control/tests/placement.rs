//! Replica placement is rack-aware and balanced.

use std::collections::BTreeMap;

use control::model::placement::{place, Load};
use control::*;

fn add_live_broker(metadata: &mut Metadata, id: BrokerId, rack: &str, shards: u16) {
    let registration = BrokerRegistration {
        id,
        incarnation: Incarnation(1),
        listener: format!("127.0.0.1:{}", 9000 + id.0),
        rack: Some(rack.to_string()),
        shards,
    };
    metadata
        .apply(&MetadataRecord::RegisterBroker(registration))
        .unwrap();
    metadata
        .apply(&MetadataRecord::UnfenceBroker {
            id,
            incarnation: Incarnation(1),
        })
        .unwrap();
}

fn cluster(racks: &[&str], shards: u16) -> Metadata {
    let mut metadata = Metadata::default();
    for (i, rack) in racks.iter().enumerate() {
        add_live_broker(&mut metadata, BrokerId(i as i32 + 1), rack, shards);
    }
    metadata
}

fn create(metadata: &mut Metadata, name: &str, partitions: usize, rf: usize) {
    let assignments = place(metadata, partitions, rf).unwrap();
    let id = TopicId([metadata.topics.len() as u8 + 1; 16]);
    metadata
        .apply(&MetadataRecord::CreateTopic {
            id,
            name: name.into(),
            config: Box::default(),
            partitions: assignments,
        })
        .unwrap();
}

fn spread(values: impl Iterator<Item = usize>) -> usize {
    let values: Vec<usize> = values.collect();
    values.iter().max().unwrap() - values.iter().min().unwrap()
}

#[test]
fn every_partition_spans_as_many_racks_as_it_can() {
    let mut metadata = cluster(&["a", "a", "b", "b", "c", "c"], 4);
    create(&mut metadata, "t", 60, 3);
    let racks: BTreeMap<BrokerId, String> = metadata
        .brokers
        .values()
        .map(|b| (b.registration.id, b.registration.rack.clone().unwrap()))
        .collect();
    for partition in &metadata.topic_by_name("t").unwrap().partitions {
        let mut used: Vec<&String> = partition.replicas.iter().map(|b| &racks[b]).collect();
        used.sort();
        used.dedup();
        assert_eq!(
            used.len(),
            3,
            "replicas {:?} share a rack",
            partition.replicas
        );
    }
}

#[test]
fn replicas_leaders_and_shards_are_balanced() {
    let mut metadata = cluster(&["a", "a", "b", "b", "c", "c"], 4);
    create(&mut metadata, "t", 60, 3);
    let load = Load::of(&metadata);
    let ids: Vec<BrokerId> = metadata.brokers.keys().copied().collect();
    assert!(
        spread(ids.iter().map(|b| load.replicas(*b))) <= 1,
        "replicas per broker"
    );
    assert!(
        spread(ids.iter().map(|b| load.leaders(*b))) <= 1,
        "leaders per broker"
    );
    let mut per_shard: BTreeMap<(BrokerId, ShardId), usize> = BTreeMap::new();
    for p in &metadata.topic_by_name("t").unwrap().partitions {
        for (b, s) in p.replicas.iter().zip(&p.shards) {
            *per_shard.entry((*b, *s)).or_default() += 1;
        }
    }
    assert_eq!(per_shard.len(), 6 * 4, "every shard gets replicas");
    assert!(
        spread(per_shard.values().copied()) <= 1,
        "replicas per shard"
    );
}

#[test]
fn new_brokers_take_the_next_topics_until_the_cluster_evens_out() {
    let mut metadata = cluster(&["a", "b", "c"], 1);
    create(&mut metadata, "first", 30, 2);
    for (i, rack) in ["a", "b", "c"].iter().enumerate() {
        add_live_broker(&mut metadata, BrokerId(10 + i as i32), rack, 1);
    }
    create(&mut metadata, "second", 30, 2);
    let load = Load::of(&metadata);
    let ids: Vec<BrokerId> = metadata.brokers.keys().copied().collect();
    assert!(
        spread(ids.iter().map(|b| load.replicas(*b))) <= 1,
        "evened out"
    );
}

#[test]
fn fenced_brokers_get_nothing_and_too_few_brokers_is_an_error() {
    let mut metadata = cluster(&["a", "b", "c"], 1);
    metadata
        .apply(&MetadataRecord::FenceBroker {
            id: BrokerId(2),
            incarnation: Incarnation(1),
        })
        .unwrap();
    let assignments = place(&metadata, 10, 2).unwrap();
    assert!(assignments
        .iter()
        .all(|a| !a.replicas.contains(&BrokerId(2))));
    assert_eq!(
        place(&metadata, 1, 3).unwrap_err(),
        MetadataError::NotEnoughBrokers {
            wanted: 3,
            available: 2
        }
    );
}

fn cordon(metadata: &mut Metadata, id: i32, cordoned: bool) {
    metadata
        .apply(&MetadataRecord::SetBrokerCordoned {
            id: BrokerId(id),
            cordoned,
        })
        .unwrap();
}

fn replicas_on(metadata: &Metadata, topic: &str, broker: i32) -> usize {
    metadata
        .topic_by_name(topic)
        .unwrap()
        .partitions
        .iter()
        .filter(|p| p.replicas.contains(&BrokerId(broker)))
        .count()
}

#[test]
fn a_cordoned_broker_gets_no_new_replicas_and_keeps_what_it_has() {
    let mut metadata = cluster(&["a", "b", "c", "d"], 2);
    create(&mut metadata, "before", 8, 2);
    let held = replicas_on(&metadata, "before", 4);
    assert!(held > 0);
    cordon(&mut metadata, 4, true);
    create(&mut metadata, "during", 12, 3);
    assert_eq!(replicas_on(&metadata, "during", 4), 0, "cordoned");
    assert_eq!(
        replicas_on(&metadata, "before", 4),
        held,
        "what it held stays"
    );
    // Three brokers left for RF 3; RF 4 needs the cordoned one.
    assert!(place(&metadata, 1, 4).is_err());
    cordon(&mut metadata, 4, false);
    create(&mut metadata, "after", 12, 3);
    assert!(replicas_on(&metadata, "after", 4) > 0, "uncordoned");
    // Only a registered broker is cordoned.
    let unknown = MetadataRecord::SetBrokerCordoned {
        id: BrokerId(9),
        cordoned: true,
    };
    assert!(metadata.validate(&unknown).is_err());
}
