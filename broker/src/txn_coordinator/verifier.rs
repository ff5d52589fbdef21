//! The partition layer's [`TxnVerifier`], answered by the coordinator of
//! the transactional id: this broker's (on the shard owning its
//! partition), or another's through AddPartitionsToTxn v4 with
//! `verify_only` (the inter-broker form Kafka's leaders send).

use std::rc::{Rc, Weak};

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::peers::Purpose;
use super::TxnCoordinator;
use crate::kafka::Code;
use crate::partition::txn_verify::{TxnVerifier, Verification};
use crate::runtime::sharded::LocalFuture;

/// The inter-broker AddPartitionsToTxn version (verify_only from v4).
const VERIFY_VERSION: i16 = 4;

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
                        let partition = (asked.topic, asked.partition);
                        state.store.borrow().verify(
                            &asked.transactional_id,
                            asked.producer_id,
                            asked.epoch,
                            &partition,
                        )
                    })
                })
                .await;
        }
        let request = verify_request(&asked);
        let answer = self
            .peers
            .call(
                &self.partitions.cluster,
                (broker, Purpose::Verification),
                &request,
                VERIFY_VERSION,
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
        .with_verify_only(true)
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
