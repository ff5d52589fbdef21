//! A Kafka-protocol client library. Built so far: the default key
//! partitioner. The connection, producer, consumer and admin calls are the
//! open broker issue.

#![warn(missing_docs)]

pub mod partitioner;
