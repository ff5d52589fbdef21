//! The broker. Built so far: its configuration, Kafka framing, request
//! headers and ApiVersions. The server itself (shards, listeners, the other
//! Kafka APIs) is the open broker issue.

#![warn(missing_docs)]

pub mod config;
pub mod kafka;
pub mod server;
