//! The broker's configuration, from four layers, each overriding the one
//! before: built-in defaults < a TOML file < `BROKER_*` environment
//! variables < command-line flags. Every setting is documented in
//! docs/configuration.md.

mod command_line;
pub mod group_timeouts;
pub mod journal_settings;
pub mod listeners;
mod machine;
pub mod migration_policy;
pub mod remote_settings;
pub mod roles;
pub mod share_settings;
mod tls_settings;

pub use command_line::CommandLine;

use std::path::{Path, PathBuf};

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};

use crate::config::group_timeouts::{Bounds, Timeouts};
use crate::config::listeners::{Listener, ListenerSettings, Listeners, SecurityProtocol};
use crate::config::machine::{open_file_limit, usable_memory_bytes};
use crate::config::migration_policy::MigrationPolicy;
use crate::config::share_settings::ShareSettings;

/// Kafka's `socket.request.max.bytes` default: the largest request frame.
pub const SOCKET_REQUEST_MAX_BYTES_DEFAULT: u32 = 100 * 1024 * 1024;

/// A setting that is a secret: shown as `***` wherever the configuration
/// is printed.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// Every setting of a broker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokerConfig {
    /// This broker's node id.
    pub node_id: i32,
    /// Where partitions and metadata live.
    pub data_dir: PathBuf,
    /// The Kafka listener, `host:port`.
    pub kafka_listen: String,
    /// What clients are told to connect to; defaults to `kafka_listen`
    /// (with 0.0.0.0 replaced by 127.0.0.1).
    pub advertised_listener: Option<String>,
    /// The Kafka listener's security protocol: `PLAINTEXT`, `SSL` (TLS
    /// with the `ssl_*` files), `SASL_PLAINTEXT` or `SASL_SSL` (clients
    /// authenticate with SASL; docs/security.md).
    pub kafka_security_protocol: String,
    /// Several Kafka listeners, `NAME://ip:port` each (Kafka's
    /// listeners); set, they replace `kafka_listen`, `advertised_listener`
    /// and `kafka_security_protocol`. A client is told the addresses of
    /// the listener it connected to.
    pub listeners: Vec<String>,
    /// `NAME://host:port` for listeners whose clients are told another
    /// address than the bound one (Kafka's advertised.listeners).
    pub advertised_listeners: Vec<String>,
    /// `NAME:PROTOCOL` for listeners not named after their protocol
    /// (Kafka's listener.security.protocol.map).
    pub listener_security_protocol_map: Vec<String>,
    /// The listener brokers reach each other on (replication, forwarded
    /// calls); unset: the first of `listeners`.
    pub inter_broker_listener_name: Option<String>,
    /// The SASL mechanisms a SASL listener offers (Kafka's
    /// sasl.enabled.mechanisms): `SCRAM-SHA-256`, `SCRAM-SHA-512`, `PLAIN`.
    pub sasl_enabled_mechanisms: Vec<String>,
    /// This broker's own user on SASL listeners, `name:password`: created
    /// (SCRAM-SHA-256 and SCRAM-SHA-512) at start if no user of that name
    /// exists yet, and the user it authenticates as to other brokers.
    /// Required with SASL. Never logged.
    pub sasl_broker_user: Option<Secret>,
    /// Who may do what: `none` (every client let in may do anything) or
    /// `acl` (Kafka's ACLs, kept in the metadata; docs/security.md).
    pub authorizer: String,
    /// Principals that pass every ACL check (`User:admin`, or a client
    /// certificate's `User:CN=...`). The broker's own SASL user is one.
    pub super_users: Vec<String>,
    /// With `authorizer = "acl"`: whether a resource no ACL is about is
    /// open to everyone (Kafka's allow.everyone.if.no.acl.found).
    pub allow_everyone_if_no_acl_found: bool,
    /// How long a SASL authentication lasts before the client must
    /// authenticate again on its connection (KIP-368; 0: as long as the
    /// connection).
    pub connections_max_reauth_ms: u64,
    /// The server's certificate chain, PEM (leaf first).
    pub ssl_certificate_location: Option<PathBuf>,
    /// The server certificate's private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub ssl_key_location: Option<PathBuf>,
    /// The CA certificates client certificates must chain to, PEM; needed
    /// when `ssl_client_auth` is not `none`.
    pub ssl_ca_location: Option<PathBuf>,
    /// Client certificates: `none`, `requested` (checked when given) or
    /// `required` (Kafka's ssl.client.auth).
    pub ssl_client_auth: String,
    /// The HTTP listener (HTTP API and /metrics), `host:port`.
    pub http_listen: String,
    /// The HTTP listener speaks TLS (HTTPS) with the `ssl_*` files.
    pub http_tls: bool,
    /// Who may use the HTTP API: `none` (anyone who reaches the port) or
    /// `basic` (HTTP Basic authentication as a SASL/SCRAM user; meant for
    /// `http_tls`). Unset: `basic` when the Kafka port asks for SASL, else
    /// `none`. /health and /metrics never ask.
    pub http_authentication: Option<String>,
    /// Shards (one glommio executor per core); 0 means one per available core.
    pub shards: usize,
    /// This broker's rack, for replica placement.
    pub rack: Option<String>,
    /// Create a topic when a client asks for metadata of an unknown one.
    pub auto_create_topics: bool,
    /// Partitions of auto-created topics.
    pub default_partitions: u32,
    /// The largest request frame accepted; larger ones close the connection.
    pub socket_request_max_bytes: u32,
    /// How often each shard applies retention and compaction to its
    /// partitions (Kafka's log.retention.check.interval.ms).
    pub retention_check_interval_ms: u64,
    /// Partitions of `__consumer_offsets` (fixed once the topic exists:
    /// a group's coordinator is its group id's hash modulo this).
    pub offsets_topic_partitions: u32,
    /// Partitions of `__transaction_state` (fixed once the topic exists:
    /// a transactional id's coordinator is its hash modulo this).
    pub transaction_state_partitions: u32,
    /// The longest transaction timeout a producer may ask for (Kafka's
    /// transaction.max.timeout.ms).
    pub transaction_max_timeout_ms: i32,
    /// How long a transactional id may stay idle (no transaction) before
    /// its coordinator forgets it (Kafka's transactional.id.expiration.ms).
    pub transactional_id_expiration_ms: i64,
    /// The `transaction.version` this broker finalizes (Kafka's feature,
    /// 0-2): 2 tells clients that read it (the Java client) to use
    /// KIP-890's protocol; 0 also writes `__transaction_state` in the
    /// record version earlier builds read (a rolling upgrade or a
    /// rollback). Requests are served by their version either way.
    pub transaction_version: i16,
    /// How long the first rebalance of an empty group waits for more
    /// members, so consumers starting together land in one generation.
    pub group_initial_rebalance_delay_ms: u64,
    /// The shortest session timeout a member may ask for.
    pub group_min_session_timeout_ms: u64,
    /// The longest session timeout a member may ask for.
    pub group_max_session_timeout_ms: u64,
    /// A consumer group (KIP-848) member not heard from for this long is
    /// removed (Kafka's `group.consumer.session.timeout.ms`).
    pub group_consumer_session_timeout_ms: u64,
    /// How often consumer group members are told to heartbeat (Kafka's
    /// `group.consumer.heartbeat.interval.ms`); below the session timeout.
    pub group_consumer_heartbeat_interval_ms: u64,
    /// The shortest session timeout a consumer group may have (Kafka's
    /// `group.consumer.min.session.timeout.ms`), the broker's own included.
    pub group_consumer_min_session_timeout_ms: u64,
    /// The longest (`group.consumer.max.session.timeout.ms`).
    pub group_consumer_max_session_timeout_ms: u64,
    /// The shortest heartbeat interval (`group.consumer.min.heartbeat.interval.ms`).
    pub group_consumer_min_heartbeat_interval_ms: u64,
    /// The longest (`group.consumer.max.heartbeat.interval.ms`).
    pub group_consumer_max_heartbeat_interval_ms: u64,
    /// Which online conversions between the classic and the consumer
    /// protocol a group with members makes (Kafka's
    /// `group.consumer.migration.policy`): bidirectional, upgrade,
    /// downgrade or disabled.
    pub group_consumer_migration_policy: String,
    /// A share group member not heard from for this long is removed
    /// (Kafka's `group.share.session.timeout.ms`).
    pub group_share_session_timeout_ms: u64,
    /// How often share group members are told to heartbeat (Kafka's
    /// `group.share.heartbeat.interval.ms`); below the session timeout.
    pub group_share_heartbeat_interval_ms: u64,
    /// How long a share group member holds the records it acquired
    /// before they go back (Kafka's `group.share.record.lock.duration.ms`).
    pub group_share_record_lock_duration_ms: u64,
    /// Deliveries after which a share group's record that comes back is
    /// archived (Kafka's `group.share.delivery.count.limit`, 2..=10).
    pub group_share_delivery_count_limit: u16,
    /// The most records in flight per share-partition (Kafka's
    /// `group.share.partition.max.record.locks`).
    pub group_share_partition_max_record_locks: u32,
    /// The most share sessions a broker keeps (Kafka's
    /// `group.share.max.share.sessions`).
    pub group_share_max_share_sessions: u32,
    /// Pin each shard's executor to its own CPU (the default). Off, the
    /// scheduler places them (see docs/configuration.md, "Pinning").
    pub pin_shards: bool,
    /// Move a client connection (plain or TLS) to the shard
    /// owning the partitions it reads and writes, once its requests name
    /// only that shard's (the default): its requests then do not cross
    /// the shard mesh.
    pub connections_follow_partitions: bool,
    /// The metadata quorum's voters, `id@ip:port` separated by commas
    /// (their metadata listeners). Empty: this broker is a quorum alone.
    /// A broker not named here joins the quorum as an observer (it follows
    /// the metadata log without a vote) at its `controller_listen`.
    pub controller_quorum_voters: String,
    /// What this node runs (`broker`, `controller`, or both, the default):
    /// a controller-only node serves no Kafka data; a broker-only node
    /// follows the metadata quorum as an observer (`config::roles`).
    pub process_roles: String,
    /// This broker's metadata listener; defaults to its own entry in
    /// `controller_quorum_voters`.
    pub controller_listen: Option<String>,
    /// The metadata quorum's transport (Raft, forwarded controller calls):
    /// `PLAINTEXT` or `SSL` (the `ssl_*` files, certificates required both
    /// ways).
    pub controller_security_protocol: String,
    /// The CA the brokers' certificates chain to, for the metadata quorum
    /// only (unset: `ssl_ca_location`). A CA of the brokers' own keeps
    /// clients' certificates (signed by `ssl_ca_location`) out of it.
    pub controller_ssl_ca_location: Option<PathBuf>,
    /// A broker whose heartbeats stop this long is fenced by the controller.
    pub broker_session_timeout_ms: u64,
    /// How often a broker heartbeats the controller.
    pub broker_heartbeat_interval_ms: u64,
    /// Whether the active controller gives leadership back to each
    /// partition's preferred replica (its first) once that is live and in
    /// sync again (Kafka's `auto.leader.rebalance.enable`).
    pub auto_leader_rebalance_enable: bool,
    /// How often it looks (Kafka's `leader.imbalance.check.interval.seconds`,
    /// in ms here).
    pub leader_imbalance_check_interval_ms: u64,
    /// A follower that has not caught up for this long leaves the ISR.
    pub replica_lag_time_max_ms: u64,
    /// How long a follower's fetch waits at the leader for new data.
    pub replica_fetch_wait_max_ms: u64,
    /// Bytes per second this broker copies for replicas a reassignment is
    /// adding here (Kafka's `follower.replication.throttled.rate`); 0:
    /// unthrottled. Replicas already in place are never throttled.
    pub follower_replication_throttled_rate: u64,
    /// Replicas of auto-created topics (capped at the live brokers).
    pub default_replication_factor: u32,
    /// Where consumers read: `leader`, or `rack-aware` (a consumer that
    /// names its rack is sent to an in-sync replica in it, KIP-392, and
    /// followers serve consumer fetches below their high watermark).
    pub replica_selector: String,
    /// Log lines as `text` (for people) or `json` (one object per line,
    /// span closes included: the traces, docs/operations.md).
    pub log_format: String,
    /// An OpenTelemetry collector's OTLP/HTTP base URL: produce and fetch
    /// traces are exported there (docs/operations.md, "Traces"); none:
    /// not exported.
    pub otlp_endpoint: Option<String>,
    /// `http/protobuf` or `http/json`.
    pub otlp_protocol: String,
    /// The share of traces exported, 0 to 1.
    pub otlp_sample_ratio: f64,
    /// An idempotent producer silent this long (by its batches'
    /// timestamps) is forgotten (Kafka's producer.id.expiration.ms).
    pub producer_id_expiration_ms: u64,
    /// Client connections the broker keeps open at most (0: three quarters
    /// of the process's open-file limit, the rest kept for logs, HTTP,
    /// replication and the controller). Past it a connection is closed at
    /// once (Kafka's max.connections).
    pub max_connections: u64,
    /// Client connections from one address at most (0: half of
    /// `max_connections`; Kafka's max.connections.per.ip).
    pub max_connections_per_ip: u64,
    /// A client connection with no request for this long is closed
    /// (Kafka's connections.max.idle.ms).
    pub connections_max_idle_ms: u64,
    /// Memory the partitions' batch caches may hold together, split evenly
    /// between the shards (0: a quarter of the machine's memory). O_DIRECT
    /// bypasses the page cache, so this is what keeps recently written data
    /// readable without the disk; each partition also keeps its newest
    /// 4 MiB whatever the others hold. The machine's memory is its cgroup's
    /// limit when that is lower.
    pub log_cache_bytes: u64,
    /// Each shard's journal file, in bytes (0: no journal): a flush of at
    /// most `journal_flush_max_bytes` new bytes to one partition is made
    /// durable by one write and fdatasync of the journal shared with the
    /// shard's other partitions, instead of an fdatasync of its own
    /// segment (docs/storage.md, "Many partitions").
    pub journal_bytes: u64,
    /// The largest flush (new bytes of one partition) that goes to the
    /// shard's journal.
    pub journal_flush_max_bytes: u64,
    /// Tiered storage's object store (docs/tiered-storage.md): `local` (a
    /// directory, `remote_store_dir`), `s3` (`remote_s3_*`), or `none`
    /// (topics cannot turn `remote.storage.enable` on).
    pub remote_store: String,
    /// The local store's directory (default: `remote-store` in the data
    /// directory, beside the partitions, never inside one).
    pub remote_store_dir: Option<PathBuf>,
    /// The S3 bucket (with `remote_store = "s3"`).
    pub remote_s3_bucket: Option<String>,
    /// The S3 endpoint, for S3-compatible servers (default: AWS's).
    pub remote_s3_endpoint: Option<String>,
    /// The S3 region.
    pub remote_s3_region: String,
    /// A credentials file as AWS's (`aws_access_key_id`,
    /// `aws_secret_access_key` of its `[default]` profile); else the
    /// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` variables.
    pub remote_s3_credentials_file: Option<PathBuf>,
    /// Object store calls running at once (uploads, reads, deletions).
    pub remote_concurrency: usize,
    /// Upload bandwidth of this broker, bytes per second (0: unlimited).
    pub remote_upload_bytes_per_second: u64,
    /// Download bandwidth of this broker's remote reads, bytes per second
    /// (0: unlimited).
    pub remote_download_bytes_per_second: u64,
    /// Memory the chunks read from the object store may keep, per shard.
    pub remote_cache_bytes: u64,
    /// The disk cache of chunks read from the object store (default:
    /// `remote-cache` in the data directory, beside the partitions).
    pub remote_cache_dir: Option<PathBuf>,
    /// Disk the cache of chunks read from the object store may fill, for
    /// the whole broker (default: 20 GiB with `remote_store = "s3"`, 0 with
    /// the local store, already on a disk; 0: no disk cache).
    pub remote_disk_cache_bytes: Option<u64>,
    /// The metadata node snapshots its state and compacts its log every
    /// this many applied entries.
    pub metadata_snapshot_every_entries: u64,
    /// After SIGTERM, the process ends within this even if a shard is
    /// wedged (a clean stop takes controlled shutdown, up to 5 s, and
    /// draining connections, up to 5 s, first).
    pub shutdown_timeout_ms: u64,
    /// Testing only: the last shard panics this long after start (0: never).
    pub test_panic_after_ms: u64,
    /// Testing only: the last shard spins without yielding once a stop
    /// begins (a wedged shard).
    pub test_wedge_on_stop: bool,
    /// Testing only: a pause before each produce's flush, widening the
    /// window in which a crash test's kill finds acknowledged-but-unwritten
    /// data if acks were ever sent early. 0 in production.
    pub test_flush_delay_ms: u64,
    /// Testing only: a pause before this broker takes up a leadership the
    /// metadata gave it (the moment a follower's write it waits for takes,
    /// widened), so a test can produce in that moment. 0 in production.
    pub test_role_delay_ms: u64,
    /// Testing only: the transaction coordinator writes a decided
    /// transaction's markers one partition at a time, each after this
    /// pause, so a test can kill a broker between them. 0 in production.
    pub test_marker_pause_ms: u64,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            node_id: 1,
            data_dir: PathBuf::from("./data"),
            kafka_listen: "0.0.0.0:9092".into(),
            advertised_listener: None,
            kafka_security_protocol: "PLAINTEXT".into(),
            listeners: Vec::new(),
            advertised_listeners: Vec::new(),
            listener_security_protocol_map: Vec::new(),
            inter_broker_listener_name: None,
            sasl_enabled_mechanisms: vec!["SCRAM-SHA-256".into(), "SCRAM-SHA-512".into()],
            sasl_broker_user: None,
            connections_max_reauth_ms: 0,
            authorizer: "none".into(),
            super_users: Vec::new(),
            allow_everyone_if_no_acl_found: false,
            ssl_certificate_location: None,
            ssl_key_location: None,
            ssl_ca_location: None,
            ssl_client_auth: "none".into(),
            http_listen: "0.0.0.0:8080".into(),
            http_tls: false,
            http_authentication: None,
            shards: 0,
            rack: None,
            auto_create_topics: true,
            default_partitions: 1,
            socket_request_max_bytes: SOCKET_REQUEST_MAX_BYTES_DEFAULT,
            pin_shards: true,
            connections_follow_partitions: true,
            offsets_topic_partitions: 50,
            transaction_state_partitions: 50,
            transaction_max_timeout_ms: 900_000,
            transactional_id_expiration_ms: 604_800_000,
            transaction_version: 2,
            group_initial_rebalance_delay_ms: 3_000,
            group_min_session_timeout_ms: 6_000,
            group_max_session_timeout_ms: 1_800_000,
            group_consumer_session_timeout_ms: 45_000,
            group_consumer_heartbeat_interval_ms: 5_000,
            group_consumer_min_session_timeout_ms: 45_000,
            group_consumer_max_session_timeout_ms: 60_000,
            group_consumer_min_heartbeat_interval_ms: 5_000,
            group_consumer_max_heartbeat_interval_ms: 15_000,
            group_consumer_migration_policy: "bidirectional".into(),
            group_share_session_timeout_ms: 45_000,
            group_share_heartbeat_interval_ms: 5_000,
            group_share_record_lock_duration_ms: 30_000,
            group_share_delivery_count_limit: 5,
            group_share_partition_max_record_locks: 2_000,
            group_share_max_share_sessions: 2_000,
            retention_check_interval_ms: 300_000,
            controller_quorum_voters: String::new(),
            process_roles: "broker,controller".into(),
            controller_listen: None,
            controller_security_protocol: "PLAINTEXT".into(),
            controller_ssl_ca_location: None,
            broker_session_timeout_ms: 9_000,
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval_ms: 300_000,
            broker_heartbeat_interval_ms: 1_000,
            replica_lag_time_max_ms: 30_000,
            replica_fetch_wait_max_ms: 500,
            follower_replication_throttled_rate: 0,
            default_replication_factor: 1,
            replica_selector: "leader".into(),
            log_format: "text".into(),
            otlp_endpoint: None,
            otlp_protocol: "http/protobuf".into(),
            otlp_sample_ratio: 1.0,
            metadata_snapshot_every_entries: 1_000,
            remote_store: "local".into(),
            remote_store_dir: None,
            remote_s3_bucket: None,
            remote_s3_endpoint: None,
            remote_s3_region: "us-east-1".into(),
            remote_s3_credentials_file: None,
            remote_concurrency: 4,
            remote_upload_bytes_per_second: 0,
            remote_download_bytes_per_second: 0,
            remote_cache_bytes: 64 << 20,
            remote_cache_dir: None,
            remote_disk_cache_bytes: None,
            log_cache_bytes: 0,
            journal_bytes: 128 << 20,
            journal_flush_max_bytes: 16 << 10,
            max_connections: 0,
            max_connections_per_ip: 0,
            connections_max_idle_ms: 600_000,
            producer_id_expiration_ms: 86_400_000,
            shutdown_timeout_ms: 30_000,
            test_panic_after_ms: 0,
            test_wedge_on_stop: false,
            test_flush_delay_ms: 0,
            test_role_delay_ms: 0,
            test_marker_pause_ms: 0,
        }
    }
}

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A flag this broker does not know, or one missing its value.
    #[error("{0}")]
    Usage(String),
    /// A layer held a bad value or an unknown key.
    #[error("configuration: {0}")]
    Invalid(String),
}

