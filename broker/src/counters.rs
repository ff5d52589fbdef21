//! Each shard's counters: atomics no other core writes, so counting costs
//! an uncontended add; a scrape (the server's /metrics) sums every
//! shard's. Plain data: every layer may count here, none is imported.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Upper bounds of the latency histograms' buckets, in seconds.
pub const LATENCY_BUCKETS_SECONDS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The largest Kafka API key counted (larger ones count as this one).
pub const API_KEYS: usize = 128;

/// A latency histogram with Prometheus's cumulative buckets.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; LATENCY_BUCKETS_SECONDS.len()],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Histogram {
    /// Counts one observation.
    pub fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        if let Some(i) = LATENCY_BUCKETS_SECONDS.iter().position(|b| seconds <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_nanos
            .fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Adds its counts to `total` (a scrape sums every shard's).
    pub fn add_to(&self, total: &mut HistogramTotal) {
        for (t, b) in total.buckets.iter_mut().zip(&self.buckets) {
            *t += b.load(Ordering::Relaxed);
        }
        total.count += self.count.load(Ordering::Relaxed);
        total.sum_nanos += self.sum_nanos.load(Ordering::Relaxed);
    }
}

/// Histograms summed over shards.
#[derive(Debug, Default, Clone)]
pub struct HistogramTotal {
    /// Observations per bucket (not yet cumulative).
    pub buckets: [u64; LATENCY_BUCKETS_SECONDS.len()],
    /// Observations in all.
    pub count: u64,
    /// Their sum, in nanoseconds.
    pub sum_nanos: u64,
}

/// One shard's counters.
#[derive(Debug)]
pub struct ShardMetrics {
    requests: Vec<AtomicU64>,
    request_errors: Vec<AtomicU64>,
    /// Request bytes read (frames, size prefixes included).
    pub bytes_in: AtomicU64,
    /// Response bytes written.
    pub bytes_out: AtomicU64,
    /// Open client connections.
    pub connections: AtomicI64,
    /// Client connections handed to the shard owning their partitions.
    pub connections_moved: AtomicU64,
    /// Connections to a TLS port whose handshake failed or timed out.
    pub tls_handshake_failures: AtomicU64,
    /// SASL authentications that succeeded (re-authentications included).
    pub sasl_authentications: AtomicU64,
    /// SASL authentications that failed (each closed its connection).
    pub sasl_authentication_failures: AtomicU64,
    /// HTTP API requests refused for their Basic credentials (401).
    pub http_authentication_failures: AtomicU64,
    /// Requests answered with a throttle time (a client over its quota).
    pub throttled_requests: AtomicU64,
    /// The throttle time handed out, in ms, in all.
    pub throttle_ms: AtomicU64,
    /// Produce request latency by acks: 0, 1, all.
    pub produce_latency: [Histogram; 3],
    /// Consumer fetch latency (long-poll waits included, as Kafka's).
    pub fetch_latency: Histogram,
    /// ISR shrinks of partitions this shard leads, as committed.
    pub isr_shrinks: AtomicU64,
    /// ISR expansions, likewise.
    pub isr_expands: AtomicU64,
    /// Consumer fetches served as a follower (rack-aware reads).
    pub follower_reads: AtomicU64,
    /// Produced record bytes kept in the memory they arrived in.
    pub produced_bytes_in_place: AtomicU64,
    /// Produced record bytes copied on their way to the log.
    pub produced_bytes_copied: AtomicU64,
    /// Transactions this shard's coordinator completed with COMMIT.
    pub transactions_committed: AtomicU64,
    /// Transactions this shard's coordinator completed with ABORT
    /// (timeouts and fences included).
    pub transactions_aborted: AtomicU64,
    /// Time consumer groups' assignors took for a new target assignment.
    pub consumer_group_assignment: Histogram,
    /// Tiered storage's uploads and remote reads.
    pub tiered: TieredCounters,
    /// What this shard's follower fetchers copy, and where their time goes.
    pub follower: FollowerCounters,
}

/// A shard's follower fetchers: one round is a fetch, then for each
/// partition an append and (topics counting fdatasync'd copies only) an
/// fdatasync before the next fetch reports the new log end, so the three
/// times say what bounds a follower's copy.
#[derive(Debug, Default)]
pub struct FollowerCounters {
    /// Fetches sent to leaders.
    pub fetches: AtomicU64,
    /// Record bytes fetched and appended (batches already held left out).
    pub appended_bytes: AtomicU64,
    /// The round trip of each fetch that brought records (one that
    /// brought none is the leader's wait for new data).
    pub fetch_latency: Histogram,
    /// Each partition's append of the records one fetch brought.
    pub append_latency: Histogram,
    /// Each fdatasync of a followed partition after its append.
    pub flush_latency: Histogram,
}

/// Tiered storage on one shard (docs/tiered-storage.md).
#[derive(Debug, Default)]
pub struct TieredCounters {
    /// Segment bytes uploaded (the `.log` files).
    pub uploaded_bytes: AtomicU64,
    /// Segments uploaded (each with its manifest entry).
    pub uploaded_segments: AtomicU64,
    /// Uploads and manifest writes that failed (retried next pass).
    pub upload_errors: AtomicU64,
    /// Sealed bytes of the partitions this shard leads not uploaded yet,
    /// as of its last pass.
    pub upload_lag_bytes: AtomicU64,
    /// Remote segments dropped by total retention.
    pub remote_segments_deleted: AtomicU64,
    /// Bytes served to readers from the object store.
    pub remote_read_bytes: AtomicU64,
    /// Remote reads that failed (the store down, a damaged object).
    pub remote_read_errors: AtomicU64,
    /// Time of remote reads (what a read below the local start waits).
    pub remote_read_latency: Histogram,
    /// Chunk lookups the shard's cache answered, and those it did not.
    pub cache_hits: AtomicU64,
    /// See `cache_hits`.
    pub cache_misses: AtomicU64,
    /// Of the shard cache's misses, those the disk cache answered, and
    /// those that went to the object store.
    pub disk_cache_hits: AtomicU64,
    /// See `disk_cache_hits`.
    pub disk_cache_misses: AtomicU64,
}

impl Default for ShardMetrics {
    fn default() -> Self {
        ShardMetrics {
            requests: (0..API_KEYS).map(|_| AtomicU64::new(0)).collect(),
            request_errors: (0..API_KEYS).map(|_| AtomicU64::new(0)).collect(),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            connections: AtomicI64::new(0),
            connections_moved: AtomicU64::new(0),
            tls_handshake_failures: AtomicU64::new(0),
            sasl_authentications: AtomicU64::new(0),
            sasl_authentication_failures: AtomicU64::new(0),
            http_authentication_failures: AtomicU64::new(0),
            throttled_requests: AtomicU64::new(0),
            throttle_ms: AtomicU64::new(0),
            produce_latency: Default::default(),
            fetch_latency: Histogram::default(),
            isr_shrinks: AtomicU64::new(0),
            isr_expands: AtomicU64::new(0),
            follower_reads: AtomicU64::new(0),
            produced_bytes_in_place: AtomicU64::new(0),
            produced_bytes_copied: AtomicU64::new(0),
            transactions_committed: AtomicU64::new(0),
            transactions_aborted: AtomicU64::new(0),
            consumer_group_assignment: Histogram::default(),
            tiered: TieredCounters::default(),
            follower: FollowerCounters::default(),
        }
    }
}

impl ShardMetrics {
    /// A request answered with `throttle_ms` of throttle time.
    pub fn throttled(&self, throttle_ms: u64) {
        self.throttled_requests.fetch_add(1, Ordering::Relaxed);
        self.throttle_ms.fetch_add(throttle_ms, Ordering::Relaxed);
    }

    /// Requests of API `key` counted (`key` below [`API_KEYS`]).
    pub fn requests_of(&self, key: usize) -> u64 {
        self.requests[key].load(Ordering::Relaxed)
    }

    /// Failed requests of API `key`.
    pub fn request_errors_of(&self, key: usize) -> u64 {
        self.request_errors[key].load(Ordering::Relaxed)
    }

    /// A request of `api_key` arrived.
    pub fn request(&self, api_key: i16) {
        self.requests[api_index(api_key)].fetch_add(1, Ordering::Relaxed);
    }

    /// A request of `api_key` failed (the connection closed, or a
    /// partition answered with an error).
    pub fn request_error(&self, api_key: i16) {
        self.request_errors[api_index(api_key)].fetch_add(1, Ordering::Relaxed);
    }

    /// Produced record bytes cut into batches: `in_place` kept in the
    /// memory their request was read into, `copied` copied on the way.
    pub fn produced_bytes(&self, in_place: usize, copied: usize) {
        self.produced_bytes_in_place
            .fetch_add(in_place as u64, Ordering::Relaxed);
        self.produced_bytes_copied
            .fetch_add(copied as u64, Ordering::Relaxed);
    }

    /// A produce with `acks` took `elapsed`.
    pub fn produce(&self, acks: i16, elapsed: Duration) {
        let i = match acks {
            0 => 0,
            1 => 1,
            _ => 2,
        };
        self.produce_latency[i].observe(elapsed);
    }
}

fn api_index(api_key: i16) -> usize {
    (api_key.max(0) as usize).min(API_KEYS - 1)
}

/// Every shard's counters, by shard index.
pub type Registry = Arc<Vec<Arc<ShardMetrics>>>;

/// A registry for `shards` shards.
pub fn registry(shards: usize) -> Registry {
    Arc::new((0..shards).map(|_| Arc::default()).collect())
}
