//! A producer: records are batched per partition (by size and linger);
//! a pipeline per broker ([`sender`]) keeps up to `max_in_flight` Produce
//! requests out on its own connection to that broker, sending the next
//! as each answer is read (each request holds the front ready batch of
//! every partition the broker leads; the broker answers in order), and
//! retriable failures (leadership moved, connection lost) are retried in
//! order after a metadata refresh. Idempotent batches keep their order
//! through retries (a batch after a retried one is refused out of
//! sequence and retried behind it); without idempotence a retried batch
//! may land after later ones, as in Kafka (`max_in_flight` 1 keeps the
//! order).
//!
//! Idempotent by default (as the Java client since 3.0), with acks=all:
//! the producer gets an id and epoch (InitProducerId) and numbers each
//! partition's records; a retried batch keeps its numbers, so a broker
//! that already has it (the answer was lost, the leader moved) answers
//! with the original offsets instead of writing it twice.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::task::Waker;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::channel::oneshot;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    InitProducerIdRequest, ProduceRequest, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::records::Compression;
use kafka_protocol::ResponseError;

use crate::cluster::Cluster;
use crate::connection::{ClientError, Connection};
use crate::partitioner::partition_for_key;
use crate::records::{add_sequence, ProducerRecord, RecordRef};

mod answers;
mod queues;
mod sender;
mod transactional;

use self::answers::{Answers, SentIds};
use self::queues::{Batch, PartitionKey, PartitionQueues, Records, Taken};

/// How a producer batches and acknowledges.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// 0, 1 or -1 (all).
    pub acks: i16,
    /// A batch is sent once it holds this many bytes...
    pub batch_bytes: usize,
    /// ...or once its first record waited this long.
    pub linger: Duration,
    /// How often a batch is retried after a retriable error.
    pub retries: u32,
    /// Pause before a retry.
    pub retry_backoff: Duration,
    /// The batches' compression.
    pub compression: Compression,
    /// How long the broker may take (the request's timeout).
    pub request_timeout: Duration,
    /// Idempotent batches (producer id, epoch, sequences): retries never
    /// duplicate. Applies with acks=all (-1); acks 0 and 1 send plain
    /// batches, as their acknowledgements promise less anyway.
    pub idempotence: bool,
    /// A transactional producer's id (None: not transactional): its
    /// records are written in transactions
    /// ([`Producer::init_transactions`], then `begin`, `commit` or
    /// `abort`), read by read_committed consumers only once committed.
    pub transactional_id: Option<String>,
    /// How long a transaction may stay open before its coordinator aborts
    /// it (transaction.timeout.ms).
    pub transaction_timeout: Duration,
    /// The newest transaction protocol to use: 2 (KIP-890, when the
    /// coordinator's broker finalized it) or 1 (the classic protocol).
    pub transaction_version: i16,
    /// Produce requests sent to a broker before the first answer is read
    /// (Kafka's max.in.flight.requests.per.connection; at most 5 with
    /// idempotence, as Kafka allows).
    pub max_in_flight: usize,
    /// The most batch bytes one Produce request carries (Kafka's
    /// max.request.size; a request holds at least one batch). Without it
    /// a producer writing to many partitions sends one request of every
    /// ready batch, tens of MiB, which a broker must read into fresh
    /// memory each time.
    pub max_request_bytes: usize,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            acks: -1,
            batch_bytes: 64 * 1024,
            linger: Duration::from_millis(5),
            retries: 10,
            retry_backoff: Duration::from_millis(100),
            compression: Compression::None,
            request_timeout: Duration::from_secs(30),
            idempotence: true,
            transactional_id: None,
            transaction_timeout: Duration::from_secs(60),
            transaction_version: 2,
            max_in_flight: 5,
            max_request_bytes: 1 << 20,
        }
    }
}

/// Where a record landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    /// Its partition.
    pub partition: i32,
    /// Its offset (-1 with acks=0).
    pub offset: i64,
    /// When its answer was read (one clock read for the whole request,
    /// so a latency measurement needs none per record).
    pub acknowledged_at: Instant,
    /// When building the request that carried it began (its last, if
    /// retried). Before it the record waited in the producer (lingering,
    /// its partition's turn, room in flight, retries); after it, the
    /// request: sealing and encoding, writing, the broker, reading the
    /// answer.
    pub request_started_at: Instant,
}

