//! A Kafka-protocol client library on glommio: connections with typed
//! calls and ApiVersions negotiation, a cluster view (brokers, partition
//! leaders), a producer (batching, acks, the Java client's key
//! partitioner, retries), a consumer of assigned partitions, and admin calls
//! (transactions' among them: list, describe, find hanging, abort). Also
//! the allocator options the broker and loadgen set at start
//! ([`allocator`]): the crate both programs use.

#![warn(missing_docs)]

pub mod acls;
pub mod admin;
pub mod allocator;
pub mod batch_builder;
pub mod cluster;
pub mod connection;
pub mod consumer;
pub mod consumer_groups;
pub mod groups;
pub mod partitioner;
pub mod producer;
pub mod quorum;
pub mod quotas;
pub mod reassignments;
pub mod records;
pub mod scram;
pub mod security;
pub mod share_groups;
pub mod tls;
pub mod transactions;
pub mod users;
