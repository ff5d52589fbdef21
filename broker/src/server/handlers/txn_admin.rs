//! The transactions' admin APIs (KIP-664): ListTransactions (the
//! transactional ids this broker coordinates, filtered by state, producer
//! id, duration and id pattern) and DescribeTransactions (one id's
//! transaction at its coordinator). Admin clients fan ListTransactions
//! out to every broker and send DescribeTransactions to each id's
//! coordinator, as Kafka's do.

use std::rc::Rc;

use kafka_protocol::messages::describe_transactions_response::{
    TopicData, TransactionState as Described,
};
use kafka_protocol::messages::list_transactions_response::TransactionState as Listed;
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ListTransactionsRequest,
    ListTransactionsResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::access::{Caller, TXN_ID_DENIED};
use super::{respond, HandlerError, Outcome};
use crate::kafka::bounds;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::runtime::clock::wall_ms;
use crate::server::shard::Shard;
use crate::transactions::metadata::{TxnMetadata, TxnState};
use control::model::acls::Operation;

/// ListTransactions versions served (v2's id pattern as a regular
/// expression, as Kafka's).
pub const LIST_VERSIONS: (i16, i16) = (0, 2);
/// DescribeTransactions versions served.
pub const DESCRIBE_VERSIONS: (i16, i16) = (0, 0);

/// The states a filter may name (Kafka's names).
const STATES: [TxnState; 7] = [
    TxnState::Empty,
    TxnState::Ongoing,
    TxnState::PrepareCommit,
    TxnState::PrepareAbort,
    TxnState::CompleteCommit,
    TxnState::CompleteAbort,
    TxnState::Dead,
];

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Answers ListTransactions from every shard's coordinator.
pub async fn list(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: ListTransactionsRequest = checked(request, bounds::check_list_transactions)?;
    let known: Vec<&str> = STATES.iter().map(|s| s.name()).collect();
    let unknown: Vec<StrBytes> = decoded
        .state_filters
        .iter()
        .filter(|f| !known.contains(&f.as_str()))
        .cloned()
        .collect();
    let pattern = match decoded.transactional_id_pattern.as_ref() {
        Some(p) if !p.is_empty() => match regex::Regex::new(&format!("^(?:{})$", p.as_str())) {
            Ok(re) => Some(re),
            Err(_) => {
                let refused = ListTransactionsResponse::default()
                    .with_error_code(ResponseError::InvalidRegularExpression.code());
                return respond(request, &refused);
            }
        },
        _ => None,
    };
    let shards = shard
        .txn_coordinator
        .on_every_shard(|c| Box::pin(async move { c.all_ids() }))
        .await;
    // A shard gone or a partition still loading: say so (the admin client
    // retries) rather than answer an incomplete list.
    let Some(ids) = shards
        .into_iter()
        .map(|answered| answered.ok().flatten())
        .collect::<Option<Vec<_>>>()
    else {
        let loading = ListTransactionsResponse::default()
            .with_error_code(ResponseError::CoordinatorLoadInProgress.code());
        return respond(request, &loading);
    };
    let ids: Vec<(String, TxnMetadata)> = ids.into_iter().flatten().collect();
    let now = wall_ms();
    let listed = ids
        .into_iter()
        .filter(|(_, m)| m.state != TxnState::Dead)
        .filter(|(_, m)| {
            decoded.state_filters.is_empty()
                || decoded
                    .state_filters
                    .iter()
                    .any(|f| f.as_str() == m.state.name())
        })
        .filter(|(_, m)| {
            decoded.producer_id_filters.is_empty()
                || decoded
                    .producer_id_filters
                    .contains(&ProducerId(m.producer_id))
        })
        .filter(|(_, m)| {
            // Open longer than the duration filter (-1: any).
            decoded.duration_filter < 0
                || (m.start_ms >= 0 && now - m.start_ms >= decoded.duration_filter)
        })
        .filter(|(id, _)| pattern.as_ref().is_none_or(|re| re.is_match(id)))
        .filter(|(id, _)| caller.may_transactional_id(Operation::Describe, id))
        .map(|(id, m)| {
            Listed::default()
                .with_transactional_id(TransactionalId(text(&id)))
                .with_producer_id(ProducerId(m.producer_id))
                .with_transaction_state(text(m.state.name()))
        })
        .collect();
    let answer = ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown)
        .with_transaction_states(listed);
    respond(request, &answer)
}

/// Answers DescribeTransactions: each id at this broker, its coordinator.
pub async fn describe(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: DescribeTransactionsRequest =
        checked(request, bounds::check_describe_transactions)?;
    let mut states = Vec::new();
    for id in &decoded.transactional_ids {
        let name = id.to_string();
        let entry = Described::default().with_transactional_id(id.clone());
        if !caller.may_transactional_id(Operation::Describe, &name) {
            states.push(entry.with_error_code(TXN_ID_DENIED));
            continue;
        }
        let key = name.clone();
        let found = shard
            .txn_coordinator
            .on_id(&key, Err, move |state| {
                Box::pin(async move {
                    let store = state.store.borrow();
                    store
                        .get(&name)
                        .filter(|m| m.state != TxnState::Dead)
                        .cloned()
                        .ok_or(ResponseError::TransactionalIdNotFound.code())
                })
            })
            .await;
        states.push(match found {
            Ok(metadata) => described(entry, &metadata),
            Err(code) => entry.with_error_code(code),
        });
    }
    respond(
        request,
        &DescribeTransactionsResponse::default().with_transaction_states(states),
    )
}

fn described(entry: Described, m: &TxnMetadata) -> Described {
    let mut topics: Vec<TopicData> = Vec::new();
    for (topic, partition) in &m.partitions {
        match topics.iter_mut().find(|t| t.topic.as_str() == topic) {
            Some(t) => t.partitions.push(*partition),
            None => topics.push(
                TopicData::default()
                    .with_topic(TopicName(text(topic)))
                    .with_partitions(vec![*partition]),
            ),
        }
    }
    entry
        .with_transaction_state(text(m.state.name()))
        .with_transaction_timeout_ms(m.timeout_ms)
        .with_transaction_start_time_ms(m.start_ms)
        .with_producer_id(ProducerId(m.producer_id))
        .with_producer_epoch(m.producer_epoch)
        .with_topics(topics)
}
