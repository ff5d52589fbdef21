//! A shard's fdatasyncs folded into one sync of their file system when
//! many are in flight.
//!
//! Every partition's flush fdatasyncs its own segment. With thousands of
//! partitions a shard kept about 300 fdatasyncs in flight, 17,000 a
//! second, each a kernel worker's wake-up, an inode write and a device
//! flush of its own (docs/benchmarks.md run 43). Up to
//! `plain_most` in flight, a sync is still that fdatasync; past it, it
//! waits for the next *round* instead: one sync of the whole file system
//! (syncfs, then one fdatasync), which covers every file whose writes
//! completed before the round started.
//!
//! Why syncfs then an fdatasync, on every file system: on ext4 without a
//! journal syncfs's only device flush comes before it writes the block
//! device's metadata buffers (an inode's extents); on xfs a syncfs with
//! no log to commit (a flush that only rewrote an already converted
//! block) flushes no device cache; and kernels 5.8-5.16 dropped the file
//! system's sync errors from syncfs. The fdatasync after it flushes the
//! device in each case (ext4 without a journal always does; xfs does when
//! its log force had nothing to write) and reports those errors.
//!
//! A round that fails fails every sync waiting for it, and every later
//! sync that waits for a round and is not already covered by one that
//! succeeded: syncfs reports a write-back error of any file on the file
//! system, so no later round can say which data it covers. (Plain
//! fdatasyncs go on: the kernel reports their errors file by file.)
//! This widens a disk error to every partition on the file system that
//! takes rounds, one reason the data directory belongs on a file system
//! of its own (docs/operations.md).
//!
//! The logic is here over [`SyncOps`], testable without a file system;
//! [`super::dma`] runs it on glommio's files.

use std::cell::{Cell, RefCell};
use std::io;
use std::task::{Poll, Waker};

/// The two ways to make a file's writes durable.
#[allow(async_fn_in_trait)]
pub trait SyncOps {
    /// A file.
    type File;
    /// Makes `file`'s writes durable.
    async fn fdatasync(&self, file: &Self::File) -> io::Result<()>;
    /// Makes the writes of every file on `file`'s file system durable.
    async fn sync_file_system(&self, file: &Self::File) -> io::Result<()>;
}

/// One file system's syncs on one shard.
#[derive(Debug)]
pub struct SyncRounds {
    /// Plain fdatasyncs allowed in flight before syncs wait for a round.
    plain_most: usize,
    plain_in_flight: Cell<usize>,
    /// Rounds started (numbered from 1; one runs at a time), and the
    /// last one that succeeded (a cancelled round neither succeeds nor
    /// fails).
    started: Cell<u64>,
    succeeded: Cell<u64>,
    running: Cell<bool>,
    /// The first round that failed, and how.
    failed: RefCell<Option<(u64, io::ErrorKind, String)>>,
    /// Syncs waiting for a round to finish.
    waiters: RefCell<Vec<Waker>>,
    counts: Cell<SyncCounts>,
}

/// What a shard's syncs did, since start.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SyncCounts {
    /// Syncs made by an fdatasync of their own file.
    pub plain: u64,
    /// Rounds run (each one syncfs and one fdatasync).
    pub rounds: u64,
    /// Syncs covered by a round.
    pub in_rounds: u64,
}

impl SyncRounds {
    /// Rounds that start once `plain_most` plain fdatasyncs are in flight.
    pub fn new(plain_most: usize) -> SyncRounds {
        SyncRounds {
            plain_most,
            plain_in_flight: Cell::new(0),
            started: Cell::new(0),
            succeeded: Cell::new(0),
            running: Cell::new(false),
            failed: RefCell::new(None),
            waiters: RefCell::new(Vec::new()),
            counts: Cell::new(SyncCounts::default()),
        }
    }

    /// What the syncs did so far.
    pub fn counts(&self) -> SyncCounts {
        self.counts.get()
    }

