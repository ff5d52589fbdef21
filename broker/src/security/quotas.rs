//! Client quotas, sans-IO: how many bytes each client (user and client
//! id) produced or fetched on this shard over the last seconds, and how
//! much of the shard's time its requests took, and how long it must pause
//! when that is over its quota (Kafka's throttle time: long enough that
//! the rate over the window falls back to the quota).
//! The broker answers at once with the throttle time and then reads
//! nothing more from the connection for that long (KIP-219), so a client
//! over its quota slows down without holding anyone else's request.
//!
//! Each shard meters its own connections against the quota divided by
//! the number of shards (a broker's quota, as Kafka's is per broker).

use std::collections::HashMap;

/// The window the rate is measured over: this many one-second samples.
pub const SAMPLES: u64 = 10;
/// One sample's length.
pub const SAMPLE_MS: u64 = 1_000;
/// The longest throttle handed out (Kafka caps it by its window).
pub const THROTTLE_MAX_MS: u64 = SAMPLES * SAMPLE_MS;
/// Clients metered at most on one shard before idle ones are forgotten.
pub const CLIENTS_MAX: usize = 10_000;

/// What is metered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metered {
    /// Bytes produced (request sizes).
    Produce,
    /// Bytes fetched (response sizes).
    Fetch,
    /// Microseconds the shard spent on the client's requests (the time
    /// their handling ran, not the time it waited on disks or peers).
    RequestTime,
}

impl Metered {
    /// The quota key that limits it.
    pub fn quota_key(self) -> &'static str {
        match self {
            Metered::Produce => control::model::quotas::PRODUCER_BYTE_RATE,
            Metered::Fetch => control::model::quotas::CONSUMER_BYTE_RATE,
            Metered::RequestTime => control::model::quotas::REQUEST_PERCENTAGE,
        }
    }

    /// A quota's value as units per second of what is metered: bytes, or
    /// for `request_percentage` microseconds (100% is one shard's whole
    /// second).
    pub fn per_second(self, quota: u64) -> u64 {
        match self {
            Metered::Produce | Metered::Fetch => quota,
            Metered::RequestTime => quota.saturating_mul(10_000),
        }
    }
}

/// One client's amount (bytes, or microseconds) per one-second sample.
#[derive(Debug, Default)]
struct Meter {
    /// (sample start ms, bytes), oldest first, within the window.
    samples: Vec<(u64, u64)>,
}

impl Meter {
    fn record(&mut self, bytes: u64, now_ms: u64) {
        let start = now_ms - now_ms % SAMPLE_MS;
        let window_start = start.saturating_sub((SAMPLES - 1) * SAMPLE_MS);
        self.samples.retain(|(at, _)| *at >= window_start);
        match self.samples.last_mut() {
            Some((at, total)) if *at == start => *total += bytes,
            _ => self.samples.push((start, bytes)),
        }
    }

    /// How long to pause so the window's rate falls to `quota` bytes/s.
    fn throttle_ms(&self, quota: u64, now_ms: u64) -> u64 {
        let Some((oldest, _)) = self.samples.first() else {
            return 0;
        };
        let total: u64 = self.samples.iter().map(|(_, bytes)| bytes).sum();
        // The samples in the window, the current one counted whole: a
        // client at its quota is never throttled at a sample's start, and
        // a burst at the start is measured over one second, not over the
        // milliseconds since it began (Kafka measures it over nine, which
        // lets a new client send nine seconds' worth at once).
        let span_ms = now_ms - now_ms % SAMPLE_MS + SAMPLE_MS - oldest;
        let allowed = quota.saturating_mul(span_ms) / 1_000;
        if total <= allowed {
            return 0;
        }
        ((total - allowed).saturating_mul(1_000) / quota.max(1)).min(THROTTLE_MAX_MS)
    }

    fn last_ms(&self) -> u64 {
        self.samples.last().map_or(0, |(at, _)| *at)
    }
}

