//! The control plane: the cluster metadata (brokers, topics, partitions,
//! leaders, ISR, epochs), the records that change it, and replica
//! placement; the Raft quorum that orders the records, the controller that
//! decides them, and the transports between metadata nodes.
//!
//! One module per layer, top to bottom: [`service`] (drives a node),
//! [`transport`], [`controller`], [`raft`], [`model`]. A module imports
//! nothing from a layer above its own (control/layers.txt, checked by
//! scripts/import-cycles.py).

#![warn(missing_docs)]

pub mod controller;
pub mod model;
pub mod raft;
pub mod service;
pub mod transport;

pub use model::config::{CleanupPolicy, TopicConfig};
pub use model::credentials::{ScramCredential, ScramMechanism};
pub use model::error::MetadataError;
pub use model::record::{
    BrokerEndpoint, BrokerRegistration, MetadataRecord, PartitionAssignment, PartitionChange,
};
pub use model::types::{
    BrokerId, ClusterId, Incarnation, LeaderEpoch, PartitionEpoch, PartitionId, ShardId, TopicId,
};
pub use model::{Broker, Metadata, Partition, Topic};
