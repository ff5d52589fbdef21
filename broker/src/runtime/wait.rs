//! Waiting with a bound: for a condition another task makes true, polled
//! at a tick, and for a future, up to a deadline.

use std::future::Future;
use std::time::{Duration, Instant};

use futures::future::{select, Either};

/// Looks at `done` every `tick` until it holds (true) or `max` has passed
/// (false). For state another task updates with no way to be woken (a
/// shard's copy of the metadata reaching an index).
pub async fn until(tick: Duration, max: Duration, mut done: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    loop {
        if done() {
            return true;
        }
        if started.elapsed() >= max {
            return false;
        }
        glommio::timer::sleep(tick).await;
    }
}

/// `work`'s output, or None if `timeout` passes first (`work` is dropped).
pub async fn within<T>(timeout: Duration, work: impl Future<Output = T>) -> Option<T> {
    let timer = glommio::timer::sleep(timeout);
    match select(Box::pin(work), Box::pin(timer)).await {
        Either::Left((output, _)) => Some(output),
        Either::Right(_) => None,
    }
}
