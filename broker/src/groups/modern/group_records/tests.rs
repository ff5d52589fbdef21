//! Golden bytes built by hand from Kafka's schemas (field by field, in
//! the comments), round trips, and every truncation refused.

use super::*;

const T1: [u8; 16] = [1; 16];
const T2: [u8; 16] = [2; 16];

fn golden() -> Vec<(ConsumerKey, ConsumerValue, Vec<u8>)> {
    let g = || "g".to_string();
    let m = || "m".to_string();
    let mut cases = Vec::new();
    // 3: version 0, epoch 7, no tagged fields.
    let epoch = ConsumerValue::GroupEpoch {
        epoch: 7,
        metadata_hash: 0,
    };
    cases.push((
        ConsumerKey::GroupEpoch { group: g() },
        epoch,
        vec![0, 0, 0, 0, 0, 7, 0],
    ));
    // 3 with the hash: one tagged field, tag 0, 8 bytes.
    let hashed = ConsumerValue::GroupEpoch {
        epoch: 7,
        metadata_hash: 0x0102_0304_0506_0708,
    };
    let bytes = vec![0, 0, 0, 0, 0, 7, 1, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8];
    cases.push((ConsumerKey::GroupEpoch { group: g() }, hashed, bytes));
    // 5: instance null, rack "r1", client "c", host "/h", names ["t"],
    // regex null, rebalance timeout 300000, assignor "uniform", no tags.
    let member = ConsumerValue::Member(MemberMetadata {
        instance_id: None,
        rack_id: Some("r1".into()),
        client_id: "c".into(),
        client_host: "/h".into(),
        subscribed_topic_names: vec!["t".into()],
        subscribed_topic_regex: None,
        rebalance_timeout_ms: 300_000,
        server_assignor: Some("uniform".into()),
        classic: None,
    });
    let mut bytes = vec![
        0, 0, 0, 3, b'r', b'1', 2, b'c', 3, b'/', b'h', 2, 2, b't', 0,
    ];
    bytes.extend([0x00, 0x04, 0x93, 0xe0, 8]);
    bytes.extend(b"uniform");
    let head = bytes.clone();
    bytes.push(0);
    cases.push((
        ConsumerKey::Member {
            group: g(),
            member: m(),
        },
        member.clone(),
        bytes,
    ));
    // 5 for a classic member: tag 0 (ClassicMemberMetadata, a nullable
    // struct): 1 tagged field, tag 0, size 16, present (1), session
    // timeout 45000, one protocol: name "range", metadata [9], its tags,
    // the struct's tags.
    let ConsumerValue::Member(mut classic) = member else {
        unreachable!()
    };
    classic.classic = Some(ClassicMetadata {
        session_timeout_ms: 45_000,
        protocols: vec![("range".into(), vec![9])],
    });
    let mut bytes = head;
    bytes.extend([1, 0, 16, 1, 0x00, 0x00, 0xaf, 0xc8, 2, 6]);
    bytes.extend(b"range");
    bytes.extend([2, 9, 0, 0]);
    cases.push((
        ConsumerKey::Member {
            group: g(),
            member: m(),
        },
        ConsumerValue::Member(classic),
        bytes,
    ));
    // 6: assignment epoch 9.
    let target_epoch = ConsumerValue::TargetEpoch {
        assignment_epoch: 9,
    };
    cases.push((
        ConsumerKey::TargetEpoch { group: g() },
        target_epoch,
        vec![0, 0, 0, 0, 0, 9, 0],
    ));
    // 7: one topic, partition 0; the topic's and the value's tags empty.
    let target = ConsumerValue::TargetMember(vec![TopicPartitions {
        topic_id: T1,
        partitions: vec![0],
    }]);
    let mut bytes = vec![0, 0, 2];
    bytes.extend(T1);
    bytes.extend([2, 0, 0, 0, 0, 0, 0]);
    cases.push((
        ConsumerKey::TargetMember {
            group: g(),
            member: m(),
        },
        target,
        bytes,
    ));
    // 8: epoch 5, previous 4, state 1, assigned T1 [0, 2], pending T2 [1].
    let current = ConsumerValue::CurrentAssignment(CurrentAssignment {
        member_epoch: 5,
        previous_member_epoch: 4,
        state: 1,
        assigned: vec![TopicPartitions {
            topic_id: T1,
            partitions: vec![0, 2],
        }],
        pending_revocation: vec![TopicPartitions {
            topic_id: T2,
            partitions: vec![1],
        }],
    });
    let mut bytes = vec![0, 0, 0, 0, 0, 5, 0, 0, 0, 4, 1, 2];
    bytes.extend(T1);
    bytes.extend([3, 0, 0, 0, 0, 0, 0, 0, 2, 0, 2]);
    bytes.extend(T2);
    bytes.extend([2, 0, 0, 0, 1, 0, 0]);
    cases.push((
        ConsumerKey::CurrentAssignment {
            group: g(),
            member: m(),
        },
        current,
        bytes,
    ));
    // 16: topics ["a", "bc"], version 3, timestamp 1000.
    let regex = ConsumerValue::Regex(RegexResolution {
        topics: vec!["a".into(), "bc".into()],
        version: 3,
        timestamp: 1000,
    });
    let mut bytes = vec![0, 0, 3, 2, b'a', 3, b'b', b'c'];
    bytes.extend(3i64.to_be_bytes());
    bytes.extend(1000i64.to_be_bytes());
    bytes.push(0);
    let key = ConsumerKey::Regex {
        group: g(),
        regex: "a.*".into(),
    };
    cases.push((key, regex, bytes));
    cases
}

