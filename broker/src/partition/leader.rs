//! A leader's bookkeeping on its open partition: moving the high
//! watermark as the ISR and its own log allow, recording followers'
//! fetches, and whether an acks=all produce may be appended and when it
//! is acknowledged. The rules live in the replication crate; this feeds
//! them the partition's facts and wakes whoever waits.

use std::time::{Duration, Instant};

use control::BrokerId;
use futures::future::{select, Either};
use kafka_protocol::ResponseError;
use replication::leader::{AckError, AckState};
use storage::{LeaderEpoch, Offset};

use super::role::Role;
use super::served::check_leader_epoch;
use super::table::OpenPartition;
use crate::kafka::Code;
use crate::runtime::clock::monotonic_ms;

/// Where a leader's own log counts as holding data for the high watermark.
pub fn own_end(partition: &OpenPartition, fsync_before_ack: bool) -> Offset {
    if fsync_before_ack {
        partition.log.flushed()
    } else {
        partition.log.log_end()
    }
}

/// Moves a replicated leader's high watermark as far as the ISR and its
/// own log allow, and wakes whoever waits for it.
pub fn advance_high_watermark(partition: &OpenPartition) {
    let moved = {
        let mut role = partition.role.borrow_mut();
        let Role::Leader(leading) = &mut *role else {
            return;
        };
        if !leading.replicated {
            return; // storage moves it with each flush
        }
        let end = own_end(partition, leading.fsync_before_ack);
        let high_watermark = leading.state.update_high_watermark(end);
        if high_watermark > partition.log.high_watermark() {
            partition.log.set_high_watermark(high_watermark);
            true
        } else {
            false
        }
    };
    if moved {
        partition.notify_arrival();
    }
}

/// A follower fetched from this leader at `fetch_offset` (its log end):
/// records its progress, moves the high watermark, and returns the high
/// watermark to send back; or the error if this broker does not lead in
/// `epoch` (-1: not checked).
pub fn on_replica_fetch(
    partition: &OpenPartition,
    follower: BrokerId,
    fetch_offset: Offset,
    epoch: i32,
) -> Result<Offset, Code> {
    {
        let mut role = partition.role.borrow_mut();
        let Role::Leader(leading) = &mut *role else {
            return Err(ResponseError::NotLeaderOrFollower.code());
        };
        check_leader_epoch(epoch, leading.state.epoch())?;
        let log_end = partition.log.log_end();
        leading
            .state
            .record_fetch(follower.0, fetch_offset, log_end, monotonic_ms());
    }
    advance_high_watermark(partition);
    Ok(partition.log.high_watermark())
}

/// Whether an acks=all produce may be appended: this broker leads and the
/// ISR has at least `min_insync` members.
pub fn check_acks_all(partition: &OpenPartition, min_insync: usize) -> Result<(), Code> {
    match &*partition.role.borrow() {
        Role::Leader(leading) => leading
            .state
            .check_acks_all(min_insync)
            .map_err(ack_error_code),
        _ => Err(ResponseError::NotLeaderOrFollower.code()),
    }
}

fn ack_error_code(error: AckError) -> Code {
    match error {
        AckError::NotEnoughReplicas => ResponseError::NotEnoughReplicas.code(),
        AckError::NotEnoughReplicasAfterAppend => {
            ResponseError::NotEnoughReplicasAfterAppend.code()
        }
    }
}

/// Waits until the high watermark passes `last_offset`, appended in leader
/// epoch `epoch` (acks=all on a replicated partition), at most `timeout`.
/// A leadership that goes on unbroken into a later epoch still answers
/// (its log holds the batch; Kafka's leader keeps such waits too); one
/// deposed in between does not, whatever it leads now.
pub async fn wait_acknowledged(
    partition: &OpenPartition,
    epoch: LeaderEpoch,
    last_offset: Offset,
    min_insync: usize,
    timeout: Duration,
) -> Result<(), Code> {
    let deadline = Instant::now() + timeout;
    loop {
        advance_high_watermark(partition);
        let state = match &*partition.role.borrow() {
            Role::Leader(leading) if leading.led_since <= epoch => {
                leading.state.ack_state(last_offset, min_insync)
            }
            // Deposed while waiting: the client retries on the new leader.
            _ => return Err(ResponseError::NotLeaderOrFollower.code()),
        };
        match state {
            AckState::Done => return Ok(()),
            AckState::Failed(error) => return Err(ack_error_code(error)),
            AckState::Waiting => {}
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ResponseError::RequestTimedOut.code());
        }
        // Woken by any high watermark move, role or ISR change.
        let arrival = partition.next_arrival();
        let timer = glommio::timer::sleep(left);
        if let Either::Right(_) = select(arrival, Box::pin(timer)).await {
            // Looked at once more above, then answered as timed out.
        }
    }
}
