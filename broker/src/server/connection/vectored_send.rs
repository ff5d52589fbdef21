//! The TCP stream under a TLS connection: its vectored writes go out in
//! one system call.
//!
//! rustls hands its encrypted records (16 KiB of plaintext each) to the
//! stream as one vectored write; glommio's stream writes only the first
//! buffer of such a write, so a 1 MiB Fetch answer cost 64 sends. Here
//! the records go out in one non-blocking `sendmsg` as far as the socket
//! takes them; when it takes nothing, glommio's own write waits for room.

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::{AsyncRead, AsyncWrite};
use glommio::net::TcpStream;
use nix::sys::socket::{sendmsg, MsgFlags};

/// Buffers per `sendmsg` (well below the kernel's IOV_MAX of 1024).
const MAX_BUFFERS: usize = 64;

/// A glommio TCP stream with gathered writes.
pub struct VectoredSend(TcpStream);

impl VectoredSend {
    pub fn new(stream: TcpStream) -> VectoredSend {
        VectoredSend(stream)
    }
}

impl AsRawFd for VectoredSend {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

impl AsyncRead for VectoredSend {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for VectoredSend {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let bufs = &bufs[..bufs.len().min(MAX_BUFFERS)];
        // MSG_DONTWAIT keeps the shard from blocking whatever the socket's
        // mode; MSG_NOSIGNAL turns a closed peer into an error, not SIGPIPE.
        let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
        match sendmsg::<()>(self.as_raw_fd(), bufs, &[], flags, None) {
            Ok(sent) => Poll::Ready(Ok(sent)),
            Err(nix::errno::Errno::EAGAIN) => {
                // Full: glommio's write of the first buffer waits for room
                // (and writes it once there is).
                let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| b);
                Pin::new(&mut self.0).poll_write(cx, first)
            }
            Err(e) => Poll::Ready(Err(e.into())),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_close(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[test]
    fn vectored_writes_arrive_whole_and_in_order_past_a_full_socket() {
        let executor = glommio::LocalExecutorBuilder::default().make().unwrap();
        executor.run(async {
            let listener = glommio::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let address = listener.local_addr().unwrap();
            let reader = glommio::spawn_local(async move {
                let mut stream = listener.accept().await.unwrap();
                // Reads only after a while: the writer's socket fills up
                // and its writes wait for room.
                glommio::timer::sleep(Duration::from_millis(100)).await;
                let mut all = Vec::new();
                stream.read_to_end(&mut all).await.unwrap();
                all
            });
            let mut writer = VectoredSend::new(TcpStream::connect(address).await.unwrap());
            // An empty socket takes a gathered write whole: more than its
            // first buffer (glommio's own vectored write sends that alone).
            let small = [[1u8; 1024], [2u8; 1024], [3u8; 1024], [4u8; 1024]];
            let slices: Vec<IoSlice> = small.iter().map(|b| IoSlice::new(b)).collect();
            assert_eq!(writer.write_vectored(&slices).await.unwrap(), 4096);
            // 32 MiB in 2000 buffers of uneven sizes: more than both
            // sockets' buffers hold, more buffers than one sendmsg takes.
            let buffers: Vec<Vec<u8>> = (0..2000)
                .map(|i| vec![(i % 251) as u8; 16 * 1024 + i % 997])
                .collect();
            let mut slices: Vec<IoSlice> = buffers.iter().map(|b| IoSlice::new(b)).collect();
            let mut rest = &mut slices[..];
            while !rest.is_empty() {
                let sent = writer.write_vectored(rest).await.unwrap();
                assert!(sent > 0);
                IoSlice::advance_slices(&mut rest, sent);
            }
            writer.close().await.unwrap();
            let received = reader.await;
            let sent: Vec<u8> = small.concat().into_iter().chain(buffers.concat()).collect();
            assert_eq!(received.len(), sent.len());
            assert!(received == sent, "bytes out of order");
        });
    }
}
