//! The command line.

use std::path::PathBuf;
use std::time::Duration;

use kafka_protocol::records::Compression;

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Producers only: throughput and produce latency (send to ack).
    Produce,
    /// Consumers only, reading what is there (and what arrives).
    Consume,
    /// Producers and consumers together: also end-to-end latency.
    EndToEnd,
    /// End to end, then every acknowledged message is checked: lost,
    /// duplicated, out of order per partition.
    Verify,
    /// The loopback TCP bandwidth of this machine (the network reference).
    TcpBaseline,
    /// The raw sequential O_DIRECT write bandwidth of a directory's disk.
    DiskBaseline,
    /// The disk's own durable-write latency under a produce workload's
    /// rate, without a broker (`disk_floor`).
    DiskFloor,
    /// Loopback TCP sent three ways: write(2), io_uring send and
    /// zero-copy send (`send_modes`).
    SendModes,
}

/// Every option, with its default.
#[derive(Debug, Clone)]
pub struct Options {
    /// The mode.
    pub mode: Mode,
    /// A broker to bootstrap from.
    pub bootstrap: String,
    /// Over TLS: the CA file the brokers' certificates chain to.
    pub ssl_ca: Option<PathBuf>,
    /// A SASL login (`--sasl MECHANISM:USER`, the password from
    /// `LOADGEN_SASL_PASSWORD`).
    pub sasl: Option<client::security::SaslLogin>,
    /// The topic (created with `partitions` if missing).
    pub topic: String,
    /// Partitions of the topic when loadgen creates it.
    pub partitions: i32,
    /// Producer workers (threads).
    pub producers: usize,
    /// Consumer workers per reading group (threads).
    pub consumers: usize,
    /// Independent readers of the whole topic (fan-out): each is
    /// `consumers` workers splitting the partitions.
    pub groups: usize,
    /// Value bytes per message (at least the 20-byte stamp).
    pub message_bytes: usize,
    /// Distinct keys (0: no keys, records spread round-robin).
    pub keys: u64,
    /// Producer batch size.
    pub batch_bytes: usize,
    /// Producer linger.
    pub linger: Duration,
    /// 0, 1 or -1 (all).
    pub acks: i16,
    /// Idempotent producers (the default, as Kafka clients'; with acks=all).
    pub idempotence: bool,
    /// Batch compression.
    pub compression: Compression,
    /// Messages per second over all producers (None: as fast as possible).
    pub rate: Option<u64>,
    /// How long to measure (after the warm-up).
    pub duration: Duration,
    /// Stop after this many messages per producer instead.
    pub messages: Option<u64>,
    /// Not counted in the summary or the logs.
    pub warmup: Duration,
    /// Bytes a producer may have unacknowledged.
    pub max_in_flight_bytes: u64,
    /// Where the .hlog and .json files go (None: nowhere).
    pub out: Option<PathBuf>,
    /// The run's name (file names, dashboard legend).
    pub name: String,
    /// Pin worker threads to cores.
    pub pin: bool,
    /// Consume mode: start at the earliest offset (else the latest).
    pub from_earliest: bool,
    /// Baselines: the directory whose disk is measured.
    pub dir: PathBuf,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mode: Mode::Produce,
            bootstrap: "127.0.0.1:9092".into(),
            ssl_ca: None,
            sasl: None,
            topic: "loadgen".into(),
            partitions: 8,
            producers: 1,
            consumers: 1,
            groups: 1,
            message_bytes: 100,
            keys: 0,
            batch_bytes: 256 * 1024,
            linger: Duration::from_millis(2),
            acks: -1,
            idempotence: true,
            compression: Compression::None,
            rate: None,
            duration: Duration::from_secs(10),
            messages: None,
            warmup: Duration::from_secs(2),
            max_in_flight_bytes: 64 << 20,
            out: None,
            name: "run".into(),
            pin: true,
            from_earliest: true,
            dir: PathBuf::from("."),
        }
    }
}

/// The usage text.
pub const USAGE: &str = "usage: loadgen MODE [OPTIONS]
modes:
  produce         producers only: throughput, produce latency (send to ack)
  consume         consumers only
  e2e             producers and consumers: also end-to-end latency (send to consume)
  verify          e2e, then report lost, duplicated and out-of-order messages
  tcp-baseline    loopback TCP bandwidth of this machine
  disk-baseline   raw sequential O_DIRECT write bandwidth under --dir
  disk-floor      the disk's own latency under --rate x --message-bytes, group-committed to
                  --partitions files under --dir for --duration (no broker): the acks=all floor
  send-modes      loopback TCP sent by write(2), io_uring send and io_uring send_zc, side by side
options (defaults in brackets):
  --bootstrap HOST:PORT [127.0.0.1:9092]   --topic NAME [loadgen]   --partitions N [8]
  --producers N [1]   --consumers N [1]   --groups N [1] (independent readers of the whole topic)
  --message-bytes N [100]   --keys N [0: no keys]   --batch-bytes N [262144]   --linger-ms N [2]
  --acks 0|1|all [all]   --idempotence on|off [on]   --compression none|gzip|snappy|lz4|zstd [none]
  --rate MSGS_PER_S [as fast as possible]   --duration S [10] | --messages N (per producer)
  --warmup S [2]   --max-in-flight-bytes N [67108864]
  --out DIR (writes NAME-produce.hlog, NAME-e2e.hlog, NAME.json)   --name NAME [run]
  --no-pin   --from earliest|latest [earliest]   --dir DIR [.] (baselines)
  --ssl-ca-location FILE (TLS to brokers whose certificates chain to this CA)
  --sasl MECHANISM:USER (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; the password from LOADGEN_SASL_PASSWORD)";

