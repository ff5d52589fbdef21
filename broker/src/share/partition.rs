//! One partition's records as a share group consumes them (KIP-932's
//! share-partition, kept by the partition's leader), sans I/O: which
//! records are in flight, who holds each and until when, how often each
//! was delivered, and where the group's start offset stands.
//!
//! - Offsets below `start` are done (acknowledged or archived); offsets
//!   from `end` on were never handed out. Between them each offset is
//!   available, acquired by one member until its lock expires,
//!   acknowledged, or archived.
//! - Acquiring hands out available records first (redeliveries, lowest
//!   offset first), then new ones from `end`, never more than
//!   `max_in_flight` offsets past `start`; each delivery counts.
//! - A member acknowledges what it holds: accept (done), release (again
//!   available), reject (archived), renew (its lock starts again), or gap
//!   (an offset with no record to give, e.g. a transaction marker). A
//!   record whose lock expires, or whose holder leaves, is available
//!   again, unless it reached the delivery limit: then it is archived.
//! - What is durable ([`PersistedState`]) is the start offset and every
//!   in-flight offset's state and delivery count; an acquired record is
//!   stored as available with the deliveries it had, so a new leader
//!   hands it out again (at-least-once) and never an acknowledged one.
//!
//! Time is milliseconds the caller passes in; nothing here reads a clock.

use std::collections::BTreeMap;

/// A member id.
pub type MemberId = String;

/// How a share-partition behaves (the group's settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long an acquired record stays with its member.
    pub lock_ms: i64,
    /// Deliveries after which a record that comes back is archived.
    pub delivery_limit: u16,
    /// The most offsets in flight (from the start offset on).
    pub max_in_flight: i64,
}

/// A record's state, as Kafka numbers the durable ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordState {
    /// It may be handed out.
    Available,
    /// A member holds it until `until_ms`.
    Acquired {
        /// The member holding it.
        member: MemberId,
        /// When its lock expires.
        until_ms: i64,
    },
    /// Processed: never handed out again.
    Acknowledged,
    /// Given up on (rejected, delivered too often, or no record there).
    Archived,
}

impl RecordState {
    /// Whether nothing more happens to it.
    fn is_done(&self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }

    /// Kafka's durable id: 0 available, 2 acknowledged, 4 archived (an
    /// acquired record is stored as available).
    pub fn durable_id(&self) -> i8 {
        match self {
            RecordState::Available | RecordState::Acquired { .. } => 0,
            RecordState::Acknowledged => 2,
            RecordState::Archived => 4,
        }
    }
}

/// How many in-flight offsets are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InFlightCounts {
    /// To be handed out (again).
    pub available: usize,
    /// Held by a member.
    pub acquired: usize,
    /// Acknowledged or archived, above the start offset.
    pub done: usize,
}

/// An in-flight offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlight {
    /// Its state.
    pub state: RecordState,
    /// How often it was handed out.
    pub delivery_count: u16,
}

/// How a member acknowledges (Kafka's AcknowledgeType; 0 is a gap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ack {
    /// No record at this offset (a control record, a compacted one).
    Gap,
    /// Processed.
    Accept,
    /// Not processed: hand it out again.
    Release,
    /// Never to be processed.
    Reject,
    /// Still working on it: the lock starts again (KIP-1222).
    Renew,
}

impl Ack {
    /// The type of Kafka's id, or None.
    pub fn of_id(id: i8) -> Option<Ack> {
        Some(match id {
            0 => Ack::Gap,
            1 => Ack::Accept,
            2 => Ack::Release,
            3 => Ack::Reject,
            4 => Ack::Renew,
            _ => return None,
        })
    }
}

/// Why a record was archived (for the dead-letter topic and metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Archived {
    /// A member rejected it.
    Rejected,
    /// It came back after its last allowed delivery.
    DeliveryLimit,
}

