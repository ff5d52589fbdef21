//! The HTTP request parser on arbitrary bytes: the head (as the listener
//! reads it, a growing prefix at a time), then the request with the rest
//! as its body, cut or padded to its Content-Length. Nothing may panic,
//! and nothing may allocate more than the bounds allow (libFuzzer's malloc
//! limit reports it).
#![no_main]

use broker::http_request::{parse_head, request, BODY_BYTES_MAX, HEAD_BYTES_MAX};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The listener reads 4 KiB at a time and parses after each read.
    let mut parsed = None;
    for end in (0..=data.len()).step_by(4096).chain([data.len()]) {
        match parse_head(&data[..end]) {
            Ok(Some(head)) => {
                parsed = Some((head, end));
                break;
            }
            Ok(None) => assert!(end <= HEAD_BYTES_MAX + 4096, "an unbounded head"),
            Err(refusal) => {
                assert!((400..500).contains(&refusal.status));
                return;
            }
        }
    }
    let Some((head, read)) = parsed else { return };
    assert!(head.content_length <= BODY_BYTES_MAX);
    assert!(head.head_bytes <= read);
    // What was read with the head is part of the body, never more of it
    // than declared; the rest comes from the stream, exactly what is left.
    let mut body = data[head.head_bytes..read].to_vec();
    assert!(body.len() <= head.content_length, "more body than declared was accepted");
    let missing = head.content_length - body.len();
    let rest = &data[read..];
    body.extend_from_slice(&rest[..missing.min(rest.len())]);
    body.resize(head.content_length, 0);
    let request = request(&head, body);
    assert_eq!(request.body.len(), head.content_length);
});
