//! Three ways to send one loopback TCP stream of 1 MiB blocks, side by
//! side: `write(2)`, io_uring's `send`, and io_uring's zero-copy `send_zc`
//! (with the kernel's report of copied sends: Linux 6.2+). It answers whether the broker's fetch answers would gain
//! from zero-copy sends on this machine: the bytes per second, each side's
//! CPU per GB, and how many zero-copy sends the kernel reported as copied
//! after all (it copies every zero-copy send delivered to a local socket,
//! so on loopback the answer is all of them).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, types, IoUring};

use crate::baseline::thread_cpu_seconds;

/// Bytes per send.
const BLOCK: usize = 1 << 20;
/// Buffers the sender rotates through: a zero-copy send's buffer is reused
/// only once the kernel has let go of it.
const BUFFERS: usize = 4;
/// `IORING_SEND_ZC_REPORT_USAGE`: the notification says whether the
/// kernel copied the data after all.
const REPORT_USAGE: u16 = 1 << 3;
/// `IORING_NOTIF_USAGE_ZC_COPIED` in a notification's result.
const USAGE_COPIED: u32 = 1 << 31;

/// How the sender hands its blocks to the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendMode {
    /// Blocking `write(2)`, as the TCP reference does.
    Write,
    /// io_uring `IORING_OP_SEND`, one in flight.
    UringSend,
    /// io_uring `IORING_OP_SEND_ZC`, one in flight.
    UringSendZc,
}

impl SendMode {
    /// Every mode, in the order they are reported.
    pub const ALL: [SendMode; 3] = [SendMode::Write, SendMode::UringSend, SendMode::UringSendZc];

    /// The mode's name in the report.
    pub fn name(self) -> &'static str {
        match self {
            SendMode::Write => "write",
            SendMode::UringSend => "io_uring send",
            SendMode::UringSendZc => "io_uring send_zc",
        }
    }
}

/// What one run measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct SendFigures {
    /// Bytes the sender sent.
    pub sent: u64,
    /// Bytes the receiver read.
    pub received: u64,
    /// From the first send to the receiver's end of stream.
    pub seconds: f64,
    /// The sending thread's user+system CPU seconds.
    pub sender_cpu: f64,
    /// The receiving thread's user+system CPU seconds.
    pub receiver_cpu: f64,
    /// Zero-copy notifications (one per zero-copy send).
    pub notifications: u64,
    /// Of those, the sends the kernel copied after all.
    pub copied: u64,
}

impl SendFigures {
    /// Bytes per second received.
    pub fn bytes_per_s(&self) -> f64 {
        self.received as f64 / self.seconds
    }

    /// CPU seconds per GB received, sender and receiver.
    pub fn cpu_per_gb(&self) -> (f64, f64) {
        let gb = self.received as f64 / 1e9;
        (self.sender_cpu / gb, self.receiver_cpu / gb)
    }
}

/// Sends on one loopback stream in `mode` for `duration`.
pub fn measure(mode: SendMode, duration: Duration) -> std::io::Result<SendFigures> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let receiver = std::thread::spawn(move || receive_all(listener));
    let mut stream = TcpStream::connect(address)?;
    let buffers: Vec<Vec<u8>> = (0..BUFFERS).map(|i| vec![i as u8 + 1; BLOCK]).collect();
    let cpu_before = thread_cpu_seconds()?;
    let started = Instant::now();
    let mut figures = match mode {
        SendMode::Write => write_blocks(&mut stream, &buffers, started + duration)?,
        SendMode::UringSend | SendMode::UringSendZc => {
            let zero_copy = mode == SendMode::UringSendZc;
            uring_send_blocks(&stream, &buffers, started + duration, zero_copy)?
        }
    };
    figures.sender_cpu = thread_cpu_seconds()? - cpu_before;
    drop(stream);
    let (received, receiver_cpu) = receiver
        .join()
        .map_err(|_| std::io::Error::other("receiver panicked"))??;
    figures.seconds = started.elapsed().as_secs_f64();
    figures.received = received;
    figures.receiver_cpu = receiver_cpu;
    Ok(figures)
}

/// Reads the one connection to its end: bytes read and the thread's CPU.
fn receive_all(listener: TcpListener) -> std::io::Result<(u64, f64)> {
    let (mut stream, _) = listener.accept()?;
    let cpu_before = thread_cpu_seconds()?;
    let mut buffer = vec![0u8; BLOCK];
    let mut total = 0u64;
    loop {
        match stream.read(&mut buffer)? {
            0 => return Ok((total, thread_cpu_seconds()? - cpu_before)),
            n => total += n as u64,
        }
    }
}

