//! Memory faulted in before a paced run begins, so that the run does not
//! fault it in while it measures.
//!
//! A paced producer holds little in flight while the broker keeps up, and
//! up to its whole window (`--max-in-flight-bytes`) when the broker or the
//! disk stalls. The first stall of a run then grows loadgen's memory, and
//! a page the process touches for the first time costs the kernel's
//! zeroing of it: on bare metal about 0.1-0.3 s per GB, on the VMs of
//! docs/benchmarks.md 3-15 s per GB (run 60: the host backs such pages
//! afresh). There, one producer at 400,000 msgs/s of 100 B grew to 254 MB
//! and its first disk stall became a stall of 2-3 s of loadgen's own,
//! counted against the broker. So paced runs touch their windows' worth of
//! memory first and hand it to the allocator, which keeps it (loadgen
//! never returns freed memory, `main.rs`) for the run to reuse.

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

    /// This process's minor page faults so far.
    fn minor_faults() -> i64 {
        // SAFETY: getrusage fills the struct it is given.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) }, 0);
        usage.ru_minflt
    }

    #[test]
    fn memory_touched_first_is_reused_without_faulting_it_in_again() {
        // As loadgen's main does (each test runs in a process of its own).
        client::allocator::configure_purge_delay(client::allocator::NEVER_PURGE);
        let bytes = 64 << 20;
        let before = minor_faults();
        touch(bytes);
        let first = minor_faults() - before;
        // A run's allocations: batches of various sizes, written whole.
        let again = minor_faults();
        let held: Vec<Vec<u8>> = (0..bytes / (256 << 10))
            .map(|i| black_box(vec![i as u8; (256 << 10) - 64 * (i as usize % 7)]))
            .collect();
        let reused = minor_faults() - again;
        drop(held);
        // Touching 64 MiB faults at least once per 2 MiB page.
        assert!(first >= 32, "touching faulted {first} times");
        assert!(
            reused * 10 <= first,
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
