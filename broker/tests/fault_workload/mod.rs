//! The load of replication_faults.rs: the test's own idempotent
//! producers (pipelined Produce requests, resent in order until
//! acknowledged), librdkafka's idempotent producer as a user sets it up,
//! and a consumer reading every partition from its leader.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use client::connection::Connection;
use client::records::{decode_records, encode_batch_as, ProducerRecord, ProducerSequence};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{InitProducerIdRequest, ProduceRequest, ProducerId};
use kafka_protocol::records::Compression;

use super::{
    connect, connection_to, fetch_request, metadata, parse_value, topic_name, value, with_timeout,
    Observed, BATCH_RECORDS, PARTITIONS, TOPIC,
};
use crate::support;

/// Batches a producer keeps in flight to one partition (the Java
/// client's max.in.flight.requests.per.connection with idempotence).
const IN_FLIGHT_MAX: usize = 5;

/// One batch on its way: its partition sequence and its values' numbers.
#[derive(Clone)]
struct InFlight {
    first_sequence: i32,
    seqs: std::ops::Range<u64>,
}

/// This producer's id and epoch (InitProducerId), asked of any broker
/// until one answers; None for acks other than all (plain batches).
async fn producer_identity(
    addresses: &[SocketAddr],
    acks: i16,
    producer: usize,
) -> Option<(i64, i16)> {
    if acks != -1 {
        return None;
    }
    for attempt in 0.. {
        let address = addresses[(producer + attempt) % addresses.len()];
        if let Some(mut connection) = connect(address).await {
            let request = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1);
            if let Some(Ok(answer)) = with_timeout(connection.call(&request, 4)).await {
                if answer.error_code == 0 {
                    return Some((answer.producer_id.0, answer.producer_epoch));
                }
            }
        }
        glommio::timer::sleep(Duration::from_millis(100)).await;
    }
    unreachable!()
}

/// A Produce request of one batch, idempotent when `identity` is given.
fn produce_request(
    acks: i16,
    partition: i32,
    producer: usize,
    identity: Option<(i64, i16)>,
    batch: &InFlight,
) -> ProduceRequest {
    let records: Vec<ProducerRecord> = batch
        .seqs
        .clone()
        .map(|s| ProducerRecord {
            key: None,
            value: Some(value(producer, s)),
            timestamp: 0,
            headers: Vec::new(),
        })
        .collect();
    let sequence = identity.map(|(producer_id, epoch)| ProducerSequence {
        producer_id,
        epoch,
        first_sequence: batch.first_sequence,
    });
    let encoded = encode_batch_as(&records, Compression::None, sequence).unwrap();
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(3_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name())
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(encoded))])])
}

