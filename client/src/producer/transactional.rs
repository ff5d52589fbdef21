//! The transactional producer (KIP-98), as the Java client drives it:
//! `init_transactions` takes the producer id and epoch from the
//! transactional id's coordinator (fencing any older instance), and
//! `commit_transaction` / `abort_transaction` flush what is queued and
//! end the transaction (EndTxn); the coordinator then writes the markers.
//! In the classic protocol (transaction.version 1) each partition joins
//! the transaction before its first record is sent (AddPartitionsToTxn).
//! With transaction.version 2 (KIP-890, when the coordinator's broker
//! finalized it) the leaders add partitions as records arrive, and every
//! end bumps the epoch: the producer goes on with the id and epoch EndTxn
//! v5 answers, its sequences from 0.

use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, ProducerId, TopicName,
    TransactionalId,
};
use kafka_protocol::ResponseError;

use super::Producer;
use crate::connection::ClientError;

/// How many times a coordinator call is tried (retriable errors, a
/// coordinator moving, the last transaction's markers still being
/// written): 30 s at [`PAUSE`], as long as the Java client blocks.
const ATTEMPTS: usize = 600;
/// The pause between tries.
const PAUSE: Duration = Duration::from_millis(50);

/// Where a transactional producer stands.
#[derive(Debug, Default)]
pub(super) struct Transaction {
    /// A transaction begun and not yet ended.
    open: bool,
    /// The partitions in it.
    partitions: std::collections::BTreeSet<(String, i32)>,
    /// A record of it failed, or a partition could not join: it can only
    /// be aborted.
    pub(super) failed: bool,
    /// Being committed or aborted: nothing more may join it.
    ending: bool,
    /// transaction.version 2 is in use (decided at `init_transactions`).
    pub(super) version2: bool,
}

impl Transaction {
    fn check_open(&self) -> Result<(), ClientError> {
        match self.open && !self.ending {
            true => Ok(()),
            false => Err(ClientError::Protocol(
                "a transactional producer sends inside begin_transaction and commit or abort"
                    .into(),
            )),
        }
    }
}

/// The highest version of API `key` this client sends: AddPartitionsToTxn
/// v4+ is between brokers; EndTxn v5 is transaction.version 2.
fn version_max(key: i16, version2: bool) -> i16 {
    match key {
        24 => 3,              // AddPartitionsToTxn
        26 if !version2 => 4, // EndTxn
        _ => i16::MAX,
    }
}

/// Coordinator errors worth another try.
fn retriable(code: i16) -> bool {
    [
        ResponseError::CoordinatorNotAvailable,
        ResponseError::NotCoordinator,
        ResponseError::CoordinatorLoadInProgress,
        ResponseError::ConcurrentTransactions,
    ]
    .iter()
    .any(|e| e.code() == code)
}

impl Producer {
    fn transactional_id(&self) -> Result<TransactionalId, ClientError> {
        let id = self.config.transactional_id.as_ref().ok_or_else(|| {
            ClientError::Protocol("not a transactional producer (no transactional id)".into())
        })?;
        Ok(TransactionalId(id.clone().into()))
    }

    /// Calls what `build` makes on the transactional id's coordinator,
    /// again while the answer (`code_of`) is retriable.
    async fn on_txn_coordinator<R: kafka_protocol::protocol::Request>(
        &self,
        request: &R,
        code_of: impl Fn(&R::Response) -> i16,
    ) -> Result<R::Response, ClientError> {
        let id = self.transactional_id()?;
        let mut last = 0;
        for _ in 0..ATTEMPTS {
            let node = self.cluster.find_transaction_coordinator(&id).await?;
            let connection = self.cluster.broker(node).await?;
            let version2 = self.queues.borrow().transaction.version2;
            let answer = async {
                let mut connection = connection.lock().await;
                let version = connection
                    .version_for::<R>()?
                    .min(version_max(R::KEY, version2));
                connection.call(request, version).await
            }
            .await;
            match answer {
                Ok(answer) if retriable(code_of(&answer)) => last = code_of(&answer),
                Ok(answer) => return Ok(answer),
                Err(ClientError::Io(_)) => self.cluster.drop_connection(Some(node)),
                Err(e) => return Err(e),
            }
            glommio::timer::sleep(PAUSE).await;
        }
        Err(ClientError::Broker(last))
    }

