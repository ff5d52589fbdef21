//! Transaction markers appended to the partitions this broker leads: what
//! WriteTxnMarkers asks of a leader, from the transaction coordinator of
//! this broker or another. A marker goes through the same append as any
//! batch (acks=all), where the log checks it against the producer's state
//! (an older epoch, an older coordinator: refused).

use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use storage::batch::ValidBatch;
use storage::markers::{self, Marker, MarkerKind};
use storage::TimestampMs;

use super::append::Acks;
use super::served::ServedPartition;
use super::table::BATCH_BYTES_CAP;
use super::Partitions;
use crate::cluster::routing::PartitionKey;
use crate::kafka::Code;
use crate::runtime::clock::wall_ms;
use crate::runtime::sharded::LocalFuture;

/// One transaction's outcome, to mark on some partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkerToWrite {
    /// The producer whose transaction ends.
    pub producer_id: i64,
    /// Its epoch (a fence or timeout abort: the bumped one).
    pub epoch: i16,
    /// COMMIT or ABORT.
    pub commit: bool,
    /// The epoch of the coordinator deciding it.
    pub coordinator_epoch: i32,
}

/// Hears of the markers written to `__consumer_offsets` partitions (the
/// group coordinator, whose pending transactional offsets they decide;
/// it lives in a layer above and is installed by the shard).
pub trait MarkerListener {
    /// A marker of `producer_id` (COMMIT if `commit`) is in partition
    /// `key`, acknowledged by its in-sync replicas.
    fn marker_written(&self, key: PartitionKey, producer_id: i64, commit: bool);
}

/// How long a marker waits for the in-sync replicas (Kafka's coordinator
/// uses request.timeout.ms, 30 s).
const MARKER_WAIT_MAX: Duration = Duration::from_secs(30);

impl Partitions {
    /// Appends `marker` to each of `partitions` (topic, index) this broker
    /// leads, at once; each partition's error code in order (0: written).
    pub async fn write_marker(
        &self,
        marker: MarkerToWrite,
        partitions: Vec<(String, i32)>,
    ) -> Vec<Code> {
        let asked = partitions
            .iter()
            .map(|(topic, index)| (self.cluster.route_by_name(topic, *index), ()));
        let work = move |owner: Rc<Partitions>, led: ServedPartition, (): ()| {
            Box::pin(async move { led.append_marker(&owner, marker).await }) as LocalFuture<_>
        };
        self.fan_out(asked, true, work)
            .await
            .into_iter()
            .map(|written| written.err().unwrap_or(0))
            .collect()
    }
}

impl ServedPartition {
    /// Appends `marker` here and waits for the in-sync replicas.
    pub async fn append_marker(
        &self,
        partitions: &Partitions,
        marker: MarkerToWrite,
    ) -> Result<(), Code> {
        let kind = match marker.commit {
            true => MarkerKind::Commit,
            false => MarkerKind::Abort,
        };
        let spec = Marker {
            kind,
            coordinator_epoch: marker.coordinator_epoch,
        };
        let built = markers::build(
            marker.producer_id,
            marker.epoch,
            spec,
            TimestampMs(wall_ms()),
        );
        let batch = ValidBatch::new(built, BATCH_BYTES_CAP)
            .map_err(|_| ResponseError::CorruptMessage.code())?;
        self.append(partitions, vec![batch], Acks::All, MARKER_WAIT_MAX)
            .await?;
        if self.topic.name == crate::groups::OFFSETS_TOPIC {
            let listener = partitions.marker_listener.borrow().clone();
            if let Some(listener) = listener {
                let key = PartitionKey {
                    topic: self.topic.id,
                    index: self.index,
                };
                listener.marker_written(key, marker.producer_id, marker.commit);
            }
        }
        Ok(())
    }
}
