//! A TCP proxy that counts Kafka frames: requests started towards the
//! server and responses completed back, per connection, and the most
//! requests a connection ever had unanswered (pipelining shows as more
//! than one).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

/// The proxy; its threads end with the test process.
pub struct FrameCounter {
    /// Where clients connect.
    pub address: SocketAddr,
    upstream: Arc<Mutex<Option<SocketAddr>>>,
    most_unanswered: Arc<AtomicI64>,
}

impl FrameCounter {
    /// Listens on 127.0.0.1 (an ephemeral port); connections wait for
    /// [`FrameCounter::forward_to`].
    pub fn bind() -> FrameCounter {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let upstream = Arc::new(Mutex::new(None));
        let most_unanswered = Arc::new(AtomicI64::new(0));
        let (to, most) = (upstream.clone(), most_unanswered.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Some(server) = *to.lock().unwrap() else {
                    continue;
                };
                let most = most.clone();
                std::thread::spawn(move || relay(client, server, most));
            }
        });
        FrameCounter {
            address,
            upstream,
            most_unanswered,
        }
    }

    /// Where connections go from now on.
    pub fn forward_to(&self, server: SocketAddr) {
        *self.upstream.lock().unwrap() = Some(server);
    }

    /// The most requests one connection had sent and not yet had answered.
    pub fn most_unanswered(&self) -> i64 {
        self.most_unanswered.load(Ordering::SeqCst)
    }
}

fn relay(client: TcpStream, server: SocketAddr, most: Arc<AtomicI64>) {
    let Ok(server) = TcpStream::connect(server) else {
        return;
    };
    let unanswered = Arc::new(AtomicI64::new(0));
    let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let back = unanswered.clone();
    std::thread::spawn(move || {
        // Responses: one less unanswered as each completes.
        copy_frames(s2, c2, |_, done| {
            if done {
                back.fetch_sub(1, Ordering::SeqCst);
            }
        })
    });
    copy_frames(client, server, |started, _| {
        if started {
            let now = unanswered.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
        }
    });
}

/// Copies `from` to `to`, telling `frame(started, completed)` as frames
/// (a 4-byte length, then that many bytes) start and complete.
fn copy_frames(mut from: TcpStream, mut to: TcpStream, mut frame: impl FnMut(bool, bool)) {
    let mut buf = vec![0; 64 << 10];
    let (mut head, mut left) = (Vec::with_capacity(4), 0usize);
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 {
            break;
        }
        let mut bytes = &buf[..n];
        while !bytes.is_empty() {
            if left == 0 {
                let take = (4 - head.len()).min(bytes.len());
                head.extend_from_slice(&bytes[..take]);
                bytes = &bytes[take..];
                if head.len() == 4 {
                    left = i32::from_be_bytes(head[..].try_into().unwrap()) as usize;
                    head.clear();
                    frame(true, left == 0);
                }
                continue;
            }
            let take = left.min(bytes.len());
            left -= take;
            bytes = &bytes[take..];
            if left == 0 {
                frame(false, true);
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