    /// Gets the producer id and epoch from the coordinator, fencing any
    /// older instance with the same transactional id.
    pub async fn init_transactions(&self) -> Result<(), ClientError> {
        // Transactions number their batches (acks=all, idempotent), as the
        // Java client requires: without, a commit could end nothing.
        if !self.idempotent() {
            return Err(ClientError::Protocol(
                "a transactional producer needs acks=all (-1) and idempotence".into(),
            ));
        }
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(self.transactional_id()?))
            .with_transaction_timeout_ms(self.config.transaction_timeout.as_millis() as i32)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let answer = self.on_txn_coordinator(&request, |a| a.error_code).await?;
        if answer.error_code != 0 {
            return Err(ClientError::Broker(answer.error_code));
        }
        let version2 = self.coordinator_speaks_version2().await;
        let mut queues = self.queues.borrow_mut();
        queues.identity = Some((answer.producer_id.0, answer.producer_epoch));
        queues.next_sequence.clear();
        queues.transaction = Transaction {
            version2,
            ..Transaction::default()
        };
        drop(queues);
        self.poke();
        Ok(())
    }

    /// Whether transaction.version 2 is to be used: asked for, finalized
    /// by the coordinator's broker, and EndTxn v5 served there.
    async fn coordinator_speaks_version2(&self) -> bool {
        if self.config.transaction_version < 2 {
            return false;
        }
        let Ok(id) = self.transactional_id() else {
            return false;
        };
        let Ok(node) = self.cluster.find_transaction_coordinator(&id).await else {
            return false;
        };
        let Ok(connection) = self.cluster.broker(node).await else {
            return false;
        };
        let connection = connection.lock().await;
        connection.transaction_version() >= 2
            && connection
                .version_for::<EndTxnRequest>()
                .is_ok_and(|v| v >= 5)
    }

    /// Begins a transaction: what is sent until it ends is in it.
    pub fn begin_transaction(&self) -> Result<(), ClientError> {
        let mut queues = self.queues.borrow_mut();
        if queues.identity.is_none() || queues.transaction.open {
            return Err(ClientError::Protocol(
                "begin_transaction needs init_transactions and no open transaction".into(),
            ));
        }
        queues.transaction.open = true;
        Ok(())
    }

    /// Makes `topic`'s `partition` part of the open transaction, once.
    pub(super) async fn join_transaction(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<(), ClientError> {
        let key = (topic.to_string(), partition);
        let (producer_id, epoch) = {
            let mut queues = self.queues.borrow_mut();
            queues.transaction.check_open()?;
            if queues.transaction.partitions.contains(&key) {
                return Ok(());
            }
            if queues.transaction.version2 {
                // The leader adds it when the records arrive (Produce v12+).
                queues.transaction.partitions.insert(key);
                return Ok(());
            }
            queues.identity.ok_or(ClientError::Broker(
                ResponseError::InvalidProducerIdMapping.code(),
            ))?
        };
        let request = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(self.transactional_id()?)
            .with_v3_and_below_producer_id(ProducerId(producer_id))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(topic.to_string().into()))
                .with_partitions(vec![partition])]);
        let code_of = |a: &kafka_protocol::messages::AddPartitionsToTxnResponse| {
            a.results_by_topic_v3_and_below
                .iter()
                .flat_map(|t| t.results_by_partition.iter())
                .map(|p| p.partition_error_code)
                .find(|c| *c != 0)
                .unwrap_or(a.error_code)
        };
        let joined = match self.on_txn_coordinator(&request, code_of).await {
            Ok(answer) if code_of(&answer) == 0 => Ok(()),
            Ok(answer) => Err(ClientError::Broker(code_of(&answer))),
            Err(e) => Err(e),
        };
        let mut queues = self.queues.borrow_mut();
        match joined {
            Ok(()) => {
                queues.transaction.partitions.insert(key);
            }
            // What was sent cannot be committed without this partition.
            Err(_) => queues.transaction.failed = true,
        }
        joined
    }

    /// Flushes what is queued, then commits the transaction.
    pub async fn commit_transaction(&self) -> Result<(), ClientError> {
        self.end_transaction(true).await
    }

    /// Flushes what is queued, then aborts the transaction.
    pub async fn abort_transaction(&self) -> Result<(), ClientError> {
        self.end_transaction(false).await
    }

    async fn end_transaction(&self, commit: bool) -> Result<(), ClientError> {
        self.queues.borrow().transaction.check_open()?;
        // Closed to new records from here; reopened if the end fails (the
        // caller may retry it, or abort).
        self.queues.borrow_mut().transaction.ending = true;
        let ended = self.end_now(commit).await;
        if ended.is_err() {
            self.queues.borrow_mut().transaction.ending = false;
        }
        ended
    }

    async fn end_now(&self, commit: bool) -> Result<(), ClientError> {
        self.flush().await;
        if commit && self.queues.borrow().transaction.failed {
            return Err(ClientError::Protocol(
                "a record of the transaction failed: abort it".into(),
            ));
        }
        let (producer_id, epoch, joined) = {
            let queues = self.queues.borrow();
            let (id, epoch) = queues.identity.unwrap_or((-1, -1));
            (id, epoch, !queues.transaction.partitions.is_empty())
        };
        // Nothing was sent: nothing to end at the coordinator (as the
        // Java client and librdkafka skip EndTxn).
        if joined {
            let request = EndTxnRequest::default()
                .with_transactional_id(self.transactional_id()?)
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch)
                .with_committed(commit);
            let answer = self.on_txn_coordinator(&request, |a| a.error_code).await?;
            if answer.error_code != 0 {
                return Err(ClientError::Broker(answer.error_code));
            }
            let mut queues = self.queues.borrow_mut();
            if queues.transaction.version2 && answer.producer_id.0 >= 0 {
                // The epoch was bumped: the next transaction's sequences
                // start over at the new one.
                queues.identity = Some((answer.producer_id.0, answer.producer_epoch));
                queues.next_sequence.clear();
            }
        }
        let (failed, version2) = {
            let transaction = &self.queues.borrow().transaction;
            (transaction.failed, transaction.version2)
        };
        // Under transaction.version 2 the end's epoch bump already starts
        // the sequences over.
        if failed && !(version2 && joined) {
            // Sequences may have a gap now: start over at a new epoch (the
            // transaction stays failed until that works).
            self.init_transactions().await?;
        }
        let mut queues = self.queues.borrow_mut();
        queues.transaction = Transaction {
            version2: queues.transaction.version2,
            ..Transaction::default()
        };
        Ok(())
    }
}
