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
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

thread_local! {
    static CATCHING: Cell<bool> = const { Cell::new(false) };
}

/// Whether a panic on this thread now would be caught by a
/// [`catch_panic`] future being polled: a panic hook that ends the
/// process lets those pass.
pub fn panic_is_caught() -> bool {
    CATCHING.with(Cell::get)
}

/// `future`, with a panic while it is polled (not while other tasks run)
/// turned into `Err` with the panic's message.
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
            Err(payload) => Poll::Ready(Err(message(&*payload))),
        }
    }
}

fn message(payload: &(dyn Any + Send)) -> String {
    match (
        payload.downcast_ref::<&str>(),
        payload.downcast_ref::<String>(),
    ) {
        (Some(text), _) => (*text).to_string(),
        (_, Some(text)) => text.clone(),
        _ => "a panic without a message".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_while_polled_is_the_futures_error_and_the_flag_is_only_up_meanwhile() {
        let seen_inside = Cell::new(false);
        let failed = futures::executor::block_on(catch_panic(async {
            seen_inside.set(panic_is_caught());
            crate::io::memory::yield_once().await;
            if seen_inside.get() {
                panic!("ENOENT");
            }
        }));
        assert!(seen_inside.get(), "caught while polled");
        assert_eq!(failed, Err("ENOENT".to_string()));
        assert!(!panic_is_caught(), "not once it returned");
        let fine = futures::executor::block_on(catch_panic(async { 7 }));
        assert_eq!(fine, Ok(7));
    }
}
