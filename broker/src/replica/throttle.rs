//! The replication throttle (Kafka's `follower.replication.throttled.rate`):
//! the bytes a shard copies for replicas a reassignment is adding here,
//! held to its share of the broker's rate, so a move does not take the
//! disk and network from producers. A token bucket holding one second of
//! the rate: a fetch that overdraws it makes that partition wait until
//! the debt is paid. Replicas already in place are never throttled: a
//! follower catching up after a restart must rejoin the ISR.

use std::cell::RefCell;

/// One shard's bucket.
#[derive(Debug, Default)]
pub struct Throttle {
    /// Bytes that may be copied now (negative: owed).
    available: f64,
    /// When it was last filled, ms.
    filled_ms: u64,
}

impl Throttle {
    /// Charges `bytes` copied at `now_ms` against `rate` bytes per second;
    /// how long (ms) the partition waits before its next fetch.
    pub fn charge(&mut self, bytes: u64, rate: u64, now_ms: u64) -> u64 {
        if rate == 0 {
            return 0;
        }
        let rate = rate as f64;
        let elapsed = now_ms.saturating_sub(self.filled_ms) as f64 / 1000.0;
        self.filled_ms = now_ms;
        self.available = (self.available + elapsed * rate).min(rate) - bytes as f64;
        if self.available >= 0.0 {
            0
        } else {
            (-self.available / rate * 1000.0).ceil() as u64
        }
    }
}

thread_local! {
    /// This shard's bucket (one executor per thread).
    static SHARD_THROTTLE: RefCell<Throttle> = RefCell::default();
}

/// Charges this shard's bucket (see [`Throttle::charge`]).
pub fn charge(bytes: u64, rate: u64, now_ms: u64) -> u64 {
    SHARD_THROTTLE.with(|throttle| throttle.borrow_mut().charge(bytes, rate, now_ms))
}

#[cfg(test)]
mod tests {
    use super::Throttle;

    #[test]
    fn copying_is_held_to_the_rate_after_a_second_of_burst() {
        let rate = 1_000_000;
        let mut throttle = Throttle::default();
        // The bucket starts full after a second.
        assert_eq!(throttle.charge(0, rate, 1_000), 0);
        assert_eq!(throttle.charge(600_000, rate, 1_000), 0);
        assert_eq!(throttle.charge(600_000, rate, 1_000), 200, "200 KB owed");
        // Waiting as told pays the debt; copying at the rate never waits long.
        let mut now = 1_200;
        let mut copied = 0u64;
        while now < 11_200 {
            let wait = throttle.charge(100_000, rate, now);
            copied += 100_000;
            now += wait.max(1);
        }
        let per_second = copied as f64 / 10.0;
        assert!(
            (900_000.0..=1_100_000.0).contains(&per_second),
            "{per_second} bytes/s at a rate of {rate}"
        );
        assert_eq!(
            Throttle::default().charge(u64::MAX / 2, 0, 5),
            0,
            "0: unthrottled"
        );
    }
}
