//! The share-partition against a model: random members acquire,
//! acknowledge (each kind, also what they do not hold), let locks expire,
//! leave, while the log grows and its start moves, and the leader
//! restarts from the durable state. Checked after every step: what was
//! handed out was available and within the limits, no record is held by
//! two members, an acknowledged record is never handed out again, the
//! state is the model's, and the start offset is as far as it can be.
//! Then a consumer drains everything. The seed is printed on a failure.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;

const LIMITS: Limits = Limits {
    lock_ms: 100,
    delivery_limit: 3,
    max_in_flight: 20,
};

#[test]
fn records_are_handed_out_acknowledged_and_given_back_as_kip_932_says() {
    let mut p = SharePartition::new(10, LIMITS);
    let got = p.acquire("a", 3, 20, 0);
    assert_eq!(
        got,
        [Acquired {
            first: 10,
            last: 12,
            delivery_count: 1
        }]
    );
    let got = p.acquire("b", 2, 20, 0);
    assert_eq!(
        got,
        [Acquired {
            first: 13,
            last: 14,
            delivery_count: 1
        }]
    );
    // b may not acknowledge what a holds; nothing changes.
    assert_eq!(
        p.acknowledge("b", (12, 13), Ack::Accept, 1),
        Err(AckError::NotHeld(12))
    );
    assert_eq!(p.acknowledge("a", (10, 10), Ack::Accept, 1), Ok(vec![]));
    assert_eq!(p.start(), 11, "the start moves past what is done");
    assert_eq!(p.acknowledge("a", (11, 11), Ack::Release, 1), Ok(vec![]));
    let rejected = p.acknowledge("a", (12, 12), Ack::Reject, 1).unwrap();
    assert_eq!(
        rejected,
        [ArchivedRecord {
            offset: 12,
            delivery_count: 1,
            why: Archived::Rejected
        }]
    );
    // The released record comes back first, delivered twice now.
    let got = p.acquire("b", 2, 20, 2);
    assert_eq!(
        got,
        [
            Acquired {
                first: 11,
                last: 11,
                delivery_count: 2
            },
            Acquired {
                first: 15,
                last: 15,
                delivery_count: 1
            },
        ]
    );
    // Renewing keeps b's lock on 13-14 past the expiry of 11 and 15.
    p.acknowledge("b", (13, 14), Ack::Renew, 90).unwrap();
    assert!(p.expire_locks(101).is_empty());
    assert!(p.expire_locks(150).is_empty(), "back, not archived");
    assert_eq!(p.get(11).unwrap().state, RecordState::Available);
    assert_eq!(p.get(15).unwrap().state, RecordState::Available);
    assert!(matches!(
        p.get(13).unwrap().state,
        RecordState::Acquired { .. }
    ));
    // Delivered a third time, 11 is archived when it comes back.
    assert_eq!(
        p.acquire("a", 1, 20, 200),
        [Acquired {
            first: 11,
            last: 11,
            delivery_count: 3
        }]
    );
    let archived = p.release_member("a");
    assert_eq!(
        archived,
        [ArchivedRecord {
            offset: 11,
            delivery_count: 3,
            why: Archived::DeliveryLimit
        }]
    );
    // No more than max_in_flight past the start, none past the log end.
    let mut q = SharePartition::new(0, LIMITS);
    assert_eq!(q.acquire("a", 100, 5, 0).len(), 1);
    assert_eq!(q.end(), 5);
    assert_eq!(
        q.acquire("a", 100, 1_000, 0),
        [Acquired {
            first: 5,
            last: 19,
            delivery_count: 1
        }]
    );
    assert!(q.acquire("b", 100, 1_000, 0).is_empty(), "twenty in flight");
}

#[test]
fn acquiring_within_a_read_takes_only_its_offsets() {
    let mut p = SharePartition::new(0, LIMITS);
    p.acquire("a", 10, 10, 0);
    for offset in [2, 3, 7] {
        p.acknowledge("a", (offset, offset), Ack::Release, 1)
            .unwrap();
    }
    assert_eq!(p.next_to_acquire(), 2);
    // A read brought the batches of offsets 3..8: 2 stays, 7 and the
    // new ones stay out of it.
    let got = p.acquire_within("b", 10, (3, 8), 2);
    assert_eq!(
        got,
        [
            Acquired {
                first: 3,
                last: 3,
                delivery_count: 2
            },
            Acquired {
                first: 7,
                last: 7,
                delivery_count: 2
            }
        ]
    );
    assert_eq!(p.next_to_acquire(), 2);
    // New records come from the end only when the read reaches it.
    assert_eq!(
        p.acquire_within("b", 10, (2, 9), 2),
        [Acquired {
            first: 2,
            last: 2,
            delivery_count: 2
        }]
    );
    assert_eq!(p.next_to_acquire(), 10);
    assert!(
        p.acquire_within("b", 10, (11, 20), 2).is_empty(),
        "the end is below the read"
    );
    assert_eq!(
        p.acquire_within("b", 2, (10, 20), 2),
        [Acquired {
            first: 10,
            last: 11,
            delivery_count: 1
        }]
    );
}

