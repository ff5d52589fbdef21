//! The broker: its configuration, the Kafka protocol handling, the
//! thread-per-core server, and the admin subcommands.

#![warn(missing_docs)]

pub mod admin_cli;
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
pub mod partition;
pub mod process;
pub mod replica;
pub mod runtime;
pub mod server;
