//! Tiered storage's part of the partition log, sans I/O: the remote log
//! of a partition as its manifest lists it ([`manifest`]). The object
//! store itself, and the uploads and reads, are the broker's.

pub mod manifest;
