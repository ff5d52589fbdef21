//! How long an HTTP connection may keep the broker waiting, now that one
//! connection carries many requests (keep-alive): while no request is
//! being answered, the next must arrive within the read limit (an idle
//! connection closes then, and a client sending its head a byte at a time
//! cannot hold a connection slot); an answer the client does not take
//! within the write limit closes the connection too. A request being
//! answered (a long poll may take seconds) is not timed here: its body
//! has a limit of its own.
//!
//! A stream wrapper, so hyper (whose timers must be `Send`, which
//! glommio's are not) needs no timer: a read or write past its deadline
//! fails with `TimedOut`, and hyper closes the connection. A client that
//! had begun a request is told so first (408), as it was before hyper.

use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::{AsyncRead, AsyncWrite, Future};
use glommio::timer::Timer;

/// Whether the connection is answering a request, and since when it has
/// not been: shared by the stream and the service that answers.
#[derive(Clone)]
pub struct Answering(Rc<Cell<Option<Instant>>>);

impl Answering {
    /// A new connection: waiting for its first request since now.
    pub fn new() -> Answering {
        Answering(Rc::new(Cell::new(Some(Instant::now()))))
    }

    /// A request arrived: its answer is being made.
    pub fn started(&self) {
        self.0.set(None);
    }

    /// The answer is made: the next request is waited for from now.
    pub fn finished(&self) {
        self.0.set(Some(Instant::now()));
    }

    fn idle_since(&self) -> Option<Instant> {
        self.0.get()
    }
}

/// A stream whose reads (between requests) and writes have deadlines.
pub struct Deadlines<S> {
    stream: S,
    answering: Answering,
    read_max: Duration,
    write_max: Duration,
    /// When the current write began waiting for room.
    write_stalled_since: Option<Instant>,
    /// The timer armed for the nearest deadline, and that deadline.
    timer: Option<(Instant, Timer)>,
    /// Bytes of a request arrived while waiting since this instant (the
    /// current wait's own: the request is late, not absent).
    begun_under: Option<Instant>,
}

/// The answer to a request that did not arrive whole in time.
const LATE_REQUEST: &[u8] = b"HTTP/1.1 408 Request Timeout\r\n\
    content-type: application/json\r\ncontent-length: 64\r\nconnection: close\r\n\r\n\
    {\"error_code\":-1,\"message\":\"the request did not arrive in time\"}";

impl<S> Deadlines<S> {
    /// Wraps `stream`.
    pub fn new(stream: S, answering: Answering, read_max: Duration, write_max: Duration) -> Self {
        Deadlines {
            stream,
            answering,
            read_max,
            write_max,
            write_stalled_since: None,
            timer: None,
            begun_under: None,
        }
    }

    /// `Pending` until `deadline`, then a `TimedOut` error. One timer
    /// serves the nearest of the deadlines waited for; when it fires the
    /// task is woken to look at each again.
    fn wait_until(
        &mut self,
        deadline: Instant,
        cx: &mut Context<'_>,
        what: &str,
    ) -> Poll<io::Error> {
        let now = Instant::now();
        if now >= deadline {
            return Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, what.to_string()));
        }
        let nearer_armed = self
            .timer
            .as_ref()
            .is_some_and(|(armed, _)| *armed <= deadline && *armed > now);
        if !nearer_armed {
            self.timer = Some((deadline, Timer::new(deadline - now)));
        }
        let (_, timer) = self.timer.as_mut().expect("armed");
        if Pin::new(timer).poll(cx).is_ready() {
            self.timer = None;
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Deadlines<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let idle_since = this.answering.idle_since();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Pending => {}
            Poll::Ready(Ok(n)) => {
                if n > 0 && idle_since.is_some() {
                    this.begun_under = idle_since;
                }
                return Poll::Ready(Ok(n));
            }
            error => return error,
        }
        let Some(idle_since) = idle_since else {
            return Poll::Pending; // answering: hyper reads ahead; not timed
        };
        let deadline = idle_since + this.read_max;
        let late = this.wait_until(deadline, cx, "no request in time");
        // A 408 only to a client that began a request during this wait
        // (not to an idle keep-alive connection after its last answer).
        if late.is_ready() && this.begun_under == Some(idle_since) {
            // Best effort: the socket has room for so little unless the
            // client stopped reading too.
            let _ = Pin::new(&mut this.stream).poll_write(cx, LATE_REQUEST);
        }
        late.map(Err)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Deadlines<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.written(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.written(cx, polled)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.stream).poll_flush(cx) {
            Poll::Pending => this.stalled(cx).map_ok(|_| ()),
            ready => {
                this.write_stalled_since = None;
                ready
            }
        }
    }

    /// Closing writes too (TLS's close_notify): a peer that stopped
    /// reading cannot hold the connection past the write limit.
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.stream).poll_close(cx) {
            Poll::Pending => this.stalled(cx).map_ok(|_| ()),
            ready => {
                this.write_stalled_since = None;
                ready
            }
        }
    }
}

impl<S> Deadlines<S> {
    /// A write's outcome: one that wrote ends the stall, one that found
    /// no room waits under the write limit.
    fn written(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match polled {
            Poll::Pending => self.stalled(cx),
            ready => {
                self.write_stalled_since = None;
                ready
            }
        }
    }

    /// A write that found no room: it may wait until the write limit.
    fn stalled(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let since = *self.write_stalled_since.get_or_insert_with(Instant::now);
        self.wait_until(
            since + self.write_max,
            cx,
            "the answer was not taken in time",
        )
        .map(Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_late_answer_declares_its_body_length() {
        let text = std::str::from_utf8(LATE_REQUEST).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let declared = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap();
        assert_eq!(declared.parse::<usize>().unwrap(), body.len());
        assert!(serde_json::from_str::<serde_json::Value>(body).is_ok());
    }
}
