//! Share groups (KIP-932), sans I/O: the per-partition state a share
//! group's consumers take records from one by one ([`partition`]).

pub mod partition;