fn number<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("{flag} {value}: not a number"))
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options::default();
    let mut it = args.iter();
    options.mode = match it.next().map(String::as_str) {
        Some("produce") => Mode::Produce,
        Some("consume") => Mode::Consume,
        Some("e2e") => Mode::EndToEnd,
        Some("verify") => Mode::Verify,
        Some("tcp-baseline") => Mode::TcpBaseline,
        Some("disk-baseline") => Mode::DiskBaseline,
        Some("disk-floor") => Mode::DiskFloor,
        Some("send-modes") => Mode::SendModes,
        _ => return Err(USAGE.to_string()),
    };
    while let Some(flag) = it.next() {
        if flag == "--no-pin" {
            options.pin = false;
            continue;
        }
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--bootstrap" => options.bootstrap = value.clone(),
            "--ssl-ca-location" => options.ssl_ca = Some(PathBuf::from(value)),
            "--sasl" => {
                let (mechanism, user) = value
                    .split_once(':')
                    .ok_or_else(|| format!("--sasl {value}: MECHANISM:USER"))?;
                options.sasl = Some(client::security::SaslLogin {
                    mechanism: client::security::SaslMechanism::from_name(mechanism)
                        .ok_or_else(|| format!("--sasl: unknown mechanism {mechanism}"))?,
                    user: user.to_string(),
                    password: std::env::var("LOADGEN_SASL_PASSWORD")
                        .map_err(|_| "--sasl needs LOADGEN_SASL_PASSWORD".to_string())?,
                });
            }
            "--topic" => options.topic = value.clone(),
            "--partitions" => options.partitions = number(flag, value)?,
            "--producers" => options.producers = number(flag, value)?,
            "--consumers" => options.consumers = number(flag, value)?,
            "--groups" => options.groups = number(flag, value)?,
            "--message-bytes" => options.message_bytes = number(flag, value)?,
            "--keys" => options.keys = number(flag, value)?,
            "--batch-bytes" => options.batch_bytes = number(flag, value)?,
            "--linger-ms" => options.linger = Duration::from_millis(number(flag, value)?),
            "--acks" => {
                options.acks = match value.as_str() {
                    "all" | "-1" => -1,
                    "1" => 1,
                    "0" => 0,
                    _ => return Err(format!("--acks {value}: 0, 1 or all")),
                }
            }
            "--idempotence" => {
                options.idempotence = match value.as_str() {
                    "on" | "true" => true,
                    "off" | "false" => false,
                    _ => return Err(format!("--idempotence {value}: on or off")),
                }
            }
            "--compression" => {
                options.compression = match value.as_str() {
                    "none" => Compression::None,
                    "gzip" => Compression::Gzip,
                    "snappy" => Compression::Snappy,
                    "lz4" => Compression::Lz4,
                    "zstd" => Compression::Zstd,
                    _ => return Err(format!("--compression {value}: unknown codec")),
                }
            }
            "--rate" => options.rate = Some(number(flag, value)?).filter(|r| *r > 0),
            "--duration" => options.duration = Duration::from_secs_f64(number(flag, value)?),
            "--messages" => options.messages = Some(number(flag, value)?),
            "--warmup" => options.warmup = Duration::from_secs_f64(number(flag, value)?),
            "--max-in-flight-bytes" => options.max_in_flight_bytes = number(flag, value)?,
            "--out" => options.out = Some(PathBuf::from(value)),
            "--name" => options.name = value.clone(),
            "--from" => {
                options.from_earliest = match value.as_str() {
                    "earliest" => true,
                    "latest" => false,
                    _ => return Err(format!("--from {value}: earliest or latest")),
                }
            }
            "--dir" => options.dir = PathBuf::from(value),
            _ => return Err(format!("unknown option {flag}\n{USAGE}")),
        }
    }
    if options.producers == 0 || options.consumers == 0 || options.groups == 0 {
        return Err("--producers, --consumers and --groups must be at least 1".into());
    }
    if options.producers > u16::MAX as usize {
        return Err("at most 65535 producers".into());
    }
    Ok(options)
}

impl Options {
    /// The cluster at `--bootstrap`, over TLS if `--ssl-ca-location`,
    /// logged in if `--sasl`.
    pub fn cluster(
        &self,
        client_id: &str,
    ) -> Result<std::rc::Rc<client::cluster::Cluster>, String> {
        let address = client::cluster::resolve(&self.bootstrap).map_err(|e| e.to_string())?;
        let tls = match &self.ssl_ca {
            Some(ca) => {
                Some(client::tls::ClientTls::from_files(ca, None).map_err(|e| e.to_string())?)
            }
            None => None,
        };
        let security = client::security::Security {
            tls,
            sasl: self.sasl.clone(),
        };
        Ok(client::cluster::Cluster::with_security(
            address, client_id, security,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn options_parse_with_defaults_and_mistakes_are_refused() {
        let o = parse(&args(
            "e2e --rate 500000 --acks 1 --message-bytes 1024 --keys 1000 --out /tmp/x --no-pin",
        ))
        .unwrap();
        assert_eq!(o.mode, Mode::EndToEnd);
        assert_eq!(o.rate, Some(500_000));
        assert_eq!(o.acks, 1);
        assert_eq!(o.message_bytes, 1024);
        assert_eq!(o.keys, 1000);
        assert!(!o.pin);
        assert_eq!(o.partitions, 8, "default");
        assert!(parse(&args("produce --acks 2")).is_err());
        assert!(parse(&args("produce --rate")).is_err());
        assert!(parse(&args("produce --bogus 1")).is_err());
        assert!(parse(&args("fly")).is_err());
        assert!(parse(&args("produce --producers 0")).is_err());
    }
}