/// A record archived by a step: its offset, deliveries and why (gaps,
/// which hold no record, are not reported).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchivedRecord {
    /// The offset.
    pub offset: i64,
    /// How often it was handed out.
    pub delivery_count: u16,
    /// Why.
    pub why: Archived,
}

/// Offsets handed out together: `first..=last`, each delivered
/// `delivery_count` times so far (Kafka's AcquiredRecords).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    /// The first offset.
    pub first: i64,
    /// The last offset.
    pub last: i64,
    /// Deliveries, this one included.
    pub delivery_count: u16,
}

/// Why an acknowledgement was refused (Kafka's codes are the caller's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckError {
    /// An offset the member does not hold (INVALID_RECORD_STATE).
    NotHeld(i64),
    /// A range that is not one, or reaches past what was ever handed
    /// out (INVALID_REQUEST).
    BadRange,
}

/// The durable state: the start offset and each in-flight offset's
/// state and deliveries, in runs (Kafka's ShareSnapshot state batches).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PersistedState {
    /// The share-partition start offset.
    pub start: i64,
    /// Runs of offsets: (first, last, durable state id, delivery count).
    pub batches: Vec<(i64, i64, i8, u16)>,
}

/// One partition's share state for one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharePartition {
    start: i64,
    end: i64,
    in_flight: BTreeMap<i64, InFlight>,
    limits: Limits,
}

impl SharePartition {
    /// A share-partition starting at `start` (where the group's
    /// `share.auto.offset.reset` puts it: the log end, or its start).
    pub fn new(start: i64, limits: Limits) -> SharePartition {
        SharePartition {
            start,
            end: start,
            in_flight: BTreeMap::new(),
            limits,
        }
    }

    /// The share-partition start offset: everything below is done.
    pub fn start(&self) -> i64 {
        self.start
    }

    /// The first offset never handed out.
    pub fn end(&self) -> i64 {
        self.end
    }

    /// The in-flight offset `offset`, if it is one.
    pub fn get(&self, offset: i64) -> Option<&InFlight> {
        self.in_flight.get(&offset)
    }

    /// Where the next records to hand out are: the first available
    /// in-flight offset, else the end.
    pub fn next_to_acquire(&self) -> i64 {
        let available = self.in_flight.iter();
        let mut available = available.filter(|(_, r)| r.state == RecordState::Available);
        available.next().map_or(self.end, |(offset, _)| *offset)
    }

    /// The limits it works with.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Works with `limits` from now on (the group's settings changed):
    /// locks taken before keep their expiry.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// How many in-flight offsets are in each state (for the lag and
    /// metrics).
    pub fn counts(&self) -> InFlightCounts {
        let mut counts = InFlightCounts::default();
        for record in self.in_flight.values() {
            match record.state {
                RecordState::Available => counts.available += 1,
                RecordState::Acquired { .. } => counts.acquired += 1,
                RecordState::Acknowledged | RecordState::Archived => counts.done += 1,
            }
        }
        counts
    }

    /// Hands `member` at most `max_records` records, at offsets below
    /// `log_end` (the high watermark), at `now_ms`: available in-flight
    /// ones first, then new ones.
    pub fn acquire(
        &mut self,
        member: &str,
        max_records: usize,
        log_end: i64,
        now_ms: i64,
    ) -> Vec<Acquired> {
        self.acquire_within(member, max_records, (i64::MIN, log_end), now_ms)
    }

    /// [`SharePartition::acquire`] of offsets in `from..below` only (the
    /// batches a read brought).
    pub fn acquire_within(
        &mut self,
        member: &str,
        max_records: usize,
        range: (i64, i64),
        now_ms: i64,
    ) -> Vec<Acquired> {
        let lock_ms = self.limits.lock_ms;
        self.acquire_locked(member, max_records, range, (now_ms, lock_ms))
    }

