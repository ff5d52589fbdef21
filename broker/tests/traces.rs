//! Traces over OTLP/HTTP (`otlp_endpoint`): a broker pointed at a
//! collector stand-in (a small HTTP server here that keeps what it is
//! sent) exports its produce and fetch spans with their attributes, as
//! JSON or protobuf, and flushes what is batched when it stops.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::start_broker_with;

/// What the stand-in was sent: (content type, body) per request.
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A collector stand-in on an ephemeral port: answers every POST 200 and
/// keeps its body. Runs until the test ends.
fn collector() -> (SocketAddr, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let received: Received = Arc::default();
    let kept = received.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let kept = kept.clone();
            std::thread::spawn(move || serve_connection(stream, &kept));
        }
    });
    (address, received)
}

/// Reads requests off one connection (the exporter keeps it alive).
fn serve_connection(stream: std::net::TcpStream, kept: &Received) {
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let (mut length, mut content_type) = (0usize, String::new());
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap_or((header, ""));
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "content-type" => content_type = value.trim().to_string(),
                _ => {}
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        kept.lock().unwrap().push((content_type.clone(), body));
        let answer = if content_type.contains("json") {
            "{}"
        } else {
            ""
        };
        let _ = write!(
            writer,
            "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        );
    }
}

fn kcat(bootstrap: &str, args: &[&str], input: &str) {
    let mut command = Command::new("kcat");
    let out = support::output_with_input(command.args(["-b", bootstrap]).args(args), input);
    assert!(
        out.status.success(),
        "kcat (the test command installs it): {out:?}"
    );
}

/// Every span the stand-in received as JSON: (name, attributes by key).
fn spans(received: &Received) -> Vec<(String, serde_json::Map<String, Value>)> {
    let mut out = Vec::new();
    for (_, body) in received.lock().unwrap().iter() {
        let Ok(export) = serde_json::from_slice::<Value>(body) else {
            continue;
        };
        let scopes = (export["resourceSpans"].as_array().into_iter().flatten())
            .flat_map(|r| r["scopeSpans"].as_array().into_iter().flatten());
        for span in scopes.flat_map(|s| s["spans"].as_array().into_iter().flatten()) {
            let attributes = (span["attributes"].as_array().into_iter().flatten())
                .map(|a| {
                    // {"stringValue": "x"} or {"intValue": 7 or "7"}.
                    let value = a["value"]
                        .as_object()
                        .and_then(|v| v.values().next().cloned());
                    (
                        a["key"].as_str().unwrap_or_default().to_string(),
                        value.unwrap_or_default(),
                    )
                })
                .collect();
            out.push((
                span["name"].as_str().unwrap_or_default().to_string(),
                attributes,
            ));
        }
    }
    out
}

fn number(value: &Value) -> Option<i64> {
    value.as_i64().or_else(|| value.as_str()?.parse().ok())
}

#[test]
fn produce_and_fetch_spans_reach_an_otlp_collector_with_their_attributes() {
    let (address, received) = collector();
    let endpoint = format!("http://{address}");
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(
        dir.path(),
        &[
            ("BROKER_OTLP_ENDPOINT", endpoint.as_str()),
            ("BROKER_OTLP_PROTOCOL", "http/json"),
        ],
    );
    let bootstrap = broker.bootstrap();
    kcat(
        &bootstrap,
        &["-P", "-t", "traced", "-X", "acks=all"],
        "one\ntwo\nthree\n",
    );
    kcat(
        &bootstrap,
        &["-C", "-t", "traced", "-o", "beginning", "-e", "-q"],
        "",
    );
    // Stopping flushes what the batch holds.
    assert!(broker.terminate().success());
    let started = Instant::now();
    let wanted = ["produce", "partition", "fdatasync", "fetch"];
    while !wanted
        .iter()
        .all(|w| spans(&received).iter().any(|(n, _)| n == w))
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "spans received: {:?}",
            spans(&received)
                .iter()
                .map(|(n, _)| n.clone())
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let spans = spans(&received);
    let first = |name: &str| &spans.iter().find(|(n, _)| n == name).unwrap().1;
    assert_eq!(first("produce")["acks"], "all", "{:?}", first("produce"));
    assert!(number(&first("produce")["correlation_id"]).is_some());
    assert_eq!(first("partition")["topic"], "traced");
    assert_eq!(number(&first("partition")["partition"]), Some(0));
    // The consumer's fetch that carried the three records.
    let carried = (spans.iter())
        .filter(|(n, _)| n == "fetch")
        .filter_map(|(_, a)| number(a.get("bytes")?))
        .max();
    assert!(carried > Some(0), "fetch spans: {spans:?}");
    let (content_type, _) = &received.lock().unwrap()[0];
    assert!(content_type.contains("json"), "{content_type}");
}

#[test]
fn the_default_protocol_is_protobuf() {
    let (address, received) = collector();
    let endpoint = format!("http://{address}");
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), &[("BROKER_OTLP_ENDPOINT", endpoint.as_str())]);
    kcat(
        &broker.bootstrap(),
        &["-P", "-t", "binary", "-X", "acks=all"],
        "x\n",
    );
    broker.terminate();
    let started = Instant::now();
    while received.lock().unwrap().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "nothing exported"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (content_type, body) = received.lock().unwrap()[0].clone();
    assert_eq!(content_type, "application/x-protobuf");
    // Protobuf keeps strings as they are: the span and attribute names.
    let has = |text: &str| body.windows(text.len()).any(|w| w == text.as_bytes());
    assert!(has("produce") && has("acks") && has("binary"), "{body:?}");
}