impl BrokerConfig {
    /// Loads the layers: defaults, the TOML file (from `--config` or
    /// `BROKER_CONFIG`), the `BROKER_*` environment, the command line.
    pub fn load(line: &CommandLine) -> Result<BrokerConfig, ConfigError> {
        let file = line
            .config_file
            .clone()
            .or_else(|| std::env::var_os("BROKER_CONFIG").map(PathBuf::from));
        let mut figment = Figment::from(Serialized::defaults(BrokerConfig::default()));
        if let Some(file) = &file {
            if !Path::new(file).exists() {
                return Err(ConfigError::Invalid(format!(
                    "config file {} not found",
                    file.display()
                )));
            }
            figment = figment.merge(Toml::file(file));
        }
        let config: BrokerConfig = figment
            .merge(Env::prefixed("BROKER_").ignore(&["config"]))
            .merge(Serialized::defaults(line))
            .extract()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        config.check()?;
        Ok(config)
    }

    /// The connection limits, (in all, per address), defaults resolved.
    pub fn connection_limits(&self) -> (usize, usize) {
        let total = match self.max_connections {
            0 => (open_file_limit().unwrap_or(1024) / 4 * 3).max(16),
            n => n,
        };
        let per_ip = match self.max_connections_per_ip {
            0 => (total / 2).max(1),
            n => n.min(total),
        };
        (total as usize, per_ip as usize)
    }

