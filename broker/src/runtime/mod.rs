//! The runtime layer: what a thread-per-core server needs whatever it
//! serves. Work sent to another shard ([`sharded`]), the clocks
//! ([`clock`]), waiting with a bound ([`wait`]), and the time a future
//! kept its thread busy ([`busy`]). Nothing here knows of
//! Kafka, partitions or the cluster; every other layer builds on it.

pub mod busy;
pub mod clock;
pub mod sharded;
pub mod wait;
