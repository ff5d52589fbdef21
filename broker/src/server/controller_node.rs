//! A controller-only node (`process_roles = "controller"`): one executor
//! running its metadata node (a voter, or an observer until
//! `broker cluster add-voter` promotes it) and the HTTP port with its
//! health and metrics. It binds no Kafka listener, registers no broker
//! and holds no partitions: the brokers follow its quorum as observers.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use control::service::MetadataService;
use control::transport::link::QuorumTls;
use glommio::{LocalExecutorBuilder, Placement};

use super::http::Served;
use super::tls::TlsServer;
use super::Listening;
use crate::cluster::quorum;
use crate::config::BrokerConfig;

/// How often the node looks at the stop flag (a stop waits at most this).
const STOP_WATCH: Duration = Duration::from_millis(100);
/// How often it looks whether the quorum has named the cluster yet.
const CLUSTER_ID_POLL: Duration = Duration::from_millis(100);

/// What the node starts with.
pub struct ControllerNode {
    /// Its configuration.
    pub config: BrokerConfig,
    /// The HTTP port's TLS, if it speaks TLS.
    pub http_tls: Option<Arc<TlsServer>>,
    /// The quorum's TLS, if it speaks TLS.
    pub quorum_tls: Option<QuorumTls>,
    /// Told where the node listens, once it does.
    pub ready: mpsc::Sender<Listening>,
    /// Set to stop.
    pub stop: Arc<AtomicBool>,
}

/// Runs the node until `stop` is set.
pub fn run(node: ControllerNode) -> std::io::Result<()> {
    let failed = Arc::new(Mutex::new(None::<String>));
    let failure = failed.clone();
    let handle = LocalExecutorBuilder::new(Placement::Unbound)
        .name("controller")
        .io_memory(super::SHARD_IO_MEMORY_BYTES)
        .ring_depth(super::SHARD_RING_DEPTH)
        .spawn(move || async move {
            if let Err(e) = serve(node).await {
                *failure.lock().expect("start failure") = Some(e.to_string());
            }
        })
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    handle
        .join()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let why = failed.lock().expect("start failure").take();
    match why {
        Some(why) => Err(std::io::Error::other(why)),
        None => Ok(()),
    }
}

async fn serve(node: ControllerNode) -> std::io::Result<()> {
    let ControllerNode {
        config,
        http_tls,
        quorum_tls,
        ready,
        stop,
    } = node;
    let (http_listener, http) = super::http::bind(&config.http_listen)
        .map_err(|e| std::io::Error::other(format!("cannot bind the HTTP listener: {e}")))?;
    let service = quorum::start_quorum(&config, quorum_tls)
        .map_err(|e| std::io::Error::other(format!("cannot start the metadata quorum: {e}")))?;
    let read_max = Duration::from_millis(config.connections_max_idle_ms);
    let served = Served::Controller(service.clone());
    glommio::spawn_local(super::http::serve(
        http_listener,
        http_tls,
        served,
        read_max,
    ))
    .detach();
    glommio::spawn_local(join_cluster_once_named(service.clone(), config.clone())).detach();
    let _ = ready.send(Listening {
        kafka: Vec::new(),
        http,
        controller: Some(metadata_listener(&config)?),
    });
    while !stop.load(Ordering::Relaxed) {
        glommio::timer::sleep(STOP_WATCH).await;
    }
    Ok(())
}

/// Refuses a data directory with partition data: a broker's, whose
/// replicas would be left unserved (decommission the broker first, then
/// start it as a controller on an empty `partitions` directory).
pub fn check_holds_no_partitions(config: &BrokerConfig) -> std::io::Result<()> {
    let partitions = config.data_dir.join(crate::cluster::PARTITIONS_DIR);
    let held = std::fs::read_dir(&partitions).map_or(0, |dir| dir.count());
    if held == 0 {
        return Ok(());
    }
    Err(std::io::Error::other(format!(
        "process_roles = \"controller\" but {} holds partition data ({held} entries): this node \
         was a broker; decommission it (broker cluster decommission {}), then remove that \
         directory, before it runs as a controller only",
        partitions.display(),
        config.node_id
    )))
}

/// Where the node's metadata listener is: its `controller_listen`, else
/// its entry among the voters.
fn metadata_listener(config: &BrokerConfig) -> std::io::Result<SocketAddr> {
    if let Some(listen) = &config.controller_listen {
        return listen.parse().map_err(std::io::Error::other);
    }
    let voters = config.voters().map_err(std::io::Error::other)?;
    voters.get(&config.node_id).copied().ok_or_else(|| {
        std::io::Error::other("a controller outside the voters needs controller_listen")
    })
}

/// Once the quorum has named the cluster, the data directory joins it
/// (or the process exits, refusing another cluster's directory), as a
/// broker's does when it goes live.
async fn join_cluster_once_named(service: Rc<MetadataService>, config: BrokerConfig) {
    let cluster = loop {
        if let Some(id) = service.view().metadata.cluster_id {
            break id;
        }
        glommio::timer::sleep(CLUSTER_ID_POLL).await;
    };
    let joined =
        crate::data_dir::join_cluster(&config.data_dir, config.node_id, &cluster.to_string());
    if let Err(e) = joined {
        tracing::error!(error = %e, "refusing to serve");
        eprintln!("broker: {e}");
        std::process::exit(1);
    }
}
