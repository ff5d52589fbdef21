//! The broker's listeners belong to one process. Every shard of this
//! process binds the Kafka port with SO_REUSEPORT (glommio sets it), and
//! so would another broker process started on the same ports: the kernel
//! would spread connections over both. So before any shard binds, the
//! kernel's table of TCP sockets (`/proc/net/tcp`, `/proc/net/tcp6`) is
//! read: a socket already listening on one of the broker's addresses
//! (the same port, and the same IP or a wildcard on either side) is
//! another process's, and the broker exits with "address in use", as a
//! second Kafka on the same port would.
//!
//! A listening socket no live process holds is a previous life's, still
//! being torn down: a SIGKILLed broker's io_uring releases its files
//! asynchronously, after the process is gone. Joining its SO_REUSEPORT
//! group then would send some connections to a socket nobody will ever
//! accept on (reset, as clients of a restarted broker saw); so the start
//! waits for it to go, up to [`ORPHAN_WAIT_MAX`].
//!
//! (Not a trial bind: without SO_REUSEPORT it fails on this broker's own
//! connections of a previous life still in TIME_WAIT, since glommio's
//! sockets lack SO_REUSEADDR. Two processes starting in the same
//! millisecond could still both pass; the data directory's lock stops the
//! common case, a second copy on the same directory, in any case.)

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use crate::config::BrokerConfig;

/// `st` of a listening socket in /proc/net/tcp.
const TCP_LISTEN: &str = "0A";
/// How long a start waits for a dead process's listener to be torn down.
pub const ORPHAN_WAIT_MAX: Duration = Duration::from_secs(5);

/// A listening socket: where, and its inode (to find its process).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Listening {
    address: SocketAddr,
    inode: u64,
}

/// Checks that no other process listens on the broker's addresses.
pub fn check_free(config: &BrokerConfig) -> std::io::Result<()> {
    let mut listeners: Vec<(String, String)> = Vec::new();
    // A controller-only node binds no Kafka listener.
    if !config.roles().controller_only() {
        let kafka = config.kafka_listeners().map_err(std::io::Error::other)?;
        listeners = (kafka.all.iter())
            .map(|l| (format!("listener {}", l.name), l.listen.to_string()))
            .collect();
        if config.listeners.is_empty() {
            listeners[0].0 = "kafka_listen".into();
        }
    }
    listeners.push(("http_listen".into(), config.http_listen.clone()));
    let voters = config.voters().map_err(std::io::Error::other)?;
    let own = voters.get(&config.node_id).map(ToString::to_string);
    // A voter's, or an observer's (set whenever it is not a voter); a
    // broker alone binds none.
    let listen = config.controller_listen.clone().or(own);
    if let Some(listen) = listen.filter(|_| !voters.is_empty()) {
        listeners.push(("controller_listen".into(), listen));
    }
    let mut wanted = Vec::new();
    for (name, address) in listeners {
        let address: SocketAddr = address
            .parse()
            .map_err(|e| std::io::Error::other(format!("{name} {address}: {e}")))?;
        // Port 0 is any free port: nobody else can hold it.
        if address.port() != 0 {
            wanted.push((name, address));
        }
    }
    // SO_REUSEPORT would let two of its own ports share connections.
    for (i, (name, address)) in wanted.iter().enumerate() {
        if let Some((other, _)) = wanted[i + 1..].iter().find(|(_, a)| overlaps(*a, *address)) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("{name} {address} and {other} share a port"),
            ));
        }
    }
    let started = Instant::now();
    loop {
        let listening = listening_sockets();
        let taken = wanted.iter().find_map(|(name, address)| {
            let held = listening.iter().find(|l| overlaps(l.address, *address))?;
            Some((name, address, held.inode))
        });
        let Some((name, address, inode)) = taken else {
            return Ok(());
        };
        let in_use = |by: String| {
            Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("{name} {address}: address in use ({by})"),
            ))
        };
        if let Some(pid) = owner_of(inode) {
            return in_use(format!("process {pid} listens there"));
        }
        if started.elapsed() > ORPHAN_WAIT_MAX {
            return in_use("another process listens there".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The process holding socket `inode`, if one is alive and visible to us.
fn owner_of(inode: u64) -> Option<u32> {
    let link = format!("socket:[{inode}]");
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|process| {
            let pid: u32 = process.file_name().to_str()?.parse().ok()?;
            let fds = std::fs::read_dir(process.path().join("fd")).ok()?;
            fds.flatten()
                .any(|fd| {
                    std::fs::read_link(fd.path())
                        .is_ok_and(|target| target.as_os_str() == link.as_str())
                })
                .then_some(pid)
        })
}

/// Whether a socket listening on `held` takes connections meant for `wanted`.
fn overlaps(held: SocketAddr, wanted: SocketAddr) -> bool {
    if held.port() != wanted.port() {
        return false;
    }
    let (held, wanted) = (held.ip(), wanted.ip());
    // A v6 wildcard is dual-stack by default: it takes IPv4 too.
    held.is_unspecified() || wanted.is_unspecified() || unmapped(held) == unmapped(wanted)
}

fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Every listening TCP socket on this machine (none if /proc is missing).
fn listening_sockets() -> Vec<Listening> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .flat_map(|table| parse_listening(&table))
        .collect()
}

