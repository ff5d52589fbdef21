//! The broker. Built so far: its configuration. The server itself (shards,
//! listeners, Kafka API handlers) is the open broker issue.

#![warn(missing_docs)]

pub mod config;
