//! The partitions this process's shards are opening or have open, so that
//! no other thread moves their directories from under them. The start-up
//! sweep of replicas moved away while the broker was down runs beside the
//! shards, which may still open a partition from the metadata they are
//! replaying: removing its directory between the open of a file and the
//! next use of its path failed the open ("No such file or directory"),
//! and inside the I/O runtime's open that took the process down. A
//! partition a shard holds is its shard's to close and remove
//! (`replica::remove_unassigned`) once its view catches up.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use control::TopicId;

/// How many claims each partition (topic, index) has: a partition moved
/// away and back may be claimed again before its earlier claim drops.
static CLAIMED: Mutex<BTreeMap<(TopicId, u32), usize>> = Mutex::new(BTreeMap::new());

fn claimed() -> MutexGuard<'static, BTreeMap<(TopicId, u32), usize>> {
    CLAIMED.lock().unwrap_or_else(|e| e.into_inner())
}

/// A shard's claim on a partition's directory, from before its log opens
/// until the partition is dropped.
#[derive(Debug)]
pub struct InUse {
    key: (TopicId, u32),
}

/// Claims partition `index` of topic `topic`.
pub fn claim(topic: TopicId, index: u32) -> InUse {
    let key = (topic, index);
    *claimed().entry(key).or_default() += 1;
    InUse { key }
}

impl Drop for InUse {
    fn drop(&mut self) {
        let mut claimed = claimed();
        if let Some(count) = claimed.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                claimed.remove(&self.key);
            }
        }
    }
}

/// Runs `act` on the partition's directory unless a shard claims the
/// partition; whether it ran. No claim is taken while `act` runs, so a
/// directory `act` moves away is never one a shard is opening.
pub fn unless_claimed<T>(topic: TopicId, index: u32, act: impl FnOnce() -> T) -> Option<T> {
    let claimed = claimed();
    if claimed.contains_key(&(topic, index)) {
        return None;
    }
    let done = act();
    drop(claimed);
    Some(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claimed_partition_is_left_alone_until_its_last_claim_drops() {
        let topic = TopicId([0x51; 16]);
        let first = claim(topic, 3);
        let second = claim(topic, 3);
        assert_eq!(unless_claimed(topic, 3, || ()), None, "claimed twice");
        assert_eq!(unless_claimed(topic, 4, || 4), Some(4), "another index");
        drop(first);
        assert_eq!(unless_claimed(topic, 3, || ()), None, "claimed once");
        drop(second);
        assert_eq!(unless_claimed(topic, 3, || 3), Some(3), "no claim left");
    }
}
