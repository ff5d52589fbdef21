//! The HTTP request path on arbitrary bytes: hyper's parser and
//! connection state machine, then the broker's body bounds
//! (`broker::http_request::serve_bytes`). Nothing may panic, every answer
//! is an HTTP/1.1 response, and nothing may allocate more than the bounds
//! allow (libFuzzer's malloc limit reports it).
#![no_main]

use broker::http_request::serve_bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let output = serve_bytes(data);
    assert!(output.is_empty() || output.starts_with(b"HTTP/1.1 "));
});
