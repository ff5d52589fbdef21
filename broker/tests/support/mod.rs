//! Shared by the broker's end-to-end tests: the real broker binary on an
//! ephemeral port with a temp data directory, and a glommio executor for
//! the project's own client.
#![allow(dead_code)] // each test binary uses its own subset

pub mod cluster;
pub mod consumer_member;
pub mod fault_proxy;
pub mod frame_counter;
pub mod group_round;
pub mod keyed_load;
pub mod produce_wire;
pub mod replay;
pub mod security;
pub mod share_wire;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A free 127.0.0.1 port for a broker that restarts on the same address,
/// taken below the kernel's ephemeral range. A port from that range can
/// be taken, while its broker is down, as the local end of another
/// process's outgoing connection (seen: a killed broker's controller port
/// became another broker's reconnection to a third), and the restart
/// then cannot bind it. Ports handed out here are never handed out again
/// by this test process, nor by another test process while this one
/// runs: each is claimed by a lock on a file of its own, held until the
/// process exits (seen without it: a port free while one test's broker
/// was killed was handed to another test's broker, and the first one's
/// restart could not bind it, or the second's start).
pub fn fixed_port() -> u16 {
    use std::collections::HashSet;
    use std::hash::{BuildHasher, RandomState};
    static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    static CLAIMS: Mutex<Vec<std::fs::File>> = Mutex::new(Vec::new());
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let floor = 10_000u16;
    assert!(
        ephemeral_low > floor + 1000,
        "ephemeral ports start at {ephemeral_low}"
    );
    let random = RandomState::new();
    let mut given = GIVEN.lock().unwrap();
    let given = given.get_or_insert_with(HashSet::new);
    for attempt in 0..10_000u64 {
        let port = floor + (random.hash_one(attempt) % u64::from(ephemeral_low - floor)) as u16;
        if given.contains(&port) {
            continue;
        }
        let Some(claim) = claim_port(port) else {
            continue;
        };
        given.insert(port);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            CLAIMS.lock().unwrap().push(claim);
            return port;
        }
    }
    panic!("no free port in {floor}..{ephemeral_low}");
}

/// Claims `port` among this machine's test processes: an exclusive lock
/// on its file, released by the kernel when the process exits (so a
/// killed test leaves nothing claimed). None if another process holds it.
fn claim_port(port: u16) -> Option<std::fs::File> {
    use std::os::fd::AsRawFd;
    let dir = std::env::temp_dir().join("broker-test-ports");
    std::fs::create_dir_all(&dir).expect("the port claims' directory");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(port.to_string()))
        .expect("a port's claim file");
    // SAFETY: flock on a descriptor this function owns; it touches no memory.
    // (std's File::try_lock is newer than the workspace's minimum Rust.)
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    locked.then_some(file)
}

/// A running broker process.
pub struct Broker {
    child: Child,
    /// Where its Kafka listener is.
    pub address: SocketAddr,
    /// Where its HTTP listener is.
    pub http: SocketAddr,
    /// Its data directory.
    pub data_dir: PathBuf,
    /// Everything it logged so far (stderr).
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the broker on 127.0.0.1 port 0 with 2 shards, waiting for the
/// line saying where it listens.
pub fn start_broker(data_dir: &Path) -> Broker {
    start_broker_with(data_dir, &[])
}

/// [`start_broker`] with extra environment variables.
pub fn start_broker_with(data_dir: &Path, env: &[(&str, &str)]) -> Broker {
    start_broker_on(data_dir, &["--kafka-listen", "127.0.0.1:0"], env)
}

/// [`start_broker_with`], its Kafka listeners given by `listen` (the
/// arguments naming them; none when the environment's `BROKER_LISTENERS`
/// does).
pub fn start_broker_on(data_dir: &Path, listen: &[&str], env: &[(&str, &str)]) -> Broker {
    start_broker_adjusted(data_dir, listen, env, |_| {})
}

/// [`start_broker_on`], with `adjust` given the command last (to set what
/// the arguments cannot, such as the child's resource limits).
pub fn start_broker_adjusted(
    data_dir: &Path,
    listen: &[&str],
    env: &[(&str, &str)],
    adjust: impl FnOnce(&mut Command),
) -> Broker {
    let mut command = Command::new(env!("CARGO_BIN_EXE_broker"));
    command
        .args(listen)
        .args(["--http-listen", "127.0.0.1:0", "--shards", "2"])
        .arg("--data-dir")
        .arg(data_dir)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    adjust(&mut command);
    let mut child = command.spawn().expect("start the broker");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let log = Arc::new(Mutex::new(Vec::new()));
    let keep = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            // JSON logs (BROKER_LOG_FORMAT=json) carry the fields quoted.
            if line.contains("\"kafka\":\"") {
                let field = |name: &str| {
                    line.split(&format!("\"{name}\":\""))
                        .nth(1)
                        .and_then(|r| r.split('"').next())
                        .unwrap_or_default()
                        .to_string()
                };
                let _ = tx.send((field("kafka"), field("http")));
            } else if let Some(rest) = line.split("kafka=").nth(1) {
                let kafka = rest.split_whitespace().next().unwrap_or_default();
                let http = line
                    .split("http=")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .unwrap_or_default();
                let _ = tx.send((kafka.to_string(), http.to_string()));
            }
            keep.lock().unwrap().push(line);
        }
    });
    let (address, http) = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(addresses) => addresses,
        Err(e) => {
            // Let the log thread catch the last lines.
            std::thread::sleep(Duration::from_millis(100));
            panic!(
                "the broker did not log where it listens ({e}); it logged:\n{}",
                log.lock().unwrap().join("\n")
            );
        }
    };
    Broker {
        child,
        address: address.parse().expect("an address"),
        http: http.parse().expect("an HTTP address"),
        data_dir: data_dir.to_path_buf(),
        log,
    }
}

