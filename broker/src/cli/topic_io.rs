//! `broker topic produce` and `broker topic consume`: records from and to
//! a shell, as `rpk topic produce/consume` and kcat give them. Produce
//! reads standard input, a record per line (keys and headers from flags or
//! the line), and prints where each landed once acknowledged (acks=all,
//! idempotent: the project's producer's defaults). Consume prints records
//! from a start (the beginning, the end, an offset or a time) until the
//! partitions' ends as of its start, a count, or, with --follow, for as
//! long as it runs. Both print as they go, in table or JSON lines.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::io::{BufRead, Write};
use std::pin::Pin;
use std::rc::Rc;

use bytes::Bytes;
use clap::Args;
use serde::Serialize;

use client::cluster::Cluster;
use client::connection::ClientError;
use client::consumer::{list_offsets, Consumer, ConsumerConfig, StartAt};
use client::producer::{Delivered, Producer, ProducerConfig};
use client::records::{ConsumedRecord, ProducerRecord};
use futures::future::{select, Either};
use futures::{SinkExt, StreamExt};

use super::output::{json_line, Format};

/// `broker topic produce`.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
#[command(after_help = "Examples:\n  \
    echo 'hello' | broker topic produce orders\n  \
    printf 'k1:v1\\nk2:v2\\n' | broker topic produce orders --key-separator : --header source=shell")]
pub struct ProduceArgs {
    /// The topic.
    pub topic: String,
    /// Every record's key (else none, or each line's with --key-separator).
    #[arg(long, conflicts_with = "key_separator")]
    pub key: Option<String>,
    /// Each line is KEY, SEP, VALUE, split at the first SEP (kcat's -K);
    /// a line without SEP is a value without a key.
    #[arg(long, value_name = "SEP")]
    pub key_separator: Option<String>,
    /// A header on every record (repeatable).
    #[arg(long = "header", value_name = "KEY=VALUE", value_parser = key_value)]
    pub headers: Vec<(String, String)>,
}

/// `KEY=VALUE`, as `--config` and `--header` take it.
pub(super) fn key_value(pair: &str) -> Result<(String, String), String> {
    let (key, value) = pair
        .split_once('=')
        .ok_or(format!("{pair}: expected KEY=VALUE"))?;
    Ok((key.to_string(), value.to_string()))
}

/// Where `topic consume` starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    /// Each partition's first record.
    Start,
    /// Each partition's end: only records produced from now on.
    End,
    /// This offset of each partition.
    Offset(i64),
}

/// `start`, `end` or an offset.
fn parse_from(text: &str) -> Result<From, String> {
    match text {
        "start" | "beginning" | "earliest" => Ok(From::Start),
        "end" | "latest" => Ok(From::End),
        offset => match offset.parse::<i64>() {
            Ok(offset) if offset >= 0 => Ok(From::Offset(offset)),
            _ => Err(format!("{text}: expected start, end or an offset")),
        },
    }
}

/// `broker topic consume`.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
#[command(after_help = "Examples:\n  \
    broker topic consume orders --num 10\n  \
    broker topic consume orders --partition 0 --offset 1000 --format json\n  \
    broker topic consume orders --from-time 2026-12-01T08:00:00Z --follow")]
pub struct ConsumeArgs {
    /// The topic.
    pub topic: String,
    /// A partition to read (repeatable; default every partition).
    #[arg(long = "partition", value_name = "N")]
    pub partitions: Vec<i32>,
    /// Where to start: start, end, or an offset (of each partition read).
    #[arg(long, value_name = "start|end|N", default_value = "start", value_parser = parse_from)]
    pub offset: From,
    /// Start at the first record at or after this time (no zone: UTC).
    #[arg(
        long,
        value_name = "YYYY-MM-DDTHH:MM:SS[.fff][Z|+HH:MM]",
        value_parser = super::group::parse_datetime,
        conflicts_with = "offset"
    )]
    pub from_time: Option<i64>,
    /// Stop after this many records.
    #[arg(long, value_name = "N")]
    pub num: Option<u64>,
    /// Keep waiting for new records at the end (until --num, or stopped)
    /// instead of stopping at the partitions' ends as of the start.
    #[arg(long)]
    pub follow: bool,
}

/// Where a produced record landed, as `--format json` prints it.
#[derive(Serialize)]
struct Landed<'a> {
    topic: &'a str,
    partition: i32,
    offset: i64,
}

