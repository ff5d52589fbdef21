//! Producer ids for InitProducerId, handed out by shard 0 from blocks the
//! active controller allocates through the metadata log (Kafka's
//! AllocateProducerIds): ids are unique across the cluster and never
//! reused, and a broker asks the controller once per thousand producers.
//! What is left of a block when the broker stops is never handed out.

use std::cell::Cell;
use std::time::Duration;

use control::service::{ControllerRequest, MetadataService};
use control::BrokerId;
use kafka_protocol::ResponseError;

use super::Cluster;
use crate::kafka::Code;
use crate::runtime::sharded::ShardId;
use crate::runtime::wait;

/// How long a caller waits for this node's metadata to show its new block.
const BLOCK_VISIBLE_WAIT_MAX: Duration = Duration::from_secs(10);

/// The ids of the current block still to hand out: `[next, end)`.
#[derive(Default)]
pub struct ProducerIds {
    next: Cell<i64>,
    end: Cell<i64>,
    /// One block request at a time (the block is read back from the
    /// metadata, where a broker's latest block replaces its previous one).
    refilling: futures::lock::Mutex<()>,
}

impl Cluster {
    /// A fresh producer id, from shard 0's block (refilled from the
    /// controller when it runs out).
    pub async fn next_producer_id(&self) -> Result<i64, Code> {
        let unavailable = ResponseError::CoordinatorNotAvailable.code();
        let me = self.me;
        self.peers
            .invoke_on(ShardId::FIRST, move |first| {
                Box::pin(async move {
                    let service = first.controller.as_ref().ok_or(unavailable)?;
                    first.producer_ids.next(service, me).await
                })
            })
            .await
            .map_err(|_| unavailable)?
    }
}

impl ProducerIds {
    async fn next(&self, service: &MetadataService, me: BrokerId) -> Result<i64, Code> {
        loop {
            if let Some(id) = self.take() {
                return Ok(id);
            }
            let _one_refill = self.refilling.lock().await;
            if self.next.get() < self.end.get() {
                continue;
            }
            let (first, size) = allocate(service, me).await?;
            self.next.set(first);
            self.end.set(first + size);
        }
    }

    fn take(&self) -> Option<i64> {
        let id = self.next.get();
        (id < self.end.get()).then(|| {
            self.next.set(id + 1);
            id
        })
    }
}

/// Asks the controller for a block and waits until this node applied it.
async fn allocate(service: &MetadataService, me: BrokerId) -> Result<(i64, i64), Code> {
    let unavailable = ResponseError::CoordinatorNotAvailable.code();
    let index = service
        .request_applied(ControllerRequest::AllocateProducerIds { broker: me })
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "no block of producer ids from the controller");
            unavailable
        })?;
    let tick = Duration::from_millis(2);
    if !wait::until(tick, BLOCK_VISIBLE_WAIT_MAX, || {
        service.view().applied >= index
    })
    .await
    {
        return Err(unavailable);
    }
    service
        .view()
        .metadata
        .producer_id_blocks
        .get(&me)
        .copied()
        .ok_or(unavailable)
}
