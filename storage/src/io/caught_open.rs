//! An open whose panic becomes its error. glommio 0.9's DMA open unwraps
//! a `statfs` of the path right after the file opens (`DmaFile::open_at`):
//! if the file's directory is renamed or removed in between (a topic
//! deleted, a partition's directory set aside, while a shard opens a file
//! there), that `unwrap` panics, and a panic ends the broker. Wrapped in
//! [`catch_panic`], the open fails instead, as it would had the directory
//! gone a moment earlier.

use std::any::Any;
use std::cell::Cell;
use std::future::Future;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe, PanicHookInfo};
use std::pin::Pin;
use std::task::{Context, Poll};

// Catching needs unwinding: a build that aborts on panic would crash
// where this says it does not.
#[cfg(not(panic = "unwind"))]
compile_error!("storage::io::caught_open needs panic = \"unwind\"");

thread_local! {
    static CATCHING: Cell<bool> = const { Cell::new(false) };
}

/// Whether a panic on this thread now would be caught by a
/// [`catch_panic`] future being polled.
pub fn panic_is_caught() -> bool {
    CATCHING.with(Cell::get)
}

/// Whether a panic hook sees the one panic [`catch_panic`] is for: the
/// runtime's open failing to find the path it just opened, while an open
/// is polled. A hook that ends the process lets it pass; any other panic
/// still ends it.
pub fn is_the_caught_open_panic(info: &PanicHookInfo<'_>) -> bool {
    let in_the_open = info
        .location()
        .is_some_and(|at| at.file().ends_with("io/dma_file.rs"));
    panic_is_caught() && in_the_open && info.payload_as_str().is_some_and(names_a_missing_path)
}

/// Whether a panic's message is an error for a path that is not there.
fn names_a_missing_path(message: &str) -> bool {
    message.contains("ENOENT") || message.contains("ENOTDIR")
}

/// `future`, with a panic for a missing path while it is polled (not
/// while other tasks run) turned into `Err` with the panic's message;
/// any other panic goes on unwinding.
pub fn catch_panic<F: Future>(future: F) -> CatchPanic<F> {
    CatchPanic {
        inner: Box::pin(future),
    }
}

/// See [`catch_panic`].
pub struct CatchPanic<F> {
    inner: Pin<Box<F>>,
}

impl<F: Future> Future for CatchPanic<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let outer = CATCHING.with(|c| c.replace(true));
        let polled = catch_unwind(AssertUnwindSafe(|| self.inner.as_mut().poll(cx)));
        CATCHING.with(|c| c.set(outer));
        match polled {
            Ok(poll) => poll.map(Ok),
            Err(payload) => match message(&*payload) {
                Some(text) if names_a_missing_path(&text) => Poll::Ready(Err(text)),
                _ => resume_unwind(payload),
            },
        }
    }
}

fn message(payload: &(dyn Any + Send)) -> Option<String> {
    match (
        payload.downcast_ref::<&str>(),
        payload.downcast_ref::<String>(),
    ) {
        (Some(text), _) => Some((*text).to_string()),
        (_, Some(text)) => Some(text.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_path_panic_while_polled_is_the_futures_error_and_the_flag_is_only_up_meanwhile() {
        let seen_inside = Cell::new(false);
        let failed = futures::executor::block_on(catch_panic(async {
            seen_inside.set(panic_is_caught());
            crate::io::memory::yield_once().await;
            if seen_inside.get() {
                panic!("called `Result::unwrap()` on an `Err` value: ENOENT");
            }
        }));
        assert!(seen_inside.get(), "caught while polled");
        assert!(failed.is_err_and(|e| e.contains("ENOENT")));
        assert!(!panic_is_caught(), "not once it returned");
        let fine = futures::executor::block_on(catch_panic(async { 7 }));
        assert_eq!(fine, Ok(7));
    }

    #[test]
    fn any_other_panic_goes_on() {
        let other = std::panic::catch_unwind(|| {
            futures::executor::block_on(catch_panic(async { panic!("a bug") }))
        });
        assert!(other.is_err(), "not caught as an open's failure");
        assert!(!panic_is_caught());
    }
}