/// The most records a new batch makes room for ahead (as many as its
/// partition's last batch held, up to this): beyond it the batch grows as
/// it fills, so a partition gone quiet holds no big empty batch. 128
/// waiters take a few KiB. The batch's bytes start with room for as many
/// as its partition's last batch took, at most `batch_bytes`: what
/// Kafka's producer reserves for every new batch (batch.size), so a busy
/// partition's batch is not grown by doubling, and one gone quiet takes
/// that much once, for one batch.
const BATCH_ROOM_MOST: usize = 128;

/// A record's fate.
pub type DeliveryResult = Result<Delivered, ClientError>;

/// Who is told of a record's fate: a future's channel, or a callback
/// (no channel or task per record; called as the answer is read, which is
/// also the moment a latency measurement wants).
enum Waiter {
    Channel(oneshot::Sender<DeliveryResult>),
    Callback(Box<dyn FnOnce(DeliveryResult)>),
}

impl Waiter {
    fn tell(self, result: DeliveryResult) {
        match self {
            Waiter::Channel(tx) => {
                let _ = tx.send(result);
            }
            Waiter::Callback(callback) => callback(result),
        }
    }
}

#[derive(Default)]
struct Queues {
    batches: PartitionQueues,
    /// Round-robin position for records without a key.
    next_unkeyed: u32,
    /// Per broker, the partition last taken into its request cut short
    /// by its size: the broker's next request starts after it, so every
    /// partition gets its turn.
    cut_after: BTreeMap<i32, PartitionKey>,
    /// The idempotent producer's id and epoch, once InitProducerId answered.
    identity: Option<(i64, i16)>,
    /// (topic, partition) -> the next record's sequence.
    next_sequence: BTreeMap<(String, i32), i32>,
    /// InitProducerId failures in a row.
    init_failures: u32,
    /// A transactional producer's state.
    transaction: transactional::Transaction,
}

/// A producer on one glommio executor.
pub struct Producer {
    cluster: Rc<Cluster>,
    config: ProducerConfig,
    queues: RefCell<Queues>,
    wake: RefCell<Option<oneshot::Sender<()>>>,
    /// Pokes so far, and the pipelines waiting for the next one: a
    /// pipeline waiting for an answer sends a batch that became ready
    /// meanwhile ([`sender`]).
    pokes: Cell<u64>,
    poke_waiters: RefCell<Vec<Waker>>,
    /// Who waits with no lingering batch's due time to wake them. A batch
    /// started alone (lingering) pokes only when whoever sends it (its
    /// leader's pipeline, or the sender if none runs) is among them: a
    /// due time armed is an earlier batch's, so whoever wakes then sees
    /// the new one. Otherwise, with many partitions, each new batch would
    /// wake every pipeline to scan every queue.
    unarmed: Rc<RefCell<Unarmed>>,
    /// The brokers a pipeline is sending to now ([`sender`]).
    pipelines: RefCell<BTreeSet<i32>>,
    /// Each broker's connection for Produce requests, between pipelines:
    /// its own, so that a pipeline's answers in flight hold up no other
    /// call (metadata, producer ids, transactions).
    produce_connections: RefCell<BTreeMap<i32, Connection>>,
}

impl Producer {
    /// A producer; its sender runs as a task of the current executor.
    pub fn new(cluster: Rc<Cluster>, config: ProducerConfig) -> Rc<Producer> {
        let producer = Rc::new(Producer {
            cluster,
            config,
            queues: RefCell::new(Queues::default()),
            wake: RefCell::new(None),
            pokes: Cell::new(0),
            poke_waiters: RefCell::new(Vec::new()),
            unarmed: Rc::new(RefCell::new(Unarmed::default())),
            pipelines: RefCell::new(BTreeSet::new()),
            produce_connections: RefCell::new(BTreeMap::new()),
        });
        glommio::spawn_local(sender::run_sender(Rc::downgrade(&producer))).detach();
        producer
    }

