//! ShareFetch (78, v1; KIP-932): a share consumer's fetch. The request
//! takes its session step (`share_sessions`), its piggy-backed
//! acknowledgements are applied first, then records are acquired for the
//! member on each partition of its session (on the partition's shard,
//! `partition::share_states`), partition after partition while the
//! request's MaxRecords and MaxBytes last, waiting up to MaxWaitMs when
//! none is there. Each partition answers the offsets acquired and the
//! whole batches holding them (records outside them are the client's to
//! drop, and offsets without a record it acknowledges as gaps).

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures::future::{select, select_all};
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{ShareFetchRequest, ShareFetchResponse};

use super::access::{Caller, GROUP_DENIED};
use super::share_sessions::{self, partition_acks, route_of, session_key, PartitionAcks};
use super::{respond, HandlerError, Outcome};
use crate::cluster::routing::Route;
use crate::kafka::bounds;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::partition::served::ServedPartition;
use crate::partition::share_states::{ShareRead, Wanted};
use crate::partition::Partitions;
use crate::runtime::sharded::LocalFuture;
use crate::server::shard::Shard;
use crate::share::sessions::{SessionKey, SessionPartition, Step, FINAL_EPOCH};
use control::model::acls::Operation;

/// ShareFetch versions served (v1: Kafka 4.2's and librdkafka's).
pub const VERSIONS: (i16, i16) = (1, 1);

/// The longest a ShareFetch may wait, whatever the client asks.
const MAX_WAIT_CAP: Duration = Duration::from_secs(30);

/// A session partition and its route.
type Routed = (SessionPartition, Route);

/// A partition's outcome: acknowledgement, then records.
#[derive(Default)]
struct Answered {
    acknowledged: Option<Result<(), Code>>,
    read: Option<Result<ShareRead, Code>>,
}

/// Answers ShareFetch.
pub async fn handle(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: ShareFetchRequest = checked(request, bounds::check_share_fetch)?;
    let key = session_key(decoded.group_id.as_ref(), decoded.member_id.as_ref());
    if !caller.may_group(Operation::Read, &key.0) {
        return respond(request, &refused(GROUP_DENIED));
    }
    let (mut added, acks) = asked(&decoded);
    if decoded.share_session_epoch == FINAL_EPOCH {
        // A closing fetch names partitions only to acknowledge them.
        added.clear();
    }
    let forgotten: Vec<SessionPartition> = (decoded.forgotten_topics_data.iter())
        .flat_map(|t| t.partitions.iter().map(|p| (*t.topic_id.as_bytes(), *p)))
        .collect();
    let acknowledges = acks
        .iter()
        .any(|(_, a)| a.as_ref().map_or(true, |a| !a.is_empty()));
    let epoch = decoded.share_session_epoch;
    let session = Some((added.clone(), forgotten, acknowledges));
    let step = match share_sessions::step(shard, caller, (&key, epoch), session).await {
        Ok(step) => step,
        Err(code) => return respond(request, &refused(code)),
    };
    let mut answered: BTreeMap<SessionPartition, Answered> = BTreeMap::new();
    let acking: Vec<_> = acks
        .into_iter()
        .filter(|(_, a)| a.as_ref().map_or(true, |a| !a.is_empty()))
        .collect();
    let routes = acking
        .iter()
        .map(|(p, a)| (permitted(shard, caller, *p), a.clone()))
        .collect();
    let acked = share_sessions::acknowledge(shard, &key, routes).await;
    for ((partition, _), outcome) in acking.iter().zip(acked) {
        answered.entry(*partition).or_default().acknowledged = Some(outcome);
    }
    for partition in &added {
        answered.entry(*partition).or_default();
    }
    // The partitions this fetch takes into its session (named without
    // acknowledgements): each is checked against its coordinator's state
    // epoch before anything is handed out.
    let taken: BTreeSet<SessionPartition> = (added.iter())
        .filter(|p| epoch == 0 || !acking.iter().any(|(acked, _)| acked == *p))
        .copied()
        .collect();
    let in_session = match step {
        Step::Closed(partitions) => {
            share_sessions::release(shard, &key, &partitions).await;
            Vec::new()
        }
        Step::Opened { partitions, .. } | Step::Continued(partitions) => {
            partitions.into_iter().collect()
        }
    };
    let mut routed: Vec<_> = (in_session.iter())
        .map(|p| (*p, permitted(shard, caller, *p)))
        .collect();
    caller.note_routes(routed.iter().map(|(_, route)| route));
    // Partitions take turns at being first (MaxRecords may run out).
    let turn = (epoch.max(0) as usize) % routed.len().max(1);
    routed.rotate_left(turn);
    let reads = long_poll(shard, &key, (&routed, &taken), &decoded).await;
    for ((partition, _), read) in routed.iter().zip(reads) {
        let records = read.as_ref().map_or(true, |r| !r.acquired.is_empty());
        if records || answered.contains_key(partition) {
            answered.entry(*partition).or_default().read = Some(read);
        }
    }
    let lock_ms = shard.cluster.share_group_settings(&key.0).lock_ms as i32;
    respond(request, &answer(answered, lock_ms))
}

