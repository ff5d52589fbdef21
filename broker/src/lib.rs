//! The broker: the thread-per-core server, its configuration, the Kafka
//! protocol handling, and the admin subcommands.
//!
//! The server stacks in layers; each uses only those below it (the test
//! command refuses a cycle between modules, and an import against the
//! order `broker/layers.txt` declares):
//!
//! ```text
//!   server       transports: Kafka handlers, HTTP (neither imports the
//!                other), connections, ports, metrics, health; shard.rs
//!                is the composition root, the one place naming every service
//!   coordinator  the group coordinator (on groups/, sans-IO)
//!   replica      roles from the metadata, the ISR loop, follower fetchers
//!   partition    a shard's partitions: the table, roles, one interface
//!                (append-and-acknowledge, bounded read with long poll,
//!                epoch checks) and the per-partition fan-out
//!   cluster      this broker's metadata view, routing, controller link, lease
//!   runtime      invoke on a shard, clocks, bounded waits (no Kafka)
//! ```
//!
//! Beside them: `kafka` (framing, bounds walkers, decoding, shared
//! answers), `groups` (membership and offsets state machines), `sasl`
//! (authentication exchanges and a connection's session), `authorizer`
//! (the ACL decisions), `quotas` (byte-rate meters), `config`,
//! `counters`, and the binaries' subcommands.

#![warn(missing_docs)]

pub mod acl_cli;
pub mod admin_cli;
pub mod authorizer;
pub mod cluster;
pub mod config;
pub mod coordinator;
pub mod counters;
pub mod data_dir;
pub mod dump_log;
pub mod dump_metadata;
pub mod group_cli;
pub mod groups;
pub mod http_request;
pub mod kafka;
pub mod listeners;
pub mod partition;
pub mod process;
pub mod quota_cli;
pub mod quotas;
pub mod replica;
pub mod runtime;
pub mod sasl;
pub mod server;
pub mod tls_files;
pub mod user_cli;
