//! How many heap allocations the broker makes per record and per request.
//!
//! Runs the broker in this process under a counting global allocator and
//! drives it with loadgen, a separate process whose allocations are not
//! counted: a produce phase, then a consume phase from the start. Prints
//! allocations per message and per request for each (the counts include
//! whatever else the broker did meanwhile: heartbeats, timers, metrics).
//! The counting allocator wraps the system's, not the mimalloc the
//! `broker` binary runs on: the counts are the broker's, the costs are not.
//!
//! ```text
//! cargo build --release -p loadgen
//! cargo run --release -p broker --example alloc_count -- [--messages N] [--message-bytes B]
//! ```

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use broker::config::BrokerConfig;
use stats_alloc::{Stats, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

struct Options {
    messages: u64,
    message_bytes: u64,
    loadgen: String,
}

fn options() -> Options {
    let mut options = Options {
        messages: 2_000_000,
        message_bytes: 100,
        loadgen: "target/release/loadgen".into(),
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        match pair[0].as_str() {
            "--messages" => options.messages = value.parse().expect("--messages N"),
            "--message-bytes" => options.message_bytes = value.parse().expect("--message-bytes B"),
            "--loadgen" => options.loadgen = value,
            other => panic!("unknown option {other}"),
        }
    }
    options
}

/// One sample of the broker's /metrics page.
fn metric(http: SocketAddr, name: &str) -> f64 {
    let mut stream = TcpStream::connect(http).expect("the broker's HTTP port");
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut page = String::new();
    stream.read_to_string(&mut page).unwrap();
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

fn loadgen(options: &Options, args: &str) {
    let status = Command::new(&options.loadgen)
        .args(args.split_whitespace())
        .status()
        .expect("loadgen (cargo build --release -p loadgen)");
    assert!(status.success(), "loadgen {args} failed");
}

/// What a phase cost: allocations (reallocations included), bytes
/// allocated, requests of the API measured, and bytes the broker sent.
struct Cost {
    allocations: f64,
    bytes: f64,
    requests: f64,
    sent: f64,
}

/// Runs `phase` and counts what it cost the broker.
fn measured(http: SocketAddr, api: &str, phase: impl FnOnce()) -> Cost {
    let requests = format!("requests_total{{api=\"{api}\"}}");
    let (requests_before, sent_before) = (metric(http, &requests), metric(http, "bytes_out_total"));
    let before = GLOBAL.stats();
    phase();
    let after = GLOBAL.stats();
    let change = |f: fn(&Stats) -> usize| (f(&after) - f(&before)) as f64;
    Cost {
        allocations: change(|s| s.allocations) + change(|s| s.reallocations),
        bytes: change(|s| s.bytes_allocated),
        requests: metric(http, &requests) - requests_before,
        sent: metric(http, "bytes_out_total") - sent_before,
    }
}

fn print(name: &str, api: &str, messages: f64, cost: &Cost) {
    println!(
        "{name}: {messages:.0} messages, {:.0} {api} requests, {:.0} MB sent: {:.0} allocations \
         ({:.4} per message, {:.1} per request), {:.1} MB allocated ({:.1} bytes per message)",
        cost.requests,
        cost.sent / 1e6,
        cost.allocations,
        cost.allocations / messages.max(1.0),
        cost.allocations / cost.requests.max(1.0),
        cost.bytes / 1e6,
        cost.bytes / messages.max(1.0),
    );
}

fn main() {
    let options = options();
    let dir = tempfile::tempdir().unwrap();
    let config = BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        kafka_listen: "127.0.0.1:0".into(),
        http_listen: "127.0.0.1:0".into(),
        shards: 2,
        ..BrokerConfig::default()
    };
    let (ready_tx, ready_rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let stop = stop.clone();
        std::thread::spawn(move || broker::server::run(config, ready_tx, stop))
    };
    let listening = ready_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the broker started");
    let (kafka, http) = (listening.kafka[0].1, listening.http);
    let common = format!(
        "--bootstrap {kafka} --topic counted --partitions 2 --message-bytes {} --warmup 0 --no-pin",
        options.message_bytes
    );
    let per_producer = options.messages / 2;
    let produced = measured(http, "Produce", || {
        loadgen(
            &options,
            &format!(
                "produce {common} --producers 2 --messages {per_producer} --batch-bytes 1048576 \
                 --linger-ms 5 --acks all"
            ),
        )
    });
    print("produce", "Produce", (per_producer * 2) as f64, &produced);
    // Until everything is read, then long polls that find nothing.
    let consumed = measured(http, "Fetch", || {
        loadgen(
            &options,
            &format!("consume {common} --from earliest --consumers 1 --duration 3"),
        )
    });
    // Each message of a batch costs its value, 8 bytes of overhead and a
    // little framing: counted from what was sent.
    let record_bytes = options.message_bytes as f64 + 10.0;
    print("consume", "Fetch", consumed.sent / record_bytes, &consumed);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    server
        .join()
        .expect("the server thread")
        .expect("a clean stop");
}
