//! The bounds walkers against real encodings and every way a body can lie.

use super::*;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{MetadataRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

fn produce(version: i16) -> Bytes {
    let topics = (0..3)
        .map(|t| {
            TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(format!("topic-{t}"))))
                .with_partition_data(
                    (0..4)
                        .map(|p| {
                            PartitionProduceData::default()
                                .with_index(p)
                                .with_records(Some(Bytes::from(vec![p as u8; 40])))
                        })
                        .collect(),
                )
        })
        .collect();
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(topics);
    let mut out = BytesMut::new();
    request.encode(&mut out, version).unwrap();
    out.freeze()
}

fn metadata(version: i16) -> Bytes {
    let topics = (0..3)
        .map(|t| {
            MetadataRequestTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(format!("t{t}")))))
        })
        .collect();
    let mut out = BytesMut::new();
    MetadataRequest::default()
        .with_topics(Some(topics))
        .encode(&mut out, version)
        .unwrap();
    out.freeze()
}

#[test]
fn every_version_the_codec_writes_passes() {
    for version in 3..=13 {
        check_produce(&produce(version), version)
            .unwrap_or_else(|e| panic!("produce v{version}: {e}"));
    }
    for version in 0..=13 {
        check_metadata(&metadata(version), version)
            .unwrap_or_else(|e| panic!("metadata v{version}: {e}"));
    }
}

pub(crate) fn encoded<T: Encodable>(message: &T, version: i16) -> Bytes {
    let mut out = BytesMut::new();
    message.encode(&mut out, version).unwrap();
    out.freeze()
}

#[test]
fn admin_and_offset_requests_of_every_version_pass() {
    use kafka_protocol::messages::create_topics_request::{
        CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
    };
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{
        BrokerId, CreateTopicsRequest, DeleteTopicsRequest, ListOffsetsRequest,
    };
    let name = || TopicName(StrBytes::from_static_str("orders"));
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(100)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name())
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(vec![CreatableReplicaAssignment::default()
                .with_partition_index(0)
                .with_broker_ids(vec![BrokerId(1), BrokerId(2)])])
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("retention.ms"))
                .with_value(Some(StrBytes::from_static_str("1000")))])]);
    for version in 2..=7 {
        check_create_topics(&encoded(&create, version), version)
            .unwrap_or_else(|e| panic!("create v{version}: {e}"));
    }
    for version in 1..=6 {
        let delete = if version >= 6 {
            DeleteTopicsRequest::default()
                .with_topics(vec![DeleteTopicState::default().with_name(Some(name()))])
        } else {
            DeleteTopicsRequest::default().with_topic_names(vec![name(), name()])
        };
        check_delete_topics(&encoded(&delete, version), version)
            .unwrap_or_else(|e| panic!("delete v{version}: {e}"));
    }
    for version in 1..=10 {
        let mut partition = ListOffsetsPartition::default()
            .with_partition_index(3)
            .with_timestamp(-1);
        if version >= 4 {
            partition = partition.with_current_leader_epoch(2);
        }
        let mut request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(name())
                .with_partitions(vec![partition])]);
        if version >= 10 {
            request = request.with_timeout_ms(100);
        }
        check_list_offsets(&encoded(&request, version), version)
            .unwrap_or_else(|e| panic!("list offsets v{version}: {e}"));
    }
    // Forged counts are refused in each.
    assert!(check_create_topics(&[0x7f, 0xff, 0xff, 0xff], 2).is_err());
    assert!(check_delete_topics(&[0x7f, 0xff, 0xff, 0xff], 1).is_err());
    assert!(check_list_offsets(&[0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff], 2).is_err());
}

#[test]
fn fetch_requests_of_every_version_pass() {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
    use kafka_protocol::messages::FetchRequest;
    for version in 4..=18i16 {
        let mut partition = FetchPartition::default()
            .with_partition(1)
            .with_fetch_offset(42)
            .with_partition_max_bytes(1 << 20);
        if version >= 9 {
            partition = partition.with_current_leader_epoch(3);
        }
        if version >= 12 {
            partition = partition.with_last_fetched_epoch(2);
        }
        if version >= 5 {
            partition = partition.with_log_start_offset(0);
        }
        let mut topic = FetchTopic::default().with_partitions(vec![partition.clone(), partition]);
        let mut forgotten = ForgottenTopic::default().with_partitions(vec![7, 8]);
        if version <= 12 {
            topic = topic.with_topic(TopicName(StrBytes::from_static_str("orders")));
            forgotten = forgotten.with_topic(TopicName(StrBytes::from_static_str("old")));
        } else {
            topic = topic.with_topic_id(uuid::Uuid::from_bytes([3; 16]));
            forgotten = forgotten.with_topic_id(uuid::Uuid::from_bytes([4; 16]));
        }
        let mut request = FetchRequest::default()
            .with_max_wait_ms(500)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_topics(vec![topic]);
        if version >= 7 {
            request = request.with_forgotten_topics_data(vec![forgotten]);
        }
        if version >= 11 {
            request = request.with_rack_id(StrBytes::from_static_str("r1"));
        }
        check_fetch(&encoded(&request, version), version)
            .unwrap_or_else(|e| panic!("fetch v{version}: {e}"));
    }
    let mut forged = vec![0u8; 4 + 13 + 8];
    forged.extend_from_slice(&i32::MAX.to_be_bytes());
    assert!(check_fetch(&forged, 7).is_err());
    // Found by fuzzing: a Fetch v18 whose partition carries a known
    // tagged field (replica_directory_id, a uuid) declaring a 1-byte
    // size. The codec reads it by its schema (16 bytes), a walk
    // skipping by size read elsewhere, and the codec then met a count
    // of ~2^28 forgotten topics and reserved 17 GB for them.
    let frame = include_bytes!("../fuzz_regressions/fetch_known_tag_size.bin");
    let request = crate::kafka::request::parse(Bytes::from_static(frame)).unwrap();
    assert_eq!(request.header.request_api_version, 18);
    assert!(check_fetch(&request.body, 18).is_err());
}

