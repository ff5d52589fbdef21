//! A follower's side: where it cuts its log when it starts following a
//! (new) leader, and the high watermark it may expose.

use crate::epochs::{EpochCache, EpochEnd};
use crate::Offset;

/// One round of finding where a follower's log parts from its leader's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncation {
    /// Cut the log here; the logs agree up to it: start fetching.
    Done(Offset),
    /// Cut the log here, then ask the leader again with the (older) latest
    /// epoch left.
    Again(Offset),
}

/// Where a follower cuts its log, given the leader's answer to
/// OffsetForLeaderEpoch for the follower's latest epoch: the largest epoch
/// the leader has at or below it, and where that epoch ends in the
/// leader's log (None: the leader has no such epoch).
///
/// One leader wrote each epoch, so two logs agree on an epoch they both
/// hold up to where it ends in the shorter. When the leader answers with
/// an older epoch than the follower's, the follower's later epochs are not
/// the leader's and go; if the follower does not hold the answered epoch
/// itself, it asks again with its own older one (KIP-279's rounds).
pub fn truncation_step(mine: &EpochCache, my_end: Offset, leader_answer: EpochEnd) -> Truncation {
    let Some(latest) = mine.latest() else {
        return Truncation::Done(my_end);
    };
    let Some((epoch, leader_end)) = leader_answer else {
        // The leader holds none of the follower's epochs.
        return Truncation::Done(mine.earliest_start().unwrap_or(my_end).min(my_end));
    };
    if epoch == latest {
        return Truncation::Done(leader_end.min(my_end));
    }
    match mine.end_offset_for(epoch, my_end) {
        Some((mine_epoch, mine_end)) if mine_epoch == epoch => {
            Truncation::Done(mine_end.min(leader_end).min(my_end))
        }
        Some((_, mine_end)) => Truncation::Again(mine_end.min(my_end)),
        None => Truncation::Done(mine.earliest_start().unwrap_or(my_end).min(my_end)),
    }
}

/// The high watermark a follower exposes: the leader's, but never past
/// what the follower itself holds.
pub fn high_watermark(leader_high_watermark: Offset, my_end: Offset) -> Offset {
    leader_high_watermark.min(my_end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LeaderEpoch;

    fn cache(entries: &[(i32, i64)]) -> EpochCache {
        let mut c = EpochCache::new();
        for (e, s) in entries {
            c.assign(LeaderEpoch(*e), Offset(*s));
        }
        c
    }

    /// Runs the rounds against a leader's cache: where the follower ends up.
    fn truncate(
        follower: &EpochCache,
        follower_end: i64,
        leader: &EpochCache,
        leader_end: i64,
    ) -> Offset {
        let mut mine = follower.clone();
        let mut end = Offset(follower_end);
        loop {
            let answer = mine
                .latest()
                .and_then(|e| leader.end_offset_for(e, Offset(leader_end)));
            match truncation_step(&mine, end, answer) {
                Truncation::Done(cut) => return cut,
                Truncation::Again(cut) => {
                    mine.truncate_from_end(cut);
                    end = cut;
                }
            }
        }
    }

    #[test]
    fn followers_cut_exactly_where_the_logs_part() {
        // Follower wrote epoch 2 from 5; the leader's epoch 3 began at 4.
        let leader = cache(&[(1, 0), (3, 4)]);
        assert_eq!(
            truncate(&cache(&[(1, 0), (2, 5)]), 8, &leader, 9),
            Offset(4)
        );
        // Same epochs, the follower ahead of what the leader kept of it.
        let leader = cache(&[(1, 0), (2, 5), (3, 7)]);
        assert_eq!(
            truncate(&cache(&[(1, 0), (2, 5)]), 8, &leader, 12),
            Offset(7)
        );
        // The follower led epoch 3 at 5, which the leader (epoch 2 at 5,
        // then 4) never saw: it keeps only epoch 1's part.
        let leader = cache(&[(1, 0), (2, 5), (4, 9)]);
        assert_eq!(
            truncate(&cache(&[(1, 0), (3, 5)]), 7, &leader, 12),
            Offset(5)
        );
        // A follower behind keeps everything.
        let leader = cache(&[(1, 0), (2, 6)]);
        assert_eq!(truncate(&cache(&[(1, 0)]), 4, &leader, 10), Offset(4));
        // Found by the simulation: the follower's only epoch (2, from 0) is
        // unknown to a leader holding epoch 1 only: nothing is common.
        let leader = cache(&[(1, 0)]);
        assert_eq!(truncate(&cache(&[(2, 0)]), 6, &leader, 3), Offset(0));
        // Two rounds: the follower holds epochs 1 and 3, the leader 2 and
        // 4 (both began from 1's records up to 3); after cutting epoch 3
        // the follower asks with epoch 1.
        let leader = cache(&[(1, 0), (2, 3), (4, 8)]);
        assert_eq!(
            truncate(&cache(&[(1, 0), (3, 4)]), 9, &leader, 10),
            Offset(3)
        );
        assert_eq!(high_watermark(Offset(10), Offset(7)), Offset(7));
    }
}