#[test]
fn values_are_kafkas_bytes_and_read_back() {
    for (key, value, bytes) in golden() {
        assert_eq!(value.encode(), bytes, "{key:?}");
        assert_eq!(ConsumerValue::decode(&key, &bytes), Ok(value), "{key:?}");
    }
}

#[test]
fn keys_are_kafkas_bytes_and_read_back() {
    let keys = [
        (
            ConsumerKey::GroupEpoch { group: "g".into() },
            vec![0, 3, 0, 1, b'g'],
        ),
        (
            ConsumerKey::PartitionMetadata { group: "g".into() },
            vec![0, 4, 0, 1, b'g'],
        ),
        (
            ConsumerKey::Member {
                group: "g".into(),
                member: "m".into(),
            },
            vec![0, 5, 0, 1, b'g', 0, 1, b'm'],
        ),
        (
            ConsumerKey::TargetEpoch { group: "g".into() },
            vec![0, 6, 0, 1, b'g'],
        ),
        (
            ConsumerKey::CurrentAssignment {
                group: "g".into(),
                member: "mm".into(),
            },
            vec![0, 8, 0, 1, b'g', 0, 2, b'm', b'm'],
        ),
        (
            ConsumerKey::Regex {
                group: "g".into(),
                regex: "^a".into(),
            },
            vec![0, 16, 0, 1, b'g', 0, 2, b'^', b'a'],
        ),
    ];
    for (key, bytes) in keys {
        assert_eq!(key.encode(), bytes);
        assert_eq!(ConsumerKey::decode(&bytes), Ok(key));
    }
    let offset_key = [0u8, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 0];
    assert_eq!(
        ConsumerKey::decode(&offset_key),
        Err(RecordError::Version(1))
    );
}

#[test]
fn every_truncation_and_trailing_byte_is_refused() {
    for (key, _, bytes) in golden() {
        for len in 0..bytes.len() {
            let cut = ConsumerValue::decode(&key, &bytes[..len]);
            assert!(cut.is_err(), "{key:?} cut to {len} bytes: {cut:?}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(ConsumerValue::decode(&key, &longer).is_err());
    }
}

#[test]
fn tagged_fields_of_newer_versions_are_skipped() {
    // Kafka 4.3 adds AssignmentEpochs (tag 0, []int32) to each topic of
    // type 8, and AssignmentTimestamp (tag 0, int64) to type 6.
    let mut bytes = vec![0, 0, 0, 0, 0, 5, 0, 0, 0, 4, 0, 2];
    bytes.extend(T1);
    bytes.extend([2, 0, 0, 0, 3]); // partitions [3]
    bytes.extend([1, 0, 5, 2, 0, 0, 0, 5]); // tag 0: epochs [5]
    bytes.extend([1, 0]); // pending: none; no tags
    let key = ConsumerKey::CurrentAssignment {
        group: "g".into(),
        member: "m".into(),
    };
    let ConsumerValue::CurrentAssignment(read) = ConsumerValue::decode(&key, &bytes).unwrap()
    else {
        panic!("not an assignment");
    };
    assert_eq!(read.assigned[0].partitions, [3]);
    let mut bytes = vec![0, 0, 0, 0, 0, 9, 1, 0, 8];
    bytes.extend(1_700_000_000_000i64.to_be_bytes());
    let key = ConsumerKey::TargetEpoch { group: "g".into() };
    let expected = ConsumerValue::TargetEpoch {
        assignment_epoch: 9,
    };
    assert_eq!(ConsumerValue::decode(&key, &bytes), Ok(expected));
}
