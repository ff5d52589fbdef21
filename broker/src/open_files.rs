//! The process's open-file limit.
//!
//! Every partition keeps its active segment open, and every client
//! connection is a descriptor, so a broker with a thousand partitions needs
//! more than the 1,024 a login shell's soft limit often allows; past it, a
//! partition whose segment cannot be opened fails. The soft limit is only a
//! default the process may raise itself, up to the hard limit (the
//! operator's: `ulimit -Hn`, systemd's `LimitNOFILE`). So `broker serve`
//! raises it to the hard limit at start and says so.

use std::io;

/// The soft and hard limits on open files, as `getrlimit` gives them.
fn limits() -> io::Result<libc::rlimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into memory this function owns.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(limit)
}

/// The most a process may ask for, soft or hard: the kernel's `fs.nr_open`
/// (setrlimit refuses either limit above it).
fn kernel_ceiling() -> u64 {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1 << 20)
}

/// The limits to set so that the soft limit is the hard one, neither above
/// `ceiling`; None when the soft limit is there already.
fn raised(limit: libc::rlimit, ceiling: u64) -> Option<libc::rlimit> {
    let hard = limit.rlim_max.min(ceiling);
    (limit.rlim_cur < hard).then_some(libc::rlimit {
        rlim_cur: hard,
        // Lowering a hard limit above the ceiling needs no privilege, and
        // keeping it would make setrlimit refuse the call.
        rlim_max: hard,
    })
}

/// Raises the soft limit on open files to the hard limit (at most the
/// kernel's ceiling). Returns the soft limit before and after.
pub fn raise_to_hard_limit() -> io::Result<(u64, u64)> {
    let limit = limits()?;
    let Some(new) = raised(limit, kernel_ceiling()) else {
        return Ok((limit.rlim_cur, limit.rlim_cur));
    };
    // SAFETY: setrlimit reads one rlimit this function owns.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((limit.rlim_cur, new.rlim_cur))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets this process's soft limit (each test runs in a process of its
    /// own under nextest, the suite's runner).
    fn set_soft(soft: u64) {
        let limit = limits().unwrap();
        let lowered = libc::rlimit {
            rlim_cur: soft,
            rlim_max: limit.rlim_max.min(kernel_ceiling()),
        };
        // SAFETY: as in raise_to_hard_limit.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lowered) }, 0);
    }

    fn limit(soft: u64, hard: u64) -> libc::rlimit {
        libc::rlimit {
            rlim_cur: soft,
            rlim_max: hard,
        }
    }

    #[test]
    fn the_soft_limit_goes_to_the_hard_one_never_above_the_ceiling() {
        let pair = |l: Option<libc::rlimit>| l.map(|l| (l.rlim_cur, l.rlim_max));
        assert_eq!(pair(raised(limit(1024, 4096), 1 << 20)), Some((4096, 4096)));
        // A hard limit above the kernel's ceiling (or unlimited) comes down
        // to it, or setrlimit would refuse.
        assert_eq!(
            pair(raised(limit(1024, 1 << 30), 1 << 20)),
            Some((1 << 20, 1 << 20))
        );
        assert_eq!(
            pair(raised(limit(1024, libc::RLIM_INFINITY), 1 << 20)),
            Some((1 << 20, 1 << 20))
        );
        // Nothing to do when the soft limit is there already.
        assert_eq!(pair(raised(limit(4096, 4096), 1 << 20)), None);
        assert_eq!(pair(raised(limit(1 << 20, 1 << 30), 1 << 20)), None);
    }

    #[test]
    fn a_low_soft_limit_is_raised_to_the_hard_one() {
        let hard = limits().unwrap().rlim_max.min(kernel_ceiling());
        let low = 256.min(hard);
        set_soft(low);
        assert_eq!(raise_to_hard_limit().unwrap(), (low, hard));
        assert_eq!(limits().unwrap().rlim_cur, hard);
        // Already there: nothing to do.
        assert_eq!(raise_to_hard_limit().unwrap(), (hard, hard));
    }
}
