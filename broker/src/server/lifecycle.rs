//! A running shard's life until it stops: it serves its Kafka ports until
//! the stop flag is set, then (shard 0) a controlled shutdown moves this
//! broker's leaderships away, and open connections drain; with the
//! testing-only faults of the configuration.

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::channel::oneshot;
use futures::FutureExt;

use super::connection::accept::{accept_loop, Accepting, Port};
use super::shard::Shard;
use crate::cluster::quorum::BrokerLife;

/// How often a stopping shard looks whether its connections (or the
/// other shards) are done.
pub const STOP_POLL: Duration = Duration::from_millis(20);
/// How often a serving shard looks at the stop flag: each look wakes the
/// shard (and costs a little per open connection, see SHARD_RING_DEPTH),
/// so an idle broker looks seldom; a stop waits at most this long.
const STOP_WATCH: Duration = Duration::from_millis(100);
/// How long a stopping shard lets open connections finish.
pub const DRAIN_MAX: Duration = Duration::from_secs(5);

/// The testing-only faults of the configuration, on the last shard: a
/// panic some time after start, a shard that never yields once a stop
/// begins. Neither is set in production.
pub async fn test_faults(shard: Rc<Shard>, stop: Arc<AtomicBool>) {
    let config = &shard.cluster.config;
    if config.test_panic_after_ms > 0 {
        glommio::timer::sleep(Duration::from_millis(config.test_panic_after_ms)).await;
        panic!(
            "test_panic_after_ms: a deliberate panic on shard {}",
            shard.cluster.shard()
        );
    }
    if config.test_wedge_on_stop {
        while !stop.load(Ordering::Relaxed) {
            glommio::timer::sleep(STOP_POLL).await;
        }
        tracing::warn!(
            shard = %shard.cluster.shard(),
            "test_wedge_on_stop: this shard stops yielding"
        );
        loop {
            std::hint::spin_loop();
        }
    }
}

/// Serves the shard's Kafka ports until `stop` is set; then (shard 0,
/// given `shutdown`) a controlled shutdown, and the connections drain.
pub async fn serve_until_stopped(
    ports: Vec<Port>,
    shard: Rc<Shard>,
    stop: Arc<AtomicBool>,
    shutdown: Option<Rc<BrokerLife>>,
) {
    let (stopping_tx, stopping_rx) = oneshot::channel::<()>();
    let stopping = stopping_rx.shared();
    shard.connections.accepting(stopping.clone());
    let acceptors: Vec<_> = ports
        .into_iter()
        .map(|port| {
            let accepting = Accepting {
                port,
                stopping: stopping.clone(),
            };
            glommio::spawn_local(accept_loop(accepting, shard.clone()))
        })
        .collect();
    while !stop.load(Ordering::Relaxed) {
        glommio::timer::sleep(STOP_WATCH).await;
    }
    if let Some(life) = shutdown {
        controlled_shutdown(&shard, &life).await;
    }
    // Dropping the acceptors cancels them and closes the ports; connections
    // close once the request they are answering (if any) is answered.
    drop(acceptors);
    shard.connections.stop();
    let _ = stopping_tx.send(());
    let started = std::time::Instant::now();
    let connections = &shard.connections;
    tracing::debug!(open = connections.open(), "stopping: draining connections");
    while connections.open() > 0 && started.elapsed() < DRAIN_MAX {
        glommio::timer::sleep(STOP_POLL).await;
    }
    if connections.open() > 0 {
        tracing::warn!(
            open = connections.open(),
            "stopping with connections still busy"
        );
    }
}

/// How long a stopping broker waits for the controller to move its
/// leaderships away.
const CONTROLLED_SHUTDOWN_MAX: Duration = Duration::from_secs(5);

/// Controlled shutdown (shard 0, which runs the controller link): stop
/// heartbeating, then ask the controller to move this broker's leaderships
/// to other in-sync replicas and fence it, before connections drain.
async fn controlled_shutdown(shard: &Shard, life: &BrokerLife) {
    life.shutting_down.set(true);
    let controller = shard.cluster.controller_here();
    let (Some(service), Some(incarnation)) = (controller, life.incarnation.get()) else {
        return;
    };
    let request = control::service::ControllerRequest::ControlledShutdown {
        broker: shard.cluster.me,
        incarnation,
    };
    // Retried while refused: a change committed meanwhile (an ISR change,
    // a controller move) makes the computed records stale.
    let service = service.clone();
    let asked = async move {
        loop {
            match service.request(request.clone()).await {
                Ok(()) => return true,
                // Retried while a concurrent change made the leadership
                // moves stale (the fence is then refused with them).
                Err(control::service::ControllerError::Refused(e))
                    if !matches!(
                        e,
                        control::MetadataError::StalePartitionEpoch { .. }
                            | control::MetadataError::StillLeads { .. }
                    ) =>
                {
                    tracing::warn!(error = %e, "controlled shutdown refused; stopping anyway");
                    return false;
                }
                Err(e) => {
                    tracing::info!(error = %e, "controlled shutdown not taken yet; asking again");
                    glommio::timer::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    };
    let timeout = glommio::timer::sleep(CONTROLLED_SHUTDOWN_MAX);
    match futures::future::select(Box::pin(asked), Box::pin(timeout)).await {
        futures::future::Either::Left((true, _)) => {
            tracing::info!("controlled shutdown: leaderships moved, broker fenced")
        }
        futures::future::Either::Left((false, _)) => {}
        futures::future::Either::Right(_) => {
            tracing::warn!("controlled shutdown not taken in time; stopping anyway")
        }
    }
}
