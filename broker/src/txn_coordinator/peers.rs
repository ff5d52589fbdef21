//! Calls from a transaction coordinator to other brokers over the Kafka
//! protocol (WriteTxnMarkers to partition leaders, AddPartitionsToTxn
//! verification to coordinators), one kept connection per broker and
//! shard: a transaction's end or first write should not pay a connection
//! set-up. A connection that fails is dropped and made again next time.

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

/// This shard's connections to other brokers.
#[derive(Default)]
pub struct PeerConnections {
    open: RefCell<HashMap<BrokerId, Rc<futures::lock::Mutex<Connection>>>>,
}

impl PeerConnections {
    /// Sends `request` at `version` to `broker` and waits (bounded) for
    /// its answer; NETWORK_EXCEPTION if it cannot be reached or answer.
    pub async fn call<R: Request>(
        &self,
        cluster: &Cluster,
        broker: BrokerId,
        request: &R,
        version: i16,
    ) -> Result<R::Response, Code> {
        let failed = ResponseError::NetworkException.code();
        let connection = self.connection(cluster, broker).await?;
        let call = async {
            let mut connection = connection.lock().await;
            connection.call(request, version).await
        };
        let timer = glommio::timer::sleep(CALL_MAX);
        let answer = match select(Box::pin(call), Box::pin(timer)).await {
            Either::Left((Ok(answer), _)) => Ok(answer),
            Either::Left((Err(e), _)) => {
                tracing::info!(broker = broker.0, error = %e, "a call to another broker failed");
                Err(failed)
            }
            Either::Right(_) => Err(failed),
        };
        if answer.is_err() {
            self.open.borrow_mut().remove(&broker);
        }
        answer
    }

    async fn connection(
        &self,
        cluster: &Cluster,
        broker: BrokerId,
    ) -> Result<Rc<futures::lock::Mutex<Connection>>, Code> {
        if let Some(open) = self.open.borrow().get(&broker) {
            return Ok(open.clone());
        }
        let failed = ResponseError::NetworkException.code();
        let address = cluster.address_of(broker).ok_or(failed)?;
        let connection = cluster
            .connect_to(address, "transaction-coordinator")
            .await
            .map_err(|e| {
                tracing::info!(broker = broker.0, error = %e, "cannot reach another broker");
                failed
            })?;
        let shared = Rc::new(futures::lock::Mutex::new(connection));
        self.open.borrow_mut().insert(broker, shared.clone());
        Ok(shared)
    }
}
