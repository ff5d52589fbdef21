//! Keeping the shard's batch caches within their shared memory, oldest
//! batches first across partitions.
//!
//! A partition that grows past its floor sheds its own oldest batches when
//! the shard's share is full (storage does that as it flushes), but then a
//! partition that stopped growing keeps what it holds while the busy one
//! is squeezed. This pass, while the share is above [`HIGH_WATER`] of its
//! limit, evicts the batches the shard cached longest ago, from whichever
//! partitions hold them, until it is below [`LOW_WATER`]: what a page
//! cache would do for a broker reading through one. Every 10th pass drops
//! read-ahead windows whose readers went away, and frees the shard's disk
//! reads that other shards sent and let go (storage's `home_bound`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::rc::Rc;
use std::time::Duration;

use super::table::PartitionTable;
use super::Partitions;

/// How often the pass looks.
const TRIM_INTERVAL: Duration = Duration::from_millis(100);

/// The share's fill (in percent of its limit) above which the pass evicts...
pub const HIGH_WATER: usize = 90;
/// ...and the fill it evicts down to.
pub const LOW_WATER: usize = 80;

/// Read-ahead windows age once every this many passes (1 s): aging
/// visits every open partition, and at 10,000 partitions aging each pass
/// and the ISR loop's visits were about half an idle broker's CPU
/// (docs/benchmarks.md run 58).
const READ_AHEAD_AGE_EVERY_PASSES: u32 = 10;

/// A read-ahead window whose reader has not read for this many ages
/// (5-6 s) is dropped with the chunks it holds: read-ahead memory is not
/// counted in the share, so it must not outlive its reader.
const READ_AHEAD_IDLE_AGES: u32 = 5;

/// Runs for as long as the shard does.
pub async fn run(partitions: Rc<Partitions>) {
    let mut passes = 0u32;
    loop {
        glommio::timer::sleep(TRIM_INTERVAL).await;
        trim(&partitions.table);
        passes = passes.wrapping_add(1);
        if passes.is_multiple_of(READ_AHEAD_AGE_EVERY_PASSES) {
            partitions.table.for_each_open(|_, partition| {
                partition.log.age_read_ahead(READ_AHEAD_IDLE_AGES);
            });
        }
        storage::io::home_bound::free_returned();
    }
}

/// Evicts the oldest cached batches across the open partitions while the
/// share is above the low water, if it was above the high water. Returns
/// the bytes evicted.
pub fn trim(table: &PartitionTable) -> usize {
    let share = table.cache_share();
    let limit = share.limit();
    if share.used() <= limit / 100 * HIGH_WATER {
        return 0;
    }
    let target = limit / 100 * LOW_WATER;
    let open = table.open_partitions();
    // Each partition by the age of its oldest evictable batch.
    let mut oldest: BinaryHeap<Reverse<(u64, usize)>> = open
        .iter()
        .enumerate()
        .filter_map(|(i, (_, p))| p.log.oldest_cached().map(|seq| Reverse((seq, i))))
        .collect();
    let mut evicted = 0;
    while share.used() > target {
        let Some(Reverse((seq, i))) = oldest.pop() else {
            break;
        };
        // Up to the next partition's oldest: the order holds across them.
        let until = oldest.peek().map_or(u64::MAX, |Reverse((next, _))| *next);
        let log = &open[i].1.log;
        evicted += log.evict_cached_before(until.max(seq + 1), target);
        if let Some(seq) = log.oldest_cached() {
            oldest.push(Reverse((seq, i)));
        }
    }
    evicted
}