/// The listening sockets of a /proc/net/tcp{,6} table.
fn parse_listening(table: &str) -> Vec<Listening> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
            if *state != TCP_LISTEN {
                return None;
            }
            Some(Listening {
                address: parse_address(local)?,
                inode: inode.parse().ok()?,
            })
        })
        .collect()
}

/// `0100007F:2382` (IPv4) or 32 hex digits and a port (IPv6), as the
/// kernel prints them: each 32-bit word in host (little-endian) order.
fn parse_address(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |hex: &str| u32::from_str_radix(hex, 16).ok().map(u32::to_le_bytes);
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(ip)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_mut(4).enumerate() {
                chunk.copy_from_slice(&word(ip.get(8 * i..8 * i + 8)?)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_table_is_read_as_addresses() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when \
            retrnsmt   uid  timeout inode\n\
            0: 0100007F:2382 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 4242 1\n\
            1: 0100007F:2383 0100007F:9999 01 00000000:00000000 00:00000000 00000000 0 0 4343 1\n";
        let listening = parse_listening(table);
        assert_eq!(listening.len(), 1);
        assert_eq!(
            listening[0].address,
            "127.0.0.1:9090".parse::<SocketAddr>().unwrap()
        );
        assert_eq!(listening[0].inode, 4242);
        let v6 = "  sl local rem st\n0: 00000000000000000000000000000000:1F90 \
            00000000000000000000000000000000:0000 0A 0 0 0 0 0 77 1\n";
        let listening = parse_listening(v6);
        assert_eq!(
            listening[0].address,
            "[::]:8080".parse::<SocketAddr>().unwrap()
        );
    }

    #[test]
    fn a_listener_on_the_same_port_overlaps_unless_both_ips_differ() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(overlaps(a("0.0.0.0:9092"), a("127.0.0.1:9092")));
        assert!(overlaps(a("127.0.0.1:9092"), a("0.0.0.0:9092")));
        assert!(overlaps(a("[::]:9092"), a("127.0.0.1:9092")));
        assert!(!overlaps(a("127.0.0.2:9092"), a("127.0.0.1:9092")));
        assert!(!overlaps(a("127.0.0.1:9093"), a("127.0.0.1:9092")));
    }

    #[test]
    fn a_port_another_socket_listens_on_is_refused_by_name() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let config = BrokerConfig {
            kafka_listen: held.local_addr().unwrap().to_string(),
            http_listen: "127.0.0.1:0".into(),
            ..BrokerConfig::default()
        };
        let refused = check_free(&config).unwrap_err().to_string();
        assert!(
            refused.contains("kafka_listen")
                && refused.contains(&format!(
                    "address in use (process {} listens there)",
                    std::process::id()
                )),
            "{refused}"
        );
        drop(held);
        check_free(&config).unwrap();
    }

    #[test]
    fn two_of_the_brokers_own_ports_on_one_port_are_refused() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = BrokerConfig {
            listeners: vec![
                format!("INTERNAL://127.0.0.1:{port}"),
                format!("EXTERNAL://0.0.0.0:{port}"),
            ],
            listener_security_protocol_map: vec![
                "INTERNAL:PLAINTEXT".into(),
                "EXTERNAL:PLAINTEXT".into(),
            ],
            http_listen: "127.0.0.1:0".into(),
            ..BrokerConfig::default()
        };
        let refused = check_free(&config).unwrap_err().to_string();
        assert!(refused.contains("share a port"), "{refused}");
    }
}