    /// Queues a record stamped now; the returned future resolves when it
    /// is acknowledged.
    pub async fn send(
        &self,
        topic: &str,
        key: Option<Bytes>,
        value: Option<Bytes>,
    ) -> Result<impl std::future::Future<Output = Result<Delivered, ClientError>>, ClientError>
    {
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        self.send_record(
            topic,
            ProducerRecord {
                key,
                value,
                timestamp,
                headers: Vec::new(),
            },
        )
        .await
    }

    /// Queues a record with its own timestamp.
    pub async fn send_record(
        &self,
        topic: &str,
        record: ProducerRecord,
    ) -> Result<impl std::future::Future<Output = Result<Delivered, ClientError>>, ClientError>
    {
        let (tx, rx) = oneshot::channel();
        self.enqueue(topic, record.borrowed(), Waiter::Channel(tx))
            .await?;
        Ok(async move {
            rx.await
                .unwrap_or_else(|_| Err(ClientError::Protocol("the producer stopped".into())))
        })
    }

    /// Queues a record (its bytes copied into its batch: the caller's
    /// buffers are free again when this returns); `on_delivery` is called
    /// with its fate when the broker answers (or the producer gives up on
    /// it).
    pub async fn send_with(
        &self,
        topic: &str,
        record: RecordRef<'_>,
        on_delivery: impl FnOnce(DeliveryResult) + 'static,
    ) -> Result<(), ClientError> {
        self.enqueue(topic, record, Waiter::Callback(Box::new(on_delivery)))
            .await
    }

    async fn enqueue(
        &self,
        topic: &str,
        record: RecordRef<'_>,
        waiter: Waiter,
    ) -> Result<(), ClientError> {
        // Known topics are looked up without copying their info (a record
        // at a time, this was most of the producer's allocations).
        let partitions = match self.cluster.partition_count(topic) {
            Some(count) => count,
            None => self.cluster.topic_info(topic, true).await?.leaders.len(),
        } as u32;
        if partitions == 0 {
            return Err(ClientError::Broker(
                ResponseError::LeaderNotAvailable.code(),
            ));
        }
        let partition = {
            let mut queues = self.queues.borrow_mut();
            match record.key {
                Some(key) => partition_for_key(key, partitions),
                None => {
                    queues.next_unkeyed = queues.next_unkeyed.wrapping_add(1);
                    queues.next_unkeyed % partitions
                }
            }
        } as i32;
        if self.config.transactional_id.is_some() {
            // Its first record in a transaction waits for the partition
            // to join it (AddPartitionsToTxn): the broker refuses a
            // batch of a partition not in the transaction.
            self.join_transaction(topic, partition).await?;
        }
        // The sender and pipelines are poked when a batch became ready to
        // go: full, made with no linger, or followed by another (it is
        // followed now). A batch started alone lingers: it pokes only a
        // waiter with no due time armed (see `unarmed`).
        let poke = {
            let mut queues = self.queues.borrow_mut();
            let size = record_size(&record);
            let queue = queues.batches.queue(topic, partition);
            let fresh = queue
                .batches
                .back()
                .is_none_or(|b| b.bytes + size > self.config.batch_bytes || b.attempts > 0);
            if fresh {
                let room = queue.last_batch_records.min(BATCH_ROOM_MOST);
                let bytes = queue
                    .last_batch_bytes
                    .min(self.config.batch_bytes)
                    .max(size);
                queue.batches.push_back(Batch::with_capacity(room, bytes));
            }
            let followed = queue.batches.len() > 1;
            let batch = queue.batches.back_mut().expect("a batch");
            let Records::Open(records) = &mut batch.records else {
                unreachable!("a batch is sealed when taken to be sent, and a new one started after")
            };
            if let Err(e) = records.push(record) {
                if batch.waiters.is_empty() {
                    queue.batches.pop_back(); // no empty batch stays behind
                }
                return Err(e);
            }
            batch.waiters.push(waiter);
            batch.bytes += size;
            let full = batch.bytes >= self.config.batch_bytes;
            let ready = full || (fresh && (followed || self.config.linger.is_zero()));
            let lingering = fresh && !ready;
            ready || (lingering && self.sender_of_unarmed(topic, partition))
        };
        if poke {
            self.poke();
        }
        Ok(())
    }

