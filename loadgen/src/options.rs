//! The command line: `loadgen MODE [OPTIONS]`, one clap subcommand per mode
//! (so `loadgen MODE --help` lists the flags, with their defaults and an
//! example), every mode taking the same flags, and `loadgen completion
//! SHELL` for shell completions. The flags become the `Options` the rest of
//! the crate reads. A flag given twice takes its last value
//! (`args_override_self`), as with the hand-written parser this replaced:
//! scripts build command lines from arrays of common flags.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::RangedU64ValueParser;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use clap_complete::Shell;
use client::security::{SaslLogin, SaslMechanism};
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
    /// The most one partition's durable appends can write on a
    /// directory's disk, without a broker (`disk_ceiling`).
    DiskCeiling,
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
    /// Producers (each its own client, connections and in-flight window).
    pub producers: usize,
    /// Threads the producers run on (at most `producers`): by default one
    /// each; fewer to run many producers (say 1,000 clients at a low rate
    /// each) without a thread apiece, each thread's producers sharing its
    /// executor.
    pub producer_threads: usize,
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
    /// Transactional producers committing this often (None: none).
    pub transaction: Option<Duration>,
    /// Their newest transaction protocol (1 or 2).
    pub transaction_version: i16,
    /// Batch compression.
    pub compression: Compression,
    /// Messages per second over all producers (None: as fast as possible).
    pub rate: Option<u64>,
    /// A paced producer due more often than this sends on this tick what is
    /// due by then (one timer wake per tick, not per message).
    pub pacing_tick: Duration,
    /// How long to measure (after the warm-up).
    pub duration: Duration,
    /// Stop after this many messages per producer (consume: per consumer)
    /// instead.
    pub messages: Option<u64>,
    /// Not counted in the summary or the logs.
    pub warmup: Duration,
    /// Bytes a producer may have unacknowledged.
    pub max_in_flight_bytes: u64,
    /// Produce requests a producer sends to a broker before reading the
    /// first answer (usize::MAX: only the byte window bounds them).
    pub requests_in_flight: usize,
    /// Where the .hlog and .json files go (None: nowhere).
    pub out: Option<PathBuf>,
    /// The run's name (file names, dashboard legend).
    pub name: String,
    /// Pin worker threads to cores.
    pub pin: bool,
    /// Consume mode: start at the earliest offset (else the latest).
    pub from_earliest: bool,
    /// Consumers read committed data only (below the last stable offset,
    /// aborted transactions left out).
    pub read_committed: bool,
    /// Baselines: the directory whose disk is measured.
    pub dir: PathBuf,
}

/// The defaults are the command line's, what `loadgen produce` runs without
/// flags: one place to change them, so the help and the code cannot differ.
impl Default for Options {
    fn default() -> Self {
        let produce = ["produce".to_string()];
        parse(&produce).expect("the defaults parse")
    }
}

/// Where `--sasl`'s password comes from (not a flag: it would show in `ps`).
const PASSWORD_VARIABLE: &str = "LOADGEN_SASL_PASSWORD";

const MODES_HELP: &str = "Each mode's flags, with an example: loadgen MODE --help";
const PRODUCE_EXAMPLE: &str = "Example:
  loadgen produce --bootstrap 127.0.0.1:9092 --message-bytes 1024 --duration 30 --out results/mine";
const CONSUME_EXAMPLE: &str = "Example:
  loadgen consume --bootstrap 127.0.0.1:9092 --topic bench-b --from earliest --duration 5";
const E2E_EXAMPLE: &str = "Example:
  loadgen e2e --bootstrap 127.0.0.1:9092 --rate 500000 --out results/mine --name half";
const VERIFY_EXAMPLE: &str = "Example:
  loadgen verify --bootstrap 127.0.0.1:9092 --keys 1000 --producers 2 --consumers 2";
const TCP_BASELINE_EXAMPLE: &str = "Example:
  loadgen tcp-baseline --duration 5";