/// The model's view of one offset.
#[derive(Debug, Clone, PartialEq)]
struct Model {
    state: RecordState,
    delivery_count: u16,
}

struct Run {
    seed: u64,
    step: usize,
    p: SharePartition,
    /// Every offset from 0 the partition ever tracked; None: not yet.
    model: Vec<Option<Model>>,
    log_start: i64,
    log_end: i64,
    now: i64,
}

impl Run {
    fn fail(&self, what: String) -> ! {
        panic!(
            "SEED={} step {}: {what}\n{:?}",
            self.seed, self.step, self.p
        )
    }

    fn at(&mut self, offset: i64) -> &mut Option<Model> {
        let i = offset as usize;
        if self.model.len() <= i {
            self.model.resize(i + 1, None);
        }
        &mut self.model[i]
    }

    fn is_done(m: &Option<Model>) -> bool {
        m.as_ref().is_some_and(|m| m.state.is_done())
    }

    fn acquire(&mut self, member: &str, max: usize) {
        let before_end = self.p.end();
        let got = self.p.acquire(member, max, self.log_end, self.now);
        let mut count = 0;
        for run in &got {
            for offset in run.first..=run.last {
                count += 1;
                if offset >= self.log_end {
                    self.fail(format!("{offset} handed out past the log end"));
                }
                let until_ms = self.now + LIMITS.lock_ms;
                let slot = self.at(offset).clone();
                let deliveries = match slot {
                    Some(Model {
                        state: RecordState::Available,
                        delivery_count,
                    }) => delivery_count + 1,
                    None if offset >= before_end => 1,
                    other => self.fail(format!("{offset} handed out while {other:?}")),
                };
                if run.delivery_count != deliveries {
                    self.fail(format!(
                        "{offset}: {} deliveries, {deliveries} expected",
                        run.delivery_count
                    ));
                }
                let state = RecordState::Acquired {
                    member: member.into(),
                    until_ms,
                };
                *self.at(offset) = Some(Model {
                    state,
                    delivery_count: deliveries,
                });
            }
        }
        if count > max {
            self.fail(format!("{count} handed out, at most {max} asked"));
        }
        if count < max {
            // Nothing else could have been handed out.
            let start = self.p.start();
            let more_available = (start..self.p.end().min(self.log_end)).any(|o| {
                matches!(self.model.get(o as usize), Some(Some(m)) if m.state == RecordState::Available)
            });
            let room = (start + LIMITS.max_in_flight).min(self.log_end);
            if more_available || self.p.end() < room {
                self.fail(format!("only {count} of {max} handed out"));
            }
        }
    }

    /// What the model expects of an acknowledgement, applied.
    fn acknowledge(&mut self, member: &str, range: (i64, i64), ack: Ack) {
        let in_range = range.0 <= range.1 && range.1 < self.p.end();
        let held = in_range && (range.0..=range.1).all(|o| {
            matches!(self.model.get(o as usize), Some(Some(Model { state: RecordState::Acquired { member: m, .. }, .. })) if m == member)
        });
        let answer = self.p.acknowledge(member, range, ack, self.now);
        let refused_as_expected = match (&answer, in_range) {
            (Ok(_), _) => held,
            (Err(AckError::BadRange), false) => true,
            (Err(AckError::NotHeld(_)), true) => !held,
            _ => false,
        };
        if !refused_as_expected {
            self.fail(format!(
                "{member} {range:?} {ack:?}: {answer:?}, held {held}"
            ));
        }
        let Ok(archived) = answer else {
            return;
        };
        let mut expected = Vec::new();
        for offset in range.0..=range.1 {
            let now = self.now;
            let m = self.at(offset).as_mut().unwrap();
            match ack {
                Ack::Accept => m.state = RecordState::Acknowledged,
                Ack::Gap => m.state = RecordState::Archived,
                Ack::Reject => {
                    m.state = RecordState::Archived;
                    expected.push((offset, Archived::Rejected));
                }
                Ack::Renew => {
                    m.state = RecordState::Acquired {
                        member: member.into(),
                        until_ms: now + LIMITS.lock_ms,
                    };
                }
                Ack::Release => expected.extend(model_back(offset, m)),
            }
        }
        self.check_archived(&archived, expected);
    }

