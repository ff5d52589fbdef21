//! Bounds walks of the transaction APIs: AddPartitionsToTxn,
//! AddOffsetsToTxn, EndTxn, WriteTxnMarkers and TxnOffsetCommit, and the
//! admin ones, ListTransactions and DescribeTransactions.
//!
//! Transactional producers send these with client-chosen lengths and
//! counts like any other request, so each is walked before the codec
//! reserves memory for it.

use super::{Walk, Walker};

/// AddPartitionsToTxn v0-5 (flexible from v3; batched transactions from v4).
pub fn check_add_partitions_to_txn(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 3);
    if version >= 4 {
        w.array(|w| {
            w.string()?; // transactional_id
            w.fixed(8 + 2 + 1)?; // producer_id, producer_epoch, verify_only
            txn_topics(w)?;
            w.tagged_fields()
        })?;
    } else {
        w.string()?; // transactional_id
        w.fixed(8 + 2)?; // producer_id, producer_epoch
        txn_topics(&mut w)?;
    }
    w.tagged_fields()?;
    w.end()
}

/// AddPartitionsToTxn's topics: the same struct in both layouts, once per
/// request up to v3 and once per transaction from v4.
fn txn_topics(w: &mut Walker) -> Walk {
    w.array(|w| {
        w.string()?; // name
        w.array(|w| w.fixed(4))?; // partitions
        w.tagged_fields()
    })
}

/// AddOffsetsToTxn v0-4 (flexible from v3).
pub fn check_add_offsets_to_txn(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 3);
    w.string()?; // transactional_id
    w.fixed(8 + 2)?; // producer_id, producer_epoch
    w.string()?; // group_id
    w.tagged_fields()?;
    w.end()
}

/// EndTxn v0-5 (flexible from v3).
pub fn check_end_txn(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 3);
    w.string()?; // transactional_id
    w.fixed(8 + 2 + 1)?; // producer_id, producer_epoch, committed
    w.tagged_fields()?;
    w.end()
}

/// WriteTxnMarkers v1 (flexible; the codec has no v0).
pub fn check_write_txn_markers(body: &[u8], _version: i16) -> Walk {
    let mut w = Walker::new(body, true);
    w.array(|w| {
        w.fixed(8 + 2 + 1)?; // producer_id, producer_epoch, transaction_result
        w.array(|w| {
            w.string()?; // name
            w.array(|w| w.fixed(4))?; // partition_indexes
            w.tagged_fields()
        })?;
        w.fixed(4)?; // coordinator_epoch
        w.tagged_fields()
    })?;
    w.tagged_fields()?;
    w.end()
}

/// TxnOffsetCommit v0-5 (flexible from v3; group membership from v3).
pub fn check_txn_offset_commit(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 3);
    w.string()?; // transactional_id
    w.string()?; // group_id
    w.fixed(8 + 2)?; // producer_id, producer_epoch
    if version >= 3 {
        w.fixed(4)?; // generation_id
        w.string()?; // member_id
        w.string()?; // group_instance_id (nullable)
    }
    w.array(|w| {
        w.string()?; // name
        w.array(|w| {
            w.fixed(4 + 8)?; // partition_index, committed_offset
            if version >= 2 {
                w.fixed(4)?; // committed_leader_epoch
            }
            w.string()?; // committed_metadata (nullable)
            w.tagged_fields()
        })?;
        w.tagged_fields()
    })?;
    w.tagged_fields()?;
    w.end()
}

/// ListTransactions v0-2 (flexible; v1 adds a duration filter, v2 an id
/// pattern).
pub fn check_list_transactions(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, true);
    w.array(|w| w.string())?; // state_filters
    w.array(|w| w.fixed(8))?; // producer_id_filters
    if version >= 1 {
        w.fixed(8)?; // duration_filter
    }
    if version >= 2 {
        w.string()?; // transactional_id_pattern (nullable)
    }
    w.tagged_fields()?;
    w.end()
}

/// DescribeTransactions v0 (flexible).
pub fn check_describe_transactions(body: &[u8], _version: i16) -> Walk {
    let mut w = Walker::new(body, true);
    w.array(|w| w.string())?; // transactional_ids
    w.tagged_fields()?;
    w.end()
}