fn write_blocks(
    stream: &mut TcpStream,
    buffers: &[Vec<u8>],
    until: Instant,
) -> std::io::Result<SendFigures> {
    let mut figures = SendFigures::default();
    for buffer in buffers.iter().cycle() {
        if Instant::now() >= until {
            break;
        }
        stream.write_all(buffer)?;
        figures.sent += buffer.len() as u64;
    }
    Ok(figures)
}

/// io_uring sends, one in flight (a stream's bytes stay in order), each
/// block resubmitted from where a short send stopped. Zero-copy: a buffer
/// is sent again only after its notification.
fn uring_send_blocks(
    stream: &TcpStream,
    buffers: &[Vec<u8>],
    until: Instant,
    zero_copy: bool,
) -> std::io::Result<SendFigures> {
    let mut ring = IoUring::new(8)?;
    let socket = types::Fd(stream.as_raw_fd());
    let mut figures = SendFigures::default();
    // Completions still owed per buffer: the send's, and its notification.
    let mut owed = vec![0u32; buffers.len()];
    let mut next = 0usize;
    let mut sending: Option<(usize, usize)> = None;
    loop {
        if sending.is_none() && Instant::now() < until && owed[next] == 0 {
            sending = Some((next, 0));
            push_send(&mut ring, socket, &buffers[next], 0, next, zero_copy)?;
            owed[next] += 1;
        }
        let stopped = sending.is_none() && Instant::now() >= until;
        if stopped && owed.iter().all(|&n| n == 0) {
            return Ok(figures);
        }
        match ring.submit_and_wait(1) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            result => result?,
        };
        let completions: Vec<cqueue::Entry> = ring.completion().collect();
        for completion in completions {
            let index = completion.user_data() as usize;
            owed[index] -= 1;
            if cqueue::notif(completion.flags()) {
                figures.notifications += 1;
                if completion.result() as u32 & USAGE_COPIED != 0 {
                    figures.copied += 1;
                }
                continue;
            }
            if completion.result() < 0 {
                return Err(std::io::Error::from_raw_os_error(-completion.result()));
            }
            if cqueue::more(completion.flags()) {
                owed[index] += 1;
            }
            figures.sent += completion.result() as u64;
            let (_, offset) = sending
                .as_mut()
                .expect("a completion of the send in flight");
            *offset += completion.result() as usize;
            if *offset < BLOCK {
                push_send(
                    &mut ring,
                    socket,
                    &buffers[index],
                    *offset,
                    index,
                    zero_copy,
                )?;
                owed[index] += 1;
            } else {
                sending = None;
                next = (next + 1) % buffers.len();
            }
        }
    }
}

fn push_send(
    ring: &mut IoUring,
    socket: types::Fd,
    buffer: &[u8],
    offset: usize,
    index: usize,
    zero_copy: bool,
) -> std::io::Result<()> {
    let rest = &buffer[offset..];
    let entry = if zero_copy {
        opcode::SendZc::new(socket, rest.as_ptr(), rest.len() as u32)
            .zc_flags(REPORT_USAGE)
            .build()
    } else {
        opcode::Send::new(socket, rest.as_ptr(), rest.len() as u32).build()
    };
    // SAFETY: the entry points into `buffer`, which the caller keeps alive
    // until every completion (and zero-copy notification) came back. On an
    // error return the ring is dropped first, and closing it cancels what
    // is in flight; a send still reading a freed buffer then sends garbage
    // or fails, and never writes to it.
    unsafe { ring.submission().push(&entry.user_data(index as u64)) }
        .map_err(|_| std::io::Error::other("io_uring submission queue full"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_delivers_what_it_sent() {
        for mode in SendMode::ALL {
            let figures = match measure(mode, Duration::from_millis(100)) {
                Ok(figures) => figures,
                // A kernel without send_zc or its usage report (before
                // 6.2) refuses the opcode or the flag.
                Err(e)
                    if mode == SendMode::UringSendZc
                        && matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EOPNOTSUPP)) =>
                {
                    eprintln!("send_zc unavailable: {e}");
                    continue;
                }
                Err(e) => panic!("{}: {e}", mode.name()),
            };
            assert!(figures.sent >= BLOCK as u64, "{}: {figures:?}", mode.name());
            assert_eq!(figures.sent, figures.received, "{}", mode.name());
            assert!(figures.bytes_per_s() > 0.0);
            if mode == SendMode::UringSendZc {
                // One notification per send (short sends included), each
                // reported copied or not.
                assert!(figures.notifications >= figures.sent / BLOCK as u64);
                assert!(figures.copied <= figures.notifications);
            } else {
                assert_eq!(figures.notifications, 0);
            }
        }
    }
}
