//! The control plane: the cluster metadata (brokers, topics, partitions,
//! leaders, ISR, epochs), the records that change it, and replica
//! placement. The Raft quorum that orders the records, the controller and
//! the transports are still to come (see the open issue).

#![warn(missing_docs)]

pub mod config;
pub mod controller;
pub mod disk;
pub mod error;
pub mod memory;
pub mod model;
pub mod node;
pub mod placement;
// rkyv's derive generates a resolver enum whose fields carry no docs.
#[allow(missing_docs)]
pub mod record;
pub mod service;
pub mod tcp;
pub mod transport;
pub mod types;

pub use config::{CleanupPolicy, TopicConfig};
pub use error::MetadataError;
pub use model::{Broker, Metadata, Partition, Topic};
pub use record::{BrokerRegistration, MetadataRecord, PartitionAssignment, PartitionChange};
pub use types::{
    BrokerId, Incarnation, LeaderEpoch, PartitionEpoch, PartitionId, ShardId, TopicId,
};
