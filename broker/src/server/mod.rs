//! The server: one glommio executor per shard, every shard accepting on
//! the same port (SO_REUSEPORT), each connection served on the shard that
//! accepted it, its requests answered in order.
//!
//! So far the only API served is ApiVersions; a request for any other API
//! closes the connection with a log line (clients only send what
//! ApiVersions advertised).

mod connection;

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use futures::channel::oneshot;
use futures::FutureExt;
use glommio::net::TcpListener;
use glommio::{LocalExecutorPoolBuilder, PoolPlacement};

use crate::config::BrokerConfig;

/// io_uring buffer memory per shard (locked memory is scarce on many hosts).
const SHARD_IO_MEMORY_BYTES: usize = 2 << 20;

/// How often a shard looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(20);
/// How long a stopping shard lets open connections finish.
const DRAIN_MAX: Duration = Duration::from_secs(5);

/// Runs the server until `stop` is set, then stops accepting, lets open
/// connections finish (at most `DRAIN_MAX`), and returns. `ready` receives
/// the Kafka address actually bound (its port is concrete even if 0 was asked).
pub fn run(
    config: BrokerConfig,
    ready: mpsc::Sender<SocketAddr>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<()> {
    let shards = match config.shards {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let listen: SocketAddr = config
        .kafka_listen
        .parse()
        .map_err(|e| std::io::Error::other(format!("kafka_listen: {e}")))?;
    // The first shard binds (resolving port 0); the others bind the same port.
    let (port_tx, port_rx) = mpsc::channel::<std::io::Result<SocketAddr>>();
    let port_rx = std::sync::Arc::new(std::sync::Mutex::new(port_rx));
    let max_request_bytes = config.socket_request_max_bytes;
    let handles = LocalExecutorPoolBuilder::new(PoolPlacement::Unbound(shards))
        .io_memory(SHARD_IO_MEMORY_BYTES)
        .on_all_shards(move || {
            let port_tx = port_tx.clone();
            let port_rx = port_rx.clone();
            let ready = ready.clone();
            let stop = stop.clone();
            async move {
                let shard = glommio::executor().id();
                let listener = if shard == 1 {
                    let bound = TcpListener::bind(listen)
                        .map_err(std::io::Error::from)
                        .and_then(|l| l.local_addr().map(|a| (l, a)).map_err(std::io::Error::from));
                    match bound {
                        Ok((listener, address)) => {
                            for _ in 1..shards {
                                let _ = port_tx.send(Ok(address));
                            }
                            let _ = ready.send(address);
                            listener
                        }
                        Err(e) => {
                            tracing::error!(%listen, error = %e, "cannot bind the Kafka listener");
                            for _ in 1..shards {
                                let _ = port_tx.send(Err(std::io::Error::other(
                                    "the first shard failed to bind",
                                )));
                            }
                            return;
                        }
                    }
                } else {
                    let address = port_rx.lock().expect("port channel").recv();
                    let bound = address
                        .map_err(std::io::Error::other)
                        .and_then(|a| a)
                        .and_then(|a| TcpListener::bind(a).map_err(std::io::Error::from));
                    match bound {
                        Ok(listener) => listener,
                        Err(e) => {
                            tracing::error!(shard, error = %e, "cannot bind the Kafka listener");
                            return;
                        }
                    }
                };
                serve_until_stopped(listener, max_request_bytes, stop).await;
            }
        })
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    handles.join_all();
    Ok(())
}

async fn serve_until_stopped(listener: TcpListener, max_request_bytes: u32, stop: Arc<AtomicBool>) {
    let open = Rc::new(Cell::new(0usize));
    let (stopping_tx, stopping_rx) = oneshot::channel::<()>();
    let stopping = stopping_rx.shared();
    let acceptor = glommio::spawn_local(accept_loop(
        listener,
        max_request_bytes,
        open.clone(),
        stopping,
    ));
    while !stop.load(Ordering::Relaxed) {
        glommio::timer::sleep(STOP_POLL).await;
    }
    // Dropping the acceptor cancels it and closes the listener; connections
    // close once the request they are answering (if any) is answered.
    drop(acceptor);
    let _ = stopping_tx.send(());
    let started = std::time::Instant::now();
    while open.get() > 0 && started.elapsed() < DRAIN_MAX {
        glommio::timer::sleep(STOP_POLL).await;
    }
}

async fn accept_loop(
    listener: TcpListener,
    max_request_bytes: u32,
    open: Rc<Cell<usize>>,
    stopping: connection::Stopping,
) {
    loop {
        match listener.accept().await {
            Ok(stream) => {
                let open = open.clone();
                let stopping = stopping.clone();
                open.set(open.get() + 1);
                glommio::spawn_local(async move {
                    connection::serve(stream, max_request_bytes, stopping).await;
                    open.set(open.get() - 1);
                })
                .detach();
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}
