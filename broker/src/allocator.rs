//! The broker's allocator: mimalloc (the global allocator is declared in
//! `main.rs`), with freed memory kept longer before it goes back to the
//! system than mimalloc keeps it by default.
//!
//! Why: a shard frees request buffers as its batch cache evicts them and
//! allocates as many again for the requests arriving. With mimalloc's
//! default delay (1 s), memory freed in one second was returned to the
//! system and faulted in again the next: rdkafka_performance's produce in
//! the peer comparison cost 0.91-0.97 CPU-s per GB (three runs) against
//! 0.72 with 10 s and 0.67 with nothing returned (one run each;
//! docs/benchmarks.md run 40). Kept 10 s, memory a burst took still goes
//! back once the broker is quieter.

use std::os::raw::c_long;

/// mimalloc's `purge_delay` option: its place in the option list of
/// mimalloc 3 (the version the `libmimalloc-sys` crate bundles; a test
/// checks the place still holds that option).
const PURGE_DELAY_OPTION: libmimalloc_sys::mi_option_t = 15;

/// How long freed memory stays with the broker before it is returned.
pub const PURGE_DELAY_MS: c_long = 10_000;

/// Sets the broker's allocator options; call once at start.
pub fn configure() {
    // SAFETY: sets a process-wide option; mimalloc reads it as it purges.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY_OPTION, PURGE_DELAY_MS) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_option_is_where_it_was_and_takes_the_setting() {
        // mimalloc 3's default purge delay is 1,000 ms, and no other
        // option of its list defaults to that: a reordered list fails here.
        // SAFETY: reads and sets process-wide options.
        let default = unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY_OPTION) };
        assert_eq!(default, 1_000, "mimalloc's purge_delay default");
        configure();
        let set = unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY_OPTION) };
        assert_eq!(set, PURGE_DELAY_MS);
    }
}