const DISK_BASELINE_EXAMPLE: &str = "Example:
  loadgen disk-baseline --dir /var/lib/broker --duration 5";
const DISK_FLOOR_EXAMPLE: &str = "Example:
  loadgen disk-floor --dir /var/lib/broker --rate 500000 --message-bytes 100 --duration 30";
const DISK_CEILING_EXAMPLE: &str = "Example:
  loadgen disk-ceiling --dir /var/lib/broker --duration 18";
const SEND_MODES_EXAMPLE: &str = "Example:
  loadgen send-modes --duration 9";
const COMPLETION_EXAMPLE: &str = "Example:
  loadgen completion bash > ~/.local/share/bash-completion/completions/loadgen";

/// Drives a Kafka-protocol broker with a fixed workload and measures it:
/// throughput, produce and end-to-end latency, HdrHistogram interval logs
/// and a JSON summary.
#[derive(Debug, Parser)]
#[command(name = "loadgen", version, propagate_version = true)]
#[command(args_override_self = true, after_help = MODES_HELP)]
pub struct Cli {
    /// The mode, with its flags; or `completion`.
    #[command(subcommand)]
    pub command: CliCommand,
}

/// What the command line asks for: a run, or a completion script.
#[derive(Debug, Subcommand)]
pub enum CliCommand {
    /// A run, in one of the modes. Boxed: the flags are large beside
    /// `completion`'s one shell (clippy's large_enum_variant).
    #[command(flatten)]
    Run(Box<RunCommand>),
    /// Print a completion script for SHELL to stdout.
    #[command(after_help = COMPLETION_EXAMPLE)]
    Completion {
        /// The shell to complete loadgen's command line in.
        shell: Shell,
    },
}

/// The modes, each a subcommand taking the same flags.
#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// Producers only: throughput, produce latency (send to ack).
    #[command(after_help = PRODUCE_EXAMPLE)]
    Produce(Flags),
    /// Consumers only: consume throughput, from --from (and what arrives).
    #[command(after_help = CONSUME_EXAMPLE)]
    Consume(Flags),
    /// Producers and consumers: also end-to-end latency (send to consume).
    #[command(name = "e2e", after_help = E2E_EXAMPLE)]
    EndToEnd(Flags),
    /// e2e, then report lost, duplicated and out-of-order messages.
    #[command(after_help = VERIFY_EXAMPLE)]
    Verify(Flags),
    /// Loopback TCP bandwidth of this machine and its sender's CPU per GB (three runs within --duration).
    #[command(after_help = TCP_BASELINE_EXAMPLE)]
    TcpBaseline(Flags),
    /// Raw sequential O_DIRECT write and read bandwidth under --dir, and
    /// write + fdatasync latency.
    #[command(after_help = DISK_BASELINE_EXAMPLE)]
    DiskBaseline(Flags),
    /// The disk's own latency under --rate x --message-bytes, group-committed
    /// to --partitions files under --dir for --duration (no broker): the
    /// acks=all floor.
    #[command(after_help = DISK_FLOOR_EXAMPLE)]
    DiskFloor(Flags),
    /// The most one partition's durable appends can write under --dir (no
    /// broker): write-then-fdatasync cycles of 1, 4 and 16 MiB, into new
    /// reserved blocks and into written ones, --duration split among them
    /// (each written-blocks measure first writes its 256 MiB file, untimed).
    #[command(after_help = DISK_CEILING_EXAMPLE)]
    DiskCeiling(Flags),
    /// Loopback TCP sent by write(2), io_uring send and io_uring send_zc, side
    /// by side.
    #[command(after_help = SEND_MODES_EXAMPLE)]
    SendModes(Flags),
}

