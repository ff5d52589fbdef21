//! The broker's two clocks, named for what they are.
//!
//! - [`monotonic_ms`]: milliseconds since the process started, never going
//!   back; for leases, heartbeats and the replication crate's time (every
//!   shard reads the same clock).
//! - [`wall_ms`]: milliseconds since the Unix epoch; for what is written
//!   down or sent (record timestamps, commit times, incarnations). It may
//!   jump when the system clock is set.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Milliseconds on a monotonic clock every shard shares.
pub fn monotonic_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Milliseconds since the Unix epoch (0 if the system clock is before it).
pub fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_monotonic_clock_never_goes_back_and_the_wall_clock_is_recent() {
        let first = monotonic_ms();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(monotonic_ms() >= first + 2);
        // After 2020-01-01: a wall clock, not an uptime.
        assert!(wall_ms() > 1_577_836_800_000);
    }
}
