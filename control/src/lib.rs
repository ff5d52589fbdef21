//! The control plane: the cluster metadata (brokers, topics, partitions,
//! leaders, ISR, epochs), the records that change it, and replica
//! placement; the Raft quorum that orders the records, the controller that
//! decides them, and the transports between metadata nodes.

#![warn(missing_docs)]

pub mod acls;
pub mod changes;
pub mod config;
pub mod controller;
pub mod credentials;
pub mod disk;
pub mod files;
// rkyv's derive generates resolver enums whose fields carry no docs.
#[allow(missing_docs)]
pub mod error;
#[allow(missing_docs)]
pub mod forward;
pub mod link;
pub mod memory;
pub mod model;
pub mod node;
pub mod placement;
pub mod quotas;
// rkyv's derive generates a resolver enum whose fields carry no docs.
#[allow(missing_docs)]
pub mod record;
#[allow(missing_docs)]
pub mod request;
pub mod service;
pub mod snapshot_format;
pub mod tcp;
pub mod transport;
pub mod types;

pub use config::{CleanupPolicy, TopicConfig};
pub use credentials::{ScramCredential, ScramMechanism};
pub use error::MetadataError;
pub use model::{Broker, Metadata, Partition, Topic};
pub use record::{
    BrokerEndpoint, BrokerRegistration, MetadataRecord, PartitionAssignment, PartitionChange,
};
pub use types::{
    BrokerId, ClusterId, Incarnation, LeaderEpoch, PartitionEpoch, PartitionId, ShardId, TopicId,
};