impl RunCommand {
    /// The run's options, its mode the subcommand's.
    pub fn into_options(self) -> Options {
        let (mode, flags) = match self {
            RunCommand::Produce(flags) => (Mode::Produce, flags),
            RunCommand::Consume(flags) => (Mode::Consume, flags),
            RunCommand::EndToEnd(flags) => (Mode::EndToEnd, flags),
            RunCommand::Verify(flags) => (Mode::Verify, flags),
            RunCommand::TcpBaseline(flags) => (Mode::TcpBaseline, flags),
            RunCommand::DiskBaseline(flags) => (Mode::DiskBaseline, flags),
            RunCommand::DiskFloor(flags) => (Mode::DiskFloor, flags),
            RunCommand::DiskCeiling(flags) => (Mode::DiskCeiling, flags),
            RunCommand::SendModes(flags) => (Mode::SendModes, flags),
        };
        flags.into_options(mode)
    }
}

/// The flags every mode takes (a mode ignores those it does not use).
#[derive(Debug, Args)]
pub struct Flags {
    /// A broker to bootstrap from.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// TLS to brokers whose certificates chain to this CA.
    #[arg(long, value_name = "FILE")]
    ssl_ca_location: Option<PathBuf>,
    /// Log in by PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 as USER, the password
    /// from LOADGEN_SASL_PASSWORD.
    #[arg(long, value_name = "MECHANISM:USER", value_parser = sasl_login)]
    sasl: Option<SaslLogin>,
    /// The topic (created with --partitions if missing).
    #[arg(long, value_name = "NAME", default_value = "loadgen")]
    topic: String,
    /// Partitions of the topic when loadgen creates it (disk-floor: files).
    #[arg(long, value_name = "N", default_value_t = 8)]
    partitions: i32,
    /// Producers, each its own client (and a thread of its own unless
    /// --producer-threads), at most 65535.
    #[arg(long, value_name = "N", default_value_t = 1)]
    #[arg(value_parser = producer_count())]
    producers: usize,
    /// Threads the producers share (0: one per producer): many producers
    /// at a low rate each run on a few threads, as many clients would.
    #[arg(long, value_name = "N", default_value_t = 0)]
    producer_threads: usize,
    /// Consumer workers (threads) per reading group.
    #[arg(long, value_name = "N", default_value_t = 1)]
    #[arg(value_parser = at_least_one())]
    consumers: usize,
    /// Independent readers of the whole topic (fan-out), each of --consumers workers.
    #[arg(long, value_name = "N", default_value_t = 1)]
    #[arg(value_parser = at_least_one())]
    groups: usize,
    /// Value bytes per message (at least the 20-byte stamp).
    #[arg(long, value_name = "N", default_value_t = 100)]
    message_bytes: usize,
    /// Distinct keys (0: no keys, records spread round-robin).
    #[arg(long, value_name = "N", default_value_t = 0)]
    keys: u64,
    /// Producer batch size, in bytes.
    #[arg(long, value_name = "N", default_value_t = 256 * 1024)]
    batch_bytes: usize,
    /// Producer linger, in milliseconds.
    #[arg(long, value_name = "N", default_value_t = 2)]
    linger_ms: u64,
    /// What a produce waits for: no acknowledgement, the leader's, or all
    /// in-sync replicas' (-1 also means all).
    #[arg(long, default_value = "all", allow_negative_numbers = true)]
    acks: Acks,
    /// Idempotent producers, as Kafka clients' default (true and false also
    /// accepted).
    #[arg(long, default_value = "on")]
    idempotence: Switch,
    /// Transactional producers, each committing a transaction every N
    /// milliseconds (0: not transactional). Needs acks=all.
    #[arg(long, value_name = "N", default_value_t = 0)]
    transaction_ms: u64,
    /// The newest transaction protocol the producers use: 2 (KIP-890, an
    /// epoch per transaction, when the broker finalizes it) or 1 (classic).
    #[arg(long, value_name = "V", default_value_t = 2)]
    #[arg(value_parser = clap::value_parser!(i16).range(1..=2))]
    transaction_version: i16,
    /// Batch compression.
    #[arg(long, default_value = "none")]
    compression: Codec,
    /// Messages per second over all producers (0: as fast as possible).
    /// A producer due more often than --pacing-tick-us sends on that tick
    /// what is due by then; latency counts from each message's intended
    /// time, that wait included.
    #[arg(long, value_name = "MSGS_PER_S", default_value_t = 0)]
    rate: u64,
    /// The paced producers' tick, in microseconds (50 to 1,000,000). A
    /// message waits for its tick, up to this long, and its latency counts
    /// the wait; a finer tick costs loadgen a timer wake per tick (run 55
    /// in docs/benchmarks.md: 1 ms for throughput runs, 50 us for a
    /// latency run that compares within a millisecond).
    #[arg(long, value_name = "US", default_value_t = 1000)]
    #[arg(value_parser = clap::value_parser!(u64).range(50..=1_000_000))]
    pacing_tick_us: u64,
    /// Seconds to measure, after the warm-up (fractions allowed).
    #[arg(long, value_name = "S", default_value = "10")]
    #[arg(value_parser = seconds)]
    duration: Duration,
    /// Stop after this many messages per producer (consume: per
    /// consumer) instead of --duration.
    #[arg(long, value_name = "N")]
    messages: Option<u64>,
    /// Seconds of warm-up, not counted in the summary or the logs.
    #[arg(long, value_name = "S", default_value = "2")]
    #[arg(value_parser = seconds)]
    warmup: Duration,
    /// Bytes a producer may have unacknowledged.
    #[arg(long, value_name = "N", default_value_t = 64 << 20)]
    max_in_flight_bytes: u64,
    /// Produce requests a producer sends to a broker before reading the
    /// first answer (Kafka's max.in.flight.requests.per.connection; at
    /// most 5 with idempotence). Default: 5 with idempotence; without,
    /// only --max-in-flight-bytes bounds them (librdkafka's default).
    #[arg(long, value_name = "N")]
    requests_in_flight: Option<usize>,
    /// Write NAME-produce.hlog, NAME-e2e.hlog and NAME.json here (none if absent).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// The run's name (file names, dashboard legend).
    #[arg(long, value_name = "NAME", default_value = "run")]
    name: String,
    /// Pin each worker thread to a core (producers from the first core on,
    /// consumers from the second).
    /// Off by default: beside a broker on the same machine, a pinned
    /// worker shares a core with whichever broker shard is pinned there,
    /// where the scheduler would have moved it (docs/benchmarks.md run 47).
    #[arg(long, conflicts_with = "no_pin")]
    pin: bool,
    /// Do not pin worker threads (the default; accepted for scripts that
    /// say so).
    #[arg(long)]
    no_pin: bool,
    /// Consume: start at the earliest offset or the latest.
    #[arg(long, default_value = "earliest")]
    from: Start,
    /// What consumers read: everything up to the high watermark, or only
    /// committed transactions, up to the last stable offset (what
    /// librdkafka consumers read by default).
    #[arg(long, default_value = "read_uncommitted")]
    isolation: Isolation,
    /// Baselines and disk-floor: the directory whose disk is measured.
    #[arg(long, value_name = "DIR", default_value = ".")]
    dir: PathBuf,
}

