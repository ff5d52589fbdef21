//! What a connection with Produce requests in flight waits for once its
//! socket holds nothing: whichever comes first, the oldest request's
//! answer or more bytes. Waiting for the answer alone stopped reading for
//! a whole flush, so a producer's next requests waited in the socket's
//! buffers and one connection carried what those hold per flush
//! (docs/benchmarks.md run 48). A wait given up loses nothing: glommio's
//! stream and a TLS session read only when bytes are there, and answers
//! stay in the pipeline until taken.

use futures::future::{select, Either};
use futures::{AsyncRead, AsyncReadExt};

use super::pipeline::Pipeline;
use crate::server::shard::Stopping;

/// What a connection with requests in flight woke for.
pub enum Woke<T> {
    /// The oldest request's answer (None: nothing was in flight).
    Answered(Option<T>),
    /// Bytes read into the buffer given (0: the client closed its side).
    Read(std::io::Result<usize>),
    /// The broker stops.
    Stopping,
}

/// Waits for the oldest answer in `pipeline`, bytes from `stream` (read
/// into `into`) or `stopping`, whichever comes first.
pub async fn answer_or_bytes<T, S>(
    pipeline: &mut Pipeline<'_, T>,
    stream: &mut S,
    into: &mut [u8],
    stopping: &Stopping,
) -> Woke<T>
where
    S: AsyncRead + Unpin,
{
    let answer = std::pin::pin!(pipeline.next_answer());
    let read = select(stream.read(into), stopping.clone());
    match select(answer, read).await {
        Either::Left((answered, _)) => Woke::Answered(answered),
        Either::Right((Either::Left((read, _)), _)) => Woke::Read(read),
        Either::Right((Either::Right(_), _)) => Woke::Stopping,
    }
}
