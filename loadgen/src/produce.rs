//! A producer worker: sends stamped messages at its share of the target
//! rate (or as fast as the in-flight window allows) and records each
//! message's latency from its intended send time to its acknowledgement.

use std::cell::RefCell;
use std::io::Write as _;
use std::rc::Rc;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use bytes::Bytes;
use client::producer::{Producer, ProducerConfig};
use client::records::RecordRef;
use glommio::sync::Semaphore;

use crate::options::Options;
use crate::payload::{self, Stamp};
use crate::report::{record, report_every_second, send_rest, Interval};

/// Messages sent on one clock read at most, sending as fast as possible.
const SENDS_PER_CLOCK_READ: u32 = 16;

/// A message due less than this far ahead is sent now rather than after a
/// timer (timers are not finer); its latency still counts from its
/// intended time.
const EARLY_SEND_SLACK: Duration = Duration::from_micros(50);

/// When a paced producer that finds its next message due at `intended`
/// wakes: then, or at the next `tick` after it if messages are due more
/// often than ticks (`--pacing-tick-us`). A timer per message cost loadgen
/// 0.88 of this machine's two cores at 20,000 msgs/s over four producers,
/// most of it in the runtime's sleeps and wakes, taken from the broker it
/// measured. A message waits for its tick (up to `tick`), and its latency
/// counts that wait: it counts from the intended time.
fn wake_time(begin: Instant, period: Duration, tick: Duration, intended: Instant) -> Instant {
    if period >= tick {
        return intended;
    }
    let tick_ns = tick.as_nanos();
    let ticks = intended
        .saturating_duration_since(begin)
        .as_nanos()
        .div_ceil(tick_ns);
    // In nanoseconds: a tick count as u32 would wrap after 2^32 ticks
    // (60 hours of 50 us ticks) and wake in the past from then on.
    begin + Duration::from_nanos((ticks * tick_ns) as u64)
}

/// What a producer worker did.
#[derive(Debug, Default)]
pub struct Produced {
    /// The worker's index (its stamp's producer field).
    pub producer: u16,
    /// Sequence numbers acknowledged (verify mode only).
    pub acked: Vec<u64>,
    /// Messages sent.
    pub sent: u64,
}

/// The record keys producers cycle through (`--keys`, at most 2^20), made
/// once per thread: a thousand producers copying 100,000 keys each took
/// longer than the warm-up.
///
/// One buffer holds them all and a key handed out is borrowed from it (the
/// producer copies it into the batch). With a buffer per key, cloning and
/// dropping each message's key touched one of 100,000 cold reference
/// counters: 5.8% of loadgen's samples with 4 producers on 1,000
/// partitions, 2.3% as counted slices of one buffer.
#[derive(Clone)]
pub struct Keys {
    all: Bytes,
    /// Where each key ends in `all` (key i starts where key i - 1 ends).
    ends: Rc<[u32]>,
}

impl Keys {
    /// `count` keys, `key-0` on (none: records without keys).
    pub fn new(count: u64) -> Keys {
        let mut all = Vec::new();
        let ends = (0..count.min(1 << 20))
            .map(|k| {
                write!(all, "key-{k}").expect("writing to memory");
                all.len() as u32
            })
            .collect();
        Keys {
            all: Bytes::from(all),
            ends,
        }
    }

    /// The key of the message numbered `sequence` (None without keys).
    fn for_message(&self, sequence: u64) -> Option<&[u8]> {
        if self.ends.is_empty() {
            return None;
        }
        let i = (sequence % self.ends.len() as u64) as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        Some(&self.all[start..self.ends[i] as usize])
    }
}