    /// [`SharePartition::acquire_within`] with locks of `lock_ms` (a
    /// visibility timeout of the HTTP API) from `now_ms`.
    pub fn acquire_locked(
        &mut self,
        member: &str,
        max_records: usize,
        (from, below): (i64, i64),
        (now_ms, lock_ms): (i64, i64),
    ) -> Vec<Acquired> {
        let until_ms = now_ms + lock_ms;
        let mut taken: Vec<(i64, u16)> = Vec::new();
        for (offset, record) in self.in_flight.range_mut(from..) {
            if taken.len() >= max_records || *offset >= below {
                break;
            }
            if record.state == RecordState::Available {
                record.delivery_count = record.delivery_count.saturating_add(1);
                record.state = RecordState::Acquired {
                    member: member.to_string(),
                    until_ms,
                };
                taken.push((*offset, record.delivery_count));
            }
        }
        let room = (self.start.saturating_add(self.limits.max_in_flight)).min(below);
        while taken.len() < max_records && self.end < room && self.end >= from {
            let record = InFlight {
                state: RecordState::Acquired {
                    member: member.to_string(),
                    until_ms,
                },
                delivery_count: 1,
            };
            self.in_flight.insert(self.end, record);
            taken.push((self.end, 1));
            self.end += 1;
        }
        taken.sort_unstable();
        runs(&taken)
    }

    /// `member` acknowledges `first..=last` with `ack` at `now_ms`: all
    /// or nothing (an offset it does not hold refuses the whole range).
    /// Returns what it archived.
    pub fn acknowledge(
        &mut self,
        member: &str,
        (first, last): (i64, i64),
        ack: Ack,
        now_ms: i64,
    ) -> Result<Vec<ArchivedRecord>, AckError> {
        self.check_held(member, (first, last))?;
        let mut archived = Vec::new();
        for offset in first..=last {
            let record = self.in_flight.get_mut(&offset).expect("checked above");
            match ack {
                Ack::Accept => record.state = RecordState::Acknowledged,
                Ack::Gap => record.state = RecordState::Archived,
                Ack::Reject => {
                    record.state = RecordState::Archived;
                    archived.push(ArchivedRecord {
                        offset,
                        delivery_count: record.delivery_count,
                        why: Archived::Rejected,
                    });
                }
                Ack::Release => archived.extend(back(offset, record, self.limits)),
                Ack::Renew => {
                    record.state = RecordState::Acquired {
                        member: member.to_string(),
                        until_ms: now_ms + self.limits.lock_ms,
                    };
                }
            }
        }
        self.advance_start();
        Ok(archived)
    }

    /// Whether `member` holds every offset of `first..=last` (what
    /// [`SharePartition::acknowledge`] checks before it changes anything).
    pub fn check_held(&self, member: &str, (first, last): (i64, i64)) -> Result<(), AckError> {
        // Kafka: INVALID_REQUEST for offsets never handed out.
        if first > last || first < 0 || last >= self.end {
            return Err(AckError::BadRange);
        }
        if first < self.start {
            // Done already (and the walk below stays within what is in
            // flight, at most `max_in_flight` offsets).
            return Err(AckError::NotHeld(first));
        }
        for offset in first..=last {
            let held = self.in_flight.get(&offset).is_some_and(
                |r| matches!(&r.state, RecordState::Acquired { member: m, .. } if m == member),
            );
            if !held {
                return Err(AckError::NotHeld(offset));
            }
        }
        Ok(())
    }

    /// Whether nothing can be handed out until something is done: no
    /// record available and `max_in_flight` offsets in flight.
    pub fn window_full(&self) -> bool {
        self.next_to_acquire() == self.end
            && self.end >= self.start.saturating_add(self.limits.max_in_flight)
    }

    /// Locks expired by `now_ms` end: those records come back (or are
    /// archived at the delivery limit). Returns what it archived.
    pub fn expire_locks(&mut self, now_ms: i64) -> Vec<ArchivedRecord> {
        let limits = self.limits;
        let mut archived = Vec::new();
        for (offset, record) in self.in_flight.iter_mut() {
            let expired = matches!(record.state, RecordState::Acquired { until_ms, .. } if until_ms <= now_ms);
            if expired {
                archived.extend(back(*offset, record, limits));
            }
        }
        self.advance_start();
        archived
    }

