//! What the tests of TLS and SASL share: a certificate authority of the
//! test's own (no private key is committed), the files a TLS broker reads,
//! a broker on TLS, a raw TLS client, kcat (the system's, built with
//! OpenSSL and SASL) and a bounded wait for a log line.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa, KeyPair,
};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use super::{start_broker_with, Broker};

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

/// A broker whose Kafka port speaks TLS with `files`.
pub fn start_tls_broker(data: &Path, files: &Files, extra: &[(&str, &str)]) -> Broker {
    let mut env = vec![
        ("BROKER_KAFKA_SECURITY_PROTOCOL", "SSL"),
        (
            "BROKER_SSL_CERTIFICATE_LOCATION",
            files.certificate.to_str().unwrap(),
        ),
        ("BROKER_SSL_KEY_LOCATION", files.key.to_str().unwrap()),
    ];
    env.extend_from_slice(extra);
    start_broker_with(data, &env)
}

/// A TLS connection trusting `ca`, presenting `identity` (certificate and
/// key PEM) if given.
pub fn tls_connect(
    address: SocketAddr,
    ca: &str,
    identity: Option<&(String, String)>,
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(certificate.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match identity {
        Some((certificate, key)) => {
            let chain = CertificateDer::pem_slice_iter(certificate.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let connection = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let socket = TcpStream::connect(address).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    rustls::StreamOwned::new(connection, socket)
}
