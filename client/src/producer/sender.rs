//! Sending: one pipeline per broker with batches ready. A pipeline keeps
//! up to `max_in_flight` Produce requests outstanding on its broker's
//! Produce connection and sends the next as each answer is read (the
//! window never drains while batches are ready, as librdkafka's), each
//! request carrying the front batch of every partition ready. The broker
//! answers in order; the first answer that asks for a retry or fails a
//! batch stops the sending, the answers still out are read, and what is
//! retried goes back to the front of its queue, in order, before the
//! pipeline backs off, refreshes metadata and ends.
//!
//! While it waits for an answer with room in its window, a batch that
//! becomes ready (made or filled, or its linger over) is sent at once:
//! the wait for the answer is dropped and taken up again (the
//! connection's frame read is cancel-safe). Otherwise a request would go
//! only when the one before it is answered, one at a time (docs/
//! benchmarks.md run 44, part 4).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::{Rc, Weak};
use std::time::Duration;

use futures::channel::oneshot;
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

use super::answers::SentIds;
use super::{Producer, Taken, Unarmed, Unsettled};
use crate::connection::{ClientError, Connection};

/// The sender: starts a pipeline for each broker that has a batch ready
/// and none running; sleeps until woken (a batch made or full, a
/// pipeline ended) or the next batch's linger runs out.
pub(super) async fn run_sender(producer: Weak<Producer>) {
    loop {
        let Some(this) = producer.upgrade() else {
            return;
        };
        if !this.ensure_identity().await {
            drop(this);
            glommio::timer::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let (ready, next_due) = this.ready_leaders();
        if ready.is_empty() {
            let (tx, rx) = oneshot::channel();
            *this.wake.borrow_mut() = Some(tx);
            let _unarmed = next_due
                .is_none()
                .then(|| UnarmedWait::new(&this.unarmed, None));
            let wait = next_due.unwrap_or(Duration::from_millis(50));
            drop(this);
            let _ = futures::future::select(rx, Box::pin(glommio::timer::sleep(wait))).await;
            continue;
        }
        for leader in ready {
            this.pipelines.borrow_mut().insert(leader);
            glommio::spawn_local(run_pipeline(this.clone(), leader)).detach();
        }
    }
}

/// One broker's pipeline, from its first ready batch until none is ready
/// and every answer is in (then, after a retry, a backoff and a metadata
/// refresh).
async fn run_pipeline(producer: Rc<Producer>, leader: i32) {
    let mut retry = if leader < 0 {
        let batches = producer.take_wave(leader);
        producer.retry_or_fail(batches, "no leader")
    } else {
        producer.pipeline(leader).await
    };
    if !retry.is_empty() {
        for (_, batch) in retry.iter_mut() {
            batch.attempts += 1;
        }
        producer.requeue(retry);
        glommio::timer::sleep(producer.config.retry_backoff).await;
        let topics = producer.queues.borrow().batches.topics();
        let names: Vec<&str> = topics.iter().map(|t| t.as_str()).collect();
        // A failed refresh shows up as the next attempt's failure.
        let _ = producer.cluster.refresh(Some(&names), false).await;
    }
    producer.pipelines.borrow_mut().remove(&leader);
    producer.poke();
}

/// Marks a waiter in [`Producer::unarmed`] while it lives (dropped with
/// the wait, however the wait ends): the sender (None) or a leader's
/// pipeline.
struct UnarmedWait {
    unarmed: Rc<RefCell<Unarmed>>,
    pipeline: Option<i32>,
}

impl UnarmedWait {
    fn new(unarmed: &Rc<RefCell<Unarmed>>, pipeline: Option<i32>) -> UnarmedWait {
        let wait = UnarmedWait {
            unarmed: unarmed.clone(),
            pipeline,
        };
        wait.mark(true);
        wait
    }

    fn mark(&self, waiting: bool) {
        let mut unarmed = self.unarmed.borrow_mut();
        match self.pipeline {
            None => unarmed.sender = waiting,
            Some(leader) if waiting => _ = unarmed.pipelines.insert(leader),
            Some(leader) => _ = unarmed.pipelines.remove(&leader),
        }
    }
}

impl Drop for UnarmedWait {
    fn drop(&mut self) {
        self.mark(false);
    }
}

/// A pipeline's requests out, oldest first: each one's batches, the topic
/// ids it named them by, and its correlation id (or why it could not be
/// sent).
type Outstanding = VecDeque<(Vec<Taken>, SentIds, Result<i32, ClientError>)>;

impl Producer {
    /// Sends `leader`'s ready batches until none is ready and every answer
    /// is read; returns the batches to retry, in order.
    async fn pipeline(&self, leader: i32) -> Vec<Taken> {
        let mut connection = match self.produce_connection(leader).await {
            Ok(connection) => connection,
            Err(e) => {
                let wave = self.take_wave(leader);
                return self.retry_or_fail(wave, &e.to_string());
            }
        };
        let version = match connection.version_for::<ProduceRequest>() {
            Ok(version) => version.min(self.produce_version_max()),
            Err(e) => {
                let wave = self.take_wave(leader);
                return self.retry_or_fail(wave, &e.to_string());
            }
        };
        let mut outstanding = Outstanding::new();
        let mut unsettled = Unsettled::default();
        let mut retry = Vec::new();
        // False once a send failed: nothing more is sent, the answers to
        // what was sent before it are still read.
        let mut sending = true;
        // False once a read failed: the connection is out of step, the
        // answers still out are lost.
        let mut reading = true;
        loop {
            // After a batch asked for a retry or failed, nothing more is
            // sent: what follows it waits to be retried behind it.
            if sending && unsettled.is_empty() {
                sending = self
                    .fill_window(
                        leader,
                        &mut connection,
                        version,
                        &mut outstanding,
                        &mut unsettled,
                    )
                    .await;
            }
            let Some((_, _, sent)) = outstanding.front() else {
                break;
            };
            let waiting_for = match sent {
                Ok(id) if reading => Some(*id),
                _ => None,
            };
            let may_send = sending && unsettled.is_empty();
            let room = outstanding.len() < self.max_in_flight();
            let answer = match waiting_for {
                Some(id) if may_send && room => {
                    match self
                        .answer_unless_batch_ready(&mut connection, leader, id, version)
                        .await
                    {
                        Some(answer) => answer,
                        None => continue,
                    }
                }
                Some(id) => connection.read_answer::<ProduceRequest>(id, version).await,
                None => Err(ClientError::Protocol("an earlier answer failed".into())),
            };
            if waiting_for.is_some() {
                reading = answer.is_ok();
            }
            let (wave, sent_ids, sent) = outstanding.pop_front().expect("its front");
            let answer = sent.and(answer);
            retry.extend(self.answered(wave, &sent_ids, answer, &mut unsettled));
        }
        if sending && reading {
            self.produce_connections
                .borrow_mut()
                .insert(leader, connection);
        }
        retry
    }

    /// Request `id`'s answer, or None if a batch may have become ready
    /// first (a poke, or a lingering batch came due): the caller then
    /// sends what is ready and waits again (the read, dropped, keeps what
    /// it had read in the connection).
    async fn answer_unless_batch_ready(
        &self,
        connection: &mut Connection,
        leader: i32,
        id: i32,
        version: i16,
    ) -> Option<Result<ProduceResponse, ClientError>> {
        let answer = Box::pin(connection.read_answer::<ProduceRequest>(id, version));
        let ready = Box::pin(async {
            let poked = Box::pin(self.next_poke());
            match self.next_due(leader) {
                Some(due) => {
                    let due = Box::pin(glommio::timer::sleep(due));
                    futures::future::select(poked, due).await;
                }
                None => {
                    let _unarmed = UnarmedWait::new(&self.unarmed, Some(leader));
                    poked.await
                }
            }
        });
        match futures::future::select(answer, ready).await {
            futures::future::Either::Left((answer, _)) => Some(answer),
            futures::future::Either::Right(_) => None,
        }
    }

    /// Sends ready batches until `max_in_flight` requests are out or none
    /// is ready (with acks=0, every ready batch: no answer comes), or a
    /// login is due (it waits for the answers out); false if a send
    /// failed (its batches then wait at the back of `outstanding`).
    async fn fill_window(
        &self,
        leader: i32,
        connection: &mut Connection,
        version: i16,
        outstanding: &mut Outstanding,
        unsettled: &mut Unsettled,
    ) -> bool {
        while outstanding.len() < self.max_in_flight() {
            if !outstanding.is_empty() && connection.renewal_due() {
                return true;
            }
            let mut wave = self.take_wave(leader);
            if wave.is_empty() {
                return true;
            }
            let request = match self.produce_request(&mut wave) {
                Ok(request) => request,
                Err(why) => {
                    unsettled
                        .failed
                        .extend(wave.iter().map(|(key, _)| key.clone()));
                    self.fail_all(wave, &why);
                    return true;
                }
            };
            let sent_ids = SentIds::of(&request);
            // With answers out, no login may come first (checked above:
            // a renewal due waits for them to drain).
            let sent = match outstanding.is_empty() {
                true => connection.send_request(&request, version).await,
                false => connection.send_behind(&request, version).await,
            };
            let failed = sent.is_err();
            if self.config.acks == 0 && !failed {
                self.settle(wave, &sent_ids, None, &mut Unsettled::default());
            } else {
                outstanding.push_back((wave, sent_ids, sent));
            }
            if failed {
                return false;
            }
        }
        true
    }

    /// Tells one request's waiters what its answer said (or that it was
    /// lost); returns its batches to retry. A lost answer leaves its
    /// batches' fate unknown: they are retried (an idempotent batch is
    /// then recognised if it was written).
    fn answered(
        &self,
        wave: Vec<Taken>,
        sent_ids: &SentIds,
        answer: Result<kafka_protocol::messages::ProduceResponse, ClientError>,
        unsettled: &mut Unsettled,
    ) -> Vec<Taken> {
        let e = match answer {
            Ok(response) => return self.settle(wave, sent_ids, Some(&response), unsettled),
            Err(e) => e,
        };
        let keys: Vec<_> = wave.iter().map(|(key, _)| key.clone()).collect();
        let again = self.retry_or_fail(wave, &e.to_string());
        for key in keys {
            match again.iter().any(|(k, _)| *k == key) {
                true => unsettled.retried.insert(key),
                false => unsettled.failed.insert(key),
            };
        }
        again
    }

    /// The connection `leader`'s pipeline sends on: the one kept from its
    /// last pipeline, or a new one.
    async fn produce_connection(&self, leader: i32) -> Result<Connection, ClientError> {
        let kept = self.produce_connections.borrow_mut().remove(&leader);
        match kept {
            Some(connection) => Ok(connection),
            None => self.cluster.connect(leader).await,
        }
    }

    /// The newest Produce version to send: a transactional producer of
    /// the classic protocol stays below v12, where the leader would add
    /// partitions itself (as the Java client caps it).
    fn produce_version_max(&self) -> i16 {
        let classic =
            self.config.transactional_id.is_some() && !self.queues.borrow().transaction.version2;
        if classic {
            11
        } else {
            i16::MAX
        }
    }
}