    /// The batch cache memory of each of `shards` shards (see
    /// `log_cache_bytes`).
    pub fn log_cache_bytes_per_shard(&self, shards: usize) -> usize {
        let total = match self.log_cache_bytes {
            0 => usable_memory_bytes().unwrap_or(4 << 30) / 4,
            bytes => bytes,
        };
        (total / shards.max(1) as u64) as usize
    }

    /// Consumer groups' timeouts unless a group has its own.
    pub fn consumer_group_timeouts(&self) -> Timeouts {
        Timeouts {
            session_ms: self.group_consumer_session_timeout_ms,
            heartbeat_interval_ms: self.group_consumer_heartbeat_interval_ms,
        }
    }

    /// What a consumer group's timeouts may be.
    pub fn consumer_group_bounds(&self) -> Bounds {
        Bounds {
            min_session_ms: self.group_consumer_min_session_timeout_ms,
            max_session_ms: self.group_consumer_max_session_timeout_ms,
            min_heartbeat_interval_ms: self.group_consumer_min_heartbeat_interval_ms,
            max_heartbeat_interval_ms: self.group_consumer_max_heartbeat_interval_ms,
        }
    }

    /// The online migrations groups make.
    pub fn migration_policy(&self) -> MigrationPolicy {
        let named = MigrationPolicy::parse(&self.group_consumer_migration_policy);
        // `check` refuses any other value.
        named.unwrap_or(MigrationPolicy {
            upgrade: false,
            downgrade: false,
        })
    }

