//! The allocator options of the project's programs (the broker and
//! loadgen declare mimalloc their global allocator in their `main.rs`):
//! freed memory kept longer before it goes back to the system than
//! mimalloc keeps it by default. Here because both programs use this
//! crate; nothing in the client library itself depends on it.
//!
//! Why: a broker shard frees request buffers as its batch cache evicts
//! them and allocates as many again for the requests arriving. With
//! mimalloc's default delay (1 s), memory freed in one second was
//! returned to the system and faulted in again the next:
//! rdkafka_performance's produce in the peer comparison cost 0.91-0.97
//! CPU-s per GB of the broker (three runs) against 0.72 with 10 s and
//! 0.67 with nothing returned (one run each; docs/benchmarks.md run 40).
//! loadgen's producers do the same with their batches: with 10 s, its
//! seconds under 200,000 msgs/s (or with none acknowledged) at 10
//! partitions and 270,000 msgs/s went from 3-9 a run to 0-2 (four runs
//! each, run 51). Kept 10 s, memory a burst took still goes back once the
//! broker is quieter; loadgen, which runs for one measurement, keeps it
//! all ([`NEVER_PURGE`], run 60).

use std::os::raw::c_long;

/// mimalloc's `purge_delay` option: its place in the option list of
/// mimalloc 3 (the version the `libmimalloc-sys` crate bundles; a test
/// checks the place still holds that option).
const PURGE_DELAY_OPTION: libmimalloc_sys::mi_option_t = 15;

/// How long freed memory stays with the program before it is returned.
pub const PURGE_DELAY_MS: c_long = 10_000;

/// The purge delay that never returns freed memory to the system.
pub const NEVER_PURGE: c_long = -1;

/// Sets the program's allocator options; call once at start, before any
/// other thread. An operator's `MIMALLOC_PURGE_DELAY` (milliseconds; -1
/// never returns memory), read by mimalloc before `main`, is kept.
pub fn configure() {
    configure_purge_delay(PURGE_DELAY_MS);
}

/// As [`configure`], with freed memory kept for `delay_ms` milliseconds
/// ([`NEVER_PURGE`]: for as long as the program runs).
pub fn configure_purge_delay(delay_ms: c_long) {
    // SAFETY: sets a process-wide option if the environment did not;
    // mimalloc reads it each time it purges.
    unsafe { libmimalloc_sys::mi_option_set_default(PURGE_DELAY_OPTION, delay_ms) };
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPERATORS_VARIABLE: &str = "MIMALLOC_PURGE_DELAY";

    fn purge_delay() -> c_long {
        // SAFETY: reads a process-wide option (no other thread sets it).
        unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY_OPTION) }
    }

    #[test]
    fn the_purge_delay_option_is_where_it_was_and_takes_the_setting() {
        if std::env::var_os(OPERATORS_VARIABLE).is_some() {
            return; // the operator's case: the test below
        }
        // mimalloc 3's default purge delay is 1,000 ms, and no other
        // option of its list defaults to that: a reordered list fails here.
        assert_eq!(purge_delay(), 1_000, "mimalloc's purge_delay default");
        configure();
        assert_eq!(purge_delay(), PURGE_DELAY_MS);
    }

    #[test]
    fn an_operators_purge_delay_is_kept() {
        let name = "allocator::tests::an_operators_purge_delay_is_kept";
        match std::env::var(OPERATORS_VARIABLE) {
            // In the child: mimalloc read the variable before main.
            Ok(value) => {
                configure();
                assert_eq!(purge_delay(), value.parse::<c_long>().unwrap());
            }
            // Run this test again in a process started with the variable.
            Err(_) => {
                let child = std::process::Command::new(std::env::current_exe().unwrap())
                    .args(["--exact", name, "--nocapture"])
                    .env(OPERATORS_VARIABLE, "4321")
                    .output()
                    .unwrap();
                let out = String::from_utf8_lossy(&child.stdout);
                assert!(child.status.success(), "{out}");
                assert!(out.contains("1 passed"), "the child ran the test: {out}");
            }
        }
    }
}