/// The admin requests of every version pass; a forged count does not.
#[cfg(test)]
mod admin_tests {
    use super::*;
    use crate::kafka::bounds::tests::encoded;
    use kafka_protocol::messages::{
        DescribeTransactionsRequest, ListTransactionsRequest, ProducerId, TransactionalId,
    };
    use kafka_protocol::protocol::StrBytes;

    #[test]
    fn transaction_admin_requests_of_every_version_pass() {
        for version in 0..=2 {
            let request = ListTransactionsRequest::default()
                .with_state_filters(vec![StrBytes::from_static_str("Ongoing")])
                .with_producer_id_filters(vec![ProducerId(4), ProducerId(5)])
                .with_duration_filter(if version >= 1 { 1_000 } else { -1 })
                .with_transactional_id_pattern(
                    (version >= 2).then(|| StrBytes::from_static_str("tx-.*")),
                );
            let body = encoded(&request, version);
            assert_eq!(
                check_list_transactions(&body, version),
                Ok(()),
                "v{version}"
            );
            assert!(check_list_transactions(&body[..body.len() - 1], version).is_err());
        }
        let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![
            TransactionalId(StrBytes::from_static_str("a")),
            TransactionalId(StrBytes::from_static_str("b")),
        ]);
        let body = encoded(&request, 0);
        assert_eq!(check_describe_transactions(&body, 0), Ok(()));
        let forged = [0xff, 0xff, 0xff, 0xff, 0x0f];
        assert!(check_describe_transactions(&forged, 0).is_err());
        assert!(check_list_transactions(&forged, 0).is_err());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::bounds::tests::encoded;
    use bytes::Bytes;
    use kafka_protocol::messages::add_partitions_to_txn_request::{
        AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
    };
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::write_txn_markers_request::{
        WritableTxnMarker, WritableTxnMarkerTopic,
    };
    use kafka_protocol::messages::{
        AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, GroupId, ProducerId,
        TopicName, TransactionalId, TxnOffsetCommitRequest, WriteTxnMarkersRequest,
    };
    use kafka_protocol::protocol::StrBytes;

    type Check = fn(&[u8], i16) -> Walk;

    fn text(s: &'static str) -> StrBytes {
        StrBytes::from_static_str(s)
    }

    fn txn_id(s: &'static str) -> TransactionalId {
        TransactionalId(text(s))
    }

    /// Two topics of two partitions each, for AddPartitionsToTxn.
    fn add_topics() -> Vec<AddPartitionsToTxnTopic> {
        vec![
            AddPartitionsToTxnTopic::default()
                .with_name(TopicName(text("orders")))
                .with_partitions(vec![0, 1]),
            AddPartitionsToTxnTopic::default()
                .with_name(TopicName(text("payments")))
                .with_partitions(vec![2, 3]),
        ]
    }

    fn add_partitions(version: i16) -> Bytes {
        let request = if version >= 4 {
            let transaction = |id| {
                AddPartitionsToTxnTransaction::default()
                    .with_transactional_id(txn_id(id))
                    .with_producer_id(ProducerId(42))
                    .with_producer_epoch(3)
                    .with_verify_only(true)
                    .with_topics(add_topics())
            };
            let transactions = vec![transaction("tx-a"), transaction("tx-b")];
            AddPartitionsToTxnRequest::default().with_transactions(transactions)
        } else {
            AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(txn_id("tx"))
                .with_v3_and_below_producer_id(ProducerId(42))
                .with_v3_and_below_producer_epoch(3)
                .with_v3_and_below_topics(add_topics())
        };
        encoded(&request, version)
    }

    fn write_markers() -> Bytes {
        let topic = |name| {
            WritableTxnMarkerTopic::default()
                .with_name(TopicName(text(name)))
                .with_partition_indexes(vec![0, 1])
        };
        let marker = |result| {
            WritableTxnMarker::default()
                .with_producer_id(ProducerId(42))
                .with_producer_epoch(3)
                .with_transaction_result(result)
                .with_topics(vec![topic("orders"), topic("payments")])
                .with_coordinator_epoch(5)
        };
        let markers = vec![marker(true), marker(false)];
        encoded(&WriteTxnMarkersRequest::default().with_markers(markers), 1)
    }