    /// Checks the values against each other.
    pub fn check(&self) -> Result<(), ConfigError> {
        let invalid = |why: String| Err(ConfigError::Invalid(why));
        if MigrationPolicy::parse(&self.group_consumer_migration_policy).is_none() {
            return invalid(format!(
                "group_consumer_migration_policy {:?}: one of {}",
                self.group_consumer_migration_policy,
                migration_policy::POLICIES.join(", ")
            ));
        }
        journal_settings::check(self.journal_bytes, self.journal_flush_max_bytes)
            .map_err(ConfigError::Invalid)?;
        if self.transactional_id_expiration_ms < 1 || self.transaction_max_timeout_ms < 1 {
            return invalid(
                "transactional_id_expiration_ms and transaction_max_timeout_ms must be at least 1"
                    .into(),
            );
        }
        let bounds = self.consumer_group_bounds();
        if bounds.min_heartbeat_interval_ms < 1 || bounds.max_session_ms > i32::MAX as u64 {
            return invalid(format!(
                "group_consumer_min_heartbeat_interval_ms must be at least 1 and group_consumer_max_session_timeout_ms at most {}",
                i32::MAX
            ));
        }
        if let Err(why) = self.consumer_group_timeouts().check(&bounds) {
            return invalid(format!("group_consumer_*: {why}"));
        }
        if !(2..=10).contains(&self.group_share_delivery_count_limit)
            || !(100..=1_000_000).contains(&self.group_share_partition_max_record_locks)
            || self.group_share_max_share_sessions < 1
        {
            return invalid(
                "group_share_delivery_count_limit 2..=10, group_share_partition_max_record_locks \
                 100..=1000000, group_share_max_share_sessions at least 1"
                    .into(),
            );
        }
        if let Err(why) = remote_settings::check(self) {
            return invalid(why);
        }
        if let Err(why) = ShareSettings::of(self, None).check() {
            return invalid(format!("group_share_*: {why}"));
        }
        if !(0..=2).contains(&self.transaction_version) {
            return invalid(format!(
                "transaction_version {}: one of 0, 1, 2",
                self.transaction_version
            ));
        }
        let listeners = self.kafka_listeners()?;
        // Brokers reach each other by IP address (no name resolution on
        // that path): a name there would leave followers with no leader.
        let inter = listeners.inter_broker();
        if let Some(advertised) = inter
            .advertised
            .as_ref()
            .filter(|_| self.voters().is_ok_and(|v| v.len() > 1))
        {
            if advertised.parse::<std::net::SocketAddr>().is_err() {
                return invalid(format!(
                    "the inter-broker listener {} is advertised as {advertised:?}: in a cluster \
                     brokers reach it by IP address (ip:port)",
                    inter.name
                ));
            }
        }
        for (name, address) in [
            ("kafka_listen", &self.kafka_listen),
            ("http_listen", &self.http_listen),
        ] {
            if address.parse::<std::net::SocketAddr>().is_err() {
                return invalid(format!(
                    "{name} must be host:port with an IP host, got {address:?}"
                ));
            }
        }
        if self.node_id < 0 {
            return invalid(format!(
                "node_id must not be negative, got {}",
                self.node_id
            ));
        }
        if self.default_partitions == 0 {
            return invalid("default_partitions must be at least 1".into());
        }
        if self.socket_request_max_bytes < 1024 {
            return invalid("socket_request_max_bytes must be at least 1024".into());
        }
        if self.leader_imbalance_check_interval_ms < 100 {
            return invalid("leader_imbalance_check_interval_ms must be at least 100".into());
        }
        if let Some(listen) = &self.controller_listen {
            if listen.parse::<std::net::SocketAddr>().is_err() {
                return invalid(format!("controller_listen must be ip:port, got {listen:?}"));
            }
        }
        self.check_observer()?;
        self.check_roles()?;
        if self.broker_heartbeat_interval_ms == 0
            || self.broker_session_timeout_ms < 2 * self.broker_heartbeat_interval_ms
        {
            return invalid(
                "broker_session_timeout_ms must be at least twice broker_heartbeat_interval_ms (> 0)"
                    .into(),
            );
        }
        if !matches!(self.log_format.as_str(), "text" | "json") {
            return invalid(format!(
                "log_format must be text or json, got {:?}",
                self.log_format
            ));
        }
        if let Some(endpoint) = self.otlp_endpoint.as_deref() {
            if !endpoint.starts_with("http://") {
                return invalid(format!(
                    "otlp_endpoint must be an http:// URL (TLS to the collector is not built in), got {endpoint:?}"
                ));
            }
        }
        if !matches!(self.otlp_protocol.as_str(), "http/protobuf" | "http/json") {
            return invalid(format!(
                "otlp_protocol must be http/protobuf or http/json, got {:?}",
                self.otlp_protocol
            ));
        }
        if !(0.0..=1.0).contains(&self.otlp_sample_ratio) {
            return invalid(format!(
                "otlp_sample_ratio must be between 0 and 1, got {}",
                self.otlp_sample_ratio
            ));
        }
        if !matches!(self.replica_selector.as_str(), "leader" | "rack-aware") {
            return invalid(format!(
                "replica_selector must be leader or rack-aware, got {:?}",
                self.replica_selector
            ));
        }
        if self.default_replication_factor == 0 {
            return invalid("default_replication_factor must be at least 1".into());
        }
        if self.shutdown_timeout_ms < 1_000 {
            return invalid("shutdown_timeout_ms must be at least 1000".into());
        }
        if self.connections_max_idle_ms < 1_000 {
            return invalid("connections_max_idle_ms must be at least 1000".into());
        }
        if self.metadata_snapshot_every_entries == 0 {
            return invalid("metadata_snapshot_every_entries must be at least 1".into());
        }
        self.check_tls()?;
        self.check_sasl()
    }