/// The meters of one shard's clients.
#[derive(Debug, Default)]
pub struct Meters {
    clients: HashMap<(Metered, String, String), Meter>,
    /// When idle meters were last forgotten (at most once a sample, so a
    /// client cycling client ids cannot make every request scan them).
    pruned_ms: u64,
}

impl Meters {
    /// Records `amount` of `metered` by (`user`, `client_id`) at `now_ms`
    /// against `quota` units per second (this shard's share); the
    /// throttle time.
    pub fn record(
        &mut self,
        metered: Metered,
        (user, client_id): (&str, &str),
        amount: u64,
        quota: u64,
        now_ms: u64,
    ) -> u64 {
        if self.clients.len() >= CLIENTS_MAX && now_ms >= self.pruned_ms + SAMPLE_MS {
            self.pruned_ms = now_ms;
            let recent = now_ms.saturating_sub(SAMPLES * SAMPLE_MS);
            self.clients.retain(|_, meter| meter.last_ms() >= recent);
        }
        let key = (metered, user.to_string(), client_id.to_string());
        let meter = self.clients.entry(key).or_default();
        meter.record(amount, now_ms);
        meter.throttle_ms(quota, now_ms)
    }
}

/// This shard's share of a broker's quota.
pub fn shard_share(quota: u64, shards: usize) -> u64 {
    quota.div_ceil(shards.max(1) as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALICE: (&str, &str) = ("alice", "app");

    #[test]
    fn under_the_quota_nothing_is_throttled() {
        let mut meters = Meters::default();
        for second in 0..20 {
            let now = second * 1_000;
            assert_eq!(meters.record(Metered::Produce, ALICE, 900, 1_000, now), 0);
        }
    }

    #[test]
    fn over_the_quota_the_pause_brings_the_rate_back_to_it() {
        let mut meters = Meters::default();
        // 5,000 bytes at once against 1,000 bytes/s: 4 s of pause, so that
        // 5,000 bytes over the 5 s since are the quota.
        let throttle = meters.record(Metered::Produce, ALICE, 5_000, 1_000, 0);
        assert_eq!(throttle, 4_000);
        // After the pause, the same rate is under the quota again.
        assert_eq!(meters.record(Metered::Produce, ALICE, 0, 1_000, 5_000), 0);
        // Another client, and the other direction, have meters of their own.
        assert_eq!(
            meters.record(Metered::Produce, ("bob", "app"), 500, 1_000, 5_000),
            0
        );
        assert_eq!(meters.record(Metered::Fetch, ALICE, 500, 1_000, 5_000), 0);
    }

    #[test]
    fn old_samples_leave_the_window_and_throttles_are_capped() {
        let mut meters = Meters::default();
        meters.record(Metered::Fetch, ALICE, 1_000_000, 1_000, 0);
        let capped = meters.record(Metered::Fetch, ALICE, 0, 1_000, 1_000);
        assert_eq!(capped, THROTTLE_MAX_MS);
        // Eleven seconds on, the burst is out of the window.
        assert_eq!(meters.record(Metered::Fetch, ALICE, 100, 1_000, 11_000), 0);
    }

    #[test]
    fn a_request_percentage_is_a_share_of_a_shards_second() {
        // 5% of a shard: 50 ms of handling per second. 200 ms used at
        // once is 150 ms over: a 3 s pause brings it to 5% over 4 s.
        let quota = Metered::RequestTime.per_second(5);
        assert_eq!(quota, 50_000);
        let mut meters = Meters::default();
        let throttle = meters.record(Metered::RequestTime, ALICE, 200_000, quota, 0);
        assert_eq!(throttle, 3_000);
        assert_eq!(Metered::Produce.per_second(5), 5);
    }

    #[test]
    fn a_quota_is_shared_between_shards() {
        assert_eq!(shard_share(1_000, 2), 500);
        assert_eq!(shard_share(1_001, 2), 501);
        assert_eq!(shard_share(1, 4), 1);
    }
}
