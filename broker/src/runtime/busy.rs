//! How long a future kept its thread busy: the time spent inside its
//! polls, not the time it waited between them (on a disk, a peer, a
//! timer). On a thread-per-core server that is the share of a core the
//! work took, what a request-time quota limits.

use std::future::Future;
use std::time::{Duration, Instant};

/// Runs `future` to completion; its output and the time its polls took.
pub async fn timed<F: Future>(future: F) -> (F::Output, Duration) {
    let mut future = std::pin::pin!(future);
    let mut busy = Duration::ZERO;
    let output = std::future::poll_fn(|context| {
        let started = Instant::now();
        let poll = future.as_mut().poll(context);
        busy += started.elapsed();
        poll
    })
    .await;
    (output, busy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_spent_waiting_is_not_counted_and_time_spent_working_is() {
        let (value, busy) = futures::executor::block_on(timed(async {
            // Waiting: another thread wakes us 200 ms later.
            let (tx, rx) = futures::channel::oneshot::channel();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                let _ = tx.send(());
            });
            rx.await.unwrap();
            // Working: 30 ms on this thread.
            std::thread::sleep(Duration::from_millis(30));
            7
        }));
        assert_eq!(value, 7);
        assert!(busy >= Duration::from_millis(30), "{busy:?}");
        assert!(busy < Duration::from_millis(150), "{busy:?}");
    }
}
