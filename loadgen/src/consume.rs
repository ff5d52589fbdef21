//! A consumer worker: reads its share of the partitions, measures each
//! stamped message's end-to-end latency (intended send time to now) and,
//! in verify mode, tallies what it saw.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::consumer::{list_offsets, Consumer, ConsumerConfig, StartAt};

use crate::options::{Mode, Options};
use crate::payload;
use crate::report::{record, report_every_second, send_rest, Interval};
use crate::verify::Tally;

/// How long consumers keep reading after the producers finished, at most.
const DRAIN_MAX: Duration = Duration::from_secs(30);

/// Where a consumer starts.
#[derive(Debug, Clone)]
pub enum From {
    /// Earliest or latest of every partition.
    Each(StartAt),
    /// These offsets (e2e and verify: the ends before producers began).
    Offsets(BTreeMap<i32, i64>),
}

/// Runs one consumer worker over `partitions` from `start` until the run
/// ends: in consume mode at the deadline, or once it has read
/// `--messages` (a topic of known size read whole, however fast); otherwise once `producers_done`
/// is set and it has read up to the end offsets it then sees.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    options: Options,
    index: usize,
    partitions: Vec<i32>,
    start: From,
    begin: Instant,
    reports: Sender<Interval>,
    producers_done: Arc<AtomicBool>,
    tally: bool,
) -> Result<Tally, String> {
    let cluster = options.cluster(&format!("loadgen-consumer-{index}"))?;
    let config = ConsumerConfig {
        max_wait: Duration::from_millis(100),
        isolation_level: i8::from(options.read_committed),
        ..ConsumerConfig::default()
    };
    let consumer = match start {
        From::Each(at) => {
            Consumer::assign(cluster.clone(), &options.topic, &partitions, at, config).await
        }
        From::Offsets(all) => {
            let mine = all
                .into_iter()
                .filter(|(p, _)| partitions.contains(p))
                .collect();
            Consumer::assign_at(cluster.clone(), &options.topic, mine, config).await
        }
    };
    let mut consumer = consumer.map_err(|e| format!("consumer {index}: {e}"))?;
    let current = Rc::new(RefCell::new(Interval::default()));
    let reporter =
        glommio::spawn_local(report_every_second(current.clone(), begin, reports.clone()));
    let mut seen = Tally::default();
    let deadline = begin + options.warmup + options.duration;
    // Connected; reading starts with the run's clock, as producing does
    // (a count read before it would be measured over too little time).
    let now = Instant::now();
    if begin > now {
        glommio::timer::sleep(begin - now).await;
    }
    let mut drain: Option<(Instant, BTreeMap<i32, i64>)> = None;
    let mut consumed = 0u64;
    loop {
        if options.mode == Mode::Consume
            && options
                .messages
                .map_or(Instant::now() >= deadline, |m| consumed >= m)
        {
            break;
        }
        if options.mode != Mode::Consume
            && drain.is_none()
            && producers_done.load(Ordering::Acquire)
        {
            let ends = list_offsets(&cluster, &options.topic, &partitions, StartAt::Latest)
                .await
                .map_err(|e| format!("consumer {index}: {e}"))?;
            drain = Some((Instant::now(), ends));
        }
        if let Some((since, ends)) = &drain {
            let caught_up = ends
                .iter()
                .all(|(p, end)| consumer.positions().get(p).is_some_and(|at| at >= end));
            if caught_up || since.elapsed() > DRAIN_MAX {
                break;
            }
        }
        let records = consumer
            .poll()
            .await
            .map_err(|e| format!("consumer {index}: {e}"))?;
        let now_ns = payload::now_ns();
        let mut interval = current.borrow_mut();
        consumed += records.len() as u64;
        for r in &records {
            let value = r.value.as_deref().unwrap_or_default();
            interval.consumed += 1;
            interval.consumed_bytes += value.len() as u64;
            if let Some(stamp) = payload::decode(value) {
                let micros = now_ns.saturating_sub(stamp.intended_ns) / 1000;
                record(&mut interval.e2e_latency, micros);
                if tally {
                    seen.saw(r.partition, stamp);
                }
            }
        }
    }
    reporter.cancel().await;
    send_rest(&current, &reports);
    Ok(seen)
}