    /// Member `member` left: what it held comes back (or is archived at
    /// the delivery limit). Returns what it archived.
    pub fn release_member(&mut self, member: &str) -> Vec<ArchivedRecord> {
        let limits = self.limits;
        let mut archived = Vec::new();
        for (offset, record) in self.in_flight.iter_mut() {
            let held =
                matches!(&record.state, RecordState::Acquired { member: m, .. } if m == member);
            if held {
                archived.extend(back(*offset, record, limits));
            }
        }
        self.advance_start();
        archived
    }

    /// The log's start moved to `log_start` (retention): what is below
    /// it is gone, done or not.
    pub fn log_start_moved(&mut self, log_start: i64) {
        if log_start <= self.start {
            return;
        }
        self.in_flight = self.in_flight.split_off(&log_start);
        self.start = log_start;
        self.end = self.end.max(log_start);
        self.advance_start();
    }

    /// The durable state.
    pub fn persisted(&self) -> PersistedState {
        let mut batches: Vec<(i64, i64, i8, u16)> = Vec::new();
        for (offset, record) in &self.in_flight {
            let (state, count) = (record.state.durable_id(), record.delivery_count);
            match batches.last_mut() {
                Some((_, last, s, c)) if *last + 1 == *offset && *s == state && *c == count => {
                    *last = *offset;
                }
                _ => batches.push((*offset, *offset, state, count)),
            }
        }
        PersistedState {
            start: self.start,
            batches,
        }
    }

    /// The share-partition as a new leader rebuilds it from its durable
    /// state: what was acquired is available with its deliveries, as
    /// when a lock expires (so archived at the delivery limit: returned).
    pub fn restored(
        state: &PersistedState,
        limits: Limits,
    ) -> (SharePartition, Vec<ArchivedRecord>) {
        let mut partition = SharePartition::new(state.start, limits);
        let mut archived = Vec::new();
        for &(first, last, id, delivery_count) in &state.batches {
            for offset in first.max(partition.start)..=last {
                let mut record = InFlight {
                    state: RecordState::Available,
                    delivery_count,
                };
                match id {
                    2 => record.state = RecordState::Acknowledged,
                    4 => record.state = RecordState::Archived,
                    _ => archived.extend(back(offset, &mut record, limits)),
                }
                partition.in_flight.insert(offset, record);
                partition.end = partition.end.max(offset + 1);
            }
        }
        partition.advance_start();
        (partition, archived)
    }

    /// Moves the start past the done offsets at its front.
    fn advance_start(&mut self) {
        while let Some(entry) = self.in_flight.first_entry() {
            if *entry.key() != self.start || !entry.get().state.is_done() {
                break;
            }
            entry.remove();
            self.start += 1;
        }
    }
}

/// A record given back: available again, or archived once it was
/// delivered as often as allowed.
fn back(offset: i64, record: &mut InFlight, limits: Limits) -> Option<ArchivedRecord> {
    if record.delivery_count >= limits.delivery_limit {
        record.state = RecordState::Archived;
        return Some(ArchivedRecord {
            offset,
            delivery_count: record.delivery_count,
            why: Archived::DeliveryLimit,
        });
    }
    record.state = RecordState::Available;
    None
}

/// Offsets with their deliveries, in order, as runs of consecutive
/// offsets with the same count.
fn runs(taken: &[(i64, u16)]) -> Vec<Acquired> {
    let mut out: Vec<Acquired> = Vec::new();
    for &(offset, delivery_count) in taken {
        match out.last_mut() {
            Some(run) if run.last + 1 == offset && run.delivery_count == delivery_count => {
                run.last = offset;
            }
            _ => out.push(Acquired {
                first: offset,
                last: offset,
                delivery_count,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests;