/// Runs one producer worker on the current glommio executor until its
/// duration or message count is done and everything sent is answered.
/// Reports go to `reports` every second from `begin`. `keys` are the
/// record keys to cycle through, shared by the thread's producers.
pub async fn run(
    options: Options,
    (index, keys): (u16, Keys),
    begin: Instant,
    reports: Sender<Interval>,
    keep_acked: bool,
) -> Result<Produced, String> {
    let cluster = options.cluster(&format!("loadgen-producer-{index}"))?;
    let producer = Producer::new(
        cluster,
        ProducerConfig {
            acks: options.acks,
            idempotence: options.idempotence,
            batch_bytes: options.batch_bytes,
            linger: options.linger,
            compression: options.compression,
            // Unique per process: two runs must not fence each other.
            transactional_id: options
                .transaction
                .map(|_| format!("loadgen-{}-{}-{index}", options.name, std::process::id())),
            transaction_timeout: options.transaction.map_or(Duration::from_secs(60), |p| {
                (p * 2).max(Duration::from_secs(60))
            }),
            transaction_version: options.transaction_version,
            max_in_flight: options.requests_in_flight,
            ..ProducerConfig::default()
        },
    );
    let mut transaction = Transactions::start(&producer, options.transaction).await?;
    let current = Rc::new(RefCell::new(Interval::default()));
    let acked = Rc::new(RefCell::new(Vec::new()));
    let reporter =
        glommio::spawn_local(report_every_second(current.clone(), begin, reports.clone()));
    let size = options.message_bytes.max(payload::HEADER_BYTES);
    let window = Rc::new(Semaphore::new(options.max_in_flight_bytes.max(size as u64)));
    let period = options.rate.map(|rate| {
        let per_producer = (rate as f64 / options.producers as f64).max(1e-3);
        Duration::from_secs_f64(1.0 / per_producer)
    });
    let paced = period.is_some();
    // The wall-clock time of `begin` (payload stamps are wall-clock, so a
    // consumer in another process can read them).
    let now = Instant::now();
    let wall_begin = payload::now_ns() + begin.saturating_duration_since(now).as_nanos() as u64
        - now.saturating_duration_since(begin).as_nanos() as u64;
    let deadline = begin + options.warmup + options.duration;
    if begin > now {
        glommio::timer::sleep(begin - now).await;
    }
    let mut sequence = 0u64;
    let mut payload = payload::padded(size);
    let mut now = Instant::now();
    let mut sends_on_this_read = 0;
    loop {
        // One clock read serves the deadline, the send time and the
        // pacing; the acknowledgement's time comes with the answer (one
        // read per request). Paced, each message reads the clock. As fast
        // as possible, a read serves a few messages in a row, unless the
        // window made one wait: at 100 B, a read per message was a tenth
        // of loadgen's time, and a few messages take microseconds (their
        // latency counts from the read, a little early: never less).
        if period.is_some() || sends_on_this_read >= SENDS_PER_CLOCK_READ {
            now = Instant::now();
            sends_on_this_read = 0;
        }
        sends_on_this_read += 1;
        if options.messages.map_or(now >= deadline, |m| sequence >= m) {
            break;
        }
        transaction.commit_if_due(&producer, now).await?;
        let intended = match period {
            Some(period) => begin + period.mul_f64(sequence as f64),
            None => now,
        };
        if let Some(period) = period.filter(|_| intended > now + EARLY_SEND_SLACK) {
            let wake = wake_time(begin, period, options.pacing_tick, intended);
            glommio::timer::sleep(wake - now).await;
        }
        if !window.try_acquire(size as u64).map_err(|e| e.to_string())? {
            window
                .acquire(size as u64)
                .await
                .map_err(|e| e.to_string())?;
            sends_on_this_read = SENDS_PER_CLOCK_READ; // it waited: read again
        }
        let intended_ns = wall_begin + intended.saturating_duration_since(begin).as_nanos() as u64;
        let stamp = Stamp {
            producer: index,
            sequence,
            intended_ns,
        };
        payload::write_stamp(&mut payload, stamp);
        let record_to_send = RecordRef {
            key: keys.for_message(sequence),
            value: Some(&payload),
            timestamp: (intended_ns / 1_000_000) as i64,
            headers: &[],
        };
        let (current, window, acked) = (current.clone(), window.clone(), acked.clone());
        producer
            .send_with(&options.topic, record_to_send, move |result| {
                window.signal(size as u64);
                let mut interval = current.borrow_mut();
                match result {
                    Ok(delivered) => {
                        let latency = delivered
                            .acknowledged_at
                            .saturating_duration_since(intended);
                        interval.produced += 1;
                        interval.produced_bytes += size as u64;
                        record(&mut interval.produce_latency, latency.as_micros() as u64);
                        if paced {
                            // Two more records a message: paced runs only,
                            // where the rate leaves room for them. A message
                            // sent a little early (EARLY_SEND_SLACK) may have
                            // its request begun before its intended time: the
                            // split is then at the intended time, so the two
                            // parts add up to the whole.
                            let split = delivered.request_started_at.max(intended);
                            let queued = split - intended;
                            let request =
                                delivered.acknowledged_at.saturating_duration_since(split);
                            record(&mut interval.produce_queued, queued.as_micros() as u64);
                            record(&mut interval.produce_request, request.as_micros() as u64);
                        }
                        if keep_acked {
                            acked.borrow_mut().push(sequence);
                        }
                    }
                    Err(_) => interval.errors += 1,
                }
            })
            .await
            .map_err(|e| format!("producer {index}: {e}"))?;
        sequence += 1;
    }
    producer.flush().await;
    transaction.finish(&producer).await?;
    reporter.cancel().await;
    send_rest(&current, &reports);
    let acked = std::mem::take(&mut *acked.borrow_mut());
    Ok(Produced {
        producer: index,
        acked,
        sent: sequence,
    })
}

