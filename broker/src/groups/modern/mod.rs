//! The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat), sans
//! I/O, beside the classic protocol of [`super::membership`]: members
//! heartbeat, the coordinator computes the assignment and hands it out
//! member by member, each partition revoked from its old owner before
//! it is given to the new one. docs/consumer-groups.md, "The consumer
//! protocol (KIP-848)", has the rules and the plan; built so far:
//! [`reconcile`], one member's way from its assignment to its target, and
//! [`assign`], the server-side assignors that compute the targets;
//! [`group_records`], the groups' records in `__consumer_offsets`.

pub mod assign;
pub mod consumer;
pub(crate) mod flex;
pub mod group_records;
pub mod reconcile;
pub mod share_group;
pub mod share_records;
pub mod topic_regex;

/// The seed of a randomized test: `SEED` if set (to replay a run), else
/// random; printed either way.
#[cfg(test)]
pub(crate) fn test_seed() -> u64 {
    let seed = std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("SEED={seed}");
    seed
}