#[test]
fn a_count_no_bytes_back_is_refused() {
    // Produce v3 with a topic count of i32::MAX and nothing after it.
    let mut body = vec![0xff, 0xff, 0, 1, 0, 0, 0x75, 0x30];
    body.extend_from_slice(&i32::MAX.to_be_bytes());
    assert!(matches!(
        check_produce(&body, 3),
        Err(BoundsError::Truncated { .. })
    ));
    // The same in a flexible version: a compact count of 2^31.
    let mut body = vec![0, 0, 1, 0, 0, 0x75, 0x30];
    body.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x08]);
    assert!(check_produce(&body, 9).is_err());
    // Metadata: a topics count far beyond the body.
    assert!(check_metadata(&[0x7f, 0xff, 0xff, 0xff, 1], 4).is_err());
}

#[test]
fn whatever_passes_the_walk_decodes_without_oversized_arrays() {
    // Flip and cut bytes of valid bodies: a body the walk accepts must
    // decode (or fail) with arrays no longer than the body.
    let mut seed = 11u64;
    for version in 3..=13i16 {
        let valid = produce(version);
        for _ in 0..300 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let mut body = valid.to_vec();
            let at = (seed >> 33) as usize % body.len();
            body[at] = (seed >> 17) as u8;
            body.truncate(body.len() - (seed >> 60) as usize % 3);
            if check_produce(&body, version).is_ok() {
                if let Ok(decoded) = ProduceRequest::decode(&mut Bytes::from(body.clone()), version)
                {
                    assert!(decoded.topic_data.len() <= body.len());
                }
            }
        }
    }
}

#[test]
fn config_partition_and_record_admin_requests_of_every_version_pass() {
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    use kafka_protocol::messages::create_partitions_request::{
        CreatePartitionsAssignment, CreatePartitionsTopic,
    };
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::incremental_alter_configs_request as incremental;
    use kafka_protocol::messages::{
        AlterConfigsRequest, BrokerId, CreatePartitionsRequest, DeleteRecordsRequest,
        DescribeClusterRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest,
    };
    let text = |s: &'static str| StrBytes::from_static_str(s);
    let name = || TopicName(text("orders"));
    let create = CreatePartitionsRequest::default()
        .with_timeout_ms(5)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(name())
            .with_count(4)
            .with_assignments(Some(vec![CreatePartitionsAssignment::default()
                .with_broker_ids(vec![BrokerId(1), BrokerId(2)])]))]);
    for version in 0..=3 {
        check_create_partitions(&encoded(&create, version), version)
            .unwrap_or_else(|e| panic!("create partitions v{version}: {e}"));
    }
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    use kafka_protocol::messages::ElectLeadersRequest;
    for named in [true, false] {
        let elect = ElectLeadersRequest::default()
            .with_election_type(0)
            .with_timeout_ms(5)
            .with_topic_partitions(named.then(|| {
                vec![TopicPartitions::default()
                    .with_topic(name())
                    .with_partitions(vec![0, 3])]
            }));
        for version in 0..=2 {
            check_elect_leaders(&encoded(&elect, version), version)
                .unwrap_or_else(|e| panic!("elect leaders v{version}: {e}"));
        }
    }
    let describe =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(text("orders"))
            .with_configuration_keys(Some(vec![text("retention.ms")]))]);
    for version in 1..=4 {
        check_describe_configs(&encoded(&describe, version), version)
            .unwrap_or_else(|e| panic!("describe configs v{version}: {e}"));
    }
    let alter =
        AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(text("orders"))
            .with_configs(vec![AlterableConfig::default()
                .with_name(text("retention.ms"))
                .with_value(Some(text("5")))])]);
    for version in 0..=2 {
        check_alter_configs(&encoded(&alter, version), version)
            .unwrap_or_else(|e| panic!("alter configs v{version}: {e}"));
    }
    let incremental = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(text("orders"))
            .with_configs(vec![incremental::AlterableConfig::default()
                .with_name(text("retention.ms"))
                .with_config_operation(0)
                .with_value(None)]),
    ]);
    for version in 0..=1 {
        check_incremental_alter_configs(&encoded(&incremental, version), version)
            .unwrap_or_else(|e| panic!("incremental alter v{version}: {e}"));
    }
    let delete = DeleteRecordsRequest::default()
        .with_timeout_ms(5)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(name())
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(1)
                .with_offset(9)])]);
    for version in 0..=2 {
        check_delete_records(&encoded(&delete, version), version)
            .unwrap_or_else(|e| panic!("delete records v{version}: {e}"));
    }
    for version in 0..=2 {
        let cluster = DescribeClusterRequest::default().with_endpoint_type(1);
        check_describe_cluster(&encoded(&cluster, version), version)
            .unwrap_or_else(|e| panic!("describe cluster v{version}: {e}"));
    }
    let forged = [0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0];
    assert!(check_create_partitions(&forged, 0).is_err());
    assert!(check_describe_configs(&forged, 1).is_err());
    assert!(check_alter_configs(&forged, 0).is_err());
    assert!(check_incremental_alter_configs(&forged, 0).is_err());
    assert!(check_delete_records(&forged, 0).is_err());
}
