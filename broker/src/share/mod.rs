//! Share groups (KIP-932), sans I/O: the per-partition state a share
//! group's consumers take records from one by one ([`partition`]), and
//! the share sessions their ShareFetch and ShareAcknowledge requests
//! form with a broker ([`sessions`]), and which records a group reading
//! committed never gets ([`aborted`]).

pub mod aborted;
pub mod partition;
pub mod sessions;