/// The partitions a request names, and each with its acknowledgements.
fn asked(decoded: &ShareFetchRequest) -> (Vec<SessionPartition>, Vec<PartitionAcks>) {
    let mut added = Vec::new();
    let mut acks = Vec::new();
    for topic in &decoded.topics {
        for p in &topic.partitions {
            let partition = (*topic.topic_id.as_bytes(), p.partition_index);
            added.push(partition);
            let batches = (p.acknowledgement_batches.iter()).map(|b| {
                (
                    b.first_offset,
                    b.last_offset,
                    b.acknowledge_types.as_slice(),
                )
            });
            acks.push(partition_acks(partition, batches));
        }
    }
    (added, acks)
}

/// A session partition's route, if the caller may READ its topic.
pub fn permitted(shard: &Shard, caller: &Caller<'_>, partition: SessionPartition) -> Route {
    let route = route_of(shard, partition);
    if !caller.checks_acls() {
        return route;
    }
    let name = shard.cluster.topic_name(control::TopicId(partition.0));
    caller.topic_route(route, Operation::Read, name.as_deref())
}

/// Acquires until something is handed out, an error comes, or the wait
/// ends; one outcome per partition.
async fn long_poll(
    shard: &Shard,
    key: &SessionKey,
    (routed, taken): (&[(SessionPartition, Route)], &BTreeSet<SessionPartition>),
    decoded: &ShareFetchRequest,
) -> Vec<Result<ShareRead, Code>> {
    let wait = Duration::from_millis(decoded.max_wait_ms.max(0) as u64).min(MAX_WAIT_CAP);
    let deadline = Instant::now() + wait;
    let wanted = Wanted {
        max_records: decoded.max_records.max(1) as usize,
        max_bytes: decoded.max_bytes.max(1) as usize,
        lock_ms: None,
        recheck_after_ms: None,
    };
    let mut taken = Some(taken);
    loop {
        let reads = acquire_all(shard, key, (routed, taken.take()), wanted).await;
        // Records anywhere, or nothing to wait on (errors are answered
        // with the records of the others, as Kafka merges them).
        let stop = reads.iter().flatten().any(|r| !r.acquired.is_empty())
            || reads.iter().all(Result::is_err);
        let now = Instant::now();
        if stop || now >= deadline || routed.is_empty() {
            return reads;
        }
        wait_for_any(shard, &key.0, (routed, &reads), deadline - now).await;
    }
}

/// Acquires on each partition in turn while records and bytes are left
/// to ask for; those `taken` into the session by this fetch are checked
/// against their coordinator's state epoch first.
async fn acquire_all(
    shard: &Shard,
    key: &SessionKey,
    (routed, taken): (
        &[(SessionPartition, Route)],
        Option<&BTreeSet<SessionPartition>>,
    ),
    wanted: Wanted,
) -> Vec<Result<ShareRead, Code>> {
    let mut left = wanted;
    let mut reads = Vec::with_capacity(routed.len());
    for (partition, route) in routed {
        if left.max_records == 0 || left.max_bytes == 0 {
            reads.push(Ok(ShareRead::default()));
            continue;
        }
        // A member may come after an administrator's reset.
        let just_taken = taken.is_some_and(|t| t.contains(partition));
        left.recheck_after_ms = just_taken.then_some(0);
        let member = key.clone();
        let work = move |owner: Rc<Partitions>, led: ServedPartition| -> LocalFuture<_> {
            Box::pin(async move {
                let who = (member.0.as_str(), member.1.as_str());
                (owner.share_states)
                    .acquire(&owner.cluster, &led, who, left)
                    .await
            })
        };
        let read = shard.partitions.on_led_partition(*route, work).await;
        if let Ok(read) = &read {
            let records: i64 = read.acquired.iter().map(|a| a.last - a.first + 1).sum();
            left.max_records = left.max_records.saturating_sub(records as usize);
            left.max_bytes = left.max_bytes.saturating_sub(read.bytes);
        }
        reads.push(read);
    }
    reads
}