impl Flags {
    /// The options of a run in `mode`.
    fn into_options(self, mode: Mode) -> Options {
        Options {
            mode,
            bootstrap: self.bootstrap,
            ssl_ca: self.ssl_ca_location,
            sasl: self.sasl,
            topic: self.topic,
            partitions: self.partitions,
            producers: self.producers,
            producer_threads: match self.producer_threads {
                0 => self.producers,
                n => n.min(self.producers),
            },
            consumers: self.consumers,
            groups: self.groups,
            message_bytes: self.message_bytes,
            keys: self.keys,
            batch_bytes: self.batch_bytes,
            linger: Duration::from_millis(self.linger_ms),
            acks: self.acks.value(),
            idempotence: self.idempotence == Switch::On,
            transaction: Some(Duration::from_millis(self.transaction_ms)).filter(|d| !d.is_zero()),
            transaction_version: self.transaction_version,
            compression: self.compression.compression(),
            // --rate 0: as fast as possible.
            rate: Some(self.rate).filter(|r| *r > 0),
            pacing_tick: Duration::from_micros(self.pacing_tick_us),
            duration: self.duration,
            messages: self.messages,
            warmup: self.warmup,
            max_in_flight_bytes: self.max_in_flight_bytes,
            requests_in_flight: self.requests_in_flight.unwrap_or(match self.idempotence {
                Switch::On => 5,
                Switch::Off => usize::MAX,
            }),
            out: self.out,
            name: self.name,
            pin: self.pin,
            from_earliest: self.from == Start::Earliest,
            read_committed: self.isolation == Isolation::ReadCommitted,
            dir: self.dir,
        }
    }
}

