//! The Kafka wire protocol on the broker side: framing, request headers,
//! bounds checks before decoding, response encoding, and the handlers that
//! need no broker state (ApiVersions, Metadata answers).

pub mod api_versions;
pub mod bounds;
pub mod decode;
pub mod frame;
pub mod metadata;
pub mod produce_legacy;
pub mod request;
pub mod response;