/// Waits until any partition's high watermark or share-partition moves
/// (records came back, the window opened) from what the reads saw, or
/// `left` passes.
async fn wait_for_any(
    shard: &Shard,
    group: &str,
    (routed, reads): (&[Routed], &[Result<ShareRead, Code>]),
    left: Duration,
) {
    let waits: Vec<_> = (routed.iter().zip(reads))
        .filter_map(|((_, route), read)| {
            let read = read.as_ref().ok()?;
            Some((*route, read.readable, read.wakes))
        })
        .map(|(route, (bound, seen), wakes)| {
            let group = group.to_string();
            let wait = move |owner: Rc<Partitions>, led: ServedPartition| -> LocalFuture<_> {
                Box::pin(async move {
                    // Checked and waited on with no await between: a
                    // change after the check wakes the wait.
                    if owner.share_states.wakes(&group, led.key()) == Some(wakes) {
                        led.wait_past(seen, bound, left).await;
                    }
                    Ok(())
                })
            };
            Box::pin(shard.partitions.on_led_partition(route, wait))
        })
        .collect();
    if waits.is_empty() {
        glommio::timer::sleep(left).await;
        return;
    }
    let _ = select(select_all(waits), Box::pin(glommio::timer::sleep(left))).await;
}

/// A request refused as a whole.
fn refused(code: Code) -> ShareFetchResponse {
    ShareFetchResponse::default().with_error_code(code)
}

/// The answer: per partition, its acknowledgement's outcome and what was
/// acquired with the batches holding it.
fn answer(answered: BTreeMap<SessionPartition, Answered>, lock_ms: i32) -> ShareFetchResponse {
    let mut topics: Vec<ShareFetchableTopicResponse> = Vec::new();
    for ((topic, index), outcome) in answered {
        let data = partition_data(index, outcome);
        match topics.last_mut() {
            Some(t) if t.topic_id.as_bytes() == &topic => t.partitions.push(data),
            _ => topics.push(
                ShareFetchableTopicResponse::default()
                    .with_topic_id(uuid::Uuid::from_bytes(topic))
                    .with_partitions(vec![data]),
            ),
        }
    }
    ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(lock_ms)
        .with_responses(topics)
}

fn partition_data(index: i32, outcome: Answered) -> PartitionData {
    let mut data = PartitionData::default()
        .with_partition_index(index)
        .with_current_leader(unknown_leader())
        .with_records(Some(Bytes::new()));
    if let Some(Err(code)) = outcome.acknowledged {
        data = data.with_acknowledge_error_code(code);
    }
    match outcome.read {
        Some(Err(code)) => data.with_error_code(code),
        Some(Ok(read)) => {
            let mut records = BytesMut::with_capacity(read.bytes);
            read.chunks
                .iter()
                .for_each(|c| records.extend_from_slice(c));
            let acquired = (read.acquired.iter())
                .map(|a| {
                    AcquiredRecords::default()
                        .with_first_offset(a.first)
                        .with_last_offset(a.last)
                        .with_delivery_count(a.delivery_count.min(i16::MAX as u16) as i16)
                })
                .collect();
            data.with_records(Some(records.freeze()))
                .with_acquired_records(acquired)
        }
        None => data,
    }
}

/// The current leader left unsaid (-1, -1: the client asks Metadata).
fn unknown_leader() -> LeaderIdAndEpoch {
    LeaderIdAndEpoch::default()
        .with_leader_id(-1)
        .with_leader_epoch(-1)
}