    /// Waits until every queued record is acknowledged or failed.
    pub async fn flush(&self) {
        loop {
            let idle = {
                let queues = self.queues.borrow();
                queues.batches.is_idle()
            };
            if idle {
                return;
            }
            self.poke();
            glommio::timer::sleep(Duration::from_millis(1)).await;
        }
    }

    fn poke(&self) {
        if let Some(wake) = self.wake.borrow_mut().take() {
            let _ = wake.send(());
        }
        self.pokes.set(self.pokes.get() + 1);
        let waiters = std::mem::take(&mut *self.poke_waiters.borrow_mut());
        for waker in waiters {
            waker.wake();
        }
    }

    /// Whether the one who sends `topic`'s `partition` (its leader's
    /// pipeline, or the sender if none runs) waits with no due time armed.
    fn sender_of_unarmed(&self, topic: &str, partition: i32) -> bool {
        let leader = self.cluster.leader_of(topic, partition).unwrap_or(-1);
        let unarmed = self.unarmed.borrow();
        match self.pipelines.borrow().contains(&leader) {
            true => unarmed.pipelines.contains(&leader),
            false => unarmed.sender,
        }
    }

    /// Completes at the next poke (a batch made or full, a pipeline ended).
    fn next_poke(&self) -> impl std::future::Future<Output = ()> + '_ {
        let seen = self.pokes.get();
        std::future::poll_fn(move |cx| {
            if self.pokes.get() != seen {
                return std::task::Poll::Ready(());
            }
            let mut waiters = self.poke_waiters.borrow_mut();
            if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                waiters.push(cx.waker().clone());
            }
            std::task::Poll::Pending
        })
    }

    /// How long until the first batch now lingering that may go to
    /// `leader` may go (None: none lingers).
    fn next_due(&self, leader: i32) -> Option<Duration> {
        let mut queues = self.queues.borrow_mut();
        let most = self.max_in_flight();
        let now = Instant::now();
        let fronts = queues
            .batches
            .iter_mut()
            .filter_map(|((topic, partition), queue)| {
                let front = queue.batches.front()?;
                let led = self.cluster.leader_of(topic, partition) == Some(leader);
                let sendable = led && queue.may_send_to(leader, most);
                sendable.then(|| self.wait_before_sending(front, queue.batches.len(), now))?
            });
        fronts.min()
    }

    /// The brokers with a batch ready to go (full, lingered long enough,
    /// or followed by another) and no pipeline sending to them yet (-1:
    /// batches whose partition has no leader known), and when the next
    /// batch not ready yet will be.
    fn ready_leaders(&self) -> (BTreeSet<i32>, Option<Duration>) {
        let mut queues = self.queues.borrow_mut();
        let pipelines = self.pipelines.borrow();
        let most = self.max_in_flight();
        let now = Instant::now();
        let mut ready = BTreeSet::new();
        let mut next_due: Option<Duration> = None;
        for ((topic, partition), queue) in queues.batches.iter_mut() {
            let Some(front) = queue.batches.front() else {
                continue;
            };
            let leader = self.cluster.leader_of(topic, partition).unwrap_or(-1);
            if pipelines.contains(&leader) || !queue.may_send_to(leader, most) {
                continue;
            }
            match self.wait_before_sending(front, queue.batches.len(), now) {
                None => {
                    ready.insert(leader);
                }
                Some(wait) => next_due = Some(next_due.map_or(wait, |d| d.min(wait))),
            }
        }
        (ready, next_due)
    }

    /// How long a partition's front batch waits before it may go (None:
    /// it may go now): full, lingered long enough, or followed by another.
    fn wait_before_sending(&self, front: &Batch, queued: usize, now: Instant) -> Option<Duration> {
        let due = front.started + self.config.linger;
        let go = queued > 1 || front.bytes >= self.config.batch_bytes || due <= now;
        (!go).then(|| due - now)
    }

    /// One request's batches for `leader`: the front batch of each
    /// partition it leads that is ready to go and may go to it, numbered
    /// if idempotent (nothing while an idempotent producer has no id), up
    /// to `max_request_bytes`.
    fn take_wave(&self, leader: i32) -> Vec<Taken> {
        let mut queues = self.queues.borrow_mut();
        let queues = &mut *queues;
        let identity = queues.identity;
        if self.idempotent() && identity.is_none() {
            return Vec::new();
        }
        let most = self.max_in_flight();
        let now = Instant::now();
        let mut wave: Vec<Taken> = Vec::new();
        let mut wave_bytes = 0;
        let after = queues.cut_after.remove(&leader);
        for ((topic, partition), queue) in queues.batches.iter_mut_after(after.as_ref()) {
            let Some(front) = queue.batches.front() else {
                continue;
            };
            if self.cluster.leader_of(topic, partition).unwrap_or(-1) != leader
                || !queue.may_send_to(leader, most)
                || self
                    .wait_before_sending(front, queue.batches.len(), now)
                    .is_some()
            {
                continue;
            }
            if !wave.is_empty() && wave_bytes + front.bytes > self.config.max_request_bytes {
                if let Some((key, _)) = wave.last() {
                    queues.cut_after.insert(leader, key.clone());
                }
                break;
            }
            wave_bytes += front.bytes;
            let mut batch = queue.batches.pop_front().expect("a front batch");
            queue.last_batch_records = batch.len();
            queue.last_batch_bytes = batch.bytes;
            queue.sent += 1;
            queue.sent_to = leader;
            if let Some(identity) = identity.filter(|_| self.idempotent()) {
                if batch
                    .sequence
                    .is_none_or(|(numbered, _)| numbered != identity)
                {
                    let key = (topic.clone(), partition);
                    let next = queues.next_sequence.entry(key).or_insert(0);
                    batch.sequence = Some((identity, *next));
                    *next = add_sequence(*next, batch.len() as i32);
                }
            }
            wave.push(((topic.clone(), partition), batch));
        }
        wave
    }

    /// Batches of one partition sent at once: `max_in_flight`, at most 5
    /// with idempotence (a broker keeps the last 5 batches' sequences).
    fn max_in_flight(&self) -> usize {
        let most = if self.idempotent() { 5 } else { usize::MAX };
        self.config.max_in_flight.clamp(1, most)
    }

    /// Whether batches are idempotent (the setting, with acks=all).
    fn idempotent(&self) -> bool {
        self.config.idempotence && self.config.acks == -1
    }

    /// Gets a producer id and epoch (InitProducerId) if batches need one
    /// and none is held; false if the broker could not give one yet. (A
    /// transactional producer's comes from `init_transactions`.)
    async fn ensure_identity(&self) -> bool {
        if !self.idempotent() || self.queues.borrow().identity.is_some() {
            return true;
        }
        if self.config.transactional_id.is_some() {
            return false;
        }
        if self.queues.borrow().batches.any_out() {
            // Batches numbered under the identity given up are still out:
            // a new one waits for their answers (as Kafka's producer
            // waits before bumping its epoch), or a batch numbered under
            // it could go before an older one retried behind it.
            return false;
        }
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let failure = match self.cluster.call_any(&request).await {
            Ok(answer) if answer.error_code == 0 => {
                let mut queues = self.queues.borrow_mut();
                queues.identity = Some((answer.producer_id.0, answer.producer_epoch));
                queues.next_sequence.clear();
                queues.init_failures = 0;
                return true;
            }
            Ok(answer) => ClientError::Broker(answer.error_code),
            Err(e) => e,
        };
        // Retried like a batch; past the retries, what waits fails with it.
        let give_up = {
            let mut queues = self.queues.borrow_mut();
            queues.init_failures += 1;
            queues.init_failures > self.config.retries
        };
        if give_up {
            self.queues.borrow_mut().init_failures = 0;
            let waiting: Vec<Taken> = {
                let mut queues = self.queues.borrow_mut();
                queues.batches.take_all()
            };
            self.fail_all(waiting, &format!("no producer id: {failure}"));
        }
        false
    }

    /// The producer starts over as a new producer (KIP-360's reset for
    /// idempotent producers): after a broker refused a batch's sequence or
    /// epoch, or after a numbered batch failed for good (its numbers would
    /// leave a gap that refuses the next batch). Sequences restart at 0
    /// under the new identity; batches numbered under the old one are
    /// renumbered when next sent (a retried batch may then be written
    /// twice, the price of starting over).
    fn reset_identity(&self) {
        if self.config.transactional_id.is_some() {
            // Its transaction can only be aborted now; the abort starts
            // it over (init_transactions: a new epoch, sequences from 0).
            return;
        }
        let mut queues = self.queues.borrow_mut();
        queues.identity = None;
        queues.next_sequence.clear();
    }

    /// Puts batches back at the front of their queues (a retry).
    fn requeue(&self, batches: Vec<Taken>) {
        let mut queues = self.queues.borrow_mut();
        for (key, batch) in batches.into_iter().rev() {
            queues.batches.settled(&key);
            queues
                .batches
                .queue(&key.0, key.1)
                .batches
                .push_front(batch);
        }
    }

    /// A batch of `key` left flight: answered, or failed for good. The
    /// sender is woken when that frees the partition for another broker
    /// (its leader moved while its batches were out).
    fn settled(&self, key: &PartitionKey) {
        let freed_for = {
            let mut queues = self.queues.borrow_mut();
            queues.batches.settled(key);
            let queue = queues.batches.queue(&key.0, key.1);
            (queue.sent == 0 && !queue.batches.is_empty()).then_some(queue.sent_to)
        };
        if freed_for.is_some_and(|to| self.cluster.leader_of(&key.0, key.1) != Some(to)) {
            self.poke();
        }
    }

    /// One wave's Produce request (each batch sealed with its numbers).
    fn produce_request(&self, wave: &mut [Taken]) -> Result<ProduceRequest, String> {
        let mut by_topic: BTreeMap<&str, Vec<PartitionProduceData>> = BTreeMap::new();
        let transactional = self.config.transactional_id.is_some();
        let started_at = Instant::now();
        for ((topic, partition), batch) in wave.iter_mut() {
            batch.request_started_at = started_at;
            let records = batch
                .sealed_for_sending(self.config.compression, transactional)
                .map_err(|e| e.to_string())?;
            by_topic.entry(topic).or_default().push(
                PartitionProduceData::default()
                    .with_index(*partition)
                    .with_records(Some(records)),
            );
        }
        let transactional_id = self
            .config
            .transactional_id
            .as_ref()
            .map(|id| TransactionalId(id.clone().into()));
        Ok(ProduceRequest::default()
            .with_transactional_id(transactional_id)
            .with_acks(self.config.acks)
            .with_timeout_ms(self.config.request_timeout.as_millis() as i32)
            .with_topic_data(
                by_topic
                    .into_iter()
                    .map(|(topic, partitions)| {
                        // v13 names topics by id, earlier versions by name.
                        let id = self.cluster.topic_id(topic).unwrap_or_default();
                        TopicProduceData::default()
                            .with_name(TopicName(topic.to_string().into()))
                            .with_topic_id(id)
                            .with_partition_data(partitions)
                    })
                    .collect(),
            ))
    }

    /// Tells one wave's waiters what the broker answered (None: acks=0),
    /// its topics found by the ids its request named them by; returns its
    /// batches to retry. `unsettled` holds the partitions an
    /// earlier wave of the same send did not get written: a later batch
    /// of one that was refused out of sequence (its predecessor is not
    /// there) is retried behind it (renumbered if the producer started
    /// over), not failed; a transactional producer's fails with it.
    fn settle(
        &self,
        wave: Vec<Taken>,
        sent_ids: &SentIds,
        response: Option<&kafka_protocol::messages::ProduceResponse>,
        unsettled: &mut Unsettled,
    ) -> Vec<Taken> {
        let mut retry = Vec::new();
        let mut reset = false;
        let acknowledged_at = Instant::now();
        let answers = response.map(Answers::of);
        for ((topic, partition), batch) in wave {
            let answer = answers
                .as_ref()
                .and_then(|answers| answers.find(&topic, sent_ids.get(&topic), partition));
            let (error, base) = match (self.config.acks, answer) {
                (0, _) => (0, -1),
                (_, Some(p)) => (p.error_code, p.base_offset),
                (_, None) => (ResponseError::UnknownServerError.code(), -1),
            };
            let key = (topic, partition);
            let out_of_order = error == ResponseError::OutOfOrderSequenceNumber.code();
            let transactional = self.config.transactional_id.is_some();
            let behind_a_retry = out_of_order && unsettled.holds_back(&key, transactional);
            if error == 0 {
                self.settled(&key);
                let request_started_at = batch.request_started_at;
                for (i, waiter) in batch.waiters.into_iter().enumerate() {
                    let offset = if base < 0 { -1 } else { base + i as i64 };
                    waiter.tell(Ok(Delivered {
                        partition,
                        offset,
                        acknowledged_at,
                        request_started_at,
                    }));
                }
            } else if (is_retriable(error) || behind_a_retry)
                && batch.attempts < self.config.retries
            {
                unsettled.retried.insert(key.clone());
                retry.push((key, batch));
            } else {
                self.settled(&key);
                unsettled.failed.insert(key);
                self.queues.borrow_mut().transaction.failed = true;
                // Refused numbering, or numbers that now leave a gap.
                reset |= batch.sequence.is_some();
                for waiter in batch.waiters {
                    waiter.tell(Err(ClientError::Broker(error)));
                }
            }
        }
        if reset {
            self.reset_identity();
        }
        retry
    }

    fn retry_or_fail(&self, batches: Vec<Taken>, why: &str) -> Vec<Taken> {
        let (retry, fail): (Vec<_>, Vec<_>) = batches
            .into_iter()
            .partition(|(_, b)| b.attempts < self.config.retries);
        self.fail_all(fail, why);
        retry
    }

    fn fail_all(&self, batches: Vec<Taken>, why: &str) {
        for (key, _) in &batches {
            self.settled(key);
        }
        if !batches.is_empty() {
            self.queues.borrow_mut().transaction.failed = true;
        }
        if batches.iter().any(|(_, b)| b.sequence.is_some()) {
            self.reset_identity();
        }
        for (_, batch) in batches {
            for waiter in batch.waiters {
                waiter.tell(Err(ClientError::Protocol(why.to_string())));
            }
        }
    }
}