/// Reads standard input a line at a time, produces each line, and prints
/// where each record landed, in input order, as the acknowledgements come
/// (typed lines and `tail -f` work as well as a file).
pub async fn produce(
    cluster: Rc<Cluster>,
    args: ProduceArgs,
    format: Format,
) -> Result<String, ClientError> {
    let producer = Producer::new(cluster.clone(), ProducerConfig::default());
    let headers: Vec<(String, Option<Bytes>)> = (args.headers.iter())
        .map(|(k, v)| (k.clone(), Some(Bytes::from(v.clone()))))
        .collect();
    let mut lines = stdin_lines();
    let mut out = std::io::stdout();
    let mut pending: VecDeque<Delivery> = VecDeque::new();
    let mut produced = 0u64;
    loop {
        // A line, or an acknowledgement of the oldest record, whichever
        // comes first (the producer's sender runs while this waits).
        let next = match pending.front_mut() {
            Some(oldest) => match select(lines.next(), oldest).await {
                Either::Left((line, _)) => Next::Line(line),
                Either::Right((delivered, _)) => Next::Delivered(delivered),
            },
            None => Next::Line(lines.next().await),
        };
        match next {
            Next::Line(Some(line)) => {
                let line = line.map_err(ClientError::Io)?;
                let (key, value) = split_line(&line, &args);
                let record = ProducerRecord {
                    key: key.map(|k| Bytes::from(k.to_string())),
                    value: Some(Bytes::from(value.to_string())),
                    timestamp: now_ms(),
                    headers: headers.clone(),
                };
                let delivery = producer.send_record(&args.topic, record).await?;
                pending.push_back(Box::pin(delivery));
            }
            Next::Line(None) => break,
            Next::Delivered(delivered) => {
                pending.pop_front();
                let delivered = delivered?;
                let (partition, offset) = (delivered.partition, delivered.offset);
                print_landed(&mut out, format, &args.topic, partition, offset);
                produced += 1;
            }
        }
    }
    while let Some(delivery) = pending.pop_front() {
        let delivered = delivery.await?;
        let (partition, offset) = (delivered.partition, delivered.offset);
        print_landed(&mut out, format, &args.topic, partition, offset);
        produced += 1;
    }
    if format == Format::Table {
        let _ = writeln!(out, "produced {produced} records to {}", args.topic);
    }
    Ok(String::new())
}

/// A record's acknowledgement, awaited in input order.
type Delivery = Pin<Box<dyn Future<Output = Result<Delivered, ClientError>>>>;

/// What `produce` waited for.
enum Next {
    Line(Option<std::io::Result<String>>),
    Delivered(Result<Delivered, ClientError>),
}

/// Standard input's lines, read on a thread of their own (a blocking read
/// on the executor would stall the producer's sender), at most 1,024
/// ahead of the producer.
fn stdin_lines() -> futures::channel::mpsc::Receiver<std::io::Result<String>> {
    let (mut sender, receiver) = futures::channel::mpsc::channel(1024);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            if futures::executor::block_on(sender.send(line)).is_err() {
                return;
            }
        }
    });
    receiver
}

/// A line's key and value under the produce flags.
fn split_line<'a>(line: &'a str, args: &'a ProduceArgs) -> (Option<&'a str>, &'a str) {
    match (&args.key, &args.key_separator) {
        (Some(key), _) => (Some(key.as_str()), line),
        (None, Some(separator)) => match line.split_once(separator.as_str()) {
            Some((key, value)) => (Some(key), value),
            None => (None, line),
        },
        (None, None) => (None, line),
    }
}

