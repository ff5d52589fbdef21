//! A TCP proxy that counts Kafka frames: requests started towards the
//! server and responses completed back, per connection, and the most
//! requests a connection ever had unanswered (pipelining shows as more
//! than one), and the requests sent as an answer came while others were
//! still out (a window kept full, not drained). It can also cut the connection carrying the n-th request,
//! before passing that request on (a connection lost mid-pipeline).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The proxy; its threads end with the test process.
pub struct FrameCounter {
    /// Where clients connect.
    pub address: SocketAddr,
    upstream: Arc<Mutex<Option<SocketAddr>>>,
    most_unanswered: Arc<AtomicI64>,
    requests: Arc<AtomicI64>,
    refills: Arc<AtomicI64>,
    cut_at: Arc<AtomicI64>,
    pace_ms: Arc<AtomicU64>,
    largest_request: Arc<AtomicI64>,
}

impl FrameCounter {
    /// Listens on 127.0.0.1 (an ephemeral port); connections wait for
    /// [`FrameCounter::forward_to`].
    pub fn bind() -> FrameCounter {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let upstream = Arc::new(Mutex::new(None));
        let most_unanswered = Arc::new(AtomicI64::new(0));
        let requests = Arc::new(AtomicI64::new(0));
        let refills = Arc::new(AtomicI64::new(0));
        let cut_at = Arc::new(AtomicI64::new(0));
        let pace_ms = Arc::new(AtomicU64::new(0));
        let largest_request = Arc::new(AtomicI64::new(0));
        let counts = Counts {
            most: most_unanswered.clone(),
            requests: requests.clone(),
            refills: refills.clone(),
            cut_at: cut_at.clone(),
            pace_ms: pace_ms.clone(),
            largest_request: largest_request.clone(),
        };
        let to = upstream.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Some(server) = *to.lock().unwrap() else {
                    continue;
                };
                let counts = counts.clone();
                std::thread::spawn(move || relay(client, server, counts));
            }
        });
        FrameCounter {
            address,
            upstream,
            most_unanswered,
            requests,
            refills,
            cut_at,
            pace_ms,
            largest_request,
        }
    }

    /// Passes each answer on `pace` after the one before (as a server
    /// answering one request at a time, each taking that long would):
    /// a client's window then refills answer by answer.
    pub fn pace_answers(&self, pace: std::time::Duration) {
        self.pace_ms
            .store(pace.as_millis() as u64, Ordering::SeqCst);
    }

    /// Cuts the connection that carries the `n`-th request from now on
    /// (counted over every connection), before passing it on.
    pub fn cut_at_request(&self, n: i64) {
        let now = self.requests.load(Ordering::SeqCst);
        self.cut_at.store(now + n, Ordering::SeqCst);
    }

    /// Requests seen, over every connection.
    pub fn requests(&self) -> i64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// Where connections go from now on.
    pub fn forward_to(&self, server: SocketAddr) {
        *self.upstream.lock().unwrap() = Some(server);
    }

    /// Requests a connection sent after an answer came back (since its
    /// previous request) while others of its requests were still
    /// unanswered: a client that sends its next request as each answer
    /// comes does this; one that reads every answer of a group of
    /// requests before sending the next group never does.
    pub fn refills(&self) -> i64 {
        self.refills.load(Ordering::SeqCst)
    }

    /// The largest request seen, in bytes (its size prefix excluded).
    pub fn largest_request(&self) -> i64 {
        self.largest_request.load(Ordering::SeqCst)
    }

    /// The most requests one connection had sent and not yet had answered.
    pub fn most_unanswered(&self) -> i64 {
        self.most_unanswered.load(Ordering::SeqCst)
    }
}

/// What every connection counts into.
#[derive(Clone)]
struct Counts {
    most: Arc<AtomicI64>,
    requests: Arc<AtomicI64>,
    refills: Arc<AtomicI64>,
    cut_at: Arc<AtomicI64>,
    pace_ms: Arc<AtomicU64>,
    largest_request: Arc<AtomicI64>,
}

fn relay(client: TcpStream, server: SocketAddr, counts: Counts) {
    let Ok(server) = TcpStream::connect(server) else {
        return;
    };
    let unanswered = Arc::new(AtomicI64::new(0));
    let answered_since_request = Arc::new(AtomicBool::new(false));
    let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let (back, answered) = (unanswered.clone(), answered_since_request.clone());
    let pace = std::time::Duration::from_millis(counts.pace_ms.load(Ordering::SeqCst));
    std::thread::spawn(move || {
        // Responses: one less unanswered as each completes.
        let paced = (!pace.is_zero()).then_some(pace);
        copy_frames(s2, c2, paced, |_, done| {
            if done {
                back.fetch_sub(1, Ordering::SeqCst);
                answered.store(true, Ordering::SeqCst);
            }
            true
        })
    });
    copy_frames(client, server, None, |started, _| {
        let Some(size) = started else {
            return true;
        };
        counts
            .largest_request
            .fetch_max(size as i64, Ordering::SeqCst);
        let nth = counts.requests.fetch_add(1, Ordering::SeqCst) + 1;
        if nth == counts.cut_at.load(Ordering::SeqCst) {
            return false;
        }
        let now = unanswered.fetch_add(1, Ordering::SeqCst) + 1;
        counts.most.fetch_max(now, Ordering::SeqCst);
        if answered_since_request.swap(false, Ordering::SeqCst) && now > 1 {
            counts.refills.fetch_add(1, Ordering::SeqCst);
        }
        true
    });
}

/// Copies `from` to `to`, telling `frame(started, completed)` as frames
/// (a 4-byte length, then that many bytes) start (`started`: its length)
/// and complete; a frame
/// it answers false for cuts the connection there (the chunk holding it
/// is not passed on). `paced`: each completed frame is passed on alone,
/// that long after the one before.
fn copy_frames(
    mut from: TcpStream,
    mut to: TcpStream,
    paced: Option<std::time::Duration>,
    mut frame: impl FnMut(Option<usize>, bool) -> bool,
) {
    let mut buf = vec![0; 64 << 10];
    let (mut head, mut left) = (Vec::with_capacity(4), 0usize);
    'copy: while let Ok(n) = from.read(&mut buf) {
        if n == 0 {
            break;
        }
        let mut written = 0;
        let mut bytes = &buf[..n];
        while !bytes.is_empty() {
            if left == 0 {
                let take = (4 - head.len()).min(bytes.len());
                head.extend_from_slice(&bytes[..take]);
                bytes = &bytes[take..];
                if head.len() == 4 {
                    left = i32::from_be_bytes(head[..].try_into().unwrap()) as usize;
                    head.clear();
                    if !frame(Some(left), left == 0) {
                        break 'copy;
                    }
                }
                continue;
            }
            let take = left.min(bytes.len());
            left -= take;
            bytes = &bytes[take..];
            if left == 0 {
                frame(None, true);
                if let Some(pace) = paced {
                    std::thread::sleep(pace);
                    let end = n - bytes.len();
                    if to.write_all(&buf[written..end]).is_err() {
                        break 'copy;
                    }
                    written = end;
                }
            }
        }
        if to.write_all(&buf[written..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