    fn check_archived(&self, got: &[ArchivedRecord], expected: Vec<(i64, Archived)>) {
        let got: Vec<(i64, Archived)> = got.iter().map(|a| (a.offset, a.why)).collect();
        if got != expected {
            self.fail(format!("archived {got:?}, expected {expected:?}"));
        }
    }

    fn expire(&mut self) {
        let archived = self.p.expire_locks(self.now);
        let now = self.now;
        let mut expected = Vec::new();
        for (offset, m) in self.model.iter_mut().enumerate() {
            if let Some(m) = m {
                if matches!(m.state, RecordState::Acquired { until_ms, .. } if until_ms <= now) {
                    expected.extend(model_back(offset as i64, m));
                }
            }
        }
        self.check_archived(&archived, expected);
    }

    fn leave(&mut self, member: &str) {
        let archived = self.p.release_member(member);
        let mut expected = Vec::new();
        for (offset, m) in self.model.iter_mut().enumerate() {
            if let Some(m) = m {
                if matches!(&m.state, RecordState::Acquired { member: h, .. } if h == member) {
                    expected.extend(model_back(offset as i64, m));
                }
            }
        }
        self.check_archived(&archived, expected);
    }

    /// A new leader: what was acquired or available comes back as after
    /// a lock expiry (archived at the limit).
    fn restart(&mut self) {
        let start = self.p.start();
        let (p, archived) = SharePartition::restored(&self.p.persisted(), LIMITS);
        self.p = p;
        let mut expected = Vec::new();
        for (offset, m) in self.model.iter_mut().enumerate() {
            let back = matches!(m, Some(m) if !m.state.is_done());
            if let (true, Some(m)) = (back && offset as i64 >= start, m) {
                expected.extend(model_back(offset as i64, m));
            }
        }
        self.check_archived(&archived, expected);
    }

    fn log_start_moved(&mut self, to: i64) {
        self.log_start = to;
        self.p.log_start_moved(to);
        for offset in 0..to.min(self.model.len() as i64) {
            // Gone: whatever it was, it is never handed out again.
            if let Some(m) = self.at(offset) {
                m.state = RecordState::Archived;
            } else {
                *self.at(offset) = Some(Model {
                    state: RecordState::Archived,
                    delivery_count: 0,
                });
            }
        }
    }

    /// The partition's state is the model's; its start is as far as it
    /// can be; no record is held by two members (one state each).
    fn check(&self) {
        let start = self.p.start();
        for offset in 0..start {
            let m = self.model.get(offset as usize).cloned().flatten();
            if !Self::is_done(&m) && offset >= self.log_start {
                self.fail(format!("{offset} below the start {start} but {m:?}"));
            }
        }
        if let Some(first) = self.p.get(start) {
            if first.state.is_done() {
                self.fail(format!("the start {start} could move past a done offset"));
            }
        }
        for offset in start..self.p.end() {
            let got = self.p.get(offset).map(|r| Model {
                state: r.state.clone(),
                delivery_count: r.delivery_count,
            });
            let expected = self.model.get(offset as usize).cloned().flatten();
            if got != expected {
                self.fail(format!("{offset}: {got:?}, the model says {expected:?}"));
            }
        }
        // The counts (the metrics' gauges) are the model's.
        let mut expected = InFlightCounts::default();
        for offset in start..self.p.end() {
            match self
                .model
                .get(offset as usize)
                .cloned()
                .flatten()
                .map(|m| m.state)
            {
                Some(RecordState::Available) => expected.available += 1,
                Some(RecordState::Acquired { .. }) => expected.acquired += 1,
                Some(_) => expected.done += 1,
                None => {}
            }
        }
        if self.p.counts() != expected {
            self.fail(format!(
                "counts {:?}, the model's {expected:?}",
                self.p.counts()
            ));
        }
    }
}

fn model_back(offset: i64, m: &mut Model) -> Option<(i64, Archived)> {
    if m.delivery_count >= LIMITS.delivery_limit {
        m.state = RecordState::Archived;
        return Some((offset, Archived::DeliveryLimit));
    }
    m.state = RecordState::Available;
    None
}