    /// Returns once `file`'s writes, all completed before the call, are
    /// durable.
    pub async fn sync<O: SyncOps>(&self, ops: &O, file: &O::File) -> io::Result<()> {
        if self.plain_in_flight.get() < self.plain_most {
            self.count(|c| c.plain += 1);
            self.plain_in_flight.set(self.plain_in_flight.get() + 1);
            let _in_flight = InFlight(&self.plain_in_flight);
            return ops.fdatasync(file).await;
        }
        self.count(|c| c.in_rounds += 1);
        // The first round to start after this call covers the file.
        let needed = self.started.get() + 1;
        loop {
            if self.succeeded.get() >= needed {
                return Ok(());
            }
            // Not covered, and no round runs after a failure.
            if let Some((round, kind, message)) = &*self.failed.borrow() {
                let message = format!("syncing the file system (round {round}): {message}");
                return Err(io::Error::new(*kind, message));
            }
            if self.running.get() {
                self.round_finished().await;
            } else {
                self.run_round(ops, file).await;
            }
        }
    }

    /// Runs the next round, driven by one of the syncs waiting for it.
    async fn run_round<O: SyncOps>(&self, ops: &O, file: &O::File) {
        let round = self.started.get() + 1;
        self.started.set(round);
        self.running.set(true);
        self.count(|c| c.rounds += 1);
        // Dropped mid-round (its sync cancelled), the round counts as not
        // run: the waiters wake and one of them runs the next.
        let running = Running(self);
        let result = ops.sync_file_system(file).await;
        std::mem::forget(running);
        match result {
            Ok(()) => self.succeeded.set(round),
            Err(e) => {
                let mut failed = self.failed.borrow_mut();
                failed.get_or_insert((round, e.kind(), e.to_string()));
            }
        }
        self.running.set(false);
        self.wake_waiters();
    }

    /// Completes when the running round finishes (or is given up).
    fn round_finished(&self) -> impl std::future::Future<Output = ()> + '_ {
        let round = self.started.get();
        std::future::poll_fn(move |cx| {
            if !self.running.get() || self.started.get() != round {
                return Poll::Ready(());
            }
            let mut waiters = self.waiters.borrow_mut();
            if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                waiters.push(cx.waker().clone());
            }
            Poll::Pending
        })
    }

    fn wake_waiters(&self) {
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        for waker in waiters {
            waker.wake();
        }
    }

    fn count(&self, change: impl FnOnce(&mut SyncCounts)) {
        let mut counts = self.counts.get();
        change(&mut counts);
        self.counts.set(counts);
    }
}