fn print_landed(out: &mut impl Write, format: Format, topic: &str, partition: i32, offset: i64) {
    let _ = match format {
        Format::Table => writeln!(out, "produced to partition {partition} at offset {offset}"),
        Format::Json => out.write_all(
            json_line(&Landed {
                topic,
                partition,
                offset,
            })
            .as_bytes(),
        ),
    };
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A consumed record, as `--format json` prints it (keys, values and
/// header values as UTF-8 text, invalid bytes replaced; null when absent).
#[derive(Serialize)]
struct Printed<'a> {
    topic: &'a str,
    partition: i32,
    offset: i64,
    timestamp: i64,
    key: Option<String>,
    value: Option<String>,
    headers: Vec<Header>,
}

#[derive(Serialize)]
struct Header {
    key: String,
    value: Option<String>,
}

fn text(bytes: &Option<Bytes>) -> Option<String> {
    bytes
        .as_ref()
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

/// Prints records of the topic from the start asked for, until the
/// partitions' ends as of the start (or --num, or never with --follow).
pub async fn consume(
    cluster: Rc<Cluster>,
    args: ConsumeArgs,
    format: Format,
) -> Result<String, ClientError> {
    let topic = args.topic.as_str();
    let count = cluster.topic_info(topic, false).await?.leaders.len() as i32;
    let partitions: Vec<i32> = match args.partitions.is_empty() {
        true => (0..count).collect(),
        false => args.partitions.clone(),
    };
    if partitions.iter().any(|p| !(0..count).contains(p)) {
        let code = kafka_protocol::ResponseError::UnknownTopicOrPartition.code();
        return Err(ClientError::Refused(
            code,
            format!("it has {count} partitions"),
        ));
    }
    let start = match (args.from_time, args.offset) {
        (Some(time), _) => StartAt::Timestamp(time),
        (None, From::Start) => StartAt::Earliest,
        (None, From::End) => StartAt::Latest,
        (None, From::Offset(offset)) => StartAt::Offset(offset),
    };
    let ends = list_offsets(&cluster, topic, &partitions, StartAt::Latest).await?;
    let config = ConsumerConfig::default();
    let mut consumer = Consumer::assign(cluster, topic, &partitions, start, config).await?;
    let mut out = std::io::stdout();
    if format == Format::Table {
        let _ = writeln!(
            out,
            "{:>9} {:>12} {:<20} VALUE",
            "PARTITION", "OFFSET", "KEY"
        );
    }
    let mut printed = 0u64;
    let done = |printed: u64, positions: &BTreeMap<i32, i64>| {
        args.num.is_some_and(|n| printed >= n) || (!args.follow && reached(positions, &ends))
    };
    while !done(printed, consumer.positions()) {
        for record in consumer.poll().await? {
            if args.num.is_some_and(|n| printed >= n) {
                break;
            }
            // A reader that went away (`| head`) ends the command.
            if print_record(&mut out, format, topic, &record).is_err() {
                return Ok(String::new());
            }
            printed += 1;
        }
        if out.flush().is_err() {
            return Ok(String::new());
        }
    }
    Ok(String::new())
}

/// Whether every partition's next offset is at or past its end.
fn reached(positions: &BTreeMap<i32, i64>, ends: &BTreeMap<i32, i64>) -> bool {
    (positions.iter()).all(|(p, next)| ends.get(p).is_none_or(|end| next >= end))
}

fn print_record(
    out: &mut impl Write,
    format: Format,
    topic: &str,
    record: &ConsumedRecord,
) -> std::io::Result<()> {
    match format {
        Format::Table => {
            let key = text(&record.key).unwrap_or_else(|| "-".into());
            let value = text(&record.value).unwrap_or_else(|| "(null)".into());
            let headers: Vec<String> = (record.headers.iter())
                .map(|(k, v)| format!("{k}={}", text(v).unwrap_or_default()))
                .collect();
            let headers = match headers.is_empty() {
                true => String::new(),
                false => format!("  [{}]", headers.join(" ")),
            };
            writeln!(
                out,
                "{:>9} {:>12} {key:<20} {value}{headers}",
                record.partition, record.offset
            )
        }
        Format::Json => out.write_all(json_line(&printed(topic, record)).as_bytes()),
    }
}

fn printed<'a>(topic: &'a str, record: &ConsumedRecord) -> Printed<'a> {
    Printed {
        topic,
        partition: record.partition,
        offset: record.offset,
        timestamp: record.timestamp,
        key: text(&record.key),
        value: text(&record.value),
        headers: (record.headers.iter())
            .map(|(key, value)| Header {
                key: key.clone(),
                value: text(value),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(key: Option<&str>, separator: Option<&str>) -> ProduceArgs {
        ProduceArgs {
            topic: "t".into(),
            key: key.map(str::to_string),
            key_separator: separator.map(str::to_string),
            headers: Vec::new(),
        }
    }

    #[test]
    fn a_line_splits_at_the_first_separator_or_takes_the_key_flag() {
        let split = args(None, Some(":"));
        assert_eq!(split_line("k:v:w", &split), (Some("k"), "v:w"));
        assert_eq!(split_line("no key", &split), (None, "no key"));
        let fixed = args(Some("user-1"), None);
        assert_eq!(split_line("a:b", &fixed), (Some("user-1"), "a:b"));
        assert_eq!(split_line("a:b", &args(None, None)), (None, "a:b"));
    }

    #[test]
    fn starts_parse_and_a_negative_offset_does_not() {
        assert_eq!(parse_from("start"), Ok(From::Start));
        assert_eq!(parse_from("end"), Ok(From::End));
        assert_eq!(parse_from("42"), Ok(From::Offset(42)));
        assert!(parse_from("-1").is_err());
        assert!(parse_from("middle").is_err());
    }

    #[test]
    fn the_end_is_reached_when_every_partition_is_at_or_past_it() {
        let ends = BTreeMap::from([(0, 5), (1, 0)]);
        assert!(!reached(&BTreeMap::from([(0, 4), (1, 0)]), &ends));
        assert!(reached(&BTreeMap::from([(0, 5), (1, 0)]), &ends));
    }
}
