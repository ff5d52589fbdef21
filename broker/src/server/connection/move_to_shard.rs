//! When a client connection should move to another shard (sans-IO).
//!
//! A connection is served by the shard that accepted it, but each
//! partition lives on one shard: a request for another shard's partition
//! crosses the shard mesh (a job there, its answer back), which wakes two
//! threads per request and cost a single consumer a quarter of its rate
//! (docs/benchmarks.md, run 10). Most connections that carry data read or
//! write partitions of one shard (one consumer of one partition, a
//! producer of one partition, a follower fetching what one shard leads):
//! such a connection moves to that shard, between two requests.
//!
//! It moves once its data requests have named that shard alone several
//! times in a row, so a client that alternates between partitions of
//! different shards is not moved back and forth: each move doubles the
//! run the next one needs.

use crate::runtime::sharded::ShardId;

/// Data requests in a row naming one other shard's partitions alone
/// before a connection's first move.
pub const FIRST_RUN: u32 = 3;

/// The longest run a move can need (moves after many are rare, not
/// impossible: a client's workload can change for good).
const RUN_CAP: u32 = 1 << 12;

/// Where a request's partitions live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PartitionShards {
    /// It named no partition of this broker (not a data request, or
    /// every partition refused).
    #[default]
    None,
    /// Every partition it named is on this shard.
    One(ShardId),
    /// Its partitions are on several shards.
    Several,
}

impl PartitionShards {
    /// With one more partition, on `shard`.
    pub fn and(self, shard: ShardId) -> PartitionShards {
        match self {
            PartitionShards::None => PartitionShards::One(shard),
            PartitionShards::One(s) if s == shard => self,
            _ => PartitionShards::Several,
        }
    }
}

/// One connection's view of where its requests' partitions live.
#[derive(Debug, Clone)]
pub struct ShardMoves {
    here: ShardId,
    candidate: Option<ShardId>,
    run: u32,
    moves: u32,
}

impl ShardMoves {
    /// A connection served by shard `here`, moved `moves` times before.
    pub fn new(here: ShardId, moves: u32) -> ShardMoves {
        ShardMoves {
            here,
            candidate: None,
            run: 0,
            moves,
        }
    }

    /// How many times it moved before arriving here.
    pub fn moves(&self) -> u32 {
        self.moves
    }

    /// After a request whose partitions were `on`: the shard it should
    /// move to now, if any.
    pub fn after(&mut self, on: PartitionShards) -> Option<ShardId> {
        match on {
            PartitionShards::None => None,
            PartitionShards::One(shard) if shard == self.here => {
                self.reset();
                None
            }
            PartitionShards::Several => {
                self.reset();
                None
            }
            PartitionShards::One(shard) => {
                if self.candidate != Some(shard) {
                    self.candidate = Some(shard);
                    self.run = 0;
                }
                self.run += 1;
                (self.run >= self.run_needed()).then_some(shard)
            }
        }
    }

    /// A move was refused (the other shard is stopping): start over.
    pub fn refused(&mut self) {
        self.reset();
        self.moves += 1;
    }

    fn reset(&mut self) {
        self.candidate = None;
        self.run = 0;
    }

    fn run_needed(&self) -> u32 {
        FIRST_RUN
            .checked_shl(self.moves)
            .unwrap_or(RUN_CAP)
            .min(RUN_CAP)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HERE: ShardId = ShardId(0);
    const THERE: ShardId = ShardId(1);
    const ELSEWHERE: ShardId = ShardId(2);

    fn on(shard: ShardId) -> PartitionShards {
        PartitionShards::One(shard)
    }

    #[test]
    fn partitions_of_one_shard_or_several() {
        let none = PartitionShards::None;
        assert_eq!(none.and(THERE), on(THERE));
        assert_eq!(none.and(THERE).and(THERE), on(THERE));
        assert_eq!(none.and(THERE).and(HERE), PartitionShards::Several);
        assert_eq!(
            none.and(THERE).and(HERE).and(THERE),
            PartitionShards::Several
        );
    }

    #[test]
    fn moves_after_a_run_of_requests_for_another_shard() {
        let mut follow = ShardMoves::new(HERE, 0);
        assert_eq!(follow.after(on(THERE)), None);
        assert_eq!(follow.after(on(THERE)), None);
        assert_eq!(follow.after(on(THERE)), Some(THERE));
    }

    #[test]
    fn requests_without_partitions_do_not_break_the_run() {
        // A consumer's heartbeats and offset commits between its fetches.
        let mut follow = ShardMoves::new(HERE, 0);
        assert_eq!(follow.after(on(THERE)), None);
        assert_eq!(follow.after(PartitionShards::None), None);
        assert_eq!(follow.after(on(THERE)), None);
        assert_eq!(follow.after(PartitionShards::None), None);
        assert_eq!(follow.after(on(THERE)), Some(THERE));
    }

    #[test]
    fn never_moves_while_its_partitions_are_here_or_spread() {
        let mut follow = ShardMoves::new(HERE, 0);
        for _ in 0..100 {
            assert_eq!(follow.after(on(HERE)), None);
            assert_eq!(follow.after(PartitionShards::Several), None);
        }
        for _ in 0..100 {
            assert_eq!(follow.after(on(THERE)), None);
            assert_eq!(follow.after(on(THERE)), None);
            assert_eq!(follow.after(on(HERE)), None);
        }
    }

    #[test]
    fn another_shard_starts_a_new_run() {
        let mut follow = ShardMoves::new(HERE, 0);
        follow.after(on(THERE));
        follow.after(on(THERE));
        assert_eq!(follow.after(on(ELSEWHERE)), None);
        assert_eq!(follow.after(on(ELSEWHERE)), None);
        assert_eq!(follow.after(on(ELSEWHERE)), Some(ELSEWHERE));
    }

    #[test]
    fn each_move_doubles_the_next_run() {
        // A client alternating between two shards' partitions in runs of
        // 10 moves a few times, then stays.
        let mut here = HERE;
        let mut moves = 0;
        for round in 0..50 {
            let mut follow = ShardMoves::new(here, moves);
            let target = if round % 2 == 0 { THERE } else { HERE };
            for _ in 0..10 {
                if let Some(to) = follow.after(on(target)) {
                    here = to;
                    moves += 1;
                    break;
                }
            }
        }
        assert_eq!(moves, 2, "moves with runs of 3 and 6, not 12");
        assert_eq!(ShardMoves::new(HERE, 40).run_needed(), RUN_CAP);
    }

    #[test]
    fn a_refused_move_waits_for_a_longer_run() {
        let mut follow = ShardMoves::new(HERE, 0);
        for _ in 0..2 {
            follow.after(on(THERE));
        }
        assert_eq!(follow.after(on(THERE)), Some(THERE));
        follow.refused();
        for _ in 0..5 {
            assert_eq!(follow.after(on(THERE)), None);
        }
        assert_eq!(follow.after(on(THERE)), Some(THERE));
    }
}
