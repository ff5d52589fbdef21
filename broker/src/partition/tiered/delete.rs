//! DeleteRecords on a tiered topic: the remote log's start moves first
//! (the manifest without the segments wholly below the new start, the one
//! holding it serving from it, nothing below it uploaded later), then the
//! local log's when the new start is past it, then the dropped segments'
//! objects go. A crash between the steps leaves the remote log already
//! trimmed and the local log not yet: the client, not answered, asks
//! again. Followers keep what they hold, as for an untiered topic.

use storage::Offset;

use super::upload::{delete_segment_objects, write_manifest};
use super::Tiering;
use crate::partition::read::Bound;
use crate::partition::served::ServedPartition;
use crate::partition::Partitions;
use crate::remote_store::RemoteError;

/// Moves the partition's start (remote and local) up to `target`, at or
/// below the high watermark; the start after it (the current one when
/// `target` is below it).
pub async fn delete_records_below(
    partitions: &Partitions,
    tiering: &Tiering,
    served: &ServedPartition,
    target: Offset,
) -> Result<Offset, RemoteError> {
    let key = served.key();
    let remote = &served.partition.remote;
    let writing = remote.writing.lock().await;
    let manifest = remote.load(tiering, key, served.epoch).await?;
    let mut trimmed = (*manifest).clone();
    let dropped = trimmed.trim_start(target);
    if trimmed != *manifest {
        write_manifest(partitions, tiering, served, trimmed).await?;
    }
    drop(writing);
    let log = &served.partition.log;
    if target > log.log_start() {
        log.delete_records_below(target)
            .await
            .map_err(|e| RemoteError::Local(format!("deleting local records: {e}")))?;
    }
    delete_segment_objects(tiering, key, &dropped).await?;
    Ok(served.log_start_seen(Bound::HighWatermark))
}
