//! A client connection's stream taken apart between two requests so that
//! another shard (another thread) can serve it: its socket, and over TLS
//! its session (keys, sequence numbers, and whatever it has read from the
//! socket but not yet handed out), which rustls lets cross threads.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};

use futures::{AsyncRead, AsyncWrite};
use futures_rustls::server::TlsStream;
use futures_rustls::TlsAcceptor;
use glommio::net::TcpStream;
use rustls::server::ServerConnection;

use super::direct_read::DirectRead;
use super::vectored_send::VectoredSend;

/// A stream apart: sendable to another thread.
pub struct Detached {
    socket: OwnedFd,
    session: Option<Box<ServerConnection>>,
}

impl Detached {
    /// Whether it speaks TLS (is put back together as a TLS stream).
    pub fn is_tls(&self) -> bool {
        self.session.is_some()
    }
}

/// A client stream that can be taken apart and put back together, on its
/// own shard or another. Only between two requests: nothing half-read by
/// the caller, every answer flushed.
pub trait Movable: AsyncRead + AsyncWrite + DirectRead + Unpin + Sized {
    /// Takes it apart; on failure (no descriptor left to copy its socket
    /// into) gives it back whole.
    fn detach(self) -> Result<Detached, (Self, std::io::Error)>;

    /// Puts a stream detached from a `Self` back together on this thread;
    /// over TLS, `tls` is the acceptor its session was made by.
    fn attach(
        detached: Detached,
        tls: Option<&TlsAcceptor>,
    ) -> impl std::future::Future<Output = std::io::Result<Self>>;
}

/// A new descriptor of `stream`'s socket: the stream itself is dropped
/// (closing its own descriptor, and glommio's state of it) once apart.
fn copy_socket(stream: &impl AsRawFd) -> std::io::Result<OwnedFd> {
    // SAFETY: the descriptor is the open socket of `stream`, which the
    // caller holds for the duration of this borrow.
    unsafe { BorrowedFd::borrow_raw(stream.as_raw_fd()) }.try_clone_to_owned()
}

fn stream_of(socket: OwnedFd) -> TcpStream {
    // SAFETY: the descriptor is ours alone (a copy made to move it).
    unsafe { TcpStream::from_raw_fd(socket.into_raw_fd()) }
}

impl Movable for TcpStream {
    fn detach(self) -> Result<Detached, (Self, std::io::Error)> {
        match copy_socket(&self) {
            Ok(socket) => Ok(Detached {
                socket,
                session: None,
            }),
            Err(e) => Err((self, e)),
        }
    }

    async fn attach(detached: Detached, _: Option<&TlsAcceptor>) -> std::io::Result<Self> {
        if detached.is_tls() {
            return Err(std::io::Error::other("a TLS session for a plain stream"));
        }
        Ok(stream_of(detached.socket))
    }
}

impl Movable for TlsStream<VectoredSend> {
    fn detach(self) -> Result<Detached, (Self, std::io::Error)> {
        match copy_socket(self.get_ref().0) {
            Ok(socket) => {
                let (_, session) = self.into_inner();
                Ok(Detached {
                    socket,
                    session: Some(Box::new(session)),
                })
            }
            Err(e) => Err((self, e)),
        }
    }

    async fn attach(detached: Detached, tls: Option<&TlsAcceptor>) -> std::io::Result<Self> {
        let (Some(mut session), Some(acceptor)) = (detached.session, tls) else {
            return Err(std::io::Error::other("a TLS stream without its session"));
        };
        // futures-rustls builds a stream only from a new session: the
        // moved one takes its place before the first poll, and the
        // "handshake" of a session past its handshake only flushes what it
        // holds to send (usually nothing: answers are flushed when sent;
        // a request answered with nothing may have left output queued).
        let stream = VectoredSend::new(stream_of(detached.socket));
        acceptor
            .accept_with(stream, move |fresh| std::mem::swap(fresh, &mut *session))
            .await
    }
}
