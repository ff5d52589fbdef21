//! The HTTP/JSON API over real HTTP on a real broker: every endpoint,
//! bad bodies, unknown topics, oversized and chunked requests; keys land
//! on the partition the Java client's partitioner picks (checked against
//! librdkafka's murmur2 partitioner through kcat).

mod support;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use support::start_broker;

/// Sends raw bytes, returns (status, body).
fn exchange(http: SocketAddr, raw: &[u8]) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(http).unwrap();
    stream.write_all(raw).unwrap();
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    let body = text
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    (status, body)
}

fn call(http: SocketAddr, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
    let (status, text) = support::http(http, method, path, body.unwrap_or(""));
    let value = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    };
    (status, value)
}

fn b64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[test]
fn every_endpoint_with_its_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let http = broker.http;

    // Topics: create, list, describe, refusals.
    let (status, created) = call(
        http,
        "POST",
        "/topics",
        Some(
            r#"{"name":"orders","partitions":4,"replication_factor":1,"configs":{"retention.ms":"3600000"}}"#,
        ),
    );
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["partitions"], 4);
    let (status, again) = call(http, "POST", "/topics", Some(r#"{"name":"orders"}"#));
    assert_eq!((status, again["error_code"].clone()), (409, json!(36)));
    for bad in [
        r#"{"name":"bad name!"}"#,
        r#"{"name":"x","partitions":0}"#,
        r#"{"name":"y","configs":{"retention.ms":"soon"}}"#,
        r#"{"name":"z","colour":"red"}"#,
        r#"not json"#,
    ] {
        let (status, refused) = call(http, "POST", "/topics", Some(bad));
        assert_eq!(status, 400, "{bad}: {refused}");
        assert!(refused["message"].as_str().is_some(), "{refused}");
    }
    let (status, listed) = call(http, "GET", "/topics", None);
    assert_eq!(status, 200);
    assert!(listed
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "orders" && t["partitions"] == 4));
    let (status, described) = call(http, "GET", "/topics/orders", None);
    assert_eq!(status, 200);
    assert_eq!(described["configs"]["retention.ms"], "3600000");
    assert_eq!(described["partitions"].as_array().unwrap().len(), 4);
    assert_eq!(call(http, "GET", "/topics/nothing", None).0, 404);

    // Messages: one, base64; one as text with headers; a batch.
    let (status, one) = call(
        http,
        "POST",
        "/topics/orders/messages",
        Some(&format!(
            r#"{{"key":"{}","value":"{}"}}"#,
            b64("user-7"),
            b64("first")
        )),
    );
    assert_eq!(status, 200, "{one}");
    let partition = one["partition"].as_i64().unwrap();
    assert_eq!(one["offset"], 0);
    assert!(one["timestamp"].as_i64().unwrap() > 1_700_000_000_000);
    let (status, text) = call(
        http,
        "POST",
        "/topics/orders/messages?encoding=text&acks=1",
        Some(r#"{"key":"user-7","value":"second","headers":{"trace":"abc"}}"#),
    );
    assert_eq!(status, 200, "{text}");
    assert_eq!(
        (text["partition"].as_i64().unwrap(), text["offset"].as_i64()),
        (partition, Some(1)),
        "one key, one partition, in order"
    );
    let records: Vec<Value> = (0..10)
        .map(|i| json!({"key": b64(&format!("k{i}")), "value": b64(&format!("v{i}"))}))
        .collect();
    let (status, batch) = call(
        http,
        "POST",
        "/topics/orders/messages?acks=all",
        Some(&json!({ "records": records }).to_string()),
    );
    assert_eq!(status, 200, "{batch}");
    assert_eq!(batch["offsets"].as_array().unwrap().len(), 10);
    let (status, pinned) = call(
        http,
        "POST",
        "/topics/orders/messages?encoding=text",
        Some(r#"{"value":"to three","partition":3}"#),
    );
    assert_eq!((status, pinned["partition"].clone()), (200, json!(3)));

    // Refusals: unknown topic, bad base64, bad acks, empty, no key or value, bad partition.
    let value = format!(r#"{{"value":"{}"}}"#, b64("x"));
    let (status, unknown) = call(http, "POST", "/topics/nothing/messages", Some(&value));
    assert_eq!((status, unknown["error_code"].clone()), (404, json!(3)));
    for (query, body) in [
        ("", r#"{"value":"!!not base64"}"#),
        ("?acks=2", value.as_str()),
        ("?encoding=rot13", value.as_str()),
        ("", r#"{"records":[]}"#),
        ("", r#"{}"#),
        ("?encoding=text", r#"{"value":"x","partition":4}"#),
        ("", r#"{"value":"eA==","extra":1}"#),
        ("", "[1,2"),
    ] {
        let (status, refused) = call(
            http,
            "POST",
            &format!("/topics/orders/messages{query}"),
            Some(body),
        );
        assert_eq!(status, 400, "{query} {body}: {refused}");
    }

    // Watermarks, and what a Kafka consumer sees of it all.
    let (status, marks) = call(
        http,
        "GET",
        &format!("/topics/orders/partitions/{partition}/watermark"),
        None,
    );
    assert_eq!(status, 200);
    assert_eq!(marks["earliest"], 0);
    assert!(marks["latest"].as_i64().unwrap() >= 2, "{marks}");
    assert_eq!(
        call(http, "GET", "/topics/orders/partitions/9/watermark", None).0,
        404
    );
    assert_eq!(
        call(http, "GET", "/topics/orders/partitions/x/watermark", None).0,
        400
    );
    let consumed = Command::new("timeout")
        .args([
            "30",
            "kcat",
            "-C",
            "-b",
            &broker.bootstrap(),
            "-t",
            "orders",
        ])
        .args(["-p", &partition.to_string(), "-o", "beginning", "-e", "-q"])
        .args(["-f", "%o %k %s %h\n"])
        .output()
        .unwrap();
    let lines: Vec<String> = String::from_utf8_lossy(&consumed.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines[0], "0 user-7 first ");
    assert_eq!(lines[1], "1 user-7 second trace=abc");

    // Malformed HTTP: a huge content-length, garbage, a huge head (each
    // answered, then the connection closes). A chunked body is read like
    // any other (here: not JSON).
    let (status, _) = exchange(
        http,
        b"POST /topics/orders/messages HTTP/1.1\r\ncontent-length: 99999999999\r\n\r\n",
    );
    assert_eq!(status, 413);
    let (status, refused) = exchange(
        http,
        b"POST /topics HTTP/1.1\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n\
          5\r\nhello\r\n0\r\n\r\n",
    );
    assert_eq!(status, 400, "{refused}");
    let (status, _) = exchange(http, b"garbage\r\n\r\n");
    assert_eq!(status, 400);
    let (status, _) = exchange(http, &[b'x'; 20_000]);
    assert_eq!(status, 431);
    assert_eq!(call(http, "GET", "/nowhere", None).0, 404);
    assert_eq!(call(http, "PUT", "/topics", None).0, 405);
    assert_eq!(
        call(http, "POST", "/consumer-groups/g/join", Some("{}")).0,
        400
    );

    // Delete; then it is gone.
    assert_eq!(call(http, "DELETE", "/topics/orders", None).0, 204);
    assert_eq!(call(http, "GET", "/topics/orders", None).0, 404);
    assert_eq!(call(http, "DELETE", "/topics/orders", None).0, 404);
    assert_eq!(
        call(http, "DELETE", "/topics/__consumer_offsets", None).0,
        400
    );
    // Refusals carry sentences, never internal names.
    let (status, refused) = call(
        http,
        "POST",
        "/consumer-groups/g/join",
        Some(r#"{"consumer_id":"c","topics":["orders"],"session_timeout_ms":1}"#),
    );
    assert_eq!(
        (status, refused["error_code"].clone()),
        (400, json!(26)),
        "{refused}"
    );
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("the session timeout is outside"),
        "{refused}"
    );
    // The broker still serves Kafka clients after all that.
    let listed = Command::new("kcat")
        .args(["-L", "-b", &broker.bootstrap()])
        .output()
        .unwrap();
    assert!(
        listed.status.success(),
        "{:?} {}",
        broker.logged("WARN"),
        String::from_utf8_lossy(&listed.stderr)
    );
}

/// Reads one response from a kept-alive connection: (status, headers,
/// body), the body by its content-length.
fn read_response(stream: &mut std::io::BufReader<std::net::TcpStream>) -> (u16, String, String) {
    use std::io::BufRead;
    let mut head = String::new();
    loop {
        let mut line = String::new();
        assert!(
            stream.read_line(&mut line).unwrap() > 0,
            "closed mid-answer: {head}"
        );
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length: ")
                .map(str::to_string)
        })
        .map_or(0, |l| l.trim().parse().unwrap());
    let mut body = vec![0; length];
    stream.read_exact(&mut body).unwrap();
    (status, head, String::from_utf8(body).unwrap())
}

#[test]
fn one_connection_carries_many_requests_chunked_bodies_and_pipelined_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let connection = std::net::TcpStream::connect(broker.http).unwrap();
    connection
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let mut writer = connection.try_clone().unwrap();
    let mut reader = std::io::BufReader::new(connection);
    // Several requests one after another, each answered on the same
    // connection, which stays open.
    let create = r#"{"name":"kept","partitions":1,"replication_factor":1}"#;
    let request = format!(
        "POST /topics HTTP/1.1\r\nhost: b\r\ncontent-length: {}\r\n\r\n{create}",
        create.len()
    );
    writer.write_all(request.as_bytes()).unwrap();
    let (status, head, body) = read_response(&mut reader);
    assert_eq!(status, 201, "{body}");
    assert!(
        !head.to_ascii_lowercase().contains("connection: close"),
        "{head}"
    );
    for _ in 0..3 {
        writer
            .write_all(b"GET /health HTTP/1.1\r\nhost: b\r\n\r\n")
            .unwrap();
        assert_eq!(read_response(&mut reader).0, 200);
    }
    // A chunked body (as curl sends one read from a pipe), in three
    // chunks, produces one message.
    let message = r#"{"key":"k","value":"chunked"}"#;
    let (first, rest) = message.split_at(10);
    let (second, third) = rest.split_at(7);
    let chunked = format!(
        "POST /topics/kept/messages?encoding=text HTTP/1.1\r\nhost: b\r\n\
         transfer-encoding: chunked\r\n\r\n{:x}\r\n{first}\r\n{:x}\r\n{second}\r\n\
         {:x}\r\n{third}\r\n0\r\n\r\n",
        first.len(),
        second.len(),
        third.len()
    );
    writer.write_all(chunked.as_bytes()).unwrap();
    let (status, _, body) = read_response(&mut reader);
    assert_eq!(status, 200, "{body}");
    // A pipelined pair, written in one go: answered in order.
    writer
        .write_all(
            b"GET /topics/kept/partitions/0/watermark HTTP/1.1\r\nhost: b\r\n\r\n\
              GET /nowhere HTTP/1.1\r\nhost: b\r\n\r\n",
        )
        .unwrap();
    let (status, _, watermark) = read_response(&mut reader);
    assert_eq!(status, 200, "{watermark}");
    let watermark: Value = serde_json::from_str(&watermark).unwrap();
    assert_eq!(watermark["latest"], 1, "the chunked message landed");
    assert_eq!(read_response(&mut reader).0, 404);
    // `connection: close` is honoured: answered, then closed.
    writer
        .write_all(b"GET /health HTTP/1.1\r\nhost: b\r\nconnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut reader).0, 200);
    let mut rest = Vec::new();
    assert_eq!(reader.read_to_end(&mut rest).unwrap(), 0, "closed after it");
}

#[test]
fn a_key_lands_where_librdkafkas_java_compatible_partitioner_puts_it() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let (status, _) = call(
        broker.http,
        "POST",
        "/topics",
        Some(r#"{"name":"keyed","partitions":12}"#),
    );
    assert_eq!(status, 201);
    let keys: Vec<String> = (0..40).map(|i| format!("customer-{i}")).collect();
    let mut kcat = Command::new("kcat")
        .args(["-P", "-b", &broker.bootstrap(), "-t", "keyed", "-K", ":"])
        .args(["-X", "partitioner=murmur2_random"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("kcat (the test command installs it)");
    {
        let stdin = kcat.stdin.as_mut().unwrap();
        for key in &keys {
            writeln!(stdin, "{key}:from-kafka").unwrap();
        }
    }
    assert!(kcat.wait().unwrap().success());
    let consumed = Command::new("timeout")
        .args(["30", "kcat", "-C", "-b", &broker.bootstrap(), "-t", "keyed"])
        .args(["-o", "beginning", "-e", "-q", "-f", "%p %k\n"])
        .output()
        .unwrap();
    let kafka: std::collections::BTreeMap<String, i64> = String::from_utf8_lossy(&consumed.stdout)
        .lines()
        .map(|l| {
            let (p, k) = l.split_once(' ').unwrap();
            (k.to_string(), p.parse().unwrap())
        })
        .collect();
    assert_eq!(kafka.len(), keys.len());
    for key in &keys {
        let (status, answer) = call(
            broker.http,
            "POST",
            "/topics/keyed/messages?encoding=text",
            Some(&json!({"key": key, "value": "from-http"}).to_string()),
        );
        assert_eq!(status, 200);
        assert_eq!(answer["partition"].as_i64(), Some(kafka[key]), "{key}");
    }
}

#[test]
fn the_openapi_file_parses_and_describes_every_endpoint() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let file = root.join("docs/openapi.yaml");
    // scripts/test.sh puts PyYAML in its virtualenv (KAFKA_PYTHON).
    let python = std::env::var("KAFKA_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = "import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); \
                  print('\\n'.join(f'{m.upper()} {p}' for p, ops in d['paths'].items() \
                  for m in ops if m != 'parameters'))";
    let out = Command::new(&python)
        .args(["-c", script])
        .arg(&file)
        .output()
        .expect("python (scripts/test.sh sets KAFKA_PYTHON)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let described: std::collections::BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    for endpoint in [
        "GET /health",
        "GET /metrics",
        "GET /topics",
        "POST /topics",
        "GET /topics/{topic}",
        "DELETE /topics/{topic}",
        "POST /topics/{topic}/messages",
        "POST /producers",
        "GET /topics/{topic}/partitions/{partition}/watermark",
        "POST /consumer-groups/{group}/join",
        "POST /consumer-groups/{group}/heartbeat",
        "POST /consumer-groups/{group}/commit",
        "POST /consumer-groups/{group}/leave",
        "GET /consumer-groups/{group}/poll",
        "POST /share-groups/{group}/receive",
        "POST /share-groups/{group}/ack",
    ] {
        assert!(
            described.contains(endpoint),
            "{endpoint} not in {described:?}"
        );
    }
}
