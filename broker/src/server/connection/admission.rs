//! Which client connections the broker takes: at most `max_connections`
//! in all and `max_connections_per_ip` from one address, so one client
//! opening connections without end (or a flood of idle ones) cannot use up
//! the process's file descriptors, which the logs, the HTTP port,
//! replication and the controller need too. Shared by every shard's
//! acceptor; its lock is taken when a connection opens or closes, never
//! per request.
//!
//! As Kafka's (KIP-402), the inter-broker listener of a broker with
//! several listeners is not held back by `max_connections`: clients
//! filling the broker cannot keep a follower from reconnecting to its
//! leader. Its connections still count, and still meet the per-address
//! limit. (With one listener, clients and brokers share it and the limit
//! holds for all: it is the only flood protection there.)

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::config::BrokerConfig;

/// The limits and the connections they count.
#[derive(Debug)]
pub struct Admission {
    max_total: usize,
    max_per_ip: usize,
    open: Mutex<Open>,
    /// Connections closed at once for a limit, since start.
    pub refused: AtomicU64,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The broker holds `max_connections`.
    Total,
    /// This address holds `max_connections_per_ip`.
    PerIp,
}

/// A connection counted against the limits until dropped.
#[derive(Debug)]
pub struct Admitted {
    admission: Arc<Admission>,
    ip: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self.admission.open.lock().expect("admission counts");
        open.total -= 1;
        if let Some(count) = open.per_ip.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.per_ip.remove(&self.ip);
            }
        }
    }
}

impl Admission {
    /// The Kafka port's limits of `config` (see
    /// [`BrokerConfig::connection_limits`]).
    pub fn new(config: &BrokerConfig) -> Arc<Admission> {
        let (max_total, max_per_ip) = config.connection_limits();
        Admission::with_limits(max_total, max_per_ip)
    }

    /// These limits: in all, and per address.
    pub fn with_limits(max_total: usize, max_per_ip: usize) -> Arc<Admission> {
        Arc::new(Admission {
            max_total,
            max_per_ip,
            open: Mutex::default(),
            refused: AtomicU64::new(0),
        })
    }

    /// Counts a connection from `ip`, or says which limit it would cross;
    /// `for_brokers`: it came in on a listener kept for brokers, which
    /// the limit in all does not hold back.
    pub fn admit(self: &Arc<Self>, ip: IpAddr, for_brokers: bool) -> Result<Admitted, Refusal> {
        let mut open = self.open.lock().expect("admission counts");
        let from_ip = open.per_ip.get(&ip).copied().unwrap_or(0);
        let refusal = if open.total >= self.max_total && !for_brokers {
            Some(Refusal::Total)
        } else if from_ip >= self.max_per_ip {
            Some(Refusal::PerIp)
        } else {
            None
        };
        if let Some(refusal) = refusal {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(refusal);
        }
        open.total += 1;
        open.per_ip.insert(ip, from_ip + 1);
        Ok(Admitted {
            admission: self.clone(),
            ip,
        })
    }

    /// Connections open now.
    #[cfg(test)]
    fn open(&self) -> usize {
        self.open.lock().expect("admission counts").total
    }

    /// The limits: (in all, per address).
    pub fn limits(&self) -> (usize, usize) {
        (self.max_total, self.max_per_ip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission(total: usize, per_ip: usize) -> Arc<Admission> {
        Arc::new(Admission {
            max_total: total,
            max_per_ip: per_ip,
            open: Mutex::default(),
            refused: AtomicU64::new(0),
        })
    }

    #[test]
    fn each_limit_refuses_past_it_and_a_closed_connection_frees_its_place() {
        let limits = admission(5, 2);
        let (a, b) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = limits.admit(a, false).unwrap();
        let _second = limits.admit(a, false).unwrap();
        assert_eq!(limits.admit(a, false).unwrap_err(), Refusal::PerIp);
        let others: Vec<_> = (0..2).map(|_| limits.admit(b, false).unwrap()).collect();
        assert_eq!(limits.open(), 4);
        let c: IpAddr = "10.0.0.3".parse().unwrap();
        let _fifth = limits.admit(c, false).unwrap();
        assert_eq!(limits.admit(c, false).unwrap_err(), Refusal::Total);
        drop(first);
        assert!(
            limits.admit(a, false).is_ok(),
            "a closed connection frees its place"
        );
        drop(others);
        assert_eq!(limits.open(), 2);
        assert_eq!(limits.refused.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn the_brokers_listener_passes_the_limit_in_all_but_not_the_one_per_address() {
        let limits = admission(2, 2);
        let (a, b) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let _clients: Vec<_> = (0..2).map(|_| limits.admit(a, false).unwrap()).collect();
        assert_eq!(limits.admit(b, false).unwrap_err(), Refusal::Total);
        let _broker = limits
            .admit(b, true)
            .expect("a broker past the limit in all");
        let _again = limits.admit(b, true).unwrap();
        assert_eq!(limits.admit(b, true).unwrap_err(), Refusal::PerIp);
        assert_eq!(limits.open(), 4, "broker connections count too");
    }
}
