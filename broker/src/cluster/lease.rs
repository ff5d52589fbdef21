//! Whether this broker may lead, and whether it may serve: one lease and
//! one readiness mark per process (one broker per process), set by the
//! heartbeat loop on shard 0 and read by every shard.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::runtime::clock::monotonic_ms;

/// Until when (on [`monotonic_ms`]'s clock) this broker may act as a leader:
/// while its last acknowledged heartbeat keeps it from being fenced. A
/// broker that stalled (paused, partitioned) past its session may have
/// been fenced and replaced without knowing it; until a heartbeat is
/// answered again and its metadata caught up, it leads nothing (one broker
/// per process, so one lease).
static LEASE_UNTIL_MS: AtomicU64 = AtomicU64::new(0);

/// The metadata index at which this broker became ready to serve (0: not
/// yet): its registration committed and unfenced, the cluster named. A
/// shard accepts connections once its own copy of the metadata reached it,
/// so the first request on any shard sees at least what the broker went
/// live with.
static READY_AT_INDEX: AtomicU64 = AtomicU64::new(0);

/// Marks the broker ready as of metadata `index` (once).
pub fn mark_ready(index: u64) {
    let _ = READY_AT_INDEX.compare_exchange(0, index.max(1), Ordering::SeqCst, Ordering::SeqCst);
}

/// Whether a shard whose copy of the metadata is at `applied` may serve.
pub fn ready_to_serve(applied: Option<u64>) -> bool {
    let ready_at = READY_AT_INDEX.load(Ordering::SeqCst);
    ready_at > 0 && applied.is_some_and(|a| a >= ready_at)
}

/// Whether this broker's lease is current (see [`LEASE_UNTIL_MS`]).
pub fn lease_valid() -> bool {
    monotonic_ms() < LEASE_UNTIL_MS.load(Ordering::Relaxed)
}

/// Extends the lease to `until_ms` (on [`monotonic_ms`]'s clock); never
/// shortens it.
pub fn extend_lease(until_ms: u64) {
    LEASE_UNTIL_MS.fetch_max(until_ms, Ordering::Relaxed);
}