/// The broker's CLI (`broker ARGS --brokers BOOTSTRAP`), which must
/// succeed; what it printed.
pub fn cli(bootstrap: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(args)
        .args(["--brokers", bootstrap])
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).to_string()
}

impl Broker {
    /// `host:port`.
    pub fn bootstrap(&self) -> String {
        self.address.to_string()
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, and wait (bounded) for the exit status.
    pub fn terminate(mut self) -> ExitStatus {
        self.stop()
    }

    /// [`Broker::terminate`], keeping the handle (its log stays readable).
    pub fn stop(&mut self) -> ExitStatus {
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the broker did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Log lines containing `needle`.
    pub fn logged(&self, needle: &str) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .cloned()
            .collect()
    }
}

/// Runs a future on a glommio executor on this thread (the client side).
pub fn on_glommio<T>(fut: impl std::future::Future<Output = T>) -> T {
    glommio::LocalExecutorBuilder::default()
        .io_memory(1 << 20)
        .make()
        .expect("glommio executor")
        .run(fut)
}

/// A seed from `SEED` or the clock, printed so a failure can be replayed.
pub fn seed() -> u64 {
    let seed = std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    println!("SEED={seed}");
    seed
}

/// One HTTP/1.1 request on a connection of its own (`connection:
/// close`: the broker answers, then closes it): (status, body).
pub fn http(address: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let (text, answered) = try_http(address, method, path, body);
    answered.unwrap_or_else(|| panic!("no status in {text:?}"))
}

/// [`http`] to a broker that may be going away: the raw answer, and its
/// status and body if it answered at all.
pub fn try_http(
    address: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> (String, Option<(u16, String)>) {
    use std::io::{Read, Write};
    let raw = format!(
        "{method} {path} HTTP/1.1\r\nhost: broker\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut text = String::new();
    let Ok(mut stream) = std::net::TcpStream::connect(address) else {
        return (text, None);
    };
    let _ = stream.write_all(raw.as_bytes());
    let _ = stream.read_to_string(&mut text);
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok());
    let body = text
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    let answered = status.map(|status| (status, body));
    (text, answered)
}

/// An ApiVersions request frame (size prefix included) at `version`, with
/// `client` as client id and software name.
pub fn api_versions_request(version: i16, correlation_id: i32, client: &'static str) -> Vec<u8> {
    use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, RequestHeader};
    use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::ApiVersions as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str(client)));
    let mut body = bytes::BytesMut::new();
    header
        .encode(&mut body, ApiVersionsRequest::header_version(version))
        .unwrap();
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str(client))
        .with_client_software_version(StrBytes::from_static_str("1"))
        .encode(&mut body, version)
        .unwrap();
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// Waits (every 100 ms) until `done`; panics with `what` after `limit`.
pub fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Calls `call` until it succeeds, at most `limit` (every 100 ms): its
/// value; panics with `what` and the last error after that.
pub fn eventually<T, E: std::fmt::Debug>(
    what: &str,
    limit: Duration,
    mut call: impl FnMut() -> Result<T, E>,
) -> T {
    let started = std::time::Instant::now();
    loop {
        match call() {
            Ok(value) => return value,
            Err(e) if started.elapsed() > limit => {
                panic!("{what}: still failing after {limit:?}: {e:?}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Runs tests/python/`script` with `args` (at most `limit_s` seconds);
/// what it printed, once it succeeded.
pub fn python_script(script: &str, args: &[&str], limit_s: u32) -> String {
    let python = std::env::var("KAFKA_PYTHON").unwrap_or_else(|_| "python3".into());
    let path = format!("{}/tests/python/{script}", env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("timeout")
        .arg(limit_s.to_string())
        .args([python.as_str(), path.as_str()])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "{script} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Sets (or with None deletes) one config of group `group`; the code.
pub async fn alter_group_config(
    c: &mut client::connection::Connection,
    group: &str,
    key: &str,
    value: Option<&str>,
) -> i16 {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::IncrementalAlterConfigsRequest;
    use kafka_protocol::protocol::StrBytes;
    let config = AlterableConfig::default()
        .with_name(StrBytes::from_string(key.to_string()))
        .with_config_operation(if value.is_some() { 0 } else { 1 })
        .with_value(value.map(|v| StrBytes::from_string(v.to_string())));
    let resource = AlterConfigsResource::default()
        .with_resource_type(32)
        .with_resource_name(StrBytes::from_string(group.to_string()))
        .with_configs(vec![config]);
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![resource]);
    c.call(&request, 1).await.unwrap().responses[0].error_code
}

/// Runs `command` with `input` on its standard input (its output and
/// errors captured): a CLI fed as a shell pipe would feed it.
pub fn output_with_input(command: &mut Command, input: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// Runs Prometheus's `promtool` (Debian's prometheus package, which the
/// test command installs) with `input` on its standard input: its
/// success and everything it printed.
pub fn promtool(args: &[&str], input: &str) -> (bool, String) {
    let mut command = Command::new("promtool");
    let output = output_with_input(command.args(args), input);
    let printed = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), printed)
}