/// A transactional producer's rhythm: a transaction open all the time,
/// committed every `period` (the commit flushes what it holds first, so
/// its cost shows in the latencies).
struct Transactions {
    period: Option<Duration>,
    began: Instant,
}

impl Transactions {
    /// Initialises and begins the first transaction (if `period`).
    async fn start(producer: &Producer, period: Option<Duration>) -> Result<Self, String> {
        if period.is_some() {
            producer
                .init_transactions()
                .await
                .map_err(|e| format!("init_transactions: {e}"))?;
            producer.begin_transaction().map_err(|e| e.to_string())?;
        }
        Ok(Transactions {
            period,
            began: Instant::now(),
        })
    }

    /// Commits and begins the next one once the period is over.
    async fn commit_if_due(&mut self, producer: &Producer, now: Instant) -> Result<(), String> {
        let Some(period) = self.period else {
            return Ok(());
        };
        if now < self.began + period {
            return Ok(());
        }
        producer
            .commit_transaction()
            .await
            .map_err(|e| format!("commit_transaction: {e}"))?;
        producer.begin_transaction().map_err(|e| e.to_string())?;
        self.began = Instant::now();
        Ok(())
    }

    /// Commits the last one.
    async fn finish(&mut self, producer: &Producer) -> Result<(), String> {
        if self.period.is_some() {
            producer
                .commit_transaction()
                .await
                .map_err(|e| format!("commit_transaction: {e}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_cycle_through_the_keys_in_order() {
        let keys = Keys::new(3);
        let taken: Vec<_> = (0..7).map(|s| keys.for_message(s).unwrap()).collect();
        let expected = [
            "key-0", "key-1", "key-2", "key-0", "key-1", "key-2", "key-0",
        ];
        assert_eq!(taken, expected.map(str::as_bytes));
        let many = Keys::new(12);
        assert_eq!(many.for_message(10), Some(&b"key-10"[..]));
        assert_eq!(many.for_message(12), Some(&b"key-0"[..]));
    }

    #[test]
    fn without_keys_messages_have_none() {
        assert_eq!(Keys::new(0).for_message(5), None);
    }

    #[test]
    fn messages_due_more_often_than_the_tick_wake_on_the_tick_after_them() {
        let begin = Instant::now();
        let (ms, us) = (Duration::from_millis, Duration::from_micros);
        // 5,000 a second: every 200 us, five to a tick, none early.
        let (period, tick) = (us(200), ms(1));
        let cases = [(200, 1000), (800, 1000), (1000, 1000), (1200, 2000)];
        for (due, wakes) in cases {
            let woken = wake_time(begin, period, tick, begin + us(due));
            assert_eq!(woken, begin + us(wakes), "due at {due} us");
        }
        // A 50 us tick: the same messages wake on their own times (due
        // less often than the tick), a faster producer's on the next 50 us.
        let fine = us(50);
        assert_eq!(
            wake_time(begin, period, fine, begin + us(1200)),
            begin + us(1200)
        );
        assert_eq!(
            wake_time(begin, us(3), fine, begin + us(1201)),
            begin + us(1250)
        );
        // Past 2^32 ticks (60 hours of 50 us), still on the next tick.
        let late = begin + us(50) * u32::MAX + us(75);
        let woken = wake_time(begin, us(3), fine, late);
        assert_eq!(woken, begin + us(50) * u32::MAX + us(100));
        // 500 a second: each on its own time.
        let woken = wake_time(begin, ms(2), tick, begin + us(4300));
        assert_eq!(woken, begin + us(4300));
    }
}
