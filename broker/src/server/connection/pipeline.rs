//! A connection's Produce requests in flight together. The next starts
//! once the one before has placed its records (every partition's offsets
//! given or refused, its refusals remembered), so its appends land after
//! them, while the earlier ones still wait for their flush or in-sync
//! replicas: one flush then covers several requests of one producer
//! (group commit across a connection's requests, where one at a time gave
//! each request its own write and fdatasync). Answers leave in the order
//! the requests came, as Kafka's must; a failed flush fails every request
//! it covered (each waits for it). Sans I/O: the connection reads and
//! writes, this only orders.

use futures::channel::oneshot;
use futures::future::{select, Either, LocalBoxFuture};
use futures::stream::{FuturesOrdered, StreamExt};
use futures::FutureExt;
use std::collections::VecDeque;

/// Produce requests one connection keeps in flight at most (an idempotent
/// producer keeps five; others more). 8 held one librdkafka producer of
/// 1 MB requests to about 1.1 GB/s here, 32 let it reach 1.2-1.4
/// (docs/benchmarks.md run 48).
pub const IN_FLIGHT_MAX: usize = 32;

/// Request bytes a connection's requests in flight may add up to (one
/// request alone may be larger). Their records, once placed, live in the
/// log's write buffer and cache until flushed, and an acks=all answer
/// waits for that: this bounds what one connection has appended and not
/// yet had acknowledged (with 1 MB requests, four times what 8 requests
/// allowed; with requests over 4 MiB, less).
pub const IN_FLIGHT_BYTES_MAX: usize = 32 << 20;

/// A connection's requests in flight, oldest first; `T` is an answer.
pub struct Pipeline<'a, T> {
    answers: FuturesOrdered<LocalBoxFuture<'a, T>>,
    /// The size of each request in flight, oldest first (answers leave in
    /// that order), and their sum.
    sizes: VecDeque<usize>,
    bytes: usize,
    /// Resolves once the newest request has placed its records (Ok), or
    /// ended without placing them (Err: dropped unsent).
    placing: Option<oneshot::Receiver<()>>,
    /// The newest request ended without placing its records (refused
    /// whole, or the connection is to close): it and every request before
    /// it are answered before another starts.
    barrier: bool,
}

/// What a started request's answer sends on once its records are placed;
/// dropped unsent if it ends without placing them.
pub type Placing = oneshot::Sender<()>;

impl<'a, T> Pipeline<'a, T> {
    pub fn new() -> Pipeline<'a, T> {
        Pipeline {
            answers: FuturesOrdered::new(),
            sizes: VecDeque::new(),
            bytes: 0,
            placing: None,
            barrier: false,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.answers.is_empty()
    }

    /// Whether a request of `bytes` may start (once the newest is
    /// placed): fewer than [`IN_FLIGHT_MAX`] in flight, and with it at
    /// most [`IN_FLIGHT_BYTES_MAX`] (one alone may always start).
    pub fn has_room_for(&self, bytes: usize) -> bool {
        self.answers.is_empty()
            || (self.answers.len() < IN_FLIGHT_MAX && self.bytes + bytes <= IN_FLIGHT_BYTES_MAX)
    }

    /// A request of `bytes` to be answered by `answer`, which is told
    /// when it is placed through the [`Placing`] made here with it.
    pub fn start(&mut self, bytes: usize, answer: impl FnOnce(Placing) -> LocalBoxFuture<'a, T>) {
        let (placing, placed) = oneshot::channel();
        self.answers.push_back(answer(placing));
        self.sizes.push_back(bytes);
        self.bytes += bytes;
        self.placing = Some(placed);
    }

    /// An answer taken out: the oldest request's bytes no longer count.
    fn taken(&mut self, answer: Option<T>) -> Option<T> {
        let answer = answer?;
        self.bytes -= self.sizes.pop_front().expect("a size per request");
        Some(answer)
    }

