//! A cluster of real broker processes on 127.0.0.1, for the tests of
//! replication: fixed ports chosen free at creation, so a restarted
//! broker comes back at the same addresses.

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Fast failure detection (a 1.5 s session), as in the fault test.
pub const FAST: [(&str, &str); 3] = [
    ("BROKER_BROKER_SESSION_TIMEOUT_MS", "1500"),
    ("BROKER_BROKER_HEARTBEAT_INTERVAL_MS", "250"),
    ("BROKER_REPLICA_FETCH_WAIT_MAX_MS", "200"),
];

/// One broker process and where it listens.
pub struct Node {
    /// Its Kafka listener.
    pub kafka: SocketAddr,
    /// Its HTTP listener.
    pub http: SocketAddr,
    /// Its second Kafka listener, EXTERNAL, if the cluster has two (then
    /// `kafka` is the one named INTERNAL).
    pub external: Option<SocketAddr>,
    /// Its metadata listener (Raft and controller calls).
    pub metadata: SocketAddr,
    /// Whether it is outside the configured voters (an observer).
    pub observer: bool,
    /// Its `process_roles`, if set (unset: both roles). A controller
    /// only has no Kafka listener: `kafka` is never bound.
    pub roles: Option<&'static str>,
    /// Its directory (data/ and broker.log).
    pub dir: PathBuf,
    process: Option<Child>,
    paused: bool,
}

impl Node {
    /// Whether it serves no Kafka data.
    pub fn is_controller_only(&self) -> bool {
        self.roles == Some("controller")
    }

    /// The line its log shows once a life of it is ready.
    fn ready_line(&self) -> &'static str {
        if self.is_controller_only() {
            "listening as a controller only"
        } else {
            "listening kafka="
        }
    }
}

/// Brokers on fixed 127.0.0.1 ports (restarts keep their addresses),
/// every one a metadata voter unless made an observer, broker N in rack
/// `rack-N`.
pub struct Cluster {
    nodes: Vec<Node>,
    voters: String,
    env: Vec<(String, String)>,
    /// Shards per broker (1 unless set).
    pub shards: usize,
}

impl Cluster {
    /// Broker `id`'s metadata listener (Raft and controller calls).
    pub fn metadata_address(&self, id: i32) -> SocketAddr {
        self.node(id).metadata
    }

    /// `voters` brokers that are the metadata quorum's configured voters
    /// and `observers` more (ids after the voters') that join it as
    /// observers, under `root` (not started), each also given `env`.
    pub fn with_observers(
        root: &Path,
        voters: i32,
        observers: i32,
        env: &[(&str, &str)],
    ) -> Cluster {
        let mut cluster = Cluster::new(root, voters + observers, env);
        let configured: Vec<String> = (1..=voters)
            .map(|id| format!("{id}@{}", cluster.node(id).metadata))
            .collect();
        cluster.voters = configured.join(",");
        for node in &mut cluster.nodes[voters as usize..] {
            node.observer = true;
        }
        cluster
    }

    /// `brokers` brokers (ids 1 to `brokers`) that are not metadata voters
    /// and `controllers` controller-only nodes (the ids after) that are,
    /// under `root` (not started), each also given `env`.
    pub fn with_controllers(
        root: &Path,
        controllers: i32,
        brokers: i32,
        env: &[(&str, &str)],
    ) -> Cluster {
        let mut cluster = Cluster::new(root, brokers + controllers, env);
        let configured: Vec<String> = (brokers + 1..=brokers + controllers)
            .map(|id| format!("{id}@{}", cluster.node(id).metadata))
            .collect();
        cluster.voters = configured.join(",");
        for node in &mut cluster.nodes[..brokers as usize] {
            node.observer = true;
            node.roles = Some("broker");
        }
        for node in &mut cluster.nodes[brokers as usize..] {
            node.roles = Some("controller");
        }
        cluster
    }

    /// Adds a controller-only node (the next id) outside the voters: it
    /// joins the quorum as an observer, for `broker cluster add-voter`.
    /// Not started.
    pub fn add_controller(&mut self) -> i32 {
        let id = self.size() + 1;
        let port = || -> SocketAddr {
            format!("127.0.0.1:{}", super::fixed_port())
                .parse()
                .unwrap()
        };
        let dir = self.nodes[0].dir.parent().unwrap().join(id.to_string());
        self.nodes.push(Node {
            kafka: port(),
            http: port(),
            metadata: port(),
            observer: true,
            roles: Some("controller"),
            external: None,
            dir,
            process: None,
            paused: false,
        });
        id
    }

    /// The ids of the nodes that are brokers.
    pub fn brokers(&self) -> Vec<i32> {
        (1..=self.size())
            .filter(|id| !self.node(*id).is_controller_only())
            .collect()
    }