/// `--acks`: what a produce request waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Acks {
    #[value(name = "0")]
    Unacknowledged,
    #[value(name = "1")]
    Leader,
    // -1: the protocol's (and Kafka clients') own spelling of all.
    #[value(name = "all", alias = "-1")]
    All,
}

impl Acks {
    /// The produce request's acks field.
    fn value(self) -> i16 {
        match self {
            Acks::Unacknowledged => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// `--idempotence`: on or off (true and false are accepted, not shown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Switch {
    #[value(name = "on", alias = "true")]
    On,
    #[value(name = "off", alias = "false")]
    Off,
}

/// `--compression`: the batch codecs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Codec {
    #[value(name = "none")]
    Uncompressed,
    #[value(name = "gzip")]
    Gzip,
    #[value(name = "snappy")]
    Snappy,
    #[value(name = "lz4")]
    Lz4,
    #[value(name = "zstd")]
    Zstd,
}

impl Codec {
    /// The codec as the protocol crate names it.
    fn compression(self) -> Compression {
        match self {
            Codec::Uncompressed => Compression::None,
            Codec::Gzip => Compression::Gzip,
            Codec::Snappy => Compression::Snappy,
            Codec::Lz4 => Compression::Lz4,
            Codec::Zstd => Compression::Zstd,
        }
    }
}

/// `--isolation`: what consumers read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Isolation {
    #[value(name = "read_uncommitted")]
    ReadUncommitted,
    #[value(name = "read_committed")]
    ReadCommitted,
}

/// `--from`: where consumers start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Start {
    #[value(name = "earliest")]
    Earliest,
    #[value(name = "latest")]
    Latest,
}

/// `--consumers` and `--groups`: at least one.
fn at_least_one() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(1..)
}

/// `--producers`: at least one, at most 65535 (u16::MAX: a message's stamp
/// names its producer in 16 bits).
fn producer_count() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(1..=65535)
}

/// Seconds, fractions allowed (`--duration 2.5`); negative ones refused.
fn seconds(value: &str) -> Result<Duration, String> {
    let seconds = value.parse::<f64>().map_err(|_| "not a number")?;
    Duration::try_from_secs_f64(seconds).map_err(|e| e.to_string())
}

/// `--sasl MECHANISM:USER`, the password from LOADGEN_SASL_PASSWORD: read
/// here, so a missing password is refused like any bad value, before
/// anything runs.
fn sasl_login(value: &str) -> Result<SaslLogin, String> {
    let Some((name, user)) = value.split_once(':') else {
        return Err("expected MECHANISM:USER".into());
    };
    let Some(mechanism) = SaslMechanism::from_name(name) else {
        return Err(format!("unknown mechanism {name}"));
    };
    let Ok(password) = std::env::var(PASSWORD_VARIABLE) else {
        return Err(format!("{PASSWORD_VARIABLE} is not set"));
    };
    Ok(SaslLogin {
        mechanism,
        user: user.to_string(),
        password,
    })
}

