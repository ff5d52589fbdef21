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
use std::thread::{self, ThreadId};

/// A value that moves between threads but is dropped on its home thread.
struct Foreign {
    _value: Box<dyn Any>,
}

// SAFETY: a `Foreign` is only moved on other threads, never used or
// dropped there: `Returns` hands it back to the home thread to drop, or
// leaks it (see `Returns`'s Drop).
unsafe impl Send for Foreign {}

/// The values other threads dropped, waiting for their home thread.
struct Returns {
    home: ThreadId,
    any: AtomicBool,
    queue: Mutex<Vec<Foreign>>,
}

impl Drop for Returns {
    fn drop(&mut self) {
        // The last reference may go on another thread after the home
        // thread ended: what is still queued is leaked, never dropped
        // there (only at a shard's exit).
        let queue = self.queue.get_mut().unwrap_or_else(|e| e.into_inner());
        for foreign in queue.drain(..) {
            std::mem::forget(foreign);
        }
    }
}

thread_local! {
    static RETURNS: Arc<Returns> = Arc::new(Returns {
        home: thread::current().id(),
        any: AtomicBool::new(false),
        queue: Mutex::new(Vec::new()),
    });
}

/// Frees what other threads dropped of this thread's values.
pub fn free_returned() {
    RETURNS.with(|returns| {
        if returns.any.swap(false, Ordering::Acquire) {
            let returned =
                std::mem::take(&mut *returns.queue.lock().unwrap_or_else(|e| e.into_inner()));
            drop(returned);
        }
    });
}

/// A byte buffer of this thread's readable from any thread; see the module.
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
            returns: RETURNS.with(Arc::clone),
        }
    }
}

// SAFETY: other threads read the bytes through `ptr` (which `new`'s
// caller promised stay put) and never touch `value`, which is dropped
// only on its home thread.
unsafe impl<T: 'static> Send for HomeBound<T> {}
unsafe impl<T: 'static> Sync for HomeBound<T> {}

impl<T: 'static> AsRef<[u8]> for HomeBound<T> {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the bytes live as long as `value` (see `new`).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T: 'static> Drop for HomeBound<T> {
    fn drop(&mut self) {
        // SAFETY: `value` is taken once, here.
        let value = unsafe { ManuallyDrop::take(&mut self.value) };
        if thread::current().id() == self.returns.home {
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
    use std::cell::Cell;
    use std::rc::Rc;

    use bytes::Bytes;

    use super::*;

    /// Bytes that count, on their home thread, how many of them were freed.
    struct Counted {
        bytes: Vec<u8>,
        freed: Rc<Cell<usize>>,
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
            self.freed.set(self.freed.get() + 1);
        }
    }

    fn counted(text: &str, freed: &Rc<Cell<usize>>) -> Bytes {
        let value = Counted {
            bytes: text.as_bytes().to_vec(),
            freed: freed.clone(),
            home: thread::current().id(),
        };
        // SAFETY: a Vec's bytes stay put when the Vec moves.
        Bytes::from_owner(unsafe { HomeBound::new(value) })
    }

    #[test]
    fn dropped_at_home_it_is_freed_at_once() {
        let freed = Rc::new(Cell::new(0));
        let bytes = counted("at home", &freed);
        let slice = bytes.slice(3..);
        drop(bytes);
        assert_eq!(freed.get(), 0, "a slice still holds it");
        assert_eq!(&slice[..], b"home");
        drop(slice);
        assert_eq!(freed.get(), 1);
    }

    #[test]
    fn dropped_elsewhere_it_waits_for_its_home_to_free_it() {
        let freed = Rc::new(Cell::new(0));
        let bytes = counted("read far away", &freed);
        let read = thread::spawn(move || {
            let text = bytes.slice(5..).to_vec();
            drop(bytes);
            text
        })
        .join()
        .unwrap();
        assert_eq!(read, b"far away");
        assert_eq!(freed.get(), 0, "not freed on the other thread");
        free_returned();
        assert_eq!(freed.get(), 1, "freed by its home");
        free_returned();
        assert_eq!(freed.get(), 1, "once");
    }
}
