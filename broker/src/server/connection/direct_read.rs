//! Reading a plain TCP socket straight into a connection's frame buffer.
//!
//! A read through the stream fills a chunk that is then copied into the
//! frame buffer: 8% of a producer's broker time (docs/benchmarks.md, run
//! 12). When the socket already holds bytes (the rest of a large request,
//! or the next pipelined ones) a non-blocking `recv` puts them straight
//! into the buffer's spare room; only an empty socket is waited on through
//! the stream.

use std::os::fd::AsRawFd;

use bytes::BytesMut;
use futures_rustls::server::TlsStream;
use glommio::net::TcpStream;

use super::vectored_send::VectoredSend;

/// A client stream that may be read without waiting, into a buffer.
pub trait DirectRead {
    /// Whether `read_now` can read at all: then a wait on an empty socket
    /// needs to read only its first bytes through the stream, the rest
    /// going straight into the frame buffer.
    const READS_DIRECTLY: bool;

    /// Reads what the socket holds now into `buffer`'s spare room, at
    /// most `limit` bytes: None when it holds nothing (or the stream
    /// cannot: TLS decrypts first); Some(Ok(0)) at the end of the stream.
    fn read_now(&mut self, buffer: &mut BytesMut, limit: usize) -> Option<std::io::Result<usize>>;
}

impl DirectRead for TcpStream {
    const READS_DIRECTLY: bool = true;

    fn read_now(&mut self, buffer: &mut BytesMut, limit: usize) -> Option<std::io::Result<usize>> {
        let room = buffer.spare_capacity_mut();
        let room_len = limit.min(room.len());
        let room = &mut room[..room_len];
        if room.is_empty() {
            return None;
        }
        // SAFETY: recv writes at most `room.len()` bytes into the spare
        // capacity it is given (never reads it); `set_len` below covers
        // only what it wrote.
        let read = unsafe {
            libc::recv(
                self.as_raw_fd(),
                room.as_mut_ptr().cast(),
                room.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if read < 0 {
            let error = std::io::Error::last_os_error();
            return match error.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => None,
                _ => Some(Err(error)),
            };
        }
        let read = read as usize;
        // SAFETY: the kernel initialized `read` bytes of the spare room.
        unsafe { buffer.set_len(buffer.len() + read) };
        Some(Ok(read))
    }
}

impl DirectRead for TlsStream<VectoredSend> {
    const READS_DIRECTLY: bool = false;

    fn read_now(&mut self, _: &mut BytesMut, _: usize) -> Option<std::io::Result<usize>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::AsyncWriteExt;

    use super::*;

    #[test]
    fn reads_what_is_there_without_waiting_and_the_end_of_the_stream() {
        let executor = glommio::LocalExecutorBuilder::default().make().unwrap();
        executor.run(async {
            let listener = glommio::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let address = listener.local_addr().unwrap();
            let mut writer = TcpStream::connect(address).await.unwrap();
            let mut reader = listener.accept().await.unwrap();
            let mut buffer = BytesMut::with_capacity(64);
            buffer.extend_from_slice(b"kept ");
            assert!(
                reader.read_now(&mut buffer, 64).is_none(),
                "nothing sent yet"
            );
            writer.write_all(b"first, then").await.unwrap();
            assert_eq!(
                read_when_there(&mut reader, &mut buffer, 5).await,
                5,
                "the limit"
            );
            assert_eq!(&buffer[..], b"kept first");
            assert_eq!(read_when_there(&mut reader, &mut buffer, 64).await, 6);
            assert_eq!(&buffer[..], b"kept first, then");
            writer.close().await.unwrap();
            drop(writer);
            assert_eq!(
                read_when_there(&mut reader, &mut buffer, 64).await,
                0,
                "the end"
            );
            assert_eq!(&buffer[..], b"kept first, then");
        });
    }

    /// read_now until the socket holds something (at most a second).
    async fn read_when_there(reader: &mut TcpStream, buffer: &mut BytesMut, limit: usize) -> usize {
        for _ in 0..100 {
            if let Some(read) = reader.read_now(buffer, limit) {
                return read.unwrap();
            }
            glommio::timer::sleep(Duration::from_millis(10)).await;
        }
        panic!("nothing arrived within a second");
    }
}
