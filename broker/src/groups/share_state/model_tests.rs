//! Leaders of one share-partition come and go against the coordinator's
//! rules ([`ShareStates`]), with an administrator resetting the state and
//! the coordinator failing over (what it remembers of reads is lost, its
//! records are replayed): random members acquire, acknowledge, let locks
//! expire and leave on the newest leader; deposed leaders keep trying to
//! write; a leader whose state an administrator changed learns it from a
//! refused write or a session's check. Checked after every step:
//!
//! - a deposed leader's write is refused (FENCED_LEADER_EPOCH), also
//!   after the coordinator's failover (the newer leader's read stamped
//!   its epoch on the stored state);
//! - a leader's write at a state epoch an administrator moved is refused
//!   (FENCED_STATE_EPOCH), and one at the current epoch by the newest
//!   leader is taken;
//! - every write keeps every record an earlier one made done (nothing
//!   acknowledged or archived durably comes back, until a reset says so);
//! - the newest leader, at the current state epoch, holds every durably
//!   done record as done: it never hands one out again.
//!
//! Then a last leader drains everything. The seed is printed on a failure.

use std::collections::BTreeSet;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::share::partition::{Ack, Limits, RecordState, SharePartition};

const LIMITS: Limits = Limits {
    lock_ms: 100,
    delivery_limit: 3,
    max_in_flight: 20,
};

const MEMBERS: [&str; 3] = ["a", "b", "c"];

fn key() -> ShareStateKey {
    ShareStateKey {
        group: "g".into(),
        topic: [1; 16],
        partition: 0,
    }
}

/// A leader of the partition, as far as its share-partition goes.
struct Leader {
    epoch: i32,
    state_epoch: i32,
    p: SharePartition,
}

struct Run {
    seed: u64,
    step: usize,
    coordinator: ShareStates,
    /// Every record appended, in order (what a new coordinator replays).
    records: Vec<ShareStateValue>,
    /// The newest leader last.
    leaders: Vec<Leader>,
    /// Offsets durably acknowledged or archived (since the last reset).
    done: BTreeSet<i64>,
    log_end: i64,
    now: i64,
}

/// The offsets a state has done: below its start, and its acknowledged
/// or archived batches.
fn done_in(state: &PersistedState) -> BTreeSet<i64> {
    let mut done: BTreeSet<i64> = (0..state.start).collect();
    for &(first, last, delivery_state, _) in &state.batches {
        if delivery_state != 0 {
            done.extend(first..=last);
        }
    }
    done
}

impl Run {
    fn fail(&self, what: String) -> ! {
        panic!("SEED={} step {}: {what}", self.seed, self.step)
    }

    fn append(&mut self, value: ShareStateValue) {
        self.coordinator.replay(&key(), Some(&value));
        self.records.push(value);
    }

    /// The state epoch stored now.
    fn stored_epoch(&self) -> i32 {
        self.coordinator.get(&key()).map_or(0, |v| v.state_epoch)
    }

    /// Leader `at` writes its state, as the partition layer does.
    fn write(&mut self, at: usize) -> Result<(), Code> {
        let leader = &self.leaders[at];
        let value = ShareStateValue {
            leader_epoch: leader.epoch,
            state_epoch: leader.state_epoch,
            state: Some(leader.p.persisted()),
        };
        self.coordinator.may_write(&key(), &value)?;
        let written = done_in(value.state.as_ref().expect("a state"));
        if let Some(lost) = self.done.difference(&written).next() {
            self.fail(format!("a write makes durably done {lost} undone"));
        }
        self.done = written;
        self.append(value);
        Ok(())
    }

    /// The newest leader writes: taken at the current state epoch,
    /// refused (and read again) at an older one.
    fn write_newest(&mut self) {
        let at = self.leaders.len() - 1;
        let current = self.leaders[at].state_epoch == self.stored_epoch();
        match (self.write(at), current) {
            (Ok(()), true) => {}
            (Err(code), false) if code == ResponseError::FencedStateEpoch.code() => self.load(at),
            (outcome, current) => self.fail(format!(
                "the newest leader's write at the current state epoch {current}: {outcome:?}"
            )),
        }
    }

    /// Leader `at` reads the state again (its slot dropped): restored, or
    /// initialized from the log start (earliest) and written so.
    fn load(&mut self, at: usize) {
        let epoch = self.leaders[at].epoch;
        let stamp = self.coordinator.stamp(&key(), epoch);
        let read = match self.coordinator.read(&key(), epoch) {
            Ok(read) => read,
            Err(code) => self.fail(format!("the newest leader's read refused: {code}")),
        };
        if let Some(stamp) = stamp {
            self.append(stamp);
        }
        self.leaders[at].state_epoch = read.state_epoch;
        match read.state {
            Some(state) => {
                let (p, archived) = SharePartition::restored(&state, LIMITS);
                self.leaders[at].p = p;
                if !archived.is_empty() {
                    self.write_newest();
                }
            }
            None => {
                self.leaders[at].p = SharePartition::new(0, LIMITS);
                self.write_newest();
            }
        }
    }

    /// A new leader at the next epoch; the others are deposed.
    fn elect(&mut self) {
        let epoch = self.leaders.last().map_or(0, |l| l.epoch + 1);
        self.leaders.push(Leader {
            epoch,
            state_epoch: 0,
            p: SharePartition::new(0, LIMITS),
        });
        self.load(self.leaders.len() - 1);
    }

