//! The runtime layer: what a thread-per-core server needs whatever it
//! serves. Work sent to another shard ([`sharded`]), the clocks
//! ([`clock`]), and waiting with a bound ([`wait`]). Nothing here knows of
//! Kafka, partitions or the cluster; every other layer builds on it.

pub mod clock;
pub mod sharded;
pub mod wait;