/// The sender and the pipelines (by leader) waiting with no lingering
/// batch's due time armed ([`Producer::unarmed`]).
#[derive(Default)]
struct Unarmed {
    sender: bool,
    pipelines: BTreeSet<i32>,
}

/// The partitions an earlier request of one pipeline did not get written.
#[derive(Default)]
struct Unsettled {
    /// Their batch is retried.
    retried: BTreeSet<PartitionKey>,
    /// Their batch failed for good (the producer starts over).
    failed: BTreeSet<PartitionKey>,
}

impl Unsettled {
    /// Whether every batch so far was written.
    fn is_empty(&self) -> bool {
        self.retried.is_empty() && self.failed.is_empty()
    }

    /// Whether a batch of `key` refused out of sequence only came before
    /// its predecessor (and may follow it): behind a retried batch, or
    /// behind a failed one when the producer starts over (a transactional
    /// producer cannot: its transaction is lost anyway).
    fn holds_back(&self, key: &PartitionKey, transactional: bool) -> bool {
        self.retried.contains(key) || (!transactional && self.failed.contains(key))
    }
}

/// A record's bytes, about (for the batch size limit).
fn record_size(record: &RecordRef<'_>) -> usize {
    let bytes = |b: &Option<&[u8]>| b.map_or(0, |b| b.len());
    let headers: usize = (record.headers.iter())
        .map(|(name, value)| name.len() + value.as_ref().map_or(0, |v| v.len()) + 2)
        .sum();
    bytes(&record.key) + bytes(&record.value) + headers + 16
}

/// Errors after which the same batch may succeed.
fn is_retriable(code: i16) -> bool {
    ResponseError::try_from_code(code).is_some_and(|e| e.is_retriable()) && !is_sequence_error(code)
}

/// A broker refused the batch's numbering: this producer's id and epoch
/// are done with.
fn is_sequence_error(code: i16) -> bool {
    code == ResponseError::OutOfOrderSequenceNumber.code()
        || code == ResponseError::InvalidProducerEpoch.code()
        || code == ResponseError::UnknownProducerId.code()
}
