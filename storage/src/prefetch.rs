//! Reading ahead of a sequential reader, so the disk works while answers
//! are sent.
//!
//! A consumer that streams a partition from disk sends one fetch, waits for
//! the answer, and sends the next. Without reading ahead every fetch waits
//! for its own disk read, so the disk and the network take turns. After a
//! read that stopped inside a segment, the log keeps a window of
//! [`CHUNKS_AHEAD`] chunk reads beyond the reader's position, each starting
//! where the previous one's whole batches end (up to [`WINDOWS_MAX`]
//! windows, for readers at different positions); the caller runs them as a
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
use crate::read_ahead::{Prefetch, ReadAhead, ReaderAt, SharedRead, Window};
use crate::types::Offset;

/// Chunks read ahead of the reader: one being read while the reader takes
/// the one before is enough to keep the disk busy, a second covers a reader
/// that asks again sooner than one read takes.
pub const CHUNKS_AHEAD: usize = 2;

/// Readers of one log read ahead for at once (consumers of several groups
/// at different positions each keep their own window); past it the least
/// recently used window goes.
pub const WINDOWS_MAX: usize = 4;

impl<FS: FileSystem> Log<FS> {
    /// The background task of the planned reads no task drives yet: it
    /// awaits them in order and plans the next chunks as each completes,
    /// until the windows are full. `None` when no undriven read is planned.
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
                log.grow_windows();
                next = log.take_undriven();
            }
        })
    }

    fn take_undriven(&self) -> Option<SharedRead> {
        let mut st = self.st();
        let prefetch = st
            .windows
            .iter_mut()
            .flat_map(|w| w.chunks.iter_mut())
            .find(|p| !p.handed_out)?;
        prefetch.handed_out = true;
        Some(prefetch.read.clone())
    }

    /// Records where a read stopped inside a segment (its next read starts
    /// at `at.position`) in its reader's window (the one within reach
    /// behind it, else a new one) and plans the reads ahead.
    pub(crate) fn reader_stopped(&self, at: ReaderAt<FS::File>) {
        {
            let mut st = self.st();
            st.stopped_reads += 1;
            let now = st.stopped_reads;
            let reach = (CHUNKS_AHEAD as u64 + 1) * at.chunk_bytes as u64;
            let same = st.windows.iter().position(|w| {
                w.at.segment_base == at.segment_base
                    && w.at.generation == at.generation
                    && w.at.position <= at.position
                    && at.position - w.at.position <= reach
            });
            match same {
                Some(i) => {
                    st.windows[i].at = at;
                    st.windows[i].used = now;
                    st.windows[i].idle_ages = 0;
                }
                None => {
                    if st.windows.len() >= WINDOWS_MAX {
                        let oldest = (0..st.windows.len())
                            .min_by_key(|&i| st.windows[i].used)
                            .expect("windows");
                        st.windows.swap_remove(oldest);
                    }
                    st.windows.push(Window {
                        at,
                        chunks: VecDeque::new(),
                        used: now,
                        idle_ages: 0,
                    });
                }
            }
        }
        self.grow_windows();
    }

    /// In every window, drops the chunks its reader has passed (or that
    /// cannot serve it) and plans reads until [`CHUNKS_AHEAD`] chunks lie
    /// ahead, each starting where the previous one's whole batches end; a
    /// chunk still in flight stops its window's planning until it
    /// completes. Windows of an older generation go.
    pub(crate) fn grow_windows(&self) {
        let mut guard = self.st();
        let st = &mut *guard;
        let generation = st.generation;
        st.windows.retain(|w| w.at.generation == generation);
        let mut planned = 0;
        for window in st.windows.iter_mut() {
            let continues_from = continuation(st.read_ahead.as_ref(), &window.at);
            drop_passed(&mut window.chunks, &window.at, continues_from);
            planned += plan(window, continues_from);
        }
        st.stats.prefetch_reads += planned;
    }

    /// Ages every read-ahead window by one and drops those whose reader has
    /// not read for more than `idle_max` ages, with the chunks (memory) and
    /// the file they hold; the last chunk read goes too once no window is
    /// left. The caller ages at a steady pace (the broker: once a second).
    /// Returns the windows dropped.
    pub fn age_read_ahead(&self, idle_max: u32) -> usize {
        let mut st = self.st();
        let before = st.windows.len();
        st.windows.iter_mut().for_each(|w| w.idle_ages += 1);
        st.windows.retain(|w| w.idle_ages <= idle_max);
        if st.windows.is_empty() {
            st.read_ahead = None;
        }
        before - st.windows.len()
    }

    /// Read-ahead windows kept now (tests, metrics).
    pub fn read_ahead_windows(&self) -> usize {
        self.state.borrow().windows.len()
    }

    /// A planned chunk's bytes from `position` on, when one covers `need`
    /// bytes there: waits for its read, keeps it as the read-ahead chunk
    /// and drops it and the chunks before it from its window. `None` when
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
                .windows
                .iter()
                .flat_map(|w| w.chunks.iter())
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
        for window in st.windows.iter_mut() {
            if window.chunks.iter().any(|p| p.position == start) {
                window
                    .chunks
                    .retain(|p| p.segment_base == segment_base && p.position > start);
                window.idle_ages = 0;
            }
        }
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

/// Plans reads in `window` until [`CHUNKS_AHEAD`] chunks lie ahead of its
/// reader; returns how many it planned.
fn plan<F: DirectFile>(window: &mut Window<F>, continues_from: u64) -> u64 {
    let at = &window.at;
    let mut planned = 0;
    while window.chunks.len() < CHUNKS_AHEAD {
        let start = match window.chunks.back() {
            Some(last) => match last.whole_end() {
                Some(end) => end,
                None => break,
            },
            None => continues_from,
        };
        if start >= at.durable_size {
            break;
        }
        let len = at.chunk_bytes.min((at.durable_size - start) as usize);
        let file = at.file.clone();
        let read = async move { file.read_at(start, len).await.map_err(Rc::new) };
        planned += 1;
        window.chunks.push_back(Prefetch {
            segment_base: at.segment_base,
            position: start,
            len,
            generation: at.generation,
            read: read.boxed_local().shared(),
            handed_out: false,
        });
    }
    planned
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