/// Parses the arguments after the program name into a run's options; the
/// error is clap's message as text (for `--help` too: main uses `Cli`).
pub fn parse(args: &[String]) -> Result<Options, String> {
    let line = std::iter::once("loadgen").chain(args.iter().map(String::as_str));
    let cli = Cli::try_parse_from(line).map_err(|e| e.to_string())?;
    match cli.command {
        CliCommand::Run(run) => {
            let options = run.into_options();
            options.check()?;
            Ok(options)
        }
        CliCommand::Completion { .. } => Err("completion is not a run".into()),
    }
}

/// Writes loadgen's completion script for `shell` to `out`.
pub fn write_completion(shell: Shell, out: &mut dyn std::io::Write) {
    clap_complete::generate(shell, &mut Cli::command(), "loadgen", out);
}

impl Options {
    /// Refuses flags that cannot work together.
    fn check(&self) -> Result<(), String> {
        if self.transaction.is_some() && (self.acks != -1 || !self.idempotence) {
            return Err("--transaction-ms needs --acks all and --idempotence on \
                        (transactions number their batches)"
                .into());
        }
        Ok(())
    }

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
    use clap::error::ErrorKind;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    /// `loadgen produce FLAGS`, which must parse.
    fn produce(flags: &str) -> Options {
        parse(&args(&format!("produce {flags}"))).unwrap()
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
        // clap's message names the flag it refuses.
        let unknown = parse(&args("produce --bogus 1")).unwrap_err();
        assert!(unknown.contains("--bogus"), "{unknown}");
        let help = Cli::try_parse_from(["loadgen", "produce", "--help"]).unwrap_err();
        assert_eq!(help.kind(), ErrorKind::DisplayHelp);
    }

