//! SIGKILL during produce: the broker is killed at a random moment while a
//! producer (acks=all) is writing; after a restart every acknowledged
//! message is there, at the offset it was acknowledged with, and each
//! partition's offsets are dense. 10 rounds on one data directory;
//! `SEED=n` replays the kill times. (Acknowledging acks=all before the
//! flush is caught here: checked by mutation.) Every third round's
//! requests are large, their records stored in the memory they arrived in.
//! The small rounds' flushes go to the shards' journals, which every
//! restart replays into the segments (both checked to have happened).

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use client::cluster::Cluster;
use client::consumer::{list_offsets, Consumer, ConsumerConfig, StartAt};
use client::producer::{Producer, ProducerConfig};
use rand::{Rng, SeedableRng};
use support::cluster::gauge;
use support::{on_glommio, seed, start_broker_with};

const PARTITIONS: i32 = 4;
const ROUNDS: usize = 10;

/// Every third round's messages are padded and share one key, in batches
/// of up to 1 MiB: its requests exceed 64 KiB and are stored in the memory
/// they were read into (broker/src/kafka/record_sets.rs).
fn large_round(round: usize) -> bool {
    round % 3 == 2
}
const LARGE_VALUE_PAD: usize = 3000;

/// (partition, offset) -> value of every acknowledged message.
type Acked = Arc<Mutex<BTreeMap<(i32, i64), String>>>;

/// Produces until the broker goes away or `stop` is set.
fn produce_until_failure(
    address: std::net::SocketAddr,
    round: usize,
    acked: Acked,
    stop: Arc<AtomicBool>,
) {
    on_glommio(async move {
        let cluster = Cluster::new(address, "crash-producer");
        let mut config = ProducerConfig {
            retries: 0,
            linger: Duration::from_millis(1),
            ..ProducerConfig::default()
        };
        if large_round(round) {
            // One batch per request: a batch small beside its request
            // would be copied out of it.
            config.batch_bytes = 1 << 20;
        }
        let producer = Producer::new(cluster, config);
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            // A window of 64 messages in flight at a time.
            let mut window = Vec::new();
            for _ in 0..64 {
                let mut value = format!("round {round} message {i}");
                i += 1;
                let mut key = Bytes::from(format!("key-{}", i % 17));
                if large_round(round) {
                    value.push_str(&"x".repeat(LARGE_VALUE_PAD));
                    key = Bytes::from_static(b"large");
                }
                match producer
                    .send("crash", Some(key), Some(Bytes::from(value.clone())))
                    .await
                {
                    Ok(sent) => window.push((value, sent)),
                    Err(_) => return,
                }
            }
            let mut failed = false;
            for (value, sent) in window {
                match sent.await {
                    Ok(delivered) => {
                        acked
                            .lock()
                            .unwrap()
                            .insert((delivered.partition, delivered.offset), value);
                    }
                    Err(_) => failed = true,
                }
            }
            if failed {
                return;
            }
        }
    });
}

/// Reads every partition from the start to its end.
fn read_everything(address: std::net::SocketAddr) -> BTreeMap<(i32, i64), String> {
    on_glommio(async move {
        let cluster = Cluster::new(address, "crash-reader");
        cluster.refresh(Some(&["crash"]), false).await.unwrap();
        let partitions: Vec<i32> = (0..PARTITIONS).collect();
        let ends = list_offsets(&cluster, "crash", &partitions, StartAt::Latest)
            .await
            .unwrap();
        let config = ConsumerConfig {
            max_wait: Duration::from_millis(50),
            ..ConsumerConfig::default()
        };
        let mut consumer =
            Consumer::assign(cluster, "crash", &partitions, StartAt::Earliest, config)
                .await
                .unwrap();
        let mut out = BTreeMap::new();
        for _ in 0..10_000 {
            if consumer.positions().iter().all(|(p, o)| *o >= ends[p]) {
                break;
            }
            for record in consumer.poll().await.unwrap() {
                let value = String::from_utf8(record.value.unwrap().to_vec()).unwrap();
                out.insert((record.partition, record.offset), value);
            }
        }
        out
    })
}