/// A plain fdatasync in flight, until dropped.
struct InFlight<'a>(&'a Cell<usize>);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// A round running; dropped only if its driver was cancelled.
struct Running<'a>(&'a SyncRounds);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.set(false);
        self.0.wake_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::oneshot;
    use futures::executor::LocalPool;
    use futures::future::RemoteHandle;
    use futures::task::LocalSpawnExt;
    use std::future::Future;
    use std::rc::Rc;

    /// Syncs that complete when the test says, and what was asked of it.
    #[derive(Default)]
    struct Ops {
        asked: RefCell<Vec<String>>,
        pending: RefCell<Vec<oneshot::Sender<io::Result<()>>>>,
    }

    impl Ops {
        async fn wait(&self, what: String) -> io::Result<()> {
            let (tx, rx) = oneshot::channel();
            self.asked.borrow_mut().push(what);
            self.pending.borrow_mut().push(tx);
            rx.await.expect("answered")
        }

        /// Completes the oldest sync asked for.
        fn complete(&self, result: io::Result<()>) {
            let tx = self.pending.borrow_mut().remove(0);
            tx.send(result).expect("still waited for");
        }
    }

    impl SyncOps for Ops {
        type File = &'static str;
        async fn fdatasync(&self, file: &&'static str) -> io::Result<()> {
            self.wait(format!("fdatasync {file}")).await
        }
        async fn sync_file_system(&self, file: &&'static str) -> io::Result<()> {
            self.wait(format!("syncfs via {file}")).await
        }
    }

    type Results = Rc<RefCell<Vec<(&'static str, Result<(), String>)>>>;

    /// A sync polled by hand.
    type Sync<'a> = std::pin::Pin<Box<dyn Future<Output = io::Result<()>> + 'a>>;

    /// Syncs run as tasks of a local pool, their results kept in order.
    struct Harness {
        pool: LocalPool,
        rounds: Rc<SyncRounds>,
        ops: Rc<Ops>,
        results: Results,
    }

    impl Harness {
        fn new(plain_most: usize) -> Harness {
            Harness {
                pool: LocalPool::new(),
                rounds: Rc::new(SyncRounds::new(plain_most)),
                ops: Rc::default(),
                results: Results::default(),
            }
        }

        /// Starts `file`'s sync and runs it as far as it goes.
        fn start(&mut self, file: &'static str) {
            let (rounds, ops, results) =
                (self.rounds.clone(), self.ops.clone(), self.results.clone());
            self.pool
                .spawner()
                .spawn_local(async move {
                    let result = rounds.sync(&*ops, &file).await;
                    results
                        .borrow_mut()
                        .push((file, result.map_err(|e| e.to_string())));
                })
                .expect("spawned");
            self.run();
        }

        /// Starts `file`'s sync; dropping the handle cancels it.
        fn start_cancellable(&mut self, file: &'static str) -> RemoteHandle<io::Result<()>> {
            let (rounds, ops) = (self.rounds.clone(), self.ops.clone());
            let handle = self
                .pool
                .spawner()
                .spawn_local_with_handle(async move { rounds.sync(&*ops, &file).await })
                .expect("spawned");
            self.run();
            handle
        }

        fn run(&mut self) {
            self.pool.run_until_stalled();
        }

        /// Whether `count` syncs finished, all of them Ok.
        fn all_ok(&self, count: usize) -> bool {
            let results = self.results.borrow();
            results.len() == count && results.iter().all(|(_, r)| r.is_ok())
        }

        fn counts(&self) -> (u64, u64, u64) {
            let counts = self.rounds.counts();
            (counts.plain, counts.rounds, counts.in_rounds)
        }
    }

    #[test]
    fn up_to_the_limit_each_file_gets_its_own_fdatasync() {
        let mut h = Harness::new(2);
        h.start("a");
        h.start("b");
        assert_eq!(*h.ops.asked.borrow(), ["fdatasync a", "fdatasync b"]);
        h.ops.complete(Ok(()));
        h.run();
        h.start("c");
        let third = h.ops.asked.borrow()[2].clone();
        assert_eq!(third, "fdatasync c", "one finished: room again");
        h.ops.complete(Ok(()));
        h.ops.complete(Ok(()));
        h.run();
        assert!(h.all_ok(3), "{:?}", h.results.borrow());
        assert_eq!(h.counts(), (3, 0, 0));
    }

    #[test]
    fn past_the_limit_syncs_share_a_round_that_started_after_them() {
        let mut h = Harness::new(1);
        h.start("a");
        // Past the limit: b runs round 1; c and d arrive while it runs,
        // so it does not cover them: they share round 2.
        for file in ["b", "c", "d"] {
            h.start(file);
        }
        assert_eq!(*h.ops.asked.borrow(), ["fdatasync a", "syncfs via b"]);
        h.ops.complete(Ok(())); // a
        h.ops.complete(Ok(())); // round 1
        h.run();
        let done: Vec<_> = h.results.borrow().iter().map(|(f, _)| *f).collect();
        assert_eq!(done, ["a", "b"], "c and d wait for a round after them");
        assert_eq!(h.ops.asked.borrow().len(), 3, "one round for both");
        assert!(h.ops.asked.borrow()[2].starts_with("syncfs via"));
        h.ops.complete(Ok(())); // round 2
        h.run();
        assert!(h.all_ok(4), "{:?}", h.results.borrow());
        assert_eq!(h.counts(), (1, 2, 3));
    }

    #[test]
    fn a_failed_round_fails_its_syncs_and_every_later_ones() {
        let mut h = Harness::new(0);
        h.start("a");
        h.start("b");
        h.ops.complete(Ok(())); // round 1: a
        h.run();
        // c arrives while round 2 (b's) runs: it waits for round 3.
        h.start("c");
        h.ops.complete(Err(io::Error::other("EIO"))); // round 2
        h.run();
        h.start("d");
        let results = h.results.borrow();
        let failed: Vec<_> = results.iter().filter(|(_, r)| r.is_err()).collect();
        let first = &results[0];
        assert_eq!(*first, ("a", Ok(())), "its round was before the failure");
        assert_eq!(failed.len(), 3, "b, c and d: {results:?}");
        let eio =
            |(_, r): &&(&str, Result<(), String>)| r.as_ref().is_err_and(|e| e.contains("EIO"));
        assert!(failed.iter().all(eio));
        assert_eq!(h.ops.asked.borrow().len(), 2, "no round after the failure");
    }

    #[test]
    fn a_sync_whose_round_succeeded_is_ok_though_a_later_round_failed_first() {
        // Polled by hand, so that w sleeps through its round's success
        // and the failure of the round after it.
        let rounds = SyncRounds::new(0);
        let ops = Ops::default();
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        let mut poll = |sync: &mut Sync<'_>| match sync.as_mut().poll(&mut cx) {
            Poll::Ready(result) => Some(result.map_err(|e| e.to_string())),
            Poll::Pending => None,
        };
        let mut a: Sync = Box::pin(rounds.sync(&ops, &"a"));
        assert_eq!(poll(&mut a), None, "a runs round 1");
        let mut w: Sync = Box::pin(rounds.sync(&ops, &"w"));
        assert_eq!(poll(&mut w), None, "w waits for round 2");
        ops.complete(Ok(()));
        assert_eq!(poll(&mut a), Some(Ok(())));
        let mut b: Sync = Box::pin(rounds.sync(&ops, &"b"));
        assert_eq!(poll(&mut b), None, "b runs round 2");
        ops.complete(Ok(()));
        assert_eq!(poll(&mut b), Some(Ok(())));
        let mut c: Sync = Box::pin(rounds.sync(&ops, &"c"));
        assert_eq!(poll(&mut c), None, "c runs round 3");
        ops.complete(Err(io::Error::other("EIO")));
        assert!(poll(&mut c).is_some_and(|r| r.is_err_and(|e| e.contains("EIO"))));
        assert_eq!(poll(&mut w), Some(Ok(())), "round 2 covered w");
        let mut d: Sync = Box::pin(rounds.sync(&ops, &"d"));
        assert!(
            poll(&mut d).is_some_and(|r| r.is_err()),
            "no round after a failure"
        );
        assert_eq!(ops.asked.borrow().len(), 3);
    }

    #[test]
    fn a_sync_whose_round_was_cancelled_fails_with_the_next_round() {
        let mut h = Harness::new(0);
        let cancelled = h.start_cancellable("a");
        h.start("b"); // waits for round 2
        drop(cancelled); // round 1 is given up
        h.run();
        h.ops.pending.borrow_mut().remove(0); // round 1's answer, unheard
        h.ops.complete(Err(io::Error::other("EIO"))); // round 2, run by b
        h.run();
        let results = h.results.borrow();
        assert_eq!(results.len(), 1);
        assert!(results[0].1.as_ref().is_err_and(|e| e.contains("EIO")));
    }

    #[test]
    fn a_cancelled_rounds_waiters_run_the_next_one() {
        let mut h = Harness::new(0);
        let cancelled = h.start_cancellable("a");
        h.start("b");
        drop(cancelled); // a's sync, driving round 1, is dropped
        h.run();
        assert_eq!(*h.ops.asked.borrow(), ["syncfs via a", "syncfs via b"]);
        let abandoned = h.ops.pending.borrow_mut().remove(0);
        assert!(abandoned.is_canceled(), "no one waits for round 1");
        h.ops.complete(Ok(()));
        h.run();
        assert_eq!(*h.results.borrow(), [("b", Ok(()))]);
    }
}