    /// The SASL settings make sense together.
    fn check_sasl(&self) -> Result<(), ConfigError> {
        let invalid = |why: String| Err(ConfigError::Invalid(why));
        for name in &self.sasl_enabled_mechanisms {
            if crate::security::sasl::SaslMechanism::from_name(name).is_none() {
                return invalid(format!(
                    "sasl_enabled_mechanisms: {name:?} is not one of SCRAM-SHA-256, \
                     SCRAM-SHA-512, PLAIN"
                ));
            }
        }
        if !matches!(self.authorizer.as_str(), "none" | "acl") {
            return invalid(format!(
                "authorizer must be none or acl, got {:?}",
                self.authorizer
            ));
        }
        if let Some(user) = self.super_users.iter().find(|u| !u.starts_with("User:")) {
            return invalid(format!("super_users: {user:?} is not User:name"));
        }
        if let Some(http) = &self.http_authentication {
            if !matches!(http.as_str(), "none" | "basic") {
                return invalid(format!(
                    "http_authentication must be none or basic, got {http:?}"
                ));
            }
        }
        if !self.kafka_uses_sasl() {
            return Ok(());
        }
        if self.sasl_enabled_mechanisms.is_empty() {
            return invalid("a SASL listener needs at least one of sasl_enabled_mechanisms".into());
        }
        if self.broker_user().is_none() {
            return invalid(
                "kafka_security_protocol SASL_* needs sasl_broker_user = \"name:password\": \
                 the broker's own user, created if absent (the first user of a new cluster)"
                    .into(),
            );
        }
        Ok(())
    }

