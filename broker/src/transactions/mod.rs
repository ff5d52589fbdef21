//! Transactions (KIP-98), the coordinator's side, sans I/O: one
//! transactional id's metadata, the rules over the ids of one
//! `__transaction_state` partition, and that topic's records. The
//! partition side (open transactions, the last stable offset, aborted
//! transactions, markers) is the storage crate's (`storage::transactions`,
//! `storage::markers`).

pub mod metadata;
pub mod records;
pub mod store;

pub use records::TRANSACTION_STATE_TOPIC;

/// The `__transaction_state` partition of a transactional id, as Kafka
/// places it (the same hash as a group's offsets partition).
pub fn state_partition(transactional_id: &str, partitions: u32) -> u32 {
    crate::groups::offsets_partition(transactional_id, partitions)
}
