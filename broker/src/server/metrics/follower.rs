//! The follower fetchers' metrics, summed over shards: how many fetches,
//! how many bytes they copied, and the time of each part of a round (the
//! fetch, the append, the fdatasync), which says what bounds a follower.

use std::sync::atomic::Ordering;

use super::{sum, Page};
use crate::counters::{FollowerCounters, Histogram, HistogramTotal, Registry};

/// A histogram family: name, help, the histogram on one shard.
type Timing = (
    &'static str,
    &'static str,
    fn(&FollowerCounters) -> &Histogram,
);

const TIMINGS: [Timing; 3] = [
    (
        "replica_fetch_seconds",
        "the round trip to its leader of each follower fetch that brought records (one that brought none is the leader's wait for new data)",
        |f| &f.fetch_latency,
    ),
    (
        "replica_append_seconds",
        "each followed partition's append of the records one fetch brought",
        |f| &f.append_latency,
    ),
    (
        "replica_flush_seconds",
        "each fdatasync of a followed partition after its append, before the next fetch reports it",
        |f| &f.flush_latency,
    ),
];

/// The follower fetchers' families.
pub fn render(page: &mut Page, all: &Registry) {
    page.counter(
        "replica_fetches_total",
        "fetches this broker's followers sent to leaders",
        sum(all, |m| m.follower.fetches.load(Ordering::Relaxed)),
    );
    page.counter(
        "replica_fetched_bytes_total",
        "record bytes this broker's followers fetched and appended",
        sum(all, |m| m.follower.appended_bytes.load(Ordering::Relaxed)),
    );
    for (name, help, histogram) in TIMINGS {
        let mut total = HistogramTotal::default();
        for m in all.iter() {
            histogram(&m.follower).add_to(&mut total);
        }
        page.header(name, "histogram", help);
        page.histogram(name, "", &total);
    }
}
