//! How a broker's shards start: the first binds the Kafka listeners and
//! the HTTP port and starts the metadata quorum, registers the broker
//! (with each listener's advertised address) and, once it is live, marks
//! it ready; every other shard binds the same ports (SO_REUSEPORT) and
//! follows the first's stream of metadata changes.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{mpsc, Arc};

use control::service::{Change, MetadataService};
use glommio::channels::local_channel::LocalReceiver;
use glommio::channels::shared_channel::{ConnectedReceiver, SharedReceiver};
use glommio::net::TcpListener;

use super::shard::Shard;
use super::tls::TlsServer;
use super::Listening;
use crate::cluster::quorum::{self, BrokerLife};
use crate::cluster::{lease, view, PARTITIONS_DIR};
use crate::config::listeners::Listeners;
use crate::config::BrokerConfig;
use crate::partition::dirs::{
    finish_topic_removals, reconcile_topic_dirs, remove_unassigned_partition_dirs,
};
use control::BrokerEndpoint;

/// Where a shard's metadata changes come from.
pub enum Changes {
    /// Shard 0: straight from the service it runs.
    Local(Rc<MetadataService>, LocalReceiver<Change>),
    /// Other shards: over a shared channel from shard 0.
    Shared(ConnectedReceiver<Change>),
}

/// What the first shard hands each other shard.
pub struct ShardStart {
    /// Each Kafka listener's bound address (ports resolved).
    addresses: Vec<SocketAddr>,
    changes: SharedReceiver<Change>,
}

/// How the first shard tells the other shards, and the process, how its
/// start went.
pub struct StartSignals<'a> {
    /// Shards in all.
    pub shards: usize,
    /// Each other shard's start (None: give up).
    pub to_others: &'a mpsc::Sender<Option<ShardStart>>,
    /// Why the broker could not start.
    pub failed: &'a std::sync::Mutex<Option<String>>,
}

/// The TLS the first shard's own services use.
pub struct FirstShardTls {
    /// The HTTP port's, if it speaks TLS.
    pub http: Option<Arc<TlsServer>>,
    /// The metadata quorum's, if it speaks TLS.
    pub quorum: Option<control::transport::link::QuorumTls>,
}

/// Binds, starts the metadata quorum, and hands the others their start.
pub fn first_shard(
    config: &BrokerConfig,
    tls: FirstShardTls,
    listeners: &Listeners,
    signals: &StartSignals,
    ready: &mpsc::Sender<Listening>,
    life: Rc<BrokerLife>,
    shard: Rc<std::cell::OnceCell<Rc<Shard>>>,
) -> Option<(Vec<TcpListener>, Changes)> {
    let (shards, start_tx) = (signals.shards, signals.to_others);
    let fail = |what: &str, e: std::io::Error| {
        tracing::error!(error = %e, "{what}");
        *signals.failed.lock().expect("start failure") = Some(format!("{what}: {e}"));
        for _ in 1..shards {
            let _ = start_tx.send(None);
        }
        None
    };
    let (ports, addresses) = match bind_all(listeners) {
        Ok(bound) => bound,
        Err(e) => return fail("cannot bind a Kafka listener", e),
    };
    let (http_listener, http) = match super::http::bind(&config.http_listen) {
        Ok(bound) => bound,
        Err(e) => return fail("cannot bind the HTTP listener", e),
    };
    let FirstShardTls {
        http: http_tls,
        quorum: quorum_tls,
    } = tls;
    let service = match quorum::start_quorum(config, quorum_tls) {
        Ok(service) => service,
        Err(e) => return fail("cannot start the metadata quorum", e),
    };
    let read_max = std::time::Duration::from_millis(config.connections_max_idle_ms);
    let served = super::http::Served::Broker(shard);
    glommio::spawn_local(super::http::serve(
        http_listener,
        http_tls,
        served,
        read_max,
    ))
    .detach();
    for _ in 1..shards {
        match service.subscribe_shared(view::CHANGES_QUEUED_MAX) {
            Ok(changes) => {
                let start = ShardStart {
                    addresses: addresses.clone(),
                    changes,
                };
                let _ = start_tx.send(Some(start));
            }
            Err(e) => {
                return fail(
                    "cannot subscribe a shard to metadata",
                    std::io::Error::other(e.to_string()),
                )
            }
        }
    }
    let local = service.subscribe(view::CHANGES_QUEUED_MAX);
    let mut endpoints: Vec<BrokerEndpoint> = listeners
        .all
        .iter()
        .zip(&addresses)
        .map(|(listener, bound)| BrokerEndpoint {
            listener: listener.name.clone(),
            address: listener.advertised_at(*bound),
        })
        .collect();
    let inter_broker = (listeners.all.iter().zip(&addresses))
        .find(|(l, _)| l.name == listeners.inter_broker().name)
        .map(|(l, bound)| l.advertised_at(*bound));
    endpoints.push(BrokerEndpoint {
        listener: control::model::HTTP_ENDPOINT.to_string(),
        address: http_advertised(http, inter_broker.as_deref()),
    });
    let listening = Listening {
        kafka: listeners
            .all
            .iter()
            .map(|l| l.name.clone())
            .zip(addresses)
            .collect(),
        http,
        controller: None,
    };
    let on_live = go_live(config, service.clone(), listening, ready.clone());
    let registration = quorum::register_and_heartbeat(
        service.clone(),
        config.clone(),
        endpoints,
        shards,
        life,
        on_live,
    );
    glommio::spawn_local(registration).detach();
    Some((ports, Changes::Local(service, local)))
}

