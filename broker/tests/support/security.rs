//! What the tests of TLS and SASL share: a certificate authority of the
//! test's own (no private key is committed), the files a TLS broker reads,
//! kcat (the system's, built with OpenSSL and SASL) and a bounded wait for
//! a log line.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa, KeyPair,
};

use super::Broker;

/// A certificate authority of the test's own.
pub struct Authority {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Authority {
    pub fn new(name: &str) -> Authority {
        let mut params = CertificateParams::default();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Authority { issuer }
    }

    /// A certificate for `names` (DNS names or IPs) with subject
    /// `CN=common_name`, valid now unless `expired`: (certificate PEM, key PEM).
    pub fn issue(&self, names: &[&str], common_name: &str, expired: bool) -> (String, String) {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        if expired {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let certificate = params.signed_by(&key, &self.issuer).unwrap();
        (certificate.pem(), key.serialize_pem())
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }
}

/// Writes `contents` to `dir/name`; its path.
pub fn write(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

/// The files of a TLS broker: server certificate and key from `authority`,
/// the CA file for clients.
pub struct Files {
    pub ca: PathBuf,
    pub certificate: PathBuf,
    pub key: PathBuf,
}

pub fn server_files(dir: &Path, authority: &Authority) -> Files {
    let (certificate, key) = authority.issue(&["127.0.0.1", "localhost"], "broker", false);
    Files {
        ca: write(dir, "ca.pem", &authority.pem()),
        certificate: write(dir, "server.pem", &certificate),
        key: write(dir, "server.key", &key),
    }
}

pub fn kcat(args: &[&str], input: Option<&str>) -> std::process::Output {
    let mut command = Command::new("timeout");
    command.arg("30").arg("kcat").args(args);
    // The test runner's library path holds the librdkafka the rdkafka
    // crate built (without OpenSSL); kcat takes the system's, with it.
    command.env_remove("LD_LIBRARY_PATH");
    command.stdin(std::process::Stdio::piped());
    command.stdout(std::process::Stdio::piped());
    command.stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    if let Some(input) = input {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

/// Waits (bounded) until the broker's log has a line containing `needle`.
pub fn wait_logged(broker: &Broker, needle: &str) -> bool {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        if !broker.logged(needle).is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Partition 0's leader and ISR size, from the HTTP API.
pub fn leader_and_isr(http: SocketAddr, topic: &str) -> Option<(i32, usize)> {
    let (status, body) = super::http(http, "GET", &format!("/topics/{topic}"), "");
    if status != 200 {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(&body).ok()?;
    let partition = &value["partitions"][0];
    Some((
        partition["leader"].as_i64()? as i32,
        partition["isr"].as_array()?.len(),
    ))
}

/// kafka-python (tests/python/secure_roundtrip.py) against `bootstrap`
/// with `settings` (its client settings as JSON, e.g. the security
/// protocol and login): its default producer (idempotent) sends 100
/// values to `topic`, then a consumer reads them back in order (only the
/// producer with `--produce-only` in `extra`). Bounded by `timeout_s`.
pub fn kafka_python_roundtrip(
    bootstrap: &str,
    topic: &str,
    settings: &str,
    extra: &[&str],
    timeout_s: u32,
) -> std::process::Output {
    let python = std::env::var("KAFKA_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/secure_roundtrip.py"
    );
    Command::new("timeout")
        .args([
            &timeout_s.to_string(),
            &python,
            script,
            bootstrap,
            topic,
            settings,
        ])
        .args(extra)
        .output()
        .unwrap()
}

/// confluent-kafka (tests/python/confluent_roundtrip.py) against
/// `bootstrap` with `settings` (librdkafka's settings as JSON): a producer
/// with its default settings sends 100 values to `topic`, then a consumer
/// in `group` reads them back. Bounded by 90 s.
pub fn confluent_roundtrip(
    bootstrap: &str,
    topic: &str,
    group: &str,
    settings: &str,
) -> std::process::Output {
    let python = std::env::var("KAFKA_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/confluent_roundtrip.py"
    );
    Command::new("timeout")
        .args(["90", &python, script, bootstrap, topic, group, settings])
        .output()
        .unwrap()
}
