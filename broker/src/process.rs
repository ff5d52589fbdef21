//! `broker serve` as a process a supervisor can rely on: it is the only
//! process on its data directory and ports (`data_dir`, `server::ports`),
//! it is gone rather than half-alive when any thread panics, and a SIGTERM
//! ends it within `shutdown_timeout_ms` however wedged a shard is.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::config::BrokerConfig;

/// The exit code of a process that gave up (a panic, a stop past its
/// deadline, a failed start).
pub const EXIT_FAILED: i32 = 1;

/// Runs the broker until SIGTERM or SIGINT; returns the process's exit code.
pub fn serve(config: BrokerConfig) -> i32 {
    exit_on_panic();
    // One process per data directory, and the directory is this node's;
    // held until the process ends.
    let metadata_dir = config.data_dir.join("metadata");
    let claimed = crate::data_dir::lock(&config.data_dir).and_then(|lock| {
        crate::data_dir::claim(&config.data_dir, config.node_id, &metadata_dir).map(|_| lock)
    });
    let _lock = match claimed {
        Ok(lock) => lock,
        Err(e) => {
            eprintln!("broker: {e}");
            return EXIT_FAILED;
        }
    };
    // A segment per partition and a descriptor per connection: take as
    // many open files as the hard limit allows (open_files).
    match crate::open_files::raise_to_hard_limit() {
        Ok((before, after)) if after > before => {
            tracing::info!(from = before, to = after, "raised the open-file limit")
        }
        Ok((now, _)) => tracing::debug!(limit = now, "open-file limit"),
        Err(e) => tracing::warn!(error = %e, "could not raise the open-file limit"),
    }
    // SIGTERM or SIGINT: stop accepting, let open connections finish, exit 0.
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(signal, stop.clone()) {
            eprintln!("broker: cannot handle signal {signal}: {e}");
            return EXIT_FAILED;
        }
    }
    stop_deadline(
        stop.clone(),
        Duration::from_millis(config.shutdown_timeout_ms),
    );
    let (ready_tx, ready_rx) = mpsc::channel::<crate::server::Listening>();
    let announcer = std::thread::spawn(move || {
        if let Ok(listening) = ready_rx.recv() {
            // `kafka`: the first listener's address (scripts read it);
            // `listeners`: every one by name.
            let named: Vec<String> = listening
                .kafka
                .iter()
                .map(|(name, address)| format!("{name}={address}"))
                .collect();
            if let Some((_, first)) = listening.kafka.first() {
                tracing::info!(kafka = %first, http = %listening.http, listeners = %named.join(","), "listening");
            } else if let Some(controller) = listening.controller {
                tracing::info!(%controller, http = %listening.http, "listening as a controller only");
            }
        }
    });
    if let Err(e) = crate::server::run(config, ready_tx, stop) {
        tracing::error!(error = %e, "the broker could not run");
        eprintln!("broker: {e}");
        return EXIT_FAILED;
    }
    let _ = announcer.join();
    tracing::info!("stopped");
    0
}

/// A panic on any thread ends the process (after the panic's message): a
/// shard that died while the others hold the ports would serve nothing
/// and keep a supervisor from restarting it.
fn exit_on_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if storage::io::caught_open::is_the_caught_open_panic(info) {
            return; // an open's, which fails instead (and is logged)
        }
        report(info);
        tracing::error!(panic = %info, "a broker thread panicked; exiting");
        eprintln!("broker: a thread panicked; exiting");
        std::process::exit(EXIT_FAILED);
    }));
}

/// Once `stop` is set, the process has `deadline` to end cleanly; past it,
/// it exits anyway, as after a crash: what acks=all acknowledged is
/// durable (fdatasync'd, or held by the in-sync replicas), acks=1 writes
/// not yet flushed may be lost as on any crash, and the next start
/// recovers the rest.
fn stop_deadline(stop: Arc<AtomicBool>, deadline: Duration) {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let asked = Instant::now();
        while asked.elapsed() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        tracing::error!(?deadline, "the broker did not stop in time; exiting anyway");
        eprintln!("broker: did not stop within {deadline:?}; exiting anyway");
        std::process::exit(EXIT_FAILED);
    });
}