/// The entries the broker's start wrote back from its journals (its log's
/// "journals replayed" line).
fn replayed_entries(broker: &support::Broker) -> u64 {
    let log = broker.log.lock().unwrap();
    let line = log.iter().find(|l| l.contains("journals replayed"));
    let entries = line.and_then(|l| l.split("entries=").nth(1));
    let digits = entries.map(|e| {
        e.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
    });
    digits.and_then(|d| d.parse().ok()).unwrap_or(0)
}

/// Odd rounds run with flushes delayed by 20 ms, so a kill often lands
/// between an append and its write: an acknowledgement sent before the
/// write would then be caught losing data.
fn restart(dir: &std::path::Path, round: usize) -> support::Broker {
    let delay = if round % 2 == 1 { "20" } else { "0" };
    start_broker_with(dir, &[("BROKER_TEST_FLUSH_DELAY_MS", delay)])
}

#[test]
fn sigkill_during_produce_loses_no_acknowledged_message() {
    let seed = seed();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let acked: Acked = Arc::default();
    let broker = restart(dir.path(), 0);
    let address = broker.address;
    on_glommio(async move {
        Cluster::new(address, "crash-admin")
            .create_topic("crash", PARTITIONS, 1, &[])
            .await
            .unwrap();
    });
    let mut broker = Some(broker);
    let mut in_place = 0.0;
    let (mut journaled, mut replays) = (0.0, 0);
    for round in 0..ROUNDS {
        let running = broker.take().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let producer = {
            let (acked, stop, address) = (acked.clone(), stop.clone(), running.address);
            std::thread::spawn(move || produce_until_failure(address, round, acked, stop))
        };
        let before = acked.lock().unwrap().len();
        std::thread::sleep(Duration::from_millis(rng.gen_range(100..600)));
        // The kill lands while the producer is producing: after its first
        // acknowledgement of the round (a loaded machine can take longer
        // than the random pause to restart, connect and be answered).
        let waiting = std::time::Instant::now();
        while acked.lock().unwrap().len() == before && waiting.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        if large_round(round) {
            in_place += gauge(running.http, "produce_record_bytes_in_place_total");
        }
        journaled += gauge(running.http, "log_journaled_flushes_total");
        running.kill9();
        stop.store(true, Ordering::Relaxed);
        producer.join().unwrap();
        let restarted = restart(dir.path(), round + 1);
        if replayed_entries(&restarted) > 0 {
            replays += 1;
        }
        let stored = read_everything(restarted.address);
        let acked = acked.lock().unwrap();
        assert!(
            acked.len() > before,
            "round {round}: the producer made progress (seed {seed})"
        );
        for ((partition, offset), value) in acked.iter() {
            assert_eq!(
                stored.get(&(*partition, *offset)),
                Some(value),
                "round {round}: acknowledged {partition}/{offset} (seed {seed})"
            );
        }
        for partition in 0..PARTITIONS {
            let offsets: Vec<i64> = stored
                .keys()
                .filter(|(p, _)| *p == partition)
                .map(|(_, o)| *o)
                .collect();
            let dense: Vec<i64> = (0..offsets.len() as i64).collect();
            assert_eq!(
                offsets, dense,
                "round {round}: partition {partition} dense (seed {seed})"
            );
        }
        println!(
            "round {round}: {} acknowledged, {} stored",
            acked.len(),
            stored.len()
        );
        broker = Some(restarted);
    }
    println!("large rounds: {in_place} record bytes kept in place");
    println!("{journaled} flushes made durable by the journals; {replays} restarts replayed them");
    assert!(
        journaled > 0.0,
        "small flushes went to the shards' journals"
    );
    assert!(
        replays > 0,
        "the journals' entries were written back at restarts"
    );
    assert!(
        in_place > 0.0,
        "the large rounds' records were kept in the memory they arrived in"
    );
}