/// Sends batches round-robin over the partitions, up to IN_FLIGHT_MAX at
/// a time to one partition's leader (pipelined on one connection), as an
/// idempotent producer with acks=all: every batch not acknowledged is
/// resent, in order and with its sequence, after a metadata refresh, until
/// it is. Stops once `stop` is set and its window is settled (at most
/// 20 s more).
pub fn produce(
    producer: usize,
    acks: i16,
    addresses: Vec<SocketAddr>,
    observed: Arc<Mutex<Observed>>,
    stop: Arc<AtomicBool>,
) {
    support::on_glommio(async move {
        let identity = producer_identity(&addresses, acks, producer).await;
        let mut seq = 0u64;
        let mut next_sequence = vec![0i32; PARTITIONS as usize];
        let mut leaders = None;
        let mut connections: HashMap<SocketAddr, Connection> = HashMap::new();
        let mut turn = 0;
        while !stop.load(Ordering::Relaxed) {
            let partition = (turn % PARTITIONS as usize) as i32;
            turn += 1;
            let mut window: Vec<InFlight> = (0..IN_FLIGHT_MAX)
                .map(|_| {
                    let batch = InFlight {
                        first_sequence: next_sequence[partition as usize],
                        seqs: seq..seq + BATCH_RECORDS,
                    };
                    seq += BATCH_RECORDS;
                    next_sequence[partition as usize] += BATCH_RECORDS as i32;
                    batch
                })
                .collect();
            let mut stopping_since = None;
            while !window.is_empty() {
                if stop.load(Ordering::Relaxed) {
                    let since = *stopping_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > Duration::from_secs(20) {
                        break; // not acknowledged: neither counted nor expected
                    }
                }
                if leaders.is_none() {
                    leaders = metadata(&addresses, producer + turn).await;
                }
                let leader = leaders.as_ref().and_then(|l| {
                    l[partition as usize]
                        .1
                        .map(|a| (l[partition as usize].0, a))
                });
                let Some((leader_id, address)) = leader else {
                    leaders = None;
                    glommio::timer::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let Some(connection) = connection_to(&mut connections, address).await else {
                    leaders = None;
                    glommio::timer::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let requests: Vec<ProduceRequest> = window
                    .iter()
                    .map(|b| produce_request(acks, partition, producer, identity, b))
                    .collect();
                let answers = with_timeout(connection.call_many(&requests, 9)).await;
                let answers = answers.unwrap_or_default();
                // The acknowledged prefix leaves the window; the rest is
                // resent (a later batch answered after an earlier failure
                // is a duplicate the broker recognises).
                let mut settled = 0;
                for (batch, answer) in window.iter().zip(&answers) {
                    let Ok(response) = answer else { break };
                    let p = &response.responses[0].partition_responses[0];
                    if p.error_code != 0 {
                        break;
                    }
                    let mut seen = observed.lock().unwrap();
                    for (i, s) in batch.seqs.clone().enumerate() {
                        seen.acked
                            .insert((producer, s), (partition, p.base_offset + i as i64));
                        let by = (leader_id, Instant::now(), batch.first_sequence);
                        seen.acked_by.insert((producer, s), by);
                    }
                    seen.ack_times.push((partition, leader_id, Instant::now()));
                    settled += 1;
                }
                window.drain(..settled);
                if window.is_empty() {
                    break;
                }
                if answers.iter().any(|a| a.is_err()) || answers.len() < requests.len() {
                    connections.remove(&address);
                }
                // Refused (leadership moved, ISR too small, timed out) or
                // the connection lost: look up the leader again and resend.
                leaders = None;
                glommio::timer::sleep(Duration::from_millis(50)).await;
            }
        }
    });
}

/// Messages librdkafka's producer may have outstanding (sent, not yet
/// reported), and how many it is handed every 10 ms: about 3,000 a
/// second, a log the drain and the replica comparison read in seconds.
const LIBRDKAFKA_OUTSTANDING_MAX: i32 = 2_000;
const LIBRDKAFKA_PER_TICK: u64 = 30;

/// librdkafka's idempotent producer as a user sets it up for durability
/// (acks=all, 5 requests in flight, retries unbounded, 120 s message
/// timeout, 5 s request timeout, 2 ms linger): it, not this test, decides
/// how to retry, when to bump its epoch and resend. Values are numbered
/// as the other producers', each sent to partition `seq % PARTITIONS`;
/// delivery reports record what was acknowledged, and errors.
pub fn produce_with_librdkafka(
    producer: usize,
    bootstrap: String,
    observed: Arc<Mutex<Observed>>,
    stop: Arc<AtomicBool>,
) {
    use rdkafka::config::ClientConfig;
    use rdkafka::error::{KafkaError, RDKafkaErrorCode};
    use rdkafka::producer::{
        BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer,
    };
    use rdkafka::{ClientContext, Message};

    struct Reports(Arc<Mutex<Observed>>);
    impl ClientContext for Reports {}
    impl ProducerContext for Reports {
        type DeliveryOpaque = ();
        fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
            let mut seen = self.0.lock().unwrap();
            match result {
                Ok(message) => {
                    if let Some(key) = message.payload().and_then(parse_value) {
                        seen.acked
                            .insert(key, (message.partition(), message.offset()));
                    }
                }
                // Purged at the end: not delivered by then, so neither
                // counted nor expected (the flush's outcome is reported).
                Err((
                    KafkaError::MessageProduction(
                        RDKafkaErrorCode::PurgeQueue | RDKafkaErrorCode::PurgeInflight,
                    ),
                    _,
                )) => {}
                Err((error, message)) => {
                    let failed = (Instant::now(), message.partition(), error.to_string());
                    seen.delivery_errors.push(failed);
                }
            }
        }
    }

    let client: ThreadedProducer<Reports> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("max.in.flight.requests.per.connection", "5")
        .set("linger.ms", "2")
        .set("message.timeout.ms", "120000")
        .set("request.timeout.ms", "5000")
        .create_with_context(Reports(observed))
        .expect("librdkafka producer");
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if client.in_flight_count() < LIBRDKAFKA_OUTSTANDING_MAX {
            for _ in 0..LIBRDKAFKA_PER_TICK {
                let payload = value(producer, seq);
                let record = BaseRecord::<(), _>::to(TOPIC)
                    .payload(&payload[..])
                    .partition((seq % PARTITIONS as u64) as i32);
                if client.send(record).is_err() {
                    break; // its queue is full: try again next tick
                }
                seq += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // What is not delivered by then is neither counted nor expected.
    if let Err(e) = client.flush(Duration::from_secs(30)) {
        println!(
            "librdkafka: {} messages undelivered at the end ({e})",
            client.in_flight_count()
        );
    }
}

/// Reads every partition from its leader, from 0, until `stop`.
pub fn consume(addresses: Vec<SocketAddr>, observed: Arc<Mutex<Observed>>, stop: Arc<AtomicBool>) {
    support::on_glommio(async move {
        let mut positions = vec![0i64; PARTITIONS as usize];
        let mut connections: HashMap<SocketAddr, Connection> = HashMap::new();
        let mut turn = 0;
        while !stop.load(Ordering::Relaxed) {
            turn += 1;
            let Some(leaders) = metadata(&addresses, turn).await else {
                glommio::timer::sleep(Duration::from_millis(50)).await;
                continue;
            };
            for partition in 0..PARTITIONS {
                let Some(address) = leaders[partition as usize].1 else {
                    continue;
                };
                let request =
                    fetch_request(partition, positions[partition as usize], 100, 256 << 10);
                let Some(connection) = connection_to(&mut connections, address).await else {
                    continue;
                };
                let Some(Ok(response)) = with_timeout(connection.call(&request, 12)).await else {
                    connections.remove(&address);
                    continue;
                };
                let data = &response.responses[0].partitions[0];
                if data.error_code != 0 {
                    continue;
                }
                let records = data.records.clone().unwrap_or_default();
                let from = positions[partition as usize];
                let decoded = decode_records(partition, &records, from).unwrap();
                let mut seen = observed.lock().unwrap();
                let mut previous = from - 1;
                for record in decoded.records {
                    if record.offset <= previous {
                        seen.nonmonotonic += 1;
                    }
                    previous = record.offset;
                    if let Some(value) = record.value {
                        seen.consumed.insert((partition, record.offset), value);
                    }
                }
                if let Some(next) = decoded.next_offset {
                    positions[partition as usize] = next;
                }
            }
        }
    });
}