    fn txn_offset_commit(version: i16) -> Bytes {
        // One partition with metadata and one without: the field is
        // nullable, and null is encoded differently from empty.
        let partition = |index, metadata| {
            let mut p = TxnOffsetCommitRequestPartition::default()
                .with_partition_index(index)
                .with_committed_offset(100)
                .with_committed_metadata(metadata);
            if version >= 2 {
                p = p.with_committed_leader_epoch(2);
            }
            p
        };
        let topic = |name| {
            let partitions = vec![partition(0, Some(text("meta"))), partition(1, None)];
            TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(text(name)))
                .with_partitions(partitions)
        };
        let mut request = TxnOffsetCommitRequest::default()
            .with_transactional_id(txn_id("tx"))
            .with_group_id(GroupId(text("g")))
            .with_producer_id(ProducerId(42))
            .with_producer_epoch(3)
            .with_topics(vec![topic("orders"), topic("payments")]);
        if version >= 3 {
            request = request
                .with_generation_id(7)
                .with_member_id(text("m"))
                .with_group_instance_id(Some(text("i")));
        }
        encoded(&request, version)
    }

    #[test]
    fn transaction_requests_of_every_version_pass() {
        let mut cases: Vec<(&str, Check, i16, Bytes)> = Vec::new();
        for v in 0..=5 {
            cases.push((
                "add partitions",
                check_add_partitions_to_txn,
                v,
                add_partitions(v),
            ));
        }
        for v in 0..=4 {
            let r = AddOffsetsToTxnRequest::default()
                .with_transactional_id(txn_id("tx"))
                .with_producer_id(ProducerId(42))
                .with_producer_epoch(3)
                .with_group_id(GroupId(text("g")));
            cases.push(("add offsets", check_add_offsets_to_txn, v, encoded(&r, v)));
        }
        for v in 0..=5 {
            let r = EndTxnRequest::default()
                .with_transactional_id(txn_id("tx"))
                .with_producer_id(ProducerId(42))
                .with_producer_epoch(3)
                .with_committed(true);
            cases.push(("end txn", check_end_txn, v, encoded(&r, v)));
        }
        cases.push(("write markers", check_write_txn_markers, 1, write_markers()));
        for v in 0..=5 {
            cases.push((
                "txn offset commit",
                check_txn_offset_commit,
                v,
                txn_offset_commit(v),
            ));
        }
        for (name, check, version, body) in &cases {
            check(body, *version).unwrap_or_else(|e| panic!("{name} v{version}: {e}"));
            // The walk reads exactly what the codec wrote: one byte less
            // is refused.
            assert!(
                check(&body[..body.len() - 1], *version).is_err(),
                "{name} v{version} accepted a cut body"
            );
        }
    }

    #[test]
    fn forged_counts_and_lengths_are_refused() {
        // 2^31 - 1 in the classic encoding, 2^32 - 2 in the compact one.
        let classic = [0x7f, 0xff, 0xff, 0xff];
        let compact = [0xff, 0xff, 0xff, 0xff, 0x0f];
        let ids = [0u8; 8 + 2]; // producer_id, producer_epoch
        let body = |parts: &[&[u8]]| parts.concat();
        // AddPartitionsToTxn v0: "t", ids, then the topics count.
        let v0 = body(&[&[0, 1, b't'], &ids, &classic]);
        assert!(check_add_partitions_to_txn(&v0, 0).is_err());
        // v3: the same in the compact encoding.
        let v3 = body(&[&[2, b't'], &ids, &compact]);
        assert!(check_add_partitions_to_txn(&v3, 3).is_err());
        // v4: the transactions count comes first.
        assert!(check_add_partitions_to_txn(&compact, 4).is_err());
        assert!(check_write_txn_markers(&compact, 1).is_err());
        // TxnOffsetCommit v0: "t", "g", ids, then the topics count.
        let v0 = body(&[&[0, 1, b't', 0, 1, b'g'], &ids, &classic]);
        assert!(check_txn_offset_commit(&v0, 0).is_err());
        // v3: generation_id, an empty member_id and a null instance id
        // come before the topics.
        let v3 = body(&[&[2, b't', 2, b'g'], &ids, &[0, 0, 0, 7, 1, 0], &compact]);
        assert!(check_txn_offset_commit(&v3, 3).is_err());
        // No arrays in these two: a transactional_id longer than the body.
        assert!(check_add_offsets_to_txn(&[0x7f, 0xff], 0).is_err());
        assert!(check_add_offsets_to_txn(&compact, 3).is_err());
        assert!(check_end_txn(&[0x7f, 0xff], 0).is_err());
        assert!(check_end_txn(&compact, 3).is_err());
    }
}