    #[test]
    fn every_flag_takes_the_values_scripts_give_it() {
        let o = parse(&args(
            "produce --bootstrap 10.0.0.1:9093 --ssl-ca-location ca.pem --topic t --partitions 2 \
             --producers 65535 --consumers 3 --groups 5 --batch-bytes 1048576 --linger-ms 5 \
             --acks -1 --idempotence off --compression lz4 --duration 0.5 --messages 7 \
             --warmup 0 --max-in-flight-bytes 1024 --name A --from latest --dir /tmp/d",
        ))
        .unwrap();
        assert_eq!(o.mode, Mode::Produce);
        assert_eq!(o.bootstrap, "10.0.0.1:9093");
        assert_eq!(o.ssl_ca, Some(PathBuf::from("ca.pem")));
        assert_eq!((o.topic.as_str(), o.partitions), ("t", 2));
        assert_eq!((o.producers, o.consumers, o.groups), (65535, 3, 5));
        assert_eq!(o.producer_threads, 65535);
        assert_eq!(
            produce("--producers 1000 --producer-threads 2").producer_threads,
            2
        );
        assert_eq!(
            produce("--producers 3 --producer-threads 8").producer_threads,
            3
        );
        assert_eq!(o.batch_bytes, 1 << 20);
        assert_eq!(o.linger, Duration::from_millis(5));
        assert_eq!((o.acks, o.idempotence), (-1, false));
        assert_eq!(o.compression, Compression::Lz4);
        assert_eq!(o.duration, Duration::from_millis(500));
        assert_eq!(o.messages, Some(7));
        assert_eq!(o.warmup, Duration::ZERO);
        assert_eq!(o.max_in_flight_bytes, 1024);
        assert_eq!((o.name.as_str(), o.from_earliest), ("A", false));
        assert_eq!(o.dir, PathBuf::from("/tmp/d"));
        assert_eq!(produce("--acks 0").acks, 0);
        assert_eq!(produce("--acks all").acks, -1);
        assert!(produce("--idempotence true").idempotence);
        assert_eq!(
            produce("--transaction-ms 100").transaction,
            Some(Duration::from_millis(100))
        );
        assert_eq!(produce("").transaction, None, "off by default");
        assert_eq!(produce("").pacing_tick, Duration::from_millis(1));
        assert_eq!(
            produce("--pacing-tick-us 50").pacing_tick,
            Duration::from_micros(50)
        );
        assert!(parse(&args("produce --pacing-tick-us 49")).is_err());
        assert_eq!(produce("").transaction_version, 2);
        assert_eq!(produce("--transaction-version 1").transaction_version, 1);
        assert!(!produce("").read_committed);
        assert!(produce("--isolation read_committed").read_committed);
        assert!(!produce("--idempotence false").idempotence);
        // Without idempotence only the byte window bounds the requests
        // in flight unless told (librdkafka's default); with it, 5.
        assert_eq!(produce("--idempotence off").requests_in_flight, usize::MAX);
        assert_eq!(produce("--idempotence on").requests_in_flight, 5);
        let told = "--idempotence off --requests-in-flight 3";
        assert_eq!(produce(told).requests_in_flight, 3);
        assert!(produce("--from earliest").from_earliest);
        assert_eq!(produce("--rate 0").rate, None, "0: as fast as possible");
        let codecs = [
            ("none", Compression::None),
            ("gzip", Compression::Gzip),
            ("snappy", Compression::Snappy),
            ("lz4", Compression::Lz4),
            ("zstd", Compression::Zstd),
        ];
        for (name, codec) in codecs {
            assert_eq!(produce(&format!("--compression {name}")).compression, codec);
        }
        // As before clap, a flag given twice takes its last value.
        assert_eq!(produce("--name a --name b").name, "b");
        let mistakes = [
            "--producers 65536",
            "--consumers 0",
            "--groups 0",
            "--from middle",
            "--idempotence maybe",
            "--compression brotli",
            "--duration -1",
            "--warmup soon",
            "--sasl PLAIN",
            "--sasl NOPE:me",
            "--transaction-ms 100 --acks 1",
            "--isolation committed",
            "--transaction-ms 100 --idempotence off",
            "--transaction-version 3",
        ];
        for mistake in mistakes {
            let line = format!("produce {mistake}");
            assert!(parse(&args(&line)).is_err(), "{mistake}");
        }
    }

    #[test]
    fn the_defaults_are_those_scripts_rely_on() {
        let o = Options::default();
        assert_eq!(o.mode, Mode::Produce);
        assert_eq!(o.bootstrap, "127.0.0.1:9092");
        assert!(o.ssl_ca.is_none() && o.sasl.is_none());
        assert_eq!((o.topic.as_str(), o.partitions), ("loadgen", 8));
        assert_eq!((o.producers, o.consumers, o.groups), (1, 1, 1));
        assert_eq!((o.message_bytes, o.keys), (100, 0));
        assert_eq!(o.batch_bytes, 256 * 1024);
        assert_eq!(o.linger, Duration::from_millis(2));
        assert_eq!((o.acks, o.idempotence), (-1, true));
        assert_eq!(o.compression, Compression::None);
        assert_eq!((o.rate, o.messages), (None, None));
        assert_eq!(o.duration, Duration::from_secs(10));
        assert_eq!(o.warmup, Duration::from_secs(2));
        assert_eq!(o.max_in_flight_bytes, 64 << 20);
        assert_eq!(o.requests_in_flight, 5);
        assert!(o.out.is_none());
        assert_eq!(o.name, "run");
        assert!(!o.pin && o.from_earliest, "not pinned unless asked");
        assert!(produce("--pin").pin);
        let both = parse(&args("produce --pin --no-pin")).unwrap_err();
        assert!(both.contains("cannot be used with"), "{both}");
        assert_eq!(o.dir, PathBuf::from("."));
    }

    #[test]
    fn the_command_line_passes_clap_own_checks() {
        Cli::command().debug_assert();
    }
}
