//! The HTTP/1.1 request wire format the HTTP listener reads, sans I/O (so
//! it is fuzzed as the Kafka decoder is): a head of at most
//! [`HEAD_BYTES_MAX`] bytes, a body of exactly its Content-Length, at most
//! [`BODY_BYTES_MAX`]; chunked bodies refused. Every refusal carries the
//! status to answer with.

use std::collections::BTreeMap;

/// The largest request head read.
pub const HEAD_BYTES_MAX: usize = 8 * 1024;
/// The largest request body accepted (a batch of messages, base64 in JSON).
pub const BODY_BYTES_MAX: usize = 16 << 20;

/// Why a request is refused, and the status to answer with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP status.
    pub status: u16,
    /// Why.
    pub message: String,
}

fn refuse(status: u16, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        message: message.into(),
    }
}

/// A request's head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// GET, POST, DELETE...
    pub method: String,
    /// The request target (path and query).
    pub target: String,
    /// The body's length (0 without a Content-Length).
    pub content_length: usize,
    /// Bytes of the head, its blank line included: the body starts here.
    pub head_bytes: usize,
    /// The Authorization header's value, if any.
    pub authorization: Option<String>,
}

/// A whole request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// GET, POST, DELETE...
    pub method: String,
    /// The path, without the query, %-decoded.
    pub path: String,
    /// Query parameters, %-decoded (the last of repeated ones).
    pub query: BTreeMap<String, String>,
    /// The body (empty without one).
    pub body: Vec<u8>,
    /// The Authorization header's value, if any.
    pub authorization: Option<String>,
}

/// Parses the head from the bytes read so far: `Ok(None)` while it is
/// incomplete (read more), a refusal once it cannot become valid.
pub fn parse_head(buffered: &[u8]) -> Result<Option<Head>, Refusal> {
    let Some(end) = buffered.windows(4).position(|w| w == b"\r\n\r\n") else {
        if buffered.len() > HEAD_BYTES_MAX {
            return Err(refuse(431, "request head too large"));
        }
        return Ok(None);
    };
    if end > HEAD_BYTES_MAX {
        return Err(refuse(431, "request head too large"));
    }
    let head = String::from_utf8_lossy(&buffered[..end]);
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut words = line.split_whitespace();
    let (Some(method), Some(target)) = (words.next(), words.next()) else {
        return Err(refuse(400, "malformed request line"));
    };
    let mut content_length = None;
    let mut authorization = None;
    for header in lines {
        let Some((name, value)) = header.split_once(':') else {
            return Err(refuse(400, "malformed header"));
        };
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => {
                let length = value
                    .trim()
                    .parse::<usize>()
                    .map_err(|_| refuse(400, "bad content-length"))?;
                if content_length.is_some_and(|l| l != length) {
                    return Err(refuse(400, "conflicting content-lengths"));
                }
                content_length = Some(length);
            }
            "authorization" => authorization = Some(value.trim().to_string()),
            "transfer-encoding" if !value.trim().eq_ignore_ascii_case("identity") => {
                return Err(refuse(
                    411,
                    "chunked bodies are not accepted: send a content-length",
                ))
            }
            _ => {}
        }
    }
    let content_length = content_length.unwrap_or(0);
    if content_length > BODY_BYTES_MAX {
        return Err(refuse(
            413,
            format!("body of {content_length} bytes exceeds {BODY_BYTES_MAX}"),
        ));
    }
    let head_bytes = end + 4;
    if buffered.len() - head_bytes > content_length {
        return Err(refuse(400, "more body than content-length"));
    }
    Ok(Some(Head {
        method: method.to_string(),
        target: target.to_string(),
        content_length,
        head_bytes,
        authorization,
    }))
}

/// The request of a parsed head and its whole body.
pub fn request(head: &Head, body: Vec<u8>) -> HttpRequest {
    let (path, query) = head.target.split_once('?').unwrap_or((&head.target, ""));
    HttpRequest {
        method: head.method.clone(),
        path: percent_decode(path),
        query: query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (percent_decode(k), percent_decode(v))
            })
            .collect(),
        body,
        authorization: head.authorization.clone(),
    }
}

/// Decodes %XX escapes (a `%` not followed by two hex digits stays).
pub fn percent_decode(text: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(high * 16 + low);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_decode_and_bad_ones_stay() {
        assert_eq!(percent_decode("a%2Fb"), "a/b");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("é%"), "é%");
    }

    #[test]
    fn a_head_parses_once_whole_and_its_request_decodes() {
        let raw = b"POST /topics/a%2Fb/messages?acks=all&encoding=text HTTP/1.1\r\n\
            Content-Length: 2\r\n\r\nhi";
        assert_eq!(parse_head(&raw[..20]), Ok(None));
        let head = parse_head(raw).unwrap().unwrap();
        assert_eq!(head.content_length, 2);
        let body = raw[head.head_bytes..].to_vec();
        let request = request(&head, body);
        assert_eq!(request.path, "/topics/a/b/messages");
        assert_eq!(request.query["acks"], "all");
        assert_eq!(request.body, b"hi");
    }

    #[test]
    fn every_fuzz_seed_parses_to_its_verdict() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/http_request");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let raw = std::fs::read(entry.path()).unwrap();
            let name = entry.file_name().to_string_lossy().to_string();
            let parsed = parse_head(&raw);
            if name == "chunked" {
                assert_eq!(parsed.unwrap_err().status, 411);
            } else {
                let head = parsed
                    .unwrap()
                    .unwrap_or_else(|| panic!("{name}: incomplete"));
                assert_eq!(raw.len() - head.head_bytes, head.content_length, "{name}");
            }
            seen += 1;
        }
        assert!(seen >= 6);
    }

    #[test]
    fn bad_heads_are_refused_with_their_status() {
        let status = |raw: &[u8]| parse_head(raw).unwrap_err().status;
        assert_eq!(status(b"GET\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\r\nnocolon\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\r\ncontent-length: x\r\n\r\n"), 400);
        assert_eq!(
            status(b"GET / HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n"),
            400
        );
        assert_eq!(
            status(b"GET / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n"),
            411
        );
        assert_eq!(
            status(b"GET / HTTP/1.1\r\ncontent-length: 99999999999\r\n\r\n"),
            413
        );
        assert_eq!(
            status(b"GET / HTTP/1.1\r\ncontent-length: 1\r\n\r\nxy"),
            400
        );
        assert_eq!(status(&vec![b'a'; HEAD_BYTES_MAX + 1]), 431);
    }
}
