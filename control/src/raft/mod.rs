//! The metadata quorum on raft-rs: one node's Raft and metadata state
//! machine with no I/O ([`node`]), its durable state in a directory
//! ([`disk`]) behind the few file operations it needs ([`files`], which a
//! test can crash inside), and the stream of committed changes that
//! shards follow, made from what the node applied ([`changes`]). A layer
//! of its own because it only orders and applies the model's records: it
//! knows nothing of what the controller decides nor of how messages
//! travel, so the simulation can drive it deterministically.

pub mod changes;
pub mod disk;
pub mod files;
pub mod node;
