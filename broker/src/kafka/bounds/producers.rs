//! Bounds walks of the idempotent producers' APIs: InitProducerId and
//! DescribeProducers.

use super::{Walk, Walker};

/// InitProducerId v0-5 (flexible from v2; producer id and epoch from v3).
pub fn check_init_producer_id(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 2);
    w.string()?; // transactional_id (nullable)
    w.fixed(4)?; // transaction_timeout_ms
    if version >= 3 {
        w.fixed(8 + 2)?; // producer_id, producer_epoch
    }
    w.tagged_fields()?;
    w.end()
}

/// DescribeProducers v0 (flexible).
pub fn check_describe_producers(body: &[u8], _version: i16) -> Walk {
    let mut w = Walker::new(body, true);
    w.array(|w| {
        w.string()?; // name
        w.array(|w| w.fixed(4))?; // partition_indexes
        w.tagged_fields()
    })?;
    w.tagged_fields()?;
    w.end()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::bounds::tests::encoded;
    use kafka_protocol::messages::describe_producers_request::TopicRequest;
    use kafka_protocol::messages::{
        DescribeProducersRequest, InitProducerIdRequest, ProducerId, TopicName, TransactionalId,
    };
    use kafka_protocol::protocol::StrBytes;

    #[test]
    fn every_version_the_codec_writes_passes_and_forged_counts_do_not() {
        for version in 0..=5 {
            for transactional in [None, Some("tx")] {
                let request = InitProducerIdRequest::default()
                    .with_transactional_id(
                        transactional.map(|t| TransactionalId(StrBytes::from_static_str(t))),
                    )
                    .with_transaction_timeout_ms(60_000)
                    .with_producer_id(if version >= 3 {
                        ProducerId(42)
                    } else {
                        ProducerId(-1)
                    })
                    .with_producer_epoch(if version >= 3 { 3 } else { -1 });
                check_init_producer_id(&encoded(&request, version), version)
                    .unwrap_or_else(|e| panic!("init producer id v{version}: {e}"));
            }
        }
        let describe =
            DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
                .with_name(TopicName(StrBytes::from_static_str("orders")))
                .with_partition_indexes(vec![0, 1, 2])]);
        check_describe_producers(&encoded(&describe, 0), 0).unwrap();
        assert!(check_describe_producers(&[0xff, 0xff, 0xff, 0x0f], 0).is_err());
        assert!(check_init_producer_id(&[0x7f, 0xff], 0).is_err());
    }
}
