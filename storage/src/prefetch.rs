//! Reading ahead of a sequential reader, so the disk works while answers
//! are sent.
//!
//! A consumer that streams a partition from disk sends one fetch, waits for
//! the answer, and sends the next. Without reading ahead every fetch waits
//! for its own disk read, so the disk and the network take turns. After a
//! read that stopped inside a segment, the log keeps a window of
//! [`CHUNKS_AHEAD`] chunk reads beyond the reader's position, each starting
//! where the previous one's whole batches end; the caller runs them as a
//! background task ([`Log::prefetch_task`]) which plans the next chunk as
//! each read completes, and a read that needs those bytes waits for the
//! chunk's read instead of issuing its own.
//!
//! The storage crate spawns nothing: without the task a planned read simply
//! runs when a read first needs it, as a plain read would.

use std::collections::VecDeque;
use std::future::Future;
use std::rc::Rc;

use bytes::Bytes;
use futures::future::FutureExt;

use crate::batch::whole_batches_within;
use crate::io::{DirectFile, FileSystem};
use crate::log::Log;
use crate::read_ahead::{Prefetch, ReadAhead, ReaderAt, SharedRead};
use crate::types::Offset;

/// Chunks read ahead of the reader: one being read while the reader takes
/// the one before is enough to keep the disk busy, a second covers a reader
/// that asks again sooner than one read takes.
pub const CHUNKS_AHEAD: usize = 2;

impl<FS: FileSystem> Log<FS> {
    /// The background task of the planned reads no task drives yet: it
    /// awaits them in order and plans the next chunk as each completes,
    /// until the window is full. `None` when no undriven read is planned.
    /// It holds the log weakly: a deleted partition's reads stop.
    pub fn prefetch_task(self: &Rc<Self>) -> Option<impl Future<Output = ()> + 'static> {
        let first = self.take_undriven()?;
        let log = Rc::downgrade(self);
        Some(async move {
            let mut next = Some(first);
            while let Some(read) = next.take() {
                // Errors reach the reader that wants the bytes, which reads again.
                let _ = read.await;
                let Some(log) = log.upgrade() else { return };
                log.grow_window();
                next = log.take_undriven();
            }
        })
    }

    fn take_undriven(&self) -> Option<SharedRead> {
        let mut st = self.st();
        let prefetch = st.prefetch.iter_mut().find(|p| !p.handed_out)?;
        prefetch.handed_out = true;
        Some(prefetch.read.clone())
    }

    /// Records where a read stopped inside a segment (its next read starts
    /// at `position`) and plans the reads ahead of it.
    pub(crate) fn reader_stopped(&self, at: ReaderAt<FS::File>) {
        self.st().reader_at = Some(at);
        self.grow_window();
    }

    /// Drops the chunks the reader has passed (or that cannot serve it) and
    /// plans reads until [`CHUNKS_AHEAD`] chunks lie ahead, each starting
    /// where the previous one's whole batches end; a chunk still in flight
    /// stops the planning until it completes.
    pub(crate) fn grow_window(&self) {
        let mut guard = self.st();
        let st = &mut *guard;
        let Some(at) = st.reader_at.as_ref() else {
            return;
        };
        if at.generation != st.generation {
            st.reader_at = None;
            st.prefetch.clear();
            return;
        }
        let continues_from = continuation(st.read_ahead.as_ref(), at);
        drop_passed(&mut st.prefetch, at, continues_from);
        while st.prefetch.len() < CHUNKS_AHEAD {
            let start = match st.prefetch.back() {
                Some(last) => match last.whole_end() {
                    Some(end) => end,
                    None => return,
                },
                None => continues_from,
            };
            if start >= at.durable_size {
                return;
            }
            let len = at.chunk_bytes.min((at.durable_size - start) as usize);
            let file = at.file.clone();
            let read = async move { file.read_at(start, len).await.map_err(Rc::new) };
            st.stats.prefetch_reads += 1;
            st.prefetch.push_back(Prefetch {
                segment_base: at.segment_base,
                position: start,
                len,
                generation: at.generation,
                read: read.boxed_local().shared(),
                handed_out: false,
            });
        }
    }

    /// A planned chunk's bytes from `position` on, when one covers `need`
    /// bytes there: waits for its read, keeps it as the read-ahead chunk
    /// and drops it and the chunks before it from the window. `None` when
    /// no chunk covers them, or its read failed (the caller reads for
    /// itself and meets the error there).
    pub(crate) async fn prefetched(
        &self,
        segment_base: Offset,
        position: u64,
        need: usize,
    ) -> Option<Bytes> {
        let (read, start, generation) = {
            let st = self.state.borrow();
            let generation = st.generation;
            let p = st
                .prefetch
                .iter()
                .find(|p| p.covers(segment_base, position, need, generation))?;
            (p.read.clone(), p.position, generation)
        };
        let data = read.await.ok()?;
        let offset_in = (position - start) as usize;
        if data.len() < offset_in + need {
            return None;
        }
        let mut st = self.st();
        if st.generation != generation {
            // The caller's read starts over; these bytes may be gone.
            return None;
        }
        st.prefetch
            .retain(|p| p.segment_base == segment_base && p.position > start);
        st.stats.prefetch_hits += 1;
        st.read_ahead = Some(ReadAhead {
            segment_base,
            position: start,
            data: data.clone(),
            generation,
        });
        Some(data.slice(offset_in..))
    }
}

/// Where the window must begin for a reader at `at`: after the whole
/// batches of the read-ahead chunk when that chunk holds the reader's
/// position, else at the position.
fn continuation<F: DirectFile>(read_ahead: Option<&ReadAhead>, at: &ReaderAt<F>) -> u64 {
    read_ahead
        .filter(|ra| ra.holds(at.segment_base, at.position, 0, at.generation))
        .map(|ra| ra.position + whole_batches_within(&ra.data, ra.data.len()) as u64)
        .filter(|&end| end > at.position)
        .unwrap_or(at.position)
}

/// Drops the chunks that end before the reader, and the whole window when
/// it does not continue from `continues_from` (the reader moved elsewhere).
fn drop_passed<F: DirectFile>(
    window: &mut VecDeque<Prefetch>,
    at: &ReaderAt<F>,
    continues_from: u64,
) {
    window.retain(|p| p.segment_base == at.segment_base && p.position + p.len as u64 > at.position);
    if window
        .front()
        .is_some_and(|first| first.position > continues_from)
    {
        window.clear();
    }
}
