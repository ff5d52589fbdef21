//! Walking a segment's batch headers (the producer state's replay, the
//! leader epochs' rebuild): read 1 MiB at a time and parsed out of the
//! reads. A read per header made a restart after a crash take seconds per
//! 100 MB of small batches.

use std::ops::ControlFlow;

use crate::batch::{BatchHeader, HEADER_BYTES};
use crate::io::DirectFile;

/// Bytes of a segment read at a time.
const CHUNK_BYTES: usize = 1 << 20;

/// Batches larger than this on average are walked one header read at a
/// time: a 1 MiB read would mostly hold batch bodies (a segment of 1 MiB
/// batches would be read whole).
const LARGE_BATCH_BYTES: usize = 64 * 1024;

/// Calls `visit` with each batch header of `file` and its position, from byte `start` (a
/// batch's start) below `size`, in order, until one does not parse (the
/// end of what was written) or `visit` breaks.
pub(crate) async fn walk<F: DirectFile>(
    file: &F,
    start: u64,
    size: u64,
    max_batch_bytes: usize,
    mut visit: impl FnMut(&BatchHeader, u64) -> ControlFlow<()>,
) -> std::io::Result<()> {
    let mut position = start;
    let mut read_bytes = CHUNK_BYTES;
    while position + HEADER_BYTES as u64 <= size {
        let want = read_bytes.min((size - position) as usize);
        let chunk = file.read_at(position, want).await?;
        let mut visit_at = |header: &BatchHeader, at: usize| visit(header, position + at as u64);
        match walk_chunk(&chunk, max_batch_bytes, &mut visit_at) {
            ControlFlow::Continue((0, _)) | ControlFlow::Break(()) => break,
            ControlFlow::Continue((through, headers)) => {
                position += through as u64;
                read_bytes = match through / headers.max(1) > LARGE_BATCH_BYTES {
                    true => HEADER_BYTES,
                    false => CHUNK_BYTES,
                };
            }
        }
    }
    Ok(())
}

/// Visits the headers starting in `chunk` (a batch may run past its end):
/// how far past the chunk's start the next batch starts, and how many
/// headers it held.
fn walk_chunk(
    chunk: &[u8],
    max_batch_bytes: usize,
    visit: &mut impl FnMut(&BatchHeader, usize) -> ControlFlow<()>,
) -> ControlFlow<(), (usize, usize)> {
    let (mut at, mut headers) = (0usize, 0usize);
    while at + HEADER_BYTES <= chunk.len() {
        let Ok(header) = BatchHeader::parse(&chunk[at..], max_batch_bytes) else {
            return ControlFlow::Break(());
        };
        visit(&header, at)?;
        at += header.total_bytes;
        headers += 1;
    }
    ControlFlow::Continue((at, headers))
}
