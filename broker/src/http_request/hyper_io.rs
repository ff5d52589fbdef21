//! hyper reads and writes through its own I/O traits; the broker's
//! streams (glommio's TCP, rustls over it) implement the `futures` ones.
//! This adapter joins the two without unsafe code: a read fills a small
//! buffer of its own and copies it into hyper's, which costs a copy the
//! HTTP API (JSON, metrics) can afford.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::{AsyncRead, AsyncWrite};
use hyper::rt::ReadBufCursor;

/// The most one read copies.
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// A `futures` stream as hyper's I/O.
pub struct HyperIo<S> {
    stream: S,
    chunk: Box<[u8]>,
}

impl<S> HyperIo<S> {
    /// Wraps `stream`.
    pub fn new(stream: S) -> HyperIo<S> {
        HyperIo {
            stream,
            chunk: vec![0; READ_CHUNK_BYTES].into_boxed_slice(),
        }
    }

    /// The stream inside.
    pub fn get_ref(&self) -> &S {
        &self.stream
    }
}

impl<S: AsyncRead + Unpin> hyper::rt::Read for HyperIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let room = buf.remaining().min(this.chunk.len());
        match Pin::new(&mut this.stream).poll_read(cx, &mut this.chunk[..room]) {
            Poll::Ready(Ok(n)) => {
                buf.put_slice(&this.chunk[..n]);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncWrite + Unpin> hyper::rt::Write for HyperIo<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_close(cx)
    }
}
