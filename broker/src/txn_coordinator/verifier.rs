//! The partition layer's [`TxnVerifier`], answered by the coordinator of
//! the transactional id: this broker's (on the shard owning its
//! partition), or another's through AddPartitionsToTxn v4 with
//! `verify_only` (the inter-broker form Kafka's leaders send), or v5
//! without it when a transaction.version 2 request adds the partition.

use std::rc::{Rc, Weak};

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::TxnCoordinator;
use crate::cluster::peers::Purpose;
use crate::kafka::Code;
use crate::partition::txn_verify::{TxnVerifier, Verification};
use crate::runtime::clock::wall_ms;
use crate::runtime::sharded::LocalFuture;

/// The inter-broker AddPartitionsToTxn version (verify_only from v4).
const VERIFY_VERSION: i16 = 4;
/// The version a leader adds a partition with for a transaction.version 2
/// request (Kafka's leaders send the newest, v5).
const ADD_VERSION: i16 = 5;

/// Verifies with the transaction coordinators, from one shard.
pub struct CoordinatorVerifier(pub Weak<TxnCoordinator>);

impl TxnVerifier for CoordinatorVerifier {
    fn verify(&self, asked: Verification) -> LocalFuture<Result<(), Code>> {
        let coordinator = self.0.upgrade();
        Box::pin(async move {
            let unavailable = ResponseError::CoordinatorNotAvailable.code();
            let coordinator = coordinator.ok_or(unavailable)?;
            coordinator.verify(asked).await
        })
    }
}

impl TxnCoordinator {
    /// Whether the partition is in the producer's ongoing transaction,
    /// asked of its coordinator wherever it is.
    pub async fn verify(self: Rc<Self>, asked: Verification) -> Result<(), Code> {
        let (broker, _) = self
            .partitions
            .cluster
            .transaction_coordinator(&asked.transactional_id)?;
        if broker == self.partitions.cluster.me {
            let id = asked.transactional_id.clone();
            return self
                .on_id(&id, Err, move |state| {
                    Box::pin(async move {
                        let id = &asked.transactional_id;
                        let partition = (asked.topic, asked.partition);
                        let (producer_id, epoch) = (asked.producer_id, asked.epoch);
                        if !asked.adds_partition {
                            return state
                                .store
                                .borrow()
                                .verify(id, producer_id, epoch, &partition);
                        }
                        let step = state.store.borrow_mut().add_partitions_as(
                            id,
                            producer_id,
                            epoch,
                            &[partition],
                            wall_ms(),
                            2,
                        )?;
                        match step {
                            Some(step) => state.run(step).await,
                            None => Ok(()),
                        }
                    })
                })
                .await;
        }
        let request = verify_request(&asked);
        let version = match asked.adds_partition {
            true => ADD_VERSION,
            false => VERIFY_VERSION,
        };
        let answer = self
            .peers
            .call(
                &self.partitions.cluster,
                (broker, Purpose::Verification),
                &request,
                version,
            )
            .await?;
        answer_code(&answer)
    }
}

fn verify_request(asked: &Verification) -> AddPartitionsToTxnRequest {
    let topic = AddPartitionsToTxnTopic::default()
        .with_name(TopicName(StrBytes::from_string(asked.topic.clone())))
        .with_partitions(vec![asked.partition]);
    let transaction = AddPartitionsToTxnTransaction::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(
            asked.transactional_id.clone(),
        )))
        .with_producer_id(ProducerId(asked.producer_id))
        .with_producer_epoch(asked.epoch)
        .with_verify_only(!asked.adds_partition)
        .with_topics(vec![topic]);
    AddPartitionsToTxnRequest::default().with_transactions(vec![transaction])
}

/// The one partition's code in a verification answer.
fn answer_code(answer: &AddPartitionsToTxnResponse) -> Result<(), Code> {
    if answer.error_code != 0 {
        return Err(answer.error_code);
    }
    let code = answer
        .results_by_transaction
        .first()
        .and_then(|t| t.topic_results.first())
        .and_then(|t| t.results_by_partition.first())
        .map_or(ResponseError::UnknownServerError.code(), |p| {
            p.partition_error_code
        });
    match code {
        0 => Ok(()),
        code => Err(code),
    }
}
