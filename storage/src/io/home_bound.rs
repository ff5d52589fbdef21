//! Disk reads handed out without a copy, though their memory belongs to
//! one shard.
//!
//! glommio's read buffers live in the shard that read them: their
//! reference counts are not atomic and the registered-buffer pool they
//! may come from sits in a `RefCell`. Copying every read into fresh
//! memory made them plain `Bytes` at a price: the copy was 28% of the
//! broker's CPU serving a consumer from disk. A [`HomeBound`] lets the
//! buffer itself travel as `Bytes` to any shard instead, while only its
//! home thread ever touches it: the bytes are read through a pointer
//! taken at home, and one dropped on another thread is queued and freed
//! by its home the next time that home reads ([`free_returned`]), as
//! Seastar's `foreign_ptr` does.

use std::any::Any;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A value that moves between threads but is dropped on its home thread.
struct Foreign {
    _value: Box<dyn Any>,
}

// SAFETY: a `Foreign` is only moved on other threads, never used or
// dropped there: its home thread drops it, or nobody does (see
// `Returns`'s Drop).
unsafe impl Send for Foreign {}

/// The values other threads dropped, waiting for their home thread.
#[derive(Default)]
struct Returns {
    any: AtomicBool,
    queue: Mutex<Vec<Foreign>>,
}

impl Returns {
    /// Drops what is queued: on the home thread only.
    fn free(&self) {
        if self.any.swap(false, Ordering::Acquire) {
            let returned =
                std::mem::take(&mut *self.queue.lock().unwrap_or_else(|e| e.into_inner()));
            drop(returned);
        }
    }
}

impl Drop for Returns {
    fn drop(&mut self) {
        // The last reference may go on another thread after the home
        // thread ended: what was queued since is leaked, never dropped
        // there.
        let queue = self.queue.get_mut().unwrap_or_else(|e| e.into_inner());
        for foreign in queue.drain(..) {
            std::mem::forget(foreign);
        }
    }
}

/// A thread's own `Returns`: what is queued when the thread ends is freed
/// by it, at home.
struct Home(Arc<Returns>);

impl Drop for Home {
    fn drop(&mut self) {
        self.0.free();
    }
}

thread_local! {
    static HOME: Home = Home(Arc::default());
}

/// Frees what other threads dropped of this thread's values: at each of
/// its disk reads, and on a timer (a shard that stops reading would keep
/// them otherwise).
pub fn free_returned() {
    let _ = HOME.try_with(|home| home.0.free());
}

/// Bytes owned by this thread that any thread may read (see the module).
pub struct HomeBound<T: 'static> {
    value: ManuallyDrop<T>,
    ptr: *const u8,
    len: usize,
    returns: Arc<Returns>,
}

impl<T: Deref<Target = [u8]> + 'static> HomeBound<T> {
    /// Binds `value` to this thread.
    ///
    /// # Safety
    /// The bytes `value` derefs to stay where they are, unchanged, while
    /// it lives (moving `value` does not move them), and `value` may be
    /// moved, unused, through another thread and back.
    pub unsafe fn new(value: T) -> HomeBound<T> {
        let (ptr, len) = (value.as_ptr(), value.len());
        HomeBound {
            value: ManuallyDrop::new(value),
            ptr,
            len,
            returns: HOME.with(|home| home.0.clone()),
        }
    }
}

// SAFETY: other threads read the bytes through `ptr` (which `new`'s
// caller promised stay put) and never touch `value`, which is dropped
// only on its home thread.
unsafe impl<T: 'static> Send for HomeBound<T> {}

impl<T: 'static> AsRef<[u8]> for HomeBound<T> {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the bytes live as long as `value` (see `new`).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T: 'static> Drop for HomeBound<T> {
    fn drop(&mut self) {
        // Decided before `value` is taken, by a check that cannot panic
        // (a thread's locals may be gone while it ends): a panic with
        // `value` out would drop it here, wherever here is.
        let at_home = HOME
            .try_with(|home| Arc::ptr_eq(&home.0, &self.returns))
            .unwrap_or(false);
        // SAFETY: `value` is taken once, here.
        let value = unsafe { ManuallyDrop::take(&mut self.value) };
        if at_home {
            drop(value);
            return;
        }
        let foreign = Foreign {
            _value: Box::new(value),
        };
        let mut queue = self.returns.queue.lock().unwrap_or_else(|e| e.into_inner());
        queue.push(foreign);
        self.returns.any.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;
    use std::thread::{self, ThreadId};

    use bytes::Bytes;

    use super::*;

    /// Bytes that count how many of them were freed, and fail a drop
    /// away from their home thread.
    struct Counted {
        bytes: Vec<u8>,
        freed: Arc<AtomicUsize>,
        home: ThreadId,
    }

    impl Deref for Counted {
        type Target = [u8];
        fn deref(&self) -> &[u8] {
            &self.bytes
        }
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            assert_eq!(thread::current().id(), self.home, "freed away from home");
            self.freed.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counted(text: &str, freed: &Arc<AtomicUsize>) -> Bytes {
        let value = Counted {
            bytes: text.as_bytes().to_vec(),
            freed: freed.clone(),
            home: thread::current().id(),
        };
        // SAFETY: a Vec's bytes stay put when the Vec moves.
        Bytes::from_owner(unsafe { HomeBound::new(value) })
    }

    fn freed(count: &Arc<AtomicUsize>) -> usize {
        count.load(Ordering::SeqCst)
    }

    #[test]
    fn dropped_at_home_it_is_freed_at_once() {
        let count = Arc::new(AtomicUsize::new(0));
        let bytes = counted("at home", &count);
        let slice = bytes.slice(3..);
        drop(bytes);
        assert_eq!(freed(&count), 0, "a slice still holds it");
        assert_eq!(&slice[..], b"home");
        drop(slice);
        assert_eq!(freed(&count), 1);
    }

    #[test]
    fn dropped_elsewhere_it_waits_for_its_home_to_free_it() {
        let count = Arc::new(AtomicUsize::new(0));
        let bytes = counted("read far away", &count);
        let read = thread::spawn(move || {
            let text = bytes.slice(5..).to_vec();
            drop(bytes);
            text
        })
        .join()
        .unwrap();
        assert_eq!(read, b"far away");
        assert_eq!(freed(&count), 0, "not freed on the other thread");
        free_returned();
        assert_eq!(freed(&count), 1, "freed by its home");
        free_returned();
        assert_eq!(freed(&count), 1, "once");
    }

    #[test]
    fn its_home_frees_what_is_queued_as_it_ends_and_nothing_is_freed_away_after() {
        let count = Arc::new(AtomicUsize::new(0));
        let (to_main, from_home) = mpsc::channel();
        let (to_home, from_main) = mpsc::channel::<()>();
        let home_count = count.clone();
        let home = thread::spawn(move || {
            to_main
                .send((counted("a", &home_count), counted("b", &home_count)))
                .unwrap();
            from_main.recv().unwrap();
        });
        let (a, b) = from_home.recv().unwrap();
        drop(a);
        to_home.send(()).unwrap();
        home.join()
            .expect("the home thread ended without a drop away from it");
        assert_eq!(freed(&count), 1, "a, queued, freed by its home as it ended");
        assert_eq!(&b[..], b"b", "b's bytes still readable");
        // Its home is gone: b is leaked, not dropped here (Counted's drop
        // would fail this test).
        drop(b);
        assert_eq!(freed(&count), 1);
    }
}