    /// Whether requests are checked against the ACLs.
    pub fn acls_checked(&self) -> bool {
        self.authorizer == "acl"
    }

    /// `super_users`, and the broker's own SASL user.
    pub fn all_super_users(&self) -> Vec<String> {
        let mut all = self.super_users.clone();
        if let Some((user, _)) = self.broker_user().filter(|_| self.kafka_uses_sasl()) {
            all.push(format!("User:{user}"));
        }
        all
    }

    /// Whether the HTTP API asks for a user (see `http_authentication`).
    pub fn http_asks_for_user(&self) -> bool {
        match self.http_authentication.as_deref() {
            Some(setting) => setting == "basic",
            None => self.kafka_uses_sasl(),
        }
    }

    /// Whether some Kafka listener asks for SASL authentication.
    pub fn kafka_uses_sasl(&self) -> bool {
        self.kafka_listeners()
            .is_ok_and(|l| l.any(SecurityProtocol::uses_sasl))
    }

    /// Whether brokers log in to each other's Kafka ports with SASL.
    pub fn inter_broker_uses_sasl(&self) -> bool {
        self.kafka_listeners()
            .is_ok_and(|l| l.inter_broker().protocol.uses_sasl())
    }

    /// The SASL mechanisms the Kafka port offers (checked names).
    pub fn sasl_mechanisms(&self) -> Vec<crate::security::sasl::SaslMechanism> {
        self.sasl_enabled_mechanisms
            .iter()
            .filter_map(|name| crate::security::sasl::SaslMechanism::from_name(name))
            .collect()
    }

