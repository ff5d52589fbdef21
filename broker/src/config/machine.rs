//! What the machine offers the broker's defaults: open files and memory,
//! as /proc and the cgroup say.

/// The process's soft limit of open files, if /proc says.
pub fn open_file_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// The memory the broker may use: the machine's, or its cgroup's limit
/// when lower (a container's).
pub fn usable_memory_bytes() -> Option<u64> {
    let cgroup = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|path| {
        std::fs::read_to_string(path)
            .ok()?
            .trim()
            .parse::<u64>()
            .ok()
    });
    let machine = physical_memory_bytes();
    match (cgroup, machine) {
        (Some(limit), Some(machine)) => Some(limit.min(machine)),
        (limit, machine) => limit.or(machine),
    }
}

/// The machine's memory (MemTotal), if /proc says.
fn physical_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
