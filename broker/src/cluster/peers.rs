//! Calls from this broker to other brokers over the Kafka protocol (a
//! transaction coordinator's WriteTxnMarkers to partition leaders and
//! AddPartitionsToTxn verification to coordinators, a partition leader's
//! share-partition state to the group's coordinator), one kept connection
//! per broker, purpose and shard: a transaction's end or first write
//! should not pay a connection set-up. A connection that fails is dropped
//! and made again next time.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use client::connection::Connection;
use control::BrokerId;
use futures::future::{select, Either};
use kafka_protocol::protocol::Request;
use kafka_protocol::ResponseError;

use crate::cluster::Cluster;
use crate::kafka::Code;

/// How long one call may take before it counts as failed.
const CALL_MAX: Duration = Duration::from_secs(35);

/// One broker's connection, made on first use and dropped when a call on
/// it fails or is cut short (a half-read answer must not be the next
/// call's).
type Slot = Rc<futures::lock::Mutex<Option<Connection>>>;

/// What a connection carries: markers wait for a leader's in-sync
/// replicas (seconds, at worst), which a produce's verification must not
/// queue behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// WriteTxnMarkers to partition leaders.
    Markers,
    /// AddPartitionsToTxn verify_only to transaction coordinators.
    Verification,
    /// Read/WriteShareGroupState to group coordinators.
    ShareState,
    /// Produce of share groups' dead letters to partition leaders.
    DeadLetters,
}

/// This shard's connections to other brokers.
#[derive(Default)]
pub struct PeerConnections {
    slots: RefCell<HashMap<(BrokerId, Purpose), Slot>>,
}

impl PeerConnections {
    /// Sends `request` at `version` to `broker` and waits (bounded, once
    /// the connection is its own) for its answer; NETWORK_EXCEPTION if it
    /// cannot be reached or does not answer.
    pub async fn call<R: Request>(
        &self,
        cluster: &Cluster,
        (broker, purpose): (BrokerId, Purpose),
        request: &R,
        version: i16,
    ) -> Result<R::Response, Code> {
        let failed = ResponseError::NetworkException.code();
        let slot = self.slot(broker, purpose);
        let mut held = slot.lock().await;
        let call = async {
            if held.is_none() {
                *held = Some(connect(cluster, broker).await?);
            }
            let connection = held.as_mut().ok_or(failed)?;
            connection.call(request, version).await.map_err(|e| {
                tracing::info!(broker = broker.0, error = %e, "a call to another broker failed");
                failed
            })
        };
        let timer = glommio::timer::sleep(CALL_MAX);
        let answer = match select(Box::pin(call), Box::pin(timer)).await {
            Either::Left((answer, _)) => answer,
            Either::Right(_) => Err(failed),
        };
        if answer.is_err() {
            *held = None;
        }
        answer
    }

    fn slot(&self, broker: BrokerId, purpose: Purpose) -> Slot {
        self.slots
            .borrow_mut()
            .entry((broker, purpose))
            .or_default()
            .clone()
    }
}

async fn connect(cluster: &Cluster, broker: BrokerId) -> Result<Connection, Code> {
    let failed = ResponseError::NetworkException.code();
    let address = cluster.address_of(broker).ok_or(failed)?;
    cluster
        .connect_to(address, "broker-peer")
        .await
        .map_err(|e| {
            tracing::info!(broker = broker.0, error = %e, "cannot reach another broker");
            failed
        })
}
