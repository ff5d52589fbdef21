//! Where an admin command goes, and how: the bootstrap broker, TLS files
//! and a SASL login, as flags every admin subcommand takes (`--brokers`
//! and the librdkafka-named `--ssl-*` and `--sasl-*` flags), and the
//! executor the command runs on.

use super::failure::Failure;
use super::output::Format;
use std::path::PathBuf;
use std::rc::Rc;

use clap::Args;
use client::cluster::{resolve, Cluster};
use client::security::{SaslLogin, SaslMechanism, Security};
use client::tls::ClientTls;

/// The connection flags of every admin subcommand.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
#[command(next_help_heading = "Connection")]
pub struct TargetArgs {
    /// The broker to bootstrap from.
    #[arg(
        long,
        global = true,
        value_name = "HOST:PORT",
        env = "BROKER_BROKERS",
        default_value = "127.0.0.1:9092"
    )]
    pub brokers: String,
    /// Over TLS: the CA the brokers' certificates chain to.
    #[arg(long = "ssl-ca-location", global = true, value_name = "FILE")]
    pub ssl_ca: Option<PathBuf>,
    /// This client's certificate, for brokers that require one (with
    /// --ssl-key-location).
    #[arg(long = "ssl-certificate-location", global = true, value_name = "FILE")]
    pub ssl_certificate: Option<PathBuf>,
    /// This client's private key (with --ssl-certificate-location).
    #[arg(long = "ssl-key-location", global = true, value_name = "FILE")]
    pub ssl_key: Option<PathBuf>,
    /// SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    #[arg(long, global = true, value_name = "MECHANISM")]
    pub sasl_mechanism: Option<String>,
    /// SASL user (with --sasl-mechanism).
    #[arg(long, global = true, value_name = "USER")]
    pub sasl_username: Option<String>,
    /// SASL password (better in BROKER_SASL_PASSWORD: kept out of the
    /// process list).
    #[arg(
        long,
        global = true,
        value_name = "PASSWORD",
        env = "BROKER_SASL_PASSWORD",
        hide_env_values = true,
        allow_hyphen_values = true
    )]
    pub sasl_password: Option<String>,
    /// How answers print: table (for people) or json (for scripts).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value_t = Format::Table,
        help_heading = "Output"
    )]
    pub format: Format,
}

/// Where the admin commands go, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The bootstrap broker, `host:port`.
    pub brokers: String,
    /// Over TLS: the CA file, and this client's certificate and key files
    /// if the brokers ask for one.
    pub tls: Option<(PathBuf, Option<(PathBuf, PathBuf)>)>,
    /// A SASL login, for brokers that ask for one.
    pub sasl: Option<SaslLogin>,
}

impl TargetArgs {
    /// The target the flags describe; flags that only work together are
    /// refused alone.
    pub fn target(&self) -> Result<Target, String> {
        let tls = match (
            self.ssl_ca.clone(),
            self.ssl_certificate.clone(),
            self.ssl_key.clone(),
        ) {
            (None, None, None) => None,
            (Some(ca), None, None) => Some((ca, None)),
            (Some(ca), Some(certificate), Some(key)) => Some((ca, Some((certificate, key)))),
            (None, _, _) => return Err("a client certificate needs --ssl-ca-location too".into()),
            _ => {
                return Err("--ssl-certificate-location and --ssl-key-location go together".into())
            }
        };
        Ok(Target {
            brokers: self.brokers.clone(),
            tls,
            sasl: self.sasl_login()?,
        })
    }

    /// The SASL login the flags describe, if any.
    fn sasl_login(&self) -> Result<Option<SaslLogin>, String> {
        let (Some(mechanism), Some(user)) = (&self.sasl_mechanism, &self.sasl_username) else {
            if self.sasl_mechanism.is_some() || self.sasl_username.is_some() {
                return Err("--sasl-mechanism and --sasl-username go together".into());
            }
            return Ok(None);
        };
        let mechanism = SaslMechanism::from_name(mechanism).ok_or_else(|| {
            format!("--sasl-mechanism {mechanism}: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
        })?;
        let password = self
            .sasl_password
            .clone()
            .ok_or("SASL needs --sasl-password or BROKER_SASL_PASSWORD")?;
        Ok(Some(SaslLogin {
            mechanism,
            user: user.clone(),
            password,
        }))
    }
}

impl Target {
    /// Runs `work` against the cluster at this target, on an executor of
    /// its own; returns what to print, or the failure in words (about
    /// `subject`, the thing the command names, if any).
    pub fn run<F, Fut>(&self, subject: Option<String>, work: F) -> Result<String, Failure>
    where
        F: FnOnce(Rc<Cluster>) -> Fut + 'static,
        Fut: std::future::Future<Output = Result<String, client::connection::ClientError>>,
    {
        let brokers = &self.brokers;
        let address = resolve(brokers).map_err(|e| match brokers.rsplit_once(':') {
            // A host and a port that does not resolve: perhaps for now.
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Failure {
                message: format!("cannot reach the cluster: --brokers {brokers}: {e}"),
                exit_code: super::failure::EXIT_UNREACHABLE,
            },
            _ => super::failure::usage(format!("--brokers {brokers}: expected host:port")),
        })?;
        let tls = match &self.tls {
            None => None,
            Some((ca, identity)) => {
                let identity = identity.as_ref().map(|(c, k)| (c.as_path(), k.as_path()));
                Some(ClientTls::from_files(ca, identity).map_err(|e| e.to_string())?)
            }
        };
        let security = Security {
            tls,
            sasl: self.sasl.clone(),
        };
        glommio::LocalExecutorBuilder::default()
            .io_memory(256 << 10)
            .make()
            .map_err(|e| format!("cannot start an executor: {e}"))?
            .run(async move {
                let cluster = Cluster::with_security(address, "broker-admin", security);
                work(cluster)
                    .await
                    .map_err(|e| super::failure::explain(subject.as_deref(), &e))
            })
    }
}
