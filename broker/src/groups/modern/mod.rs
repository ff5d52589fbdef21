//! The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat), sans
//! I/O, beside the classic protocol of [`super::membership`]: members
//! heartbeat, the coordinator computes the assignment and hands it out
//! member by member, each partition revoked from its old owner before
//! it is given to the new one. docs/consumer-groups.md, "The consumer
//! protocol (KIP-848)", has the rules and the plan; built so far:
//! [`reconcile`], one member's way from its assignment to its target, and
//! [`assign`], the server-side assignors that compute the targets.

pub mod assign;
pub mod reconcile;
