//! Memory faulted in before a paced run begins, so that the run does not
//! fault it in while it measures.
//!
//! A paced producer holds little in flight while the broker keeps up, and
//! up to its whole window (`--max-in-flight-bytes`) when the broker or the
//! disk stalls. The first stall of a run then grows loadgen's memory, and
//! a page the process touches for the first time costs the kernel's
//! zeroing of it: on bare metal a fraction of a second per GB (not
//! measured here), on the VMs of
//! docs/benchmarks.md 3-15 s per GB (run 60: the host backs such pages
//! afresh). There, one producer at 400,000 msgs/s of 100 B grew to 254 MB
//! and its first disk stall became a stall of 1.7-4 s of loadgen's own,
//! counted against the broker. So paced runs touch their windows' worth of
//! memory first and hand it to the allocator, which keeps it (loadgen
//! never returns freed memory, `main.rs`) for the run to reuse. The touch
//! runs on the main thread before the workers start; a worker reuses
//! most of it, not all (about 72% in this module's test); with twice the
//! windows touched, C's runs in docs/benchmarks.md run 60 had no stall of
//! seconds left.

use std::hint::black_box;

/// Memory is touched in blocks of this size (each its own allocation, as
/// the run's batches are, and returned to the allocator's shared arenas
/// when freed).
const BLOCK_BYTES: usize = 4 << 20;

/// At most this much is touched: the cost on a slow VM stays a few seconds
/// before the run, not counted in it.
pub const MOST_BYTES: u64 = 256 << 20;

/// What a paced run of `producers`, each with `window_bytes` in flight at
/// most, touches first: twice the windows (a message in flight takes its
/// payload and about as much again in its batch and callback), at most
/// [`MOST_BYTES`].
pub fn bytes_for(producers: usize, window_bytes: u64) -> u64 {
    (producers as u64)
        .saturating_mul(window_bytes)
        .saturating_mul(2)
        .min(MOST_BYTES)
}

/// Allocates `bytes` (rounded up to whole blocks), writes every page, and
/// frees it all.
pub fn touch(bytes: u64) {
    let blocks = (bytes as usize).div_ceil(BLOCK_BYTES);
    let held: Vec<Vec<u8>> = (0..blocks)
        .map(|_| black_box(vec![1u8; BLOCK_BYTES]))
        .collect();
    drop(black_box(held));
}

#[cfg(test)]
mod tests {
    use super::*;

    // The unit tests' allocator is loadgen's (main.rs), so that what they
    // measure of it holds for the program.
    #[global_allocator]
    static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

    /// The calling thread's minor page faults so far (not the process's:
    /// other tests may run beside it).
    fn minor_faults() -> i64 {
        // SAFETY: getrusage fills the struct it is given.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        assert_eq!(
            unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) },
            0
        );
        usage.ru_minflt
    }

    #[test]
    fn memory_touched_first_is_reused_by_another_thread_without_faulting_it_in_again() {
        // As loadgen's main does (the option is process-wide, and every
        // test that sets it sets this).
        client::allocator::configure_purge_delay(client::allocator::NEVER_PURGE);
        let bytes = 64 << 20;
        let before = minor_faults();
        touch(bytes);
        let first = minor_faults() - before;
        // A run's allocations, on a thread of their own as loadgen's
        // producers are: batches of various sizes, written whole.
        let reused = std::thread::spawn(move || {
            let before = minor_faults();
            let held: Vec<Vec<u8>> = (0..bytes / (256 << 10))
                .map(|i| black_box(vec![i as u8; (256 << 10) - 64 * (i as usize % 7)]))
                .collect();
            let reused = minor_faults() - before;
            drop(held);
            reused
        })
        .join()
        .unwrap();
        // Touching 64 MiB faults at least once per 2 MiB page. Another
        // thread reuses most of it, not all: 9 faults against 36-41 here,
        // its RSS grew 18 of the 64 MiB (the same thread: 2 against 40).
        // Without the touch, every page would fault.
        assert!(first >= 32, "touching faulted {first} times");
        assert!(
            reused * 2 <= first,
            "{reused} faults reusing, {first} touching"
        );
    }

    #[test]
    fn twice_the_windows_up_to_the_cap() {
        assert_eq!(bytes_for(1, 64 << 20), 128 << 20);
        assert_eq!(bytes_for(4, 64 << 20), MOST_BYTES);
        assert_eq!(bytes_for(1000, 1 << 20), MOST_BYTES);
        assert_eq!(bytes_for(1, 0), 0);
    }
}
