//! Tiered storage's part of the partition log, sans I/O: the remote log
//! of a partition as its manifest lists it ([`manifest`]), what a log
//! offers for upload ([`sealed`]) and the batches a fetch takes from a
//! remote segment's bytes ([`read`]). The object store itself, and the
//! uploads and reads, are the broker's.

pub mod manifest;
pub mod read;
pub mod sealed;