const MEMBERS: [&str; 3] = ["a", "b", "c"];

#[test]
fn random_members_never_share_a_record_nor_see_an_acknowledged_one_again() {
    let seed = crate::groups::modern::test_seed();
    let mut rng = SmallRng::seed_from_u64(seed);
    for _ in 0..200 {
        let mut run = Run {
            seed,
            step: 0,
            p: SharePartition::new(0, LIMITS),
            model: Vec::new(),
            log_start: 0,
            log_end: rng.gen_range(0..30),
            now: 0,
        };
        for step in 0..300 {
            run.step = step;
            let member = MEMBERS[rng.gen_range(0..MEMBERS.len())];
            match rng.gen_range(0..12) {
                0..=2 => run.acquire(member, rng.gen_range(1..8)),
                3..=6 => {
                    let first = rng.gen_range(run.p.start()..=run.p.end());
                    let last = first + rng.gen_range(0..3);
                    let ack = Ack::of_id(rng.gen_range(0..5)).unwrap();
                    run.acknowledge(member, (first, last), ack);
                }
                7 => {
                    run.now += rng.gen_range(0..80);
                    run.expire();
                }
                8 => run.leave(member),
                9 => run.restart(),
                10 => run.log_end += rng.gen_range(0..10),
                11 if rng.gen_bool(0.2) => {
                    let to = rng.gen_range(run.log_start..=run.log_end);
                    run.log_start_moved(to);
                }
                _ => {}
            }
            run.check();
        }
        // Changes stop: one member takes and accepts everything.
        run.now += 1_000;
        run.expire();
        for _ in 0..1_000 {
            if run.p.start() >= run.log_end {
                break;
            }
            run.acquire("drain", 5);
            let held: Vec<i64> = (run.p.start()..run.p.end())
                .filter(|o| matches!(&run.p.get(*o).unwrap().state, RecordState::Acquired { member, .. } if member == "drain"))
                .collect();
            for offset in held {
                run.acknowledge("drain", (offset, offset), Ack::Accept);
            }
            run.check();
        }
        assert_eq!(
            run.p.start(),
            run.log_end.max(run.log_start),
            "SEED={seed}: drained"
        );
        let counts = run.p.counts();
        assert_eq!((counts.available, counts.acquired), (0, 0), "SEED={seed}");
    }
}

#[test]
fn the_durable_state_keeps_acknowledgements_and_deliveries_and_frees_locks() {
    let mut p = SharePartition::new(0, LIMITS);
    p.acquire("a", 6, 10, 0);
    p.acknowledge("a", (1, 2), Ack::Accept, 0).unwrap();
    p.acknowledge("a", (3, 3), Ack::Reject, 0).unwrap();
    p.acknowledge("a", (4, 4), Ack::Release, 0).unwrap();
    let state = p.persisted();
    assert_eq!(state.start, 0);
    assert_eq!(
        state.batches,
        [(0, 0, 0, 1), (1, 2, 2, 1), (3, 3, 4, 1), (4, 5, 0, 1)],
        "acquired stored as available, runs of one state and count"
    );
    let (back, archived) = SharePartition::restored(&state, LIMITS);
    assert!(archived.is_empty(), "none delivered as often as allowed");
    assert_eq!(back.get(0).unwrap().state, RecordState::Available);
    assert_eq!(back.get(2).unwrap().state, RecordState::Acknowledged);
    assert_eq!(back.end(), 6);
    // Acknowledged at the front: a restored start moves past them.
    let mut q = SharePartition::new(0, LIMITS);
    q.acquire("a", 3, 10, 0);
    q.acknowledge("a", (1, 2), Ack::Accept, 0).unwrap();
    q.acknowledge("a", (0, 0), Ack::Accept, 0).unwrap();
    assert_eq!(
        SharePartition::restored(&q.persisted(), LIMITS).0.start(),
        3
    );
    // A record held at its last allowed delivery is archived on restore.
    let mut r = SharePartition::new(0, LIMITS);
    for round in 0..3 {
        r.acquire("a", 1, 1, round);
        if round < 2 {
            r.acknowledge("a", (0, 0), Ack::Release, round).unwrap();
        }
    }
    let (r, archived) = SharePartition::restored(&r.persisted(), LIMITS);
    assert_eq!(
        archived,
        [ArchivedRecord {
            offset: 0,
            delivery_count: 3,
            why: Archived::DeliveryLimit
        }]
    );
    assert_eq!(r.start(), 1);
}
