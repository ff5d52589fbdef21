//! Tiered storage's metrics (docs/tiered-storage.md), summed over shards:
//! what was uploaded, what is waiting (the upload lag the alert watches),
//! remote reads and the chunk cache.

use std::sync::atomic::Ordering;

use super::{sum, Page};
use crate::counters::{HistogramTotal, Registry, TieredCounters};

/// A counter family: name, help, its value on one shard.
type Family = (&'static str, &'static str, fn(&TieredCounters) -> u64);

const COUNTERS: [Family; 10] = [
    (
        "remote_uploaded_bytes_total",
        "segment bytes uploaded to the object store",
        |t| t.uploaded_bytes.load(Ordering::Relaxed),
    ),
    (
        "remote_uploaded_segments_total",
        "segments uploaded to the object store, each listed in its partition's manifest",
        |t| t.uploaded_segments.load(Ordering::Relaxed),
    ),
    (
        "remote_upload_errors_total",
        "tiered storage passes that failed (retried; nothing not uploaded is deleted)",
        |t| t.upload_errors.load(Ordering::Relaxed),
    ),
    (
        "remote_segments_deleted_total",
        "remote segments dropped by total retention",
        |t| t.remote_segments_deleted.load(Ordering::Relaxed),
    ),
    (
        "remote_read_bytes_total",
        "bytes served to readers from the object store",
        |t| t.remote_read_bytes.load(Ordering::Relaxed),
    ),
    (
        "remote_read_errors_total",
        "remote reads that failed (the store unreachable, a damaged object refused)",
        |t| t.remote_read_errors.load(Ordering::Relaxed),
    ),
    (
        "remote_cache_hits_total",
        "chunk lookups of remote reads the shards' memory caches answered",
        |t| t.cache_hits.load(Ordering::Relaxed),
    ),
    (
        "remote_cache_misses_total",
        "chunk lookups of remote reads the shards' memory caches did not answer",
        |t| t.cache_misses.load(Ordering::Relaxed),
    ),
    (
        "remote_disk_cache_hits_total",
        "memory cache misses of remote reads the disk cache answered",
        |t| t.disk_cache_hits.load(Ordering::Relaxed),
    ),
    (
        "remote_disk_cache_misses_total",
        "memory cache misses of remote reads that went to the object store",
        |t| t.disk_cache_misses.load(Ordering::Relaxed),
    ),
];

/// Tiered storage's families.
pub fn render(page: &mut Page, all: &Registry) {
    for (name, help, value) in COUNTERS {
        page.counter(name, help, sum(all, |m| value(&m.tiered)));
    }
    page.gauge(
        "remote_upload_lag_bytes",
        "bytes of sealed segments of tiered partitions led here not uploaded yet, as of the last pass",
        sum(all, |m| m.tiered.upload_lag_bytes.load(Ordering::Relaxed)) as f64,
    );
    let mut latency = HistogramTotal::default();
    for m in all.iter() {
        m.tiered.remote_read_latency.add_to(&mut latency);
    }
    page.header(
        "remote_read_latency_seconds",
        "histogram",
        "reads below the local log start, from the chunk cache or the object store",
    );
    page.histogram("remote_read_latency_seconds", "", &latency);
}
