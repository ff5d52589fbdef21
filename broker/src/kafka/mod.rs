//! The Kafka wire protocol on the broker side: framing, request headers,
//! and the handlers of the APIs served so far.

pub mod api_versions;
pub mod bounds;
pub mod frame;
pub mod metadata;
pub mod request;
