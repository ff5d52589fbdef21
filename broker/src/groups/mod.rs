//! Consumer groups: one group's membership (join, sync, heartbeat, leave,
//! timeouts, static members), the KIP-848 protocol's rules as they are
//! built ([`modern`]), the groups of one `__consumer_offsets`
//! partition rebuilt from its records, offsets pending in transactions,
//! the records' layout, and lag. All
//! sans-IO; `crate::coordinator` runs them on the partition's shard.

pub mod consumer_protocol;
pub mod lag;
pub mod membership;
pub mod modern;
pub mod pending;
pub mod record_error;
pub mod records;
pub mod share_state;
pub mod store;

/// The internal topic holding committed offsets and group membership.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// The `__consumer_offsets` partition of a group, as Kafka places it:
/// Java's `String.hashCode` of the group id, made non-negative the way
/// Kafka's `Utils.abs` does, modulo the partition count. Kafka tools
/// reading the topic find a group where Kafka would put it.
pub fn offsets_partition(group: &str, partitions: u32) -> u32 {
    let hash = group
        .encode_utf16()
        .fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(unit as i32));
    (hash & 0x7fff_ffff) as u32 % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_land_where_kafka_puts_them() {
        // Java: "test".hashCode() == 3556498; "my-group".hashCode() ==
        // -1906497762 (it overflows), placed at 36 of 50 by Kafka.
        assert_eq!(offsets_partition("test", 50), 3556498 % 50);
        assert_eq!(offsets_partition("my-group", 50), 36);
        assert_eq!(offsets_partition("", 50), 0);
    }
}
