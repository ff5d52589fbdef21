//! docs/http-api.md's examples, walked: the block under "Examples
//! (checked)" is read from the page and each request sent to a fresh
//! broker in order; its status must be the one shown and its answer must
//! hold what is shown (the syntax is explained above the block). A page
//! that says one thing while the broker does another fails here.

mod support;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;
use support::start_broker;

/// One example: the request line and the expected answer line.
struct Example {
    request: String,
    status: u16,
    holds: Option<String>,
}

fn examples(page: &str) -> Vec<Example> {
    let section = page
        .split("## Examples (checked)")
        .nth(1)
        .expect("the page has its examples section");
    let block = section
        .split("```http\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a fenced http block");
    let lines: Vec<&str> = block.lines().filter(|l| !l.trim().is_empty()).collect();
    lines
        .chunks(2)
        .map(|pair| {
            let answer = pair
                .get(1)
                .and_then(|l| l.strip_prefix("-> "))
                .unwrap_or_else(|| panic!("{:?} is not followed by an answer", pair[0]));
            let (status, holds) = match answer.split_once(' ') {
                Some((status, holds)) => (status, Some(holds.to_string())),
                None => (answer, None),
            };
            Example {
                request: pair[0].to_string(),
                status: status.parse().expect("a status"),
                holds,
            }
        })
        .collect()
}

/// Sends one request (connection: close) and reads the status and body.
fn send(address: SocketAddr, request: &str) -> (u16, String) {
    let (method, rest) = request.split_once(' ').expect("METHOD PATH");
    let (path, body) = rest.split_once(' ').unwrap_or((rest, ""));
    let mut head = format!("{method} {path} HTTP/1.1\r\nhost: broker\r\nconnection: close\r\n");
    let mut payload = body.as_bytes().to_vec();
    if let Some(n) = token(body, "<head ") {
        head.push_str(&format!("x-pad: {}\r\n", "p".repeat(n)));
        payload.clear();
    }
    let declared = match token(body, "<") {
        // Only the length is sent: the broker refuses it before reading.
        Some(n) if !body.starts_with("<head ") => {
            payload.clear();
            n
        }
        _ => payload.len(),
    };
    head.push_str(&format!("content-length: {declared}\r\n\r\n"));
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&payload).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).to_string();
    let status = (answer.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{request}: no HTTP answer: {answer:?}"));
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}

/// N of `<N bytes>` (after `prefix`), if the body is such a token.
fn token(body: &str, prefix: &str) -> Option<usize> {
    body.strip_prefix(prefix)?
        .strip_suffix(" bytes>")?
        .parse()
        .ok()
}

/// Whether `actual` holds `expected` (binding `"$name"`s).
fn holds(
    actual: &Value,
    expected: &Value,
    vars: &mut HashMap<String, Value>,
) -> Result<(), String> {
    match expected {
        Value::String(s) if s == "..." => Ok(()),
        Value::String(s) if s.starts_with('$') => {
            vars.insert(s[1..].to_string(), actual.clone());
            Ok(())
        }
        Value::Object(fields) => {
            for (key, want) in fields {
                let got = actual.get(key).ok_or(format!("no field {key:?}"))?;
                holds(got, want, vars).map_err(|e| format!("{key}: {e}"))?;
            }
            Ok(())
        }
        Value::Array(wanted) => {
            let got = actual.as_array().ok_or("not an array")?;
            for want in wanted {
                let found = got
                    .iter()
                    .find(|g| holds(g, want, &mut vars.clone()).is_ok());
                let found = found.ok_or(format!("no element holds {want}"))?;
                holds(found, want, vars)?;
            }
            Ok(())
        }
        other if other == actual => Ok(()),
        other => Err(format!("{actual} is not {other}")),
    }
}

fn substitute(text: &str, vars: &HashMap<String, Value>) -> String {
    let mut out = text.to_string();
    for (name, value) in vars {
        let raw = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out = out.replace(&format!("${name}"), &raw);
    }
    out
}

#[test]
fn the_http_api_pages_examples_are_what_the_broker_answers() {
    let page = include_str!("../../docs/http-api.md");
    let examples = examples(page);
    assert!(examples.len() >= 30, "{} examples", examples.len());
    // Every status the page's conventions name is walked or named as
    // walked elsewhere.
    let walked: Vec<u16> = examples.iter().map(|e| e.status).collect();
    for status in [200, 201, 204, 400, 404, 409, 413, 416, 431, 503] {
        assert!(walked.contains(&status), "no example answers {status}");
    }
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let mut vars = HashMap::new();
    for example in &examples {
        let request = substitute(&example.request, &vars);
        let (status, body) = send(broker.http, &request);
        assert_eq!(status, example.status, "{request}\n{body}");
        let Some(expected) = &example.holds else {
            continue;
        };
        let expected: Value = serde_json::from_str(expected)
            .unwrap_or_else(|e| panic!("the page's answer for {request}: {e}"));
        let actual: Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{request}: {e}: {body}"));
        if let Err(why) = holds(&actual, &expected, &mut vars) {
            panic!("{request}\nanswered {actual}\nwhich does not hold {expected}: {why}");
        }
        // Errors carry a sentence, never a bare name.
        if let Some(message) = actual.get("message").and_then(Value::as_str) {
            assert!(message.contains(' '), "{request}: {message:?}");
        }
    }
}