    /// Waits until the newest request has placed its records (None: the
    /// next may start), or the oldest is answered first (Some: send it,
    /// then wait again). A newest request that ended without placing its
    /// records (its answer may close the connection) holds the next until
    /// it and all before it are answered.
    pub async fn until_placed(&mut self) -> Option<T> {
        if let Some(placing) = self.placing.as_mut() {
            match select(placing, self.answers.next()).await {
                Either::Left((placed, _)) => {
                    self.placing = None;
                    self.barrier = placed.is_err();
                }
                Either::Right((answer, _)) => return self.taken(answer),
            }
        }
        if !self.barrier {
            return None;
        }
        let answer = self.answers.next().await;
        self.barrier = answer.is_some();
        self.taken(answer)
    }

    /// The oldest request's answer if it has come (checked without
    /// waiting), so that it leaves before the connection reads on.
    pub fn ready_answer(&mut self) -> Option<T> {
        if self.answers.is_empty() {
            return None;
        }
        let answer = self.answers.next().now_or_never().flatten();
        self.taken(answer)
    }

    /// The oldest request's answer, once it comes (None: nothing in flight).
    pub async fn next_answer(&mut self) -> Option<T> {
        let answer = self.answers.next().await;
        self.taken(answer)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use futures::channel::oneshot;
    use futures::executor::LocalPool;
    use futures::task::LocalSpawnExt;
    use futures::FutureExt;

    use super::*;

    /// A request answered `name` once `done` fires, placed once `placed` fires.
    fn request(
        name: &'static str,
        placed: oneshot::Receiver<()>,
        done: oneshot::Receiver<()>,
    ) -> impl FnOnce(Placing) -> LocalBoxFuture<'static, &'static str> {
        move |placing| {
            async move {
                let _ = placed.await;
                let _ = placing.send(());
                let _ = done.await;
                name
            }
            .boxed_local()
        }
    }

    #[test]
    fn the_next_starts_once_placed_and_answers_leave_in_order() {
        let mut pool = LocalPool::new();
        let log = Rc::new(RefCell::new(Vec::new()));
        let (place_a, placed_a) = oneshot::channel();
        let (finish_a, done_a) = oneshot::channel();
        let (place_b, placed_b) = oneshot::channel();
        let (finish_b, done_b) = oneshot::channel();
        let seen = log.clone();
        pool.spawner()
            .spawn_local(async move {
                let mut pipeline = Pipeline::new();
                pipeline.start(1, request("a", placed_a, done_a));
                assert_eq!(pipeline.until_placed().await, None);
                seen.borrow_mut().push("a placed");
                pipeline.start(1, request("b", placed_b, done_b));
                assert_eq!(pipeline.until_placed().await, None);
                seen.borrow_mut().push("b placed");
                while let Some(answer) = pipeline.next_answer().await {
                    seen.borrow_mut().push(answer);
                }
            })
            .unwrap();
        pool.run_until_stalled();
        assert!(log.borrow().is_empty(), "a is not placed yet");
        place_a.send(()).unwrap();
        pool.run_until_stalled();
        assert_eq!(*log.borrow(), ["a placed"], "b started only now");
        place_b.send(()).unwrap();
        finish_b.send(()).unwrap();
        pool.run_until_stalled();
        assert_eq!(*log.borrow(), ["a placed", "b placed"], "b waits for a");
        finish_a.send(()).unwrap();
        pool.run_until_stalled();
        assert_eq!(*log.borrow(), ["a placed", "b placed", "a", "b"]);
    }

    #[test]
    fn an_answer_before_its_placing_is_given_while_waiting() {
        let mut pool = LocalPool::new();
        let answered = pool.run_until(async {
            let mut pipeline = Pipeline::new();
            // Answered at its first poll (a refused request): its Placing
            // drops with it.
            pipeline.start(1, |placing| {
                async move {
                    drop(placing);
                    "refused"
                }
                .boxed_local()
            });
            let first = pipeline.until_placed().await;
            let second = pipeline.until_placed().await;
            (first, second, pipeline.is_empty())
        });
        assert_eq!(answered, (Some("refused"), None, true));
    }

    #[test]
    fn a_request_ended_unplaced_holds_the_next_until_all_before_are_answered() {
        let mut pool = LocalPool::new();
        let log = Rc::new(RefCell::new(Vec::new()));
        let (place_a, placed_a) = oneshot::channel();
        let (finish_a, done_a) = oneshot::channel();
        let seen = log.clone();
        pool.spawner()
            .spawn_local(async move {
                let mut pipeline = Pipeline::new();
                pipeline.start(1, request("a", placed_a, done_a));
                assert_eq!(pipeline.until_placed().await, None);
                // Ends at once without placing (a request to close on).
                pipeline.start(1, |placing| {
                    async move {
                        drop(placing);
                        "closing"
                    }
                    .boxed_local()
                });
                while let Some(answer) = pipeline.until_placed().await {
                    seen.borrow_mut().push(answer);
                }
                seen.borrow_mut().push("next may start");
                assert!(pipeline.is_empty());
            })
            .unwrap();
        place_a.send(()).unwrap();
        pool.run_until_stalled();
        assert!(log.borrow().is_empty(), "held while a is out");
        finish_a.send(()).unwrap();
        pool.run_until_stalled();
        assert_eq!(*log.borrow(), ["a", "closing", "next may start"]);
    }

    #[test]
    fn a_ready_answer_is_taken_without_waiting() {
        let mut pool = LocalPool::new();
        let (finish, done) = oneshot::channel::<()>();
        let mut pipeline = Pipeline::new();
        pipeline.start(1, move |_| {
            async move { done.await.map(|()| "a").unwrap_or("gone") }.boxed_local()
        });
        assert_eq!(pipeline.ready_answer(), None, "not answered yet");
        finish.send(()).unwrap();
        assert_eq!(pipeline.ready_answer(), Some("a"));
        assert_eq!(pipeline.ready_answer(), None, "nothing in flight");
        assert!(pipeline.is_empty());
        pool.run_until_stalled();
    }

    #[test]
    fn room_is_bounded_by_count() {
        let mut pipeline: Pipeline<'_, ()> = Pipeline::new();
        for _ in 0..IN_FLIGHT_MAX {
            assert!(pipeline.has_room_for(1));
            pipeline.start(1, |_| futures::future::pending().boxed_local());
        }
        assert!(!pipeline.has_room_for(1));
    }

    #[test]
    fn room_is_bounded_by_bytes_and_each_answer_gives_its_own_back() {
        let third = IN_FLIGHT_BYTES_MAX / 3 + 1;
        // Starts a request of `third` bytes answered once its sender fires.
        fn start(
            pipeline: &mut Pipeline<'_, &'static str>,
            bytes: usize,
            name: &'static str,
        ) -> oneshot::Sender<()> {
            let (finish, done) = oneshot::channel::<()>();
            pipeline.start(bytes, move |_| {
                async move { done.await.map(|()| name).unwrap_or("gone") }.boxed_local()
            });
            finish
        }
        let mut finishers = Vec::new();
        let mut pipeline = Pipeline::new();
        for name in ["a", "b"] {
            assert!(pipeline.has_room_for(third), "room for {name}");
            finishers.push(start(&mut pipeline, third, name));
        }
        assert!(
            !pipeline.has_room_for(third),
            "a third would pass the bytes"
        );
        assert!(pipeline.has_room_for(1), "a small one fits");
        finishers.remove(0).send(()).unwrap();
        assert_eq!(pipeline.ready_answer(), Some("a"));
        assert!(pipeline.has_room_for(third), "a's bytes given back");
        finishers.push(start(&mut pipeline, third, "c"));
        assert!(
            !pipeline.has_room_for(third),
            "only a's bytes were given back"
        );
        for finish in finishers {
            finish.send(()).unwrap();
        }
        let rest = futures::executor::block_on(async {
            let b = pipeline.next_answer().await;
            let c = pipeline.until_placed().await;
            (b, c)
        });
        assert_eq!(rest, (Some("b"), Some("c")));
        assert!(pipeline.is_empty());
        assert!(
            pipeline.has_room_for(IN_FLIGHT_BYTES_MAX),
            "every byte given back"
        );
    }

    #[test]
    fn one_request_alone_starts_however_large() {
        let mut pipeline: Pipeline<'_, ()> = Pipeline::new();
        assert!(pipeline.has_room_for(4 * IN_FLIGHT_BYTES_MAX));
        pipeline.start(4 * IN_FLIGHT_BYTES_MAX, |_| {
            futures::future::pending().boxed_local()
        });
        assert!(!pipeline.has_room_for(1));
    }
}