/// Binds every Kafka listener: the sockets and their addresses (ports
/// resolved), in the listeners' order.
fn bind_all(listeners: &Listeners) -> std::io::Result<(Vec<TcpListener>, Vec<SocketAddr>)> {
    let mut ports = Vec::new();
    let mut addresses = Vec::new();
    for listener in &listeners.all {
        let named = |e: glommio::GlommioError<()>| {
            std::io::Error::other(format!("{} {}: {e}", listener.name, listener.listen))
        };
        let port = TcpListener::bind(listener.listen).map_err(named)?;
        addresses.push(port.local_addr().map_err(named)?);
        ports.push(port);
    }
    Ok((ports, addresses))
}

/// What the broker does once its registration is committed and live:
/// the data directory joins the quorum's cluster (or the process exits,
/// refusing another cluster's directory), partition directories are
/// reconciled with the metadata, and the broker is marked ready.
fn go_live(
    config: &BrokerConfig,
    quorum: Rc<MetadataService>,
    listening: Listening,
    ready: mpsc::Sender<Listening>,
) -> impl FnOnce() {
    let root = config.data_dir.join(PARTITIONS_DIR);
    let data_dir = config.data_dir.clone();
    let node_id = config.node_id;
    move || {
        // The quorum named the cluster before this life went live.
        let cluster = quorum
            .view()
            .metadata
            .cluster_id
            .expect("live after the cluster id");
        if let Err(e) = crate::data_dir::join_cluster(&data_dir, node_id, &cluster.to_string()) {
            tracing::error!(error = %e, "refusing to serve");
            eprintln!("broker: {e}");
            std::process::exit(1);
        }
        // This life's registration is committed: the metadata is replayed
        // up to it, so deletions made while it was down are known. Files
        // of topics it does not know at all stay (and are reported).
        let unknown = reconcile_topic_dirs(&root, &quorum.view().metadata);
        if !unknown.is_empty() {
            tracing::warn!(dir = %root.display(), ?unknown, "partition data of topics the metadata does not know: kept, not served");
        }
        for dir in finish_topic_removals(&root) {
            tracing::info!(dir = %dir.display(), "removing a deleted topic's files (a stop interrupted it)");
        }
        // Copies a reassignment moved away while this broker was down.
        let me = control::BrokerId(node_id);
        for dir in remove_unassigned_partition_dirs(&root, &quorum.view().metadata, me) {
            tracing::info!(dir = %dir.display(), "replica moved away while this broker was down: its files are removed");
        }
        // Ready as of the last change the shards were sent: a trailing
        // entry with no record would never reach their copies.
        lease::mark_ready(quorum.view().published);
        let _ = ready.send(listening);
    }
}

/// Binds the ports the first shard bound and connects to its change stream.
pub async fn other_shard(start: Option<ShardStart>) -> Option<(Vec<TcpListener>, Changes)> {
    let start = start?;
    let changes = start.changes.connect().await;
    let mut ports = Vec::new();
    for address in start.addresses {
        match TcpListener::bind(address) {
            Ok(port) => ports.push(port),
            Err(e) => {
                tracing::error!(error = %e, %address, "cannot bind a Kafka listener");
                return None;
            }
        }
    }
    Some((ports, Changes::Shared(changes)))
}

/// Where other brokers reach this one's HTTP API: its bound address, or,
/// bound to every interface, the inter-broker listener's advertised host
/// with the HTTP port.
fn http_advertised(bound: std::net::SocketAddr, inter_broker: Option<&str>) -> String {
    let host = inter_broker
        .and_then(|a| a.rsplit_once(':'))
        .map(|(host, _)| host);
    match (bound.ip().is_unspecified(), host) {
        (true, Some(host)) => format!("{host}:{}", bound.port()),
        _ => bound.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_http_api_is_advertised_on_the_inter_broker_host_when_bound_everywhere() {
        let everywhere = "0.0.0.0:8080".parse().unwrap();
        let at = |bound| super::http_advertised(bound, Some("10.0.0.2:9092"));
        assert_eq!(at(everywhere), "10.0.0.2:8080");
        assert_eq!(at("10.0.0.9:8081".parse().unwrap()), "10.0.0.9:8081");
        assert_eq!(super::http_advertised(everywhere, None), "0.0.0.0:8080");
    }
}
