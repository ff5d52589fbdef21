//! A TCP proxy in front of a server, for fault tests: it passes bytes
//! both ways, or (switched at any time, open connections included)
//! refuses every connection (the server is down), answers every request
//! with HTTP 500 (the server is failing) or passes bytes late (the server
//! is slow).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Fault {
    /// Bytes pass both ways.
    None = 0,
    /// Connections are closed at once.
    Down = 1,
    /// Every request gets `500 Internal Server Error`.
    Http500 = 2,
    /// Bytes pass both ways, each read's worth [`SLOW_DELAY`] late.
    Slow = 3,
}

/// How late a slow server's bytes are.
pub const SLOW_DELAY: Duration = Duration::from_millis(250);

/// The proxy (its threads end with the test process).
pub struct FaultProxy {
    /// Where clients connect.
    pub address: SocketAddr,
    fault: Arc<AtomicU8>,
}

impl FaultProxy {
    /// A proxy on 127.0.0.1 (an ephemeral port) to `upstream`.
    pub fn start(upstream: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let fault = Arc::new(AtomicU8::new(Fault::None as u8));
        let shared = fault.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let fault = shared.clone();
                std::thread::spawn(move || serve(client, upstream, &fault));
            }
        });
        FaultProxy { address, fault }
    }

    /// Switches the fault (open connections too: they are dropped when
    /// they next carry bytes).
    pub fn set(&self, fault: Fault) {
        self.fault.store(fault as u8, Ordering::SeqCst);
    }
}

fn current(fault: &AtomicU8) -> Fault {
    match fault.load(Ordering::SeqCst) {
        1 => Fault::Down,
        2 => Fault::Http500,
        3 => Fault::Slow,
        _ => Fault::None,
    }
}

fn serve(client: TcpStream, upstream: SocketAddr, fault: &Arc<AtomicU8>) {
    match current(fault) {
        Fault::Down => {}
        Fault::Http500 => answer_500(client),
        Fault::None | Fault::Slow => {
            let Ok(server) = TcpStream::connect(upstream) else {
                return;
            };
            let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let back = fault.clone();
            std::thread::spawn(move || pipe(s2, c2, &back));
            pipe(client.try_clone().unwrap(), server, fault);
            let _ = client.shutdown(Shutdown::Both);
        }
    }
}

/// Copies `from` to `to` until either closes or the server goes down or
/// fails; late while it is slow.
fn pipe(mut from: TcpStream, mut to: TcpStream, fault: &AtomicU8) {
    let _ = from.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = vec![0; 64 << 10];
    loop {
        if matches!(current(fault), Fault::Down | Fault::Http500) {
            break;
        }
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if current(fault) == Fault::Slow {
                    std::thread::sleep(SLOW_DELAY);
                }
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// Reads a request's head and answers 500, closing the connection.
fn answer_500(mut client: TcpStream) {
    let _ = client.set_read_timeout(Some(Duration::from_secs(2)));
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 64 << 10 {
        match client.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    let _ = client.write_all(
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    let _ = client.shutdown(Shutdown::Both);
}