    /// `sasl_broker_user` split into name and password.
    pub fn broker_user(&self) -> Option<(&str, &str)> {
        let Secret(user) = self.sasl_broker_user.as_ref()?;
        user.split_once(':').filter(|(name, password)| {
            control::model::credentials::check_user_name(name).is_ok() && !password.is_empty()
        })
    }

    /// The Kafka listeners: `listeners` with the settings that go with
    /// it, else the one of `kafka_listen`, `advertised_listener` and
    /// `kafka_security_protocol` (named after its protocol, as Kafka's
    /// default listener is).
    pub fn kafka_listeners(&self) -> Result<Listeners, ConfigError> {
        let invalid = |why: String| Err(ConfigError::Invalid(why));
        if !self.listeners.is_empty() {
            let defaults = BrokerConfig::default();
            if self.kafka_listen != defaults.kafka_listen
                || self.advertised_listener.is_some()
                || self.kafka_security_protocol != defaults.kafka_security_protocol
            {
                return invalid(
                    "listeners replaces kafka_listen, advertised_listener and \
                     kafka_security_protocol: set one or the other"
                        .into(),
                );
            }
            let settings = ListenerSettings {
                listeners: &self.listeners,
                advertised: &self.advertised_listeners,
                protocol_map: &self.listener_security_protocol_map,
                inter_broker: self.inter_broker_listener_name.as_deref(),
            };
            return Listeners::parse(&settings).map_err(ConfigError::Invalid);
        }
        if !self.advertised_listeners.is_empty() || !self.listener_security_protocol_map.is_empty()
        {
            return invalid(
                "advertised_listeners and listener_security_protocol_map name listeners: \
                 set listeners too"
                    .into(),
            );
        }
        let name = self.kafka_security_protocol.clone();
        let Some(protocol) = SecurityProtocol::from_name(&name) else {
            return invalid(format!(
                "kafka_security_protocol must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, got {name:?}"
            ));
        };
        if let Some(inter) = &self.inter_broker_listener_name {
            if !inter.eq_ignore_ascii_case(&name) {
                return invalid(format!(
                    "inter_broker_listener_name {inter} is not one of the listeners ({name})"
                ));
            }
        }
        let Ok(listen) = self.kafka_listen.parse() else {
            return invalid(format!(
                "kafka_listen must be host:port with an IP host, got {:?}",
                self.kafka_listen
            ));
        };
        Ok(Listeners::single(Listener {
            name,
            listen,
            advertised: self.advertised_listener.clone(),
            protocol,
        }))
    }

