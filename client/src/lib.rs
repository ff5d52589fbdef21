//! A Kafka-protocol client library. Built so far: a connection with typed
//! calls and ApiVersions negotiation, and the default key partitioner. The
//! producer, consumer and admin calls are the open broker issue.

#![warn(missing_docs)]

pub mod connection;
pub mod partitioner;
