//! The broker: the thread-per-core server, its configuration, the Kafka
//! protocol handling, and the command line.
//!
//! The modules stack in layers; each uses only those below it (the test
//! command refuses a cycle between modules, an import against the order
//! `broker/layers.txt` declares, and a module it does not name;
//! docs/architecture.md walks through them):
//!
//! ```text
//!   cli, process, traces
//!                the binary: the command line (clap), `broker serve`,
//!                the OTLP export of its traces
//!   server       transports: Kafka handlers, HTTP (neither imports the
//!                other), connections, ports, metrics, health; shard.rs
//!                is the composition root, the one place naming every service
//!   coordinator, txn_coordinator
//!                the group and transaction coordinators (on groups/ and
//!                transactions/, sans-IO)
//!   replica      roles from the metadata, the ISR loop, follower fetchers
//!   partition    a shard's partitions: the table, roles, one interface
//!                (append-and-acknowledge, bounded read with long poll,
//!                epoch checks) and the per-partition fan-out
//!   cluster      this broker's metadata view, routing, controller link, lease
//!   security     logins (sasl), ACL decisions, TLS files, quotas (sans-IO)
//!   groups, transactions
//!                group membership and offsets, and the transaction
//!                coordinator's rules and records (sans-IO)
//!   config, data_dir, http_request, counters, open_files
//!                settings, the data directory's ownership, HTTP requests
//!                read within bounds, per-shard counters, the open-file limit
//!   kafka        the wire protocol: framing, bounds walkers, decoding
//!   runtime      invoke on a shard, clocks, bounded waits (no Kafka)
//! ```

#![warn(missing_docs)]

pub mod cli;
pub mod cluster;
pub mod config;
pub mod coordinator;
pub mod counters;
pub mod data_dir;
pub mod groups;
pub mod http_request;
pub mod kafka;
pub mod open_files;
pub mod partition;
pub mod process;
pub mod remote_store;
pub mod replica;
pub mod runtime;
pub mod security;
pub mod server;
pub mod share;
pub mod traces;
pub mod transactions;
pub mod txn_coordinator;
