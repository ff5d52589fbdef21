//! The lock that serializes a log's file I/O (flushes, truncation,
//! retention, compaction), and the signal that it was released.
//!
//! Waiting for durability must not mean queueing for the lock: a task
//! that flushes, appends again and asks for the lock again would win
//! against the tasks it just woke, forever. Waiters instead sleep until
//! the lock is released, then look at the flushed offset again; only if
//! their data is still not durable does one of them take the lock.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::task::{Poll, Waker};

use futures::lock::{Mutex, MutexGuard};

/// A mutex with a release signal.
#[derive(Default)]
pub struct IoLock {
    mutex: Mutex<()>,
    releases: Cell<u64>,
    waiters: RefCell<Vec<Waker>>,
}

/// Held while a task does the log's I/O; releasing it wakes the waiters.
pub struct IoGuard<'a> {
    _guard: MutexGuard<'a, ()>,
    lock: &'a IoLock,
}

impl IoLock {
    /// Waits for the lock (maintenance: rare, may queue).
    pub async fn lock(&self) -> IoGuard<'_> {
        IoGuard {
            _guard: self.mutex.lock().await,
            lock: self,
        }
    }

    /// The lock if it is free now.
    pub fn try_lock(&self) -> Option<IoGuard<'_>> {
        self.mutex.try_lock().map(|guard| IoGuard {
            _guard: guard,
            lock: self,
        })
    }

    /// Wakes the waiters: the lock was released or a flush finished.
    pub fn notify(&self) {
        self.releases.set(self.releases.get() + 1);
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        for waker in waiters {
            waker.wake();
        }
    }

    /// Completes at the next release of the lock or finished flush.
    pub fn progress(&self) -> impl Future<Output = ()> + '_ {
        let seen = self.releases.get();
        std::future::poll_fn(move |cx| {
            if self.releases.get() != seen {
                return Poll::Ready(());
            }
            self.waiters.borrow_mut().push(cx.waker().clone());
            Poll::Pending
        })
    }
}

impl Drop for IoGuard<'_> {
    fn drop(&mut self) {
        self.lock.notify();
    }
}
