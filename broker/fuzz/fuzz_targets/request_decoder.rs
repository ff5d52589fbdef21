//! The request decoder on arbitrary bytes: a frame's header, then the
//! body of whichever API and version it names (bounds walk, then codec),
//! and Produce v0-2's own walker. Nothing may panic, abort or allocate
//! beyond the input's size (libFuzzer's malloc limit reports it).
#![no_main]

use broker::kafka::{decode, produce_legacy, request};
use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(request) = request::parse(Bytes::copy_from_slice(data)) else {
        return;
    };
    let _ = decode::decode_any(&request);
    let version = request.header.request_api_version;
    if request.api_key == ApiKey::Produce && (0..3).contains(&version) {
        let _ = produce_legacy::answer(version, 1, &request.body);
    }
});
