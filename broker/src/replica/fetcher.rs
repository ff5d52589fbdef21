//! Follower fetchers: one per (leader broker, shard), copying every
//! partition this shard follows on that leader with one Fetch at a time
//! (replica id set), over the Kafka protocol like any client.
//!
//! A partition joins a fetcher untruncated: before its first fetch in a
//! leader epoch it asks the leader, with OffsetForLeaderEpoch, where its
//! latest epoch ends there, and cuts its own log to the point where both
//! agree (in rounds, `replication::follower::truncation_step`). Then each
//! fetch appends the leader's batches at their offsets, fdatasyncs them
//! (when the topic counts only fdatasync'd copies) before the next fetch
//! reports the new log end, and takes the high watermark the leader sends.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use client::connection::Connection;
use control::BrokerId;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{FetchRequest, OffsetForLeaderEpochRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use replication::follower::{truncation_step, Truncation};
use storage::{LeaderEpoch, Offset};

use super::{tiered_start, Replication};
use crate::cluster::routing::PartitionKey;
use crate::partition::role::Role;
use crate::partition::table::{OpenPartition, BATCH_BYTES_CAP};
use crate::partition::Partitions;

/// The most a follower asks for per partition and per fetch. Each fetch
/// is followed by an append and an fdatasync before the next one, so one
/// partition's copy moves at most this much per such round: with 1 MiB,
/// three brokers on one machine copied at 0.30-0.33x one broker's rate.
const PARTITION_BYTES_MAX: i32 = 8 << 20;
/// The most a follower asks for per fetch.
const FETCH_BYTES_MAX: i32 = 16 << 20;
/// The pause before reconnecting, doubled up to [`BACKOFF_MAX`].
const BACKOFF_MIN: Duration = Duration::from_millis(20);
/// The longest a throttled fetch waits (a debt beyond it is paid over the
/// next fetches).
const THROTTLE_WAIT_MAX: Duration = Duration::from_secs(5);
const BACKOFF_MAX: Duration = Duration::from_millis(500);
/// The pause of a fetcher with nothing to fetch yet.
const IDLE: Duration = Duration::from_millis(20);

/// How long a partition waits after the object store failed its start
/// over (a store down or refusing must not make a busy loop).
const STORE_RETRY: Duration = Duration::from_secs(1);
/// Fetch and OffsetForLeaderEpoch versions used: the last ones that carry
/// the replica id as a plain field and name topics (v12 and v3+).
const FETCH_VERSION: i16 = 12;
const OFFSET_FOR_LEADER_EPOCH_VERSION: i16 = 3;

/// One partition a fetcher copies.
#[derive(Debug, Clone)]
struct Followed {
    topic: String,
    epoch: LeaderEpoch,
    /// Cut to where it agrees with the leader in this epoch.
    truncated: bool,
    /// Not fetched before this (the object store failed it while it was
    /// starting over at its leader's local start).
    not_before: Option<std::time::Instant>,
}

type FollowedMap = Rc<RefCell<BTreeMap<PartitionKey, Followed>>>;

/// A running fetcher. It is stopped by emptying its partitions, never
/// cancelled: a task dropped half-way through a truncation or flush would
/// leave the log's memory and files out of step.
pub struct Fetcher {
    partitions: FollowedMap,
}

/// The fetchers of one shard, by leader.
#[derive(Default)]
pub struct Fetchers {
    by_leader: RefCell<HashMap<BrokerId, Fetcher>>,
}

/// A partition this shard follows.
pub struct Following {
    /// The broker leading it.
    pub leader: BrokerId,
    /// The partition.
    pub key: PartitionKey,
    /// Its topic's name (fetches name topics).
    pub topic: String,
    /// The leader epoch followed.
    pub epoch: LeaderEpoch,
}

/// Points this shard's fetchers at what it now follows. Fetchers of
/// leaders it no longer follows stop; a partition whose epoch changed is
/// truncated again.
pub fn follow(replication: &Replication, following: Vec<Following>) {
    let mut wanted: HashMap<BrokerId, BTreeMap<PartitionKey, (String, LeaderEpoch)>> =
        HashMap::new();
    for f in following {
        wanted
            .entry(f.leader)
            .or_default()
            .insert(f.key, (f.topic, f.epoch));
    }
    let mut fetchers = replication.fetchers.by_leader.borrow_mut();
    fetchers.retain(|leader, fetcher| {
        let keep = wanted.contains_key(leader);
        if !keep {
            fetcher.partitions.borrow_mut().clear(); // its task ends
        }
        keep
    });
    for (leader, partitions) in wanted {
        let fetcher = fetchers.entry(leader).or_insert_with(|| {
            let map: FollowedMap = Rc::default();
            let partitions = replication.partitions.clone();
            glommio::spawn_local(run(partitions, leader, map.clone())).detach();
            Fetcher { partitions: map }
        });
        let mut map = fetcher.partitions.borrow_mut();
        map.retain(|key, _| partitions.contains_key(key));
        for (key, (topic, epoch)) in partitions {
            match map.get(&key) {
                Some(existing) if existing.epoch == epoch => {}
                _ => {
                    map.insert(
                        key,
                        Followed {
                            topic,
                            epoch,
                            truncated: false,
                            not_before: None,
                        },
                    );
                }
            }
        }
    }
}

/// Why a round stopped: the connection must be made again.
#[derive(Debug, thiserror::Error)]
enum RoundError {
    #[error(transparent)]
    Client(#[from] client::connection::ClientError),
    #[error("storage: {0}")]
    Storage(#[from] storage::StorageError),
}

/// A failed connect to the leader: a refused TLS handshake (a certificate
/// not trusted, not naming the leader's IP, or not allowed as a client) is
/// a configuration error nobody will fix by waiting, so it is a warning
/// (the first time, then every 100th); anything else (the leader
/// restarting) stays at debug level.
fn log_connect_failure(leader: BrokerId, error: &client::connection::ClientError, before: u64) {
    let tls = matches!(error, client::connection::ClientError::Io(e)
        if e.kind() == std::io::ErrorKind::InvalidData);
    if tls && before.is_multiple_of(100) {
        tracing::warn!(leader = leader.0, error = %error, failed_before = before, "cannot reach the leader: TLS refused");
    } else {
        tracing::debug!(leader = leader.0, error = %error, "cannot reach the leader");
    }
}

async fn run(shard: Rc<Partitions>, leader: BrokerId, partitions: FollowedMap) {
    let mut backoff = BACKOFF_MIN;
    let mut failed_connects = 0u64;
    // Ends once it follows nothing there (a fetcher for that leader, if
    // wanted again, is a new one with a new map).
    let stopped = |partitions: &FollowedMap| Rc::strong_count(partitions) == 1;
    loop {
        if stopped(&partitions) {
            return;
        }
        let Some(address) = shard.cluster.address_of(leader) else {
            glommio::timer::sleep(backoff).await;
            continue;
        };
        let client_id = format!(
            "replica-{}-shard-{}",
            shard.cluster.me.0,
            shard.cluster.shard()
        );
        let mut connection = match shard.cluster.connect_to(address, &client_id).await {
            Ok(connection) => connection,
            Err(e) => {
                log_connect_failure(leader, &e, failed_connects);
                failed_connects += 1;
                glommio::timer::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        backoff = BACKOFF_MIN;
        failed_connects = 0;
        loop {
            if stopped(&partitions) {
                return;
            }
            match round(&shard, &partitions, &mut connection).await {
                // Cooperative scheduling: a round that never waited must
                // not keep the shard (its metadata service among others).
                Ok(true) => glommio::yield_if_needed().await,
                Ok(false) => glommio::timer::sleep(IDLE).await,
                Err(e) => {
                    tracing::debug!(leader = leader.0, error = %e, "replica fetch failed; reconnecting");
                    glommio::timer::sleep(backoff).await;
                    break;
                }
            }
        }
    }
}

/// One round: truncate what needs it, then one fetch. Returns whether it
/// asked the leader anything: partitions waiting for this shard to give
/// them their follower role are nothing to do yet (counting them as work
/// made this loop spin without ever yielding, starving the shard, its
/// metadata service included, until the role change it waited for could
/// never run).
async fn round(
    shard: &Partitions,
    partitions: &FollowedMap,
    connection: &mut Connection,
) -> Result<bool, RoundError> {
    let snapshot: Vec<(PartitionKey, Followed)> = partitions
        .borrow()
        .iter()
        .map(|(k, f)| (*k, f.clone()))
        .collect();
    let untruncated: Vec<_> = snapshot.iter().filter(|(_, f)| !f.truncated).collect();
    let mut asked = false;
    if !untruncated.is_empty() {
        asked = truncate(shard, partitions, connection, &untruncated).await?;
    }
    let ready: Vec<_> = snapshot
        .iter()
        .filter(|(k, _)| partitions.borrow().get(k).is_some_and(|f| f.truncated))
        .collect();
    if ready.is_empty() {
        return Ok(asked);
    }
    fetch(shard, partitions, connection, &ready).await?;
    Ok(true)
}

/// The open log of a partition this shard follows in `epoch`, if that
/// still holds.
fn followed_log(
    shard: &Partitions,
    key: PartitionKey,
    epoch: LeaderEpoch,
) -> Option<Rc<OpenPartition>> {
    let partition = shard.table.get_open(key)?;
    let follows =
        matches!(&*partition.role.borrow(), Role::Follower { epoch: e, .. } if *e == epoch);
    follows.then_some(partition)
}

fn still_followed(partitions: &FollowedMap, key: PartitionKey, epoch: LeaderEpoch) -> bool {
    partitions
        .borrow()
        .get(&key)
        .is_some_and(|f| f.epoch == epoch)
}

/// A partition named in a request to the leader: its key, what the
/// fetcher knew of it when asking, its log.
type Asked = (PartitionKey, Followed, Rc<OpenPartition>);

/// The asked partition an answer is about.
fn find_asked<'a>(asked: &'a [Asked], topic: &str, index: i32) -> Option<&'a Asked> {
    asked
        .iter()
        .find(|(k, f, _)| f.topic == topic && k.index as i32 == index)
}

fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

/// Truncates followed logs to where they agree with the leader (one
/// OffsetForLeaderEpoch round); returns whether the leader was asked.
async fn truncate(
    shard: &Partitions,
    partitions: &FollowedMap,
    connection: &mut Connection,
    untruncated: &[&(PartitionKey, Followed)],
) -> Result<bool, RoundError> {
    let Some((request, asked)) = epochs_request(shard, partitions, untruncated) else {
        return Ok(false);
    };
    let response = connection
        .call(&request, OFFSET_FOR_LEADER_EPOCH_VERSION)
        .await?;
    for topic in &response.topics {
        for answer in &topic.partitions {
            let Some(asked) = find_asked(&asked, topic.topic.as_str(), answer.partition) else {
                continue;
            };
            if answer.error_code != 0 || !still_followed(partitions, asked.0, asked.1.epoch) {
                continue; // asked again next round, or after the metadata moves
            }
            let leader_answer = (answer.leader_epoch >= 0)
                .then_some((LeaderEpoch(answer.leader_epoch), Offset(answer.end_offset)));
            truncate_one(shard, partitions, asked, leader_answer).await?;
        }
    }
    Ok(true)
}

/// The OffsetForLeaderEpoch request for the partitions not yet truncated
/// (each one's latest epoch), or None when none needs asking; an empty
/// log agrees with every leader and is marked truncated here.
fn epochs_request(
    shard: &Partitions,
    partitions: &FollowedMap,
    untruncated: &[&(PartitionKey, Followed)],
) -> Option<(OffsetForLeaderEpochRequest, Vec<Asked>)> {
    let mut asked = Vec::new();
    let mut topics: BTreeMap<&str, Vec<OffsetForLeaderPartition>> = BTreeMap::new();
    for (key, followed) in untruncated {
        let Some(partition) = followed_log(shard, *key, followed.epoch) else {
            continue;
        };
        let Some(latest) = partition.log.epochs().latest() else {
            mark_truncated(partitions, *key, followed.epoch);
            continue;
        };
        topics.entry(&followed.topic).or_default().push(
            OffsetForLeaderPartition::default()
                .with_partition(key.index as i32)
                .with_current_leader_epoch(followed.epoch.0)
                .with_leader_epoch(latest.0),
        );
        asked.push((*key, followed.clone(), partition));
    }
    if asked.is_empty() {
        return None;
    }
    let topics = topics
        .into_iter()
        .map(|(topic, partitions)| {
            OffsetForLeaderTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(partitions)
        })
        .collect();
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(shard.cluster.me.0))
        .with_topics(topics);
    Some((request, asked))
}

/// Cuts one log by the leader's answer (its end of our latest epoch);
/// marks it truncated once both agree.
async fn truncate_one(
    shard: &Partitions,
    partitions: &FollowedMap,
    (key, followed, partition): &Asked,
    leader_answer: Option<(LeaderEpoch, Offset)>,
) -> Result<(), RoundError> {
    let _writing = partition.replica_writes.lock().await;
    if followed_log(shard, *key, followed.epoch).is_none() {
        return Ok(()); // its role changed meanwhile
    }
    let log = &partition.log;
    let (cut, done) = match truncation_step(&log.epochs(), log.log_end(), leader_answer) {
        Truncation::Done(at) => (at, true),
        Truncation::Again(at) => (at, false),
    };
    if cut < log.log_end() {
        tracing::info!(topic = %followed.topic, partition = key.index, from = log.log_end().0, to = cut.0, "truncating to the leader's log");
        log.truncate_to(cut).await?;
    }
    if done {
        mark_truncated(partitions, *key, followed.epoch);
    }
    Ok(())
}

fn mark_truncated(partitions: &FollowedMap, key: PartitionKey, epoch: LeaderEpoch) {
    if let Some(f) = partitions.borrow_mut().get_mut(&key) {
        if f.epoch == epoch {
            f.truncated = true;
        }
    }
}

/// One Fetch for every truncated partition; appends what comes back.
async fn fetch(
    shard: &Partitions,
    partitions: &FollowedMap,
    connection: &mut Connection,
    ready: &[&(PartitionKey, Followed)],
) -> Result<(), RoundError> {
    let Some((request, asked)) = fetch_request(shard, ready) else {
        glommio::timer::sleep(IDLE).await;
        return Ok(());
    };
    let asked_at = std::time::Instant::now();
    let response = connection.call(&request, FETCH_VERSION).await?;
    let counters = &shard.metrics.follower;
    counters.fetches.fetch_add(1, Ordering::Relaxed);
    // Timed only when it brought records: an empty one is the leader's
    // wait for new data (up to replica_fetch_wait_max_ms), which would
    // hide the round trip of those that copy.
    let brought_records = (response.responses.iter())
        .flat_map(|topic| &topic.partitions)
        .any(|data| data.records.as_ref().is_some_and(|r| !r.is_empty()));
    if brought_records {
        counters.fetch_latency.observe(asked_at.elapsed());
    }
    let mut backed_off = false;
    for topic in &response.responses {
        for data in &topic.partitions {
            let Some(asked) = find_asked(&asked, topic.topic.as_str(), data.partition_index) else {
                continue;
            };
            let (key, followed, _) = asked;
            if !still_followed(partitions, *key, followed.epoch) {
                continue;
            }
            match ResponseError::try_from_code(data.error_code) {
                None => take_fetched(shard, partitions, asked, data).await?,
                Some(ResponseError::OffsetMovedToTieredStorage) => {
                    start_at_leaders_local_start(shard, partitions, connection, asked).await?
                }
                Some(ResponseError::OffsetOutOfRange) => {
                    out_of_range(shard, partitions, connection, asked).await?
                }
                Some(error) => {
                    // Not (yet) the leader in this epoch, as far as it
                    // knows: wait for the metadata to settle.
                    tracing::debug!(topic = %followed.topic, partition = key.index, ?error, "replica fetch refused");
                    if !backed_off {
                        backed_off = true;
                        glommio::timer::sleep(IDLE).await;
                    }
                }
            }
        }
    }
    Ok(())
}

/// The leader has no offset this follower asked for: either this log
/// ends below the leader's log start (a replica added by a reassignment,
/// or back after retention or DeleteRecords moved the start past it),
/// and it starts over there; or it ends past the leader's log end, and
/// it finds the common point again.
async fn out_of_range(
    shard: &Partitions,
    partitions: &FollowedMap,
    connection: &mut Connection,
    asked: &Asked,
) -> Result<(), RoundError> {
    let (key, followed, partition) = asked;
    let me = shard.cluster.me.0;
    let start = tiered_start::leaders_local_start(connection, me, &followed.topic, *key).await?;
    if start > partition.log.log_end() {
        return start_at_leaders_local_start(shard, partitions, connection, asked).await;
    }
    if let Some(f) = partitions.borrow_mut().get_mut(key) {
        f.truncated = false;
    }
    Ok(())
}

/// Starts the log over at the leader's local log start (tiered storage:
/// what this follower would copy next is only in the remote log; or this
/// log ends below the leader's log start).
async fn start_at_leaders_local_start(
    shard: &Partitions,
    partitions: &FollowedMap,
    connection: &mut Connection,
    (key, followed, partition): &Asked,
) -> Result<(), RoundError> {
    let me = shard.cluster.me.0;
    let start = tiered_start::leaders_local_start(connection, me, &followed.topic, *key).await?;
    let snapshot = match start > partition.log.log_end() {
        true => match tiered_start::producer_snapshot(shard, *key, start).await {
            Ok(snapshot) => snapshot,
            Err(e) => {
                // The other partitions of the round go on; this one asks
                // again in a while (it never starts over without the
                // producer state the remote log holds).
                tracing::warn!(topic = %followed.topic, partition = key.index, error = %e, "cannot read the leader's producer snapshot from the object store; trying again in a second");
                if let Some(f) = partitions.borrow_mut().get_mut(key) {
                    f.not_before = Some(std::time::Instant::now() + STORE_RETRY);
                }
                return Ok(());
            }
        },
        false => None,
    };
    let _writing = partition.replica_writes.lock().await;
    if followed_log(shard, *key, followed.epoch).is_none()
        || !still_followed(partitions, *key, followed.epoch)
    {
        return Ok(()); // its role changed meanwhile
    }
    let log = &partition.log;
    if start > log.log_end() {
        tracing::info!(topic = %followed.topic, partition = key.index, from = log.log_end().0, to = start.0, "the leader no longer holds the offsets between locally (deleted, or only in tiered storage): starting the log over at its local start");
        log.restart_at(start, snapshot.as_deref()).await?;
    }
    mark_truncated(partitions, *key, followed.epoch);
    Ok(())
}

/// The Fetch request (as replica) from each ready partition's log end, or
/// None when none is still followed.
fn fetch_request(
    shard: &Partitions,
    ready: &[&(PartitionKey, Followed)],
) -> Option<(FetchRequest, Vec<Asked>)> {
    let mut asked = Vec::new();
    let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
    let now = std::time::Instant::now();
    for (key, followed) in ready {
        if followed.not_before.is_some_and(|at| at > now) {
            continue;
        }
        let Some(partition) = followed_log(shard, *key, followed.epoch) else {
            continue;
        };
        let log = &partition.log;
        topics.entry(&followed.topic).or_default().push(
            FetchPartition::default()
                .with_partition(key.index as i32)
                .with_current_leader_epoch(followed.epoch.0)
                .with_fetch_offset(log.log_end().0)
                .with_log_start_offset(log.log_start().0)
                .with_partition_max_bytes(PARTITION_BYTES_MAX),
        );
        asked.push((*key, (*followed).clone(), partition));
    }
    if asked.is_empty() {
        return None;
    }
    let topics = topics
        .into_iter()
        .map(|(topic, partitions)| {
            FetchTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(partitions)
        })
        .collect();
    let request = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(shard.cluster.me.0))
        .with_replica_state(ReplicaState::default())
        .with_max_wait_ms(shard.cluster.config.replica_fetch_wait_max_ms as i32)
        .with_min_bytes(1)
        .with_max_bytes(FETCH_BYTES_MAX)
        .with_session_epoch(-1)
        .with_topics(topics);
    Some((request, asked))
}

/// Appends one partition's fetched batches (under its replica-writes
/// lock, if it is still followed in the epoch asked), fdatasyncs them
/// when the topic counts only fdatasync'd copies, and takes the leader's
/// high watermark.
async fn take_fetched(
    shard: &Partitions,
    partitions: &FollowedMap,
    (key, followed, partition): &Asked,
    data: &PartitionData,
) -> Result<(), RoundError> {
    let records = data.records.clone().unwrap_or_default();
    let _writing = partition.replica_writes.lock().await;
    if followed_log(shard, *key, followed.epoch).is_none()
        || !still_followed(partitions, *key, followed.epoch)
    {
        return Ok(()); // its role changed while the fetch was out
    }
    let counters = &shard.metrics.follower;
    let appending = std::time::Instant::now();
    let appended = append_batches(partition, &records).await?;
    if appended > 0 {
        counters.append_latency.observe(appending.elapsed());
        (counters.appended_bytes).fetch_add(appended as u64, Ordering::Relaxed);
    }
    let log = &partition.log;
    let fsync = shard
        .cluster
        .view
        .borrow()
        .metadata
        .topics
        .get(&key.topic)
        .is_none_or(|t| t.config.fsync_before_ack);
    if fsync && log.flushed() < log.log_end() {
        let flushing = std::time::Instant::now();
        log.flush().await?;
        counters.flush_latency.observe(flushing.elapsed());
    }
    let high_watermark = Offset(data.high_watermark).min(log.log_end());
    if high_watermark > log.high_watermark() {
        log.set_high_watermark(high_watermark);
        partition.notify_arrival();
    }
    throttle_if_added(shard, partitions, *key, records.len() as u64);
    Ok(())
}

/// A replica a reassignment is adding here, while out of sync, copies
/// within this shard's share of `follower_replication_throttled_rate`:
/// past it, its next fetch waits (at most [`THROTTLE_WAIT_MAX`]). Once in
/// the ISR it is not throttled: acks=all produces wait for its fetches.
fn throttle_if_added(shard: &Partitions, partitions: &FollowedMap, key: PartitionKey, bytes: u64) {
    let cluster = &shard.cluster;
    let rate = cluster.config.follower_replication_throttled_rate;
    if rate == 0 || bytes == 0 {
        return;
    }
    let rate = (rate / cluster.shards().max(1) as u64).max(1);
    let catching_up = {
        let view = cluster.view.borrow();
        let index = control::PartitionId(key.index as i32);
        let moving = view.metadata.reassignments.get(&(key.topic, index));
        let out_of_sync = view
            .metadata
            .partition(key.topic, index)
            .is_ok_and(|p| !p.isr.contains(&cluster.me));
        out_of_sync && moving.is_some_and(|m| m.adding().contains(&cluster.me))
    };
    if !catching_up {
        return;
    }
    let wait_ms = super::throttle::charge(bytes, rate, crate::runtime::clock::monotonic_ms())
        .min(THROTTLE_WAIT_MAX.as_millis() as u64);
    if wait_ms > 0 {
        if let Some(f) = partitions.borrow_mut().get_mut(&key) {
            f.not_before = Some(std::time::Instant::now() + Duration::from_millis(wait_ms));
        }
    }
}

/// Appends the whole batches of a fetch response at their offsets (a
/// partial batch at its end is left for the next fetch); a batch already
/// held (below the log end) is skipped. Returns the bytes appended.
async fn append_batches(partition: &OpenPartition, records: &Bytes) -> Result<usize, RoundError> {
    let batches = storage::batch::split_stored(records, BATCH_BYTES_CAP)
        .map_err(storage::StorageError::from)?;
    let mut appended = 0;
    for (header, batch) in batches {
        if header.base_offset >= partition.log.log_end() {
            appended += batch.len();
            partition
                .log
                .append_replica(BytesMut::from(&batch[..]))
                .await?;
        }
    }
    Ok(appended)
}