    /// A deposed leader writes what it holds: refused.
    fn deposed_write(&mut self, at: usize) {
        let fenced = ResponseError::FencedLeaderEpoch.code();
        let written = self.write(at);
        if written != Err(fenced) {
            self.fail(format!("deposed leader {at}'s write: {written:?}"));
        }
    }

    fn newest(&mut self) -> &mut SharePartition {
        &mut self.leaders.last_mut().expect("a leader").p
    }

    fn acquire(&mut self, member: &str, max: usize) {
        let (log_end, now) = (self.log_end, self.now);
        self.newest().acquire(member, max, log_end, now);
    }

    fn acknowledge(&mut self, member: &str, range: (i64, i64), ack: Ack) {
        let now = self.now;
        let acked = self.newest().acknowledge(member, range, ack, now);
        if acked.is_ok() && ack != Ack::Renew {
            self.write_newest();
        }
    }

    fn expire_or_leave(&mut self, leaving: Option<&str>) {
        let now = self.now;
        let archived = match leaving {
            Some(member) => self.newest().release_member(member),
            None => self.newest().expire_locks(now),
        };
        if !archived.is_empty() {
            self.write_newest();
        }
    }

    /// An administrator resets the state to start at `start` (the group
    /// empty: the model does not keep members, its leaders learn it).
    fn reset(&mut self, start: i64) {
        let value = self.coordinator.reset(&key(), Some(start));
        self.done = (0..start).collect();
        self.append(value);
    }

    /// A session's first fetch: the newest leader checks its state epoch.
    fn recheck(&mut self) {
        if self.leaders.last().expect("a leader").state_epoch != self.stored_epoch() {
            self.load(self.leaders.len() - 1);
        }
    }

    /// The coordinator fails over: a new one replays the records.
    fn coordinator_failover(&mut self) {
        let mut fresh = ShareStates::default();
        for value in &self.records {
            fresh.replay(&key(), Some(value));
        }
        self.coordinator = fresh;
    }

    fn check(&self) {
        let newest = self.leaders.last().expect("a leader");
        if newest.state_epoch != self.stored_epoch() {
            return; // not told of the reset yet
        }
        for &offset in self.done.range(newest.p.start()..) {
            let state = newest.p.get(offset).map(|r| &r.state);
            if !matches!(
                state,
                Some(RecordState::Acknowledged | RecordState::Archived)
            ) {
                self.fail(format!("durably done {offset} is {state:?} at the leader"));
            }
        }
    }
}

#[test]
fn leaders_come_and_go_and_no_durably_done_record_comes_back() {
    let seed = crate::groups::modern::test_seed();
    let mut rng = SmallRng::seed_from_u64(seed);
    for _ in 0..100 {
        let mut run = Run {
            seed,
            step: 0,
            coordinator: ShareStates::default(),
            records: Vec::new(),
            leaders: Vec::new(),
            done: BTreeSet::new(),
            log_end: rng.gen_range(0..30),
            now: 0,
        };
        run.elect();
        for step in 0..300 {
            run.step = step;
            let member = MEMBERS[rng.gen_range(0..MEMBERS.len())];
            match rng.gen_range(0..16) {
                0..=2 => run.acquire(member, rng.gen_range(1..8)),
                3..=6 => {
                    let p = &run.leaders.last().expect("a leader").p;
                    let first = rng.gen_range(p.start()..=p.end());
                    let last = first + rng.gen_range(0..3);
                    let ack = Ack::of_id(rng.gen_range(0..5)).unwrap();
                    run.acknowledge(member, (first, last), ack);
                }
                7 => {
                    run.now += rng.gen_range(0..80);
                    run.expire_or_leave(None);
                }
                8 => run.expire_or_leave(Some(member)),
                9 => run.elect(),
                10 if run.leaders.len() > 1 => {
                    let at = rng.gen_range(0..run.leaders.len() - 1);
                    run.deposed_write(at);
                }
                11 if rng.gen_bool(0.3) => run.reset(rng.gen_range(0..=run.log_end)),
                12 => run.recheck(),
                13 if rng.gen_bool(0.3) => run.coordinator_failover(),
                14 => run.log_end += rng.gen_range(0..10),
                _ => {}
            }
            run.check();
        }
        // Changes stop: a last leader, one member takes and accepts all.
        run.elect();
        for _ in 0..1_000 {
            let start = run.newest().start();
            if start >= run.log_end {
                break;
            }
            run.acquire("drain", 5);
            let p = &run.leaders.last().expect("a leader").p;
            let held: Vec<i64> = (p.start()..p.end())
                .filter(|o| {
                    let state = &p.get(*o).unwrap().state;
                    matches!(state, RecordState::Acquired { member, .. } if member == "drain")
                })
                .collect();
            for offset in held {
                run.acknowledge("drain", (offset, offset), Ack::Accept);
            }
            run.check();
        }
        let start = run.newest().start();
        assert!(start >= run.log_end, "SEED={seed}: drained to {start}");
        for at in 0..run.leaders.len() - 1 {
            run.deposed_write(at);
        }
    }
}