    /// A node outside `controller_quorum_voters` joins the quorum as an
    /// observer: the voters must reach it, at a `controller_listen` they
    /// can route to.
    fn check_observer(&self) -> Result<(), ConfigError> {
        let voters = self.voters()?;
        if voters.is_empty() || voters.contains_key(&self.node_id) {
            return Ok(());
        }
        let listen = self.controller_listen.as_deref().unwrap_or_default();
        match listen.parse::<std::net::SocketAddr>() {
            Ok(address) if !address.ip().is_unspecified() && address.port() != 0 => Ok(()),
            _ => Err(ConfigError::Invalid(format!(
                "node {} is not among controller_quorum_voters, so it joins the metadata quorum \
                 as an observer: set controller_listen to its metadata listener, an ip:port the \
                 voters can reach (not 0.0.0.0, not port 0), got {listen:?}",
                self.node_id
            ))),
        }
    }

    /// The metadata quorum's voters by node id (empty: this broker alone).
    pub fn voters(
        &self,
    ) -> Result<std::collections::BTreeMap<i32, std::net::SocketAddr>, ConfigError> {
        let mut voters = std::collections::BTreeMap::new();
        for entry in self
            .controller_quorum_voters
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            let bad = || {
                ConfigError::Invalid(format!(
                    "controller_quorum_voters: expected id@ip:port, got {entry:?}"
                ))
            };
            let (id, address) = entry.split_once('@').ok_or_else(bad)?;
            let id: i32 = id.parse().map_err(|_| bad())?;
            let address = address.parse().map_err(|_| bad())?;
            if id < 0 || voters.insert(id, address).is_some() {
                return Err(bad());
            }
        }
        Ok(voters)
    }

    /// Whether consumers may read from in-sync followers in their rack.
    pub fn rack_aware_reads(&self) -> bool {
        self.replica_selector == "rack-aware"
    }
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's closures return its large error type
mod tests;
