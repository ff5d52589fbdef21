//! The whole HTTP request path on bytes, without a socket or a broker:
//! hyper's parser and connection state machine, then [`super::read`]'s
//! bounds, each request answered with the size of the body it read. The
//! fuzz target feeds it arbitrary bytes; the tests feed it the seeds and
//! the pipelined, chunked and oversized cases.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{AsyncRead, AsyncWrite};
use http_body_util::Full;

use super::{read, HyperIo, HEAD_BYTES_MAX};

/// Serves the requests in `input` as the listener would (the client then
/// closes); returns every byte answered.
pub fn serve_bytes(input: &[u8]) -> Vec<u8> {
    let mut stream = Replay {
        input: input.to_vec(),
        read: 0,
        output: Vec::new(),
    };
    let service = hyper::service::service_fn(|request| async move {
        let (status, body) = match read(request).await {
            Ok(request) => (200, format!("{} {}", request.path, request.body.len())),
            Err(refusal) => (refusal.status, refusal.message),
        };
        let mut response = hyper::Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = hyper::StatusCode::from_u16(status).expect("a status");
        Ok::<_, std::convert::Infallible>(response)
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .max_buf_size(64 * 1024)
        .max_header_size(HEAD_BYTES_MAX)
        .header_read_timeout(None)
        .half_close(true)
        .serve_connection(HyperIo::new(&mut stream), service);
    let _ = futures::executor::block_on(connection);
    stream.output
}

/// A client that sends its bytes, then closes its side.
struct Replay {
    input: Vec<u8>,
    read: usize,
    output: Vec<u8>,
}

impl AsyncRead for &mut Replay {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let n = buf.len().min(this.input.len() - this.read);
        buf[..n].copy_from_slice(&this.input[this.read..this.read + n]);
        this.read += n;
        Poll::Ready(Ok(n))
    }
}

impl AsyncWrite for &mut Replay {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().output.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status lines answered, in order.
    fn statuses(input: &[u8]) -> Vec<u16> {
        let output = String::from_utf8_lossy(&serve_bytes(input)).to_string();
        output
            .match_indices("HTTP/1.1 ")
            .filter_map(|(at, _)| output[at + 9..at + 12].parse().ok())
            .collect()
    }

    #[test]
    fn every_fuzz_seed_is_answered_200() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/http_request");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let raw = std::fs::read(entry.path()).unwrap();
            let name = entry.file_name().to_string_lossy().to_string();
            assert_eq!(statuses(&raw), vec![200], "{name}");
            seen += 1;
        }
        assert!(seen >= 6);
    }

    #[test]
    fn pipelined_and_chunked_requests_are_answered_in_order() {
        let raw = b"GET /a HTTP/1.1\r\n\r\n\
            POST /b HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n\
            POST /c HTTP/1.1\r\ncontent-length: 3\r\n\r\nxyz";
        let output = String::from_utf8_lossy(&serve_bytes(raw)).to_string();
        let bodies: Vec<&str> = output
            .split("\r\n\r\n")
            .skip(1)
            .map(|rest| rest.split("HTTP/1.1").next().unwrap())
            .collect();
        assert_eq!(bodies, ["/a 0", "/b 11", "/c 3"], "{output}");
    }

    #[test]
    fn bad_heads_are_refused_with_their_status() {
        assert_eq!(statuses(b"GET\r\n\r\n"), [400]);
        assert_eq!(statuses(b"GET / HTTP/1.1\r\nnocolon\r\n\r\n"), [400]);
        assert_eq!(
            statuses(b"GET / HTTP/1.1\r\ncontent-length: x\r\n\r\n"),
            [400]
        );
        assert_eq!(
            statuses(b"GET / HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n"),
            [400]
        );
        assert_eq!(
            statuses(b"GET / HTTP/1.1\r\ncontent-length: 99999999999\r\n\r\n"),
            [413]
        );
        assert_eq!(statuses(&vec![b'a'; HEAD_BYTES_MAX + 1]), [431]);
        let long_header = format!(
            "GET / HTTP/1.1\r\nx: {}\r\n\r\n",
            "y".repeat(HEAD_BYTES_MAX)
        );
        assert_eq!(statuses(long_header.as_bytes()), [431]);
    }

    #[test]
    fn random_bytes_never_panic_and_answers_stay_http() {
        let seed = std::env::var("SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| std::process::id() as u64);
        println!("SEED={seed}");
        let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(seed);
        let mut next = || rand::Rng::gen::<u64>(&mut rng);
        let pieces: [&[u8]; 10] = [
            b"GET / HTTP/1.1\r\n",
            b"POST /t HTTP/1.1\r\n",
            b"content-length: 5\r\n",
            b"transfer-encoding: chunked\r\n",
            b"\r\n",
            b"5\r\nhello\r\n",
            b"0\r\n\r\n",
            b"ffffffffffff\r\n",
            b"\x00\xff%",
            b"host: x\r\n",
        ];
        for _ in 0..2_000 {
            let mut input = Vec::new();
            for _ in 0..next() % 12 {
                input.extend_from_slice(pieces[(next() % 10) as usize]);
            }
            let output = serve_bytes(&input);
            assert!(
                output.is_empty() || output.starts_with(b"HTTP/1.1 "),
                "SEED={seed} {:?} -> {:?}",
                String::from_utf8_lossy(&input),
                String::from_utf8_lossy(&output)
            );
        }
    }
}