    /// `broker` with `args`, through the first broker that runs and is
    /// not paused.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        let via = (self.brokers().into_iter())
            .find(|id| self.is_running(*id) && !self.is_paused(*id))
            .expect("a broker running");
        Command::new(env!("CARGO_BIN_EXE_broker"))
            .args(args)
            .args(["--brokers", &self.node(via).kafka.to_string()])
            .output()
            .unwrap()
    }

    /// [`Cluster::cli`] asked again (every 200 ms, at most 20 s) until it
    /// succeeds, as an operator asks again when the quorum refuses for
    /// now (an observer just back not yet heard from): what it printed.
    pub fn cli_until_ok(&self, args: &[&str]) -> String {
        let started = Instant::now();
        loop {
            let out = self.cli(args);
            if out.status.success() {
                return String::from_utf8_lossy(&out.stdout).to_string();
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{args:?}: {out:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The metadata quorum line of `cluster status` (empty if none).
    pub fn quorum_line(&self) -> String {
        let status = self.cli(&["cluster", "status"]);
        let text = String::from_utf8_lossy(&status.stdout).to_string();
        text.lines()
            .find(|l| l.starts_with("metadata quorum"))
            .unwrap_or_default()
            .to_string()
    }

    /// [`Cluster::cli`], which must succeed: what it printed.
    pub fn cli_ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// `brokers` brokers under `root` (not started), each also given `env`.
    pub fn new(root: &Path, brokers: i32, env: &[(&str, &str)]) -> Cluster {
        let mut nodes = Vec::new();
        let mut voters = Vec::new();
        for id in 1..=brokers {
            let (kafka, http, metadata) = (
                super::fixed_port(),
                super::fixed_port(),
                super::fixed_port(),
            );
            voters.push(format!("{id}@127.0.0.1:{metadata}"));
            nodes.push(Node {
                kafka: format!("127.0.0.1:{kafka}").parse().unwrap(),
                http: format!("127.0.0.1:{http}").parse().unwrap(),
                metadata: format!("127.0.0.1:{metadata}").parse().unwrap(),
                observer: false,
                roles: None,
                external: None,
                dir: root.join(id.to_string()),
                process: None,
                paused: false,
            });
        }
        Cluster {
            nodes,
            voters: voters.join(","),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            shards: 1,
        }
    }

    /// [`Cluster::new`] with two Kafka listeners per broker, INTERNAL at
    /// `kafka` and EXTERNAL at `external` (`env` maps them to protocols).
    pub fn with_two_listeners(root: &Path, brokers: i32, env: &[(&str, &str)]) -> Cluster {
        let mut cluster = Cluster::new(root, brokers, env);
        for node in &mut cluster.nodes {
            node.external = Some(
                format!("127.0.0.1:{}", super::fixed_port())
                    .parse()
                    .unwrap(),
            );
        }
        cluster
    }

    /// Starts every broker and waits until all are registered and the
    /// metadata counts them live.
    pub fn start(&mut self) {
        for id in 1..=self.size() {
            self.spawn(id);
        }
        for id in 1..=self.size() {
            self.wait_listening(id, 0);
        }
        self.wait_unfenced();
    }

    /// Waits (at most 30 s, then goes on) until `cluster status` lists
    /// every broker; goes on after five failures in a row (a cluster the
    /// plain CLI cannot ask: TLS, SASL). A broker logs that it listens
    /// once registered, but the controller counts it live (unfenced) only
    /// after its first heartbeat: a topic created in between with one
    /// replica per broker is refused (INVALID_REPLICATION_FACTOR),
    /// rightly. The listing is a broker's view of committed metadata,
    /// which the controller has applied already.
    fn wait_unfenced(&self) {
        let started = Instant::now();
        let ids = self.brokers();
        let mut failures = 0;
        if ids.is_empty() {
            return;
        }
        loop {
            let status = self.cli(&["cluster", "status"]);
            if !status.status.success() {
                failures += 1;
                if failures == 5 {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            failures = 0;
            let text = String::from_utf8_lossy(&status.stdout);
            let listed = |id: &i32| text.contains(&format!("  broker {id} at "));
            if ids.iter().all(listed) {
                return;
            }
            if started.elapsed() > Duration::from_secs(30) {
                eprintln!("not every broker of {ids:?} is live after 30 s:\n{text}");
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// How many brokers.
    pub fn size(&self) -> i32 {
        self.nodes.len() as i32
    }

    /// Broker `id`'s log file.
    pub fn log_path(&self, id: i32) -> PathBuf {
        self.node(id).dir.join("broker.log")
    }

    /// Broker `id` (from 1).
    pub fn node(&self, id: i32) -> &Node {
        &self.nodes[(id - 1) as usize]
    }

    fn node_mut(&mut self, id: i32) -> &mut Node {
        &mut self.nodes[(id - 1) as usize]
    }

    /// Starts broker `id` (its log appended to its directory's broker.log).
    pub fn spawn(&mut self, id: i32) {
        let voters = self.voters.clone();
        let env = self.env.clone();
        let shards = self.shards.to_string();
        let node = self.node_mut(id);
        std::fs::create_dir_all(&node.dir).unwrap();
        let log = File::options()
            .create(true)
            .append(true)
            .open(node.dir.join("broker.log"))
            .unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_broker"));
        command
            .args(["serve", "--node-id", &id.to_string(), "--shards", &shards])
            .arg("--data-dir")
            .arg(node.dir.join("data"))
            .args(["--http-listen", &node.http.to_string()])
            .env("RUST_LOG", "info")
            .env("BROKER_CONTROLLER_QUORUM_VOTERS", voters)
            .env("BROKER_RACK", format!("rack-{id}"))
            .env("BROKER_PIN_SHARDS", "false")
            .env("BROKER_AUTO_CREATE_TOPICS", "false")
            .stdout(Stdio::null())
            .stderr(log);
        if node.observer {
            command.env("BROKER_CONTROLLER_LISTEN", node.metadata.to_string());
        }
        if let Some(roles) = node.roles {
            command.env("BROKER_PROCESS_ROLES", roles);
        }
        match node.external {
            None => command.args(["--kafka-listen", &node.kafka.to_string()]),
            Some(external) => command.env(
                "BROKER_LISTENERS",
                format!("[INTERNAL://{},EXTERNAL://{external}]", node.kafka),
            ),
        };
        for (key, value) in env {
            command.env(key, value);
        }
        let child = command.spawn().expect("start a broker");
        node.process = Some(child);
        node.paused = false;
    }

    /// Waits until broker `id`'s current life logged that it listens
    /// (registered with the quorum), counting `before` earlier lines.
    pub fn wait_listening(&self, id: i32, before: usize) {
        let started = Instant::now();
        loop {
            let text = std::fs::read_to_string(self.log_path(id)).unwrap_or_default();
            if text.matches(self.node(id).ready_line()).count() > before {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "broker {id} did not become ready; its log:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// How many lives of broker `id` became ready so far.
    pub fn lives(&self, id: i32) -> usize {
        std::fs::read_to_string(self.log_path(id))
            .unwrap_or_default()
            .matches(self.node(id).ready_line())
            .count()
    }

    /// SIGKILL broker `id`.
    pub fn kill9(&mut self, id: i32) {
        if let Some(mut child) = self.node_mut(id).process.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM broker `id` and wait (bounded) for it to exit cleanly.
    pub fn terminate(&mut self, id: i32) {
        let mut child = self.node_mut(id).process.take().expect("running");
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(status.success(), "broker {id} exited with {status}");
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "broker {id} did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (at most 30 s) for node `id`'s process to exit by itself:
    /// its status.
    pub fn wait_exit(&mut self, id: i32) -> std::process::ExitStatus {
        let mut child = self.node_mut(id).process.take().expect("running");
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "node {id} still runs"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts broker `id` again and waits until it is registered.
    pub fn restart(&mut self, id: i32) {
        self.restart_all(&[id]);
    }

    /// Starts brokers `ids` again together and waits until all are
    /// registered (two voters of three must both be up before either can).
    pub fn restart_all(&mut self, ids: &[i32]) {
        let before: Vec<usize> = ids.iter().map(|id| self.lives(*id)).collect();
        for id in ids {
            self.spawn(*id);
        }
        for (id, before) in ids.iter().zip(before) {
            self.wait_listening(*id, before);
        }
    }

    /// Whether broker `id`'s process runs (paused counts as running).
    pub fn is_running(&self, id: i32) -> bool {
        self.node(id).process.is_some()
    }

    /// Whether broker `id` was stopped with SIGSTOP (and not resumed).
    pub fn is_paused(&self, id: i32) -> bool {
        self.node(id).paused
    }

    /// Sends `signal` to broker `id` (SIGSTOP marks it paused).
    pub fn signal(&mut self, id: i32, signal: i32) {
        let node = self.node_mut(id);
        if let Some(child) = &node.process {
            unsafe {
                libc::kill(child.id() as i32, signal);
            }
            node.paused = signal == libc::SIGSTOP;
        }
    }

    /// Every broker running and resumed.
    pub fn heal(&mut self) {
        for id in 1..=self.size() {
            if self.node(id).paused {
                self.signal(id, libc::SIGCONT);
            }
            if self.node(id).process.is_none() {
                self.restart(id);
            }
        }
    }

    /// SIGTERM every broker at once; each one's exit status (None: it had
    /// to be killed after 30 s).
    pub fn stop_all(&mut self) -> Vec<Option<std::process::ExitStatus>> {
        for node in &mut self.nodes {
            if let Some(child) = &node.process {
                unsafe {
                    libc::kill(child.id() as i32, libc::SIGTERM);
                }
            }
        }
        let mut statuses = Vec::new();
        for node in &mut self.nodes {
            if let Some(mut child) = node.process.take() {
                let started = Instant::now();
                let status = loop {
                    if let Some(status) = child.try_wait().unwrap() {
                        break Some(status);
                    }
                    if started.elapsed() > Duration::from_secs(30) {
                        let _ = child.kill();
                        let _ = child.wait();
                        break None;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                };
                statuses.push(status);
            }
        }
        statuses
    }

    /// SIGTERM every broker and wait for them to exit.
    pub fn stop(&mut self) {
        for node in &mut self.nodes {
            if let Some(child) = &node.process {
                unsafe {
                    libc::kill(child.id() as i32, libc::SIGTERM);
                }
            }
        }
        for node in &mut self.nodes {
            if let Some(mut child) = node.process.take() {
                let started = Instant::now();
                while child.try_wait().unwrap().is_none() {
                    if started.elapsed() > Duration::from_secs(30) {
                        let _ = child.kill();
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }

    /// Every broker's Kafka listener (controllers have none).
    pub fn addresses(&self) -> Vec<SocketAddr> {
        (self.nodes.iter())
            .filter(|n| !n.is_controller_only())
            .map(|n| n.kafka)
            .collect()
    }

    /// Every broker's Kafka address, as a client's bootstrap list.
    pub fn bootstrap(&self) -> String {
        let addresses: Vec<String> = self.addresses().iter().map(|a| a.to_string()).collect();
        addresses.join(",")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // A failing test shows what each broker last said.
        if std::thread::panicking() {
            for (i, node) in self.nodes.iter().enumerate() {
                let log = std::fs::read_to_string(node.dir.join("broker.log")).unwrap_or_default();
                let lines: Vec<&str> = log.lines().collect();
                let tail = &lines[lines.len().saturating_sub(40)..];
                eprintln!(
                    "--- broker {} log (last {} lines):\n{}",
                    i + 1,
                    tail.len(),
                    tail.join("\n")
                );
            }
        }
        for node in &mut self.nodes {
            if let Some(mut child) = node.process.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// The broker FindCoordinator names for transactional id `id`, asked of
/// any running broker.
pub fn coordinator_of(cluster: &Cluster, id: &str) -> Option<i32> {
    coordinator_of_key(cluster, 1, id)
}

/// The broker FindCoordinator names for group `id`, asked of any running
/// broker.
pub fn coordinator_of_group(cluster: &Cluster, id: &str) -> Option<i32> {
    coordinator_of_key(cluster, 0, id)
}

/// The coordinator of `id` of `key_type` (0: a group, 1: a transactional
/// id).
fn coordinator_of_key(cluster: &Cluster, key_type: i8, id: &str) -> Option<i32> {
    use kafka_protocol::messages::FindCoordinatorRequest;
    use kafka_protocol::protocol::StrBytes;
    let addresses: Vec<_> = (1..=cluster.size())
        .filter(|b| cluster.is_running(*b))
        .map(|b| cluster.node(b).kafka)
        .collect();
    let id = id.to_string();
    super::on_glommio(async move {
        for address in addresses {
            let Ok(mut c) = client::connection::Connection::connect(address, "faults").await else {
                continue;
            };
            let find = FindCoordinatorRequest::default()
                .with_key(StrBytes::from_string(id.clone()))
                .with_key_type(key_type);
            if let Ok(answer) = c.call(&find, 3).await {
                if answer.error_code == 0 {
                    return Some(answer.node_id.0);
                }
            }
        }
        None
    })
}

/// A gauge from a broker's /metrics, if the broker answers and has it
/// (negative values read as absent).
pub fn try_counter(http: SocketAddr, name: &str) -> Option<u64> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect_timeout(&http, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let request = "GET /metrics HTTP/1.1\r\nhost: broker\r\nconnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| *v >= 0.0)
        .map(|v| v as u64)
}

/// A counter (or integral gauge) from a broker's /metrics.
pub fn counter(http: SocketAddr, name: &str) -> u64 {
    gauge(http, name) as u64
}

/// A sample from a broker's /metrics.
pub fn gauge(http: SocketAddr, name: &str) -> f64 {
    let (_, text) = super::http(http, "GET", "/metrics", "");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} not in /metrics:\n{text}"))
}
