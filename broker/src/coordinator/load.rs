//! Loading a `__consumer_offsets` partition's groups: its records replayed
//! into the groups' state (offsets written in a transaction counted once
//! its COMMIT marker is replayed), the first time a request needs them in
//! a leadership.

use std::time::{Duration, Instant};

use storage::batch;

use crate::groups::store::PartitionGroups;
use crate::partition::served::ServedPartition;
use crate::partition::table::BATCH_BYTES_CAP;

/// Replays a partition's records into its groups.
pub async fn load(
    led: &ServedPartition,
    initial_delay: Duration,
) -> Result<PartitionGroups, storage::StorageError> {
    let log = &led.partition.log;
    // Everything the leader holds, as Kafka's coordinator loads: above the
    // high watermark too (a leader never cuts its own log).
    let end = log.log_end();
    let mut next = log.log_start();
    let mut groups = PartitionGroups::new(initial_delay);
    let now = Instant::now();
    while next < end {
        let read = log.read(next, 1 << 20, end).await?;
        let Some(after) = read.next_offset else {
            break;
        };
        for chunk in &read.chunks {
            for (header, stored) in batch::split_stored(chunk, BATCH_BYTES_CAP)? {
                if header.next_offset() <= next {
                    continue;
                }
                if header.is_control() {
                    end_transaction(&mut groups, &stored, header);
                    continue;
                }
                let Ok(records) = batch::records(&stored, header) else {
                    tracing::warn!(
                        offset = header.base_offset.0,
                        "skipping a compressed batch in __consumer_offsets"
                    );
                    continue;
                };
                for record in records {
                    let record = record?;
                    let Some(key) = record.key else { continue };
                    let replayed = match header.is_transactional() {
                        true => groups.replay_transactional(
                            header.producer_id,
                            record.offset.0,
                            key,
                            record.value,
                        ),
                        false => groups.replay(record.offset.0, key, record.value, now),
                    };
                    if let Err(e) = replayed {
                        tracing::warn!(offset = record.offset.0, error = %e, "skipping an unreadable __consumer_offsets record");
                    }
                }
            }
        }
        next = after;
    }
    Ok(groups)
}

/// A transaction marker in `__consumer_offsets`: the offsets its
/// producer wrote in the transaction count (COMMIT) or go (ABORT).
fn end_transaction(groups: &mut PartitionGroups, stored: &[u8], header: batch::BatchHeader) {
    if !header.is_transactional() {
        return; // another kind of control batch
    }
    match storage::markers::parse(stored, header) {
        Ok(marker) => {
            let commit = marker.kind == storage::markers::MarkerKind::Commit;
            groups.end_transaction(header.producer_id, commit);
        }
        Err(e) => {
            tracing::warn!(offset = header.base_offset.0, error = %e, "skipping an unreadable marker in __consumer_offsets")
        }
    }
}
