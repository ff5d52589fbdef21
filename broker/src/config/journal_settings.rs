//! The bounds of the shards' journal settings (`journal_bytes`,
//! `journal_flush_max_bytes`; docs/storage.md, "Many partitions").

/// Why `journal_bytes` and `journal_flush_max_bytes` cannot be used, if
/// they cannot: a journal is none (0) or at least 1 MiB of whole 4 KiB
/// blocks, and a flush that goes to it is 1 byte to 256 KiB.
pub fn check(journal_bytes: u64, flush_max_bytes: u64) -> Result<(), String> {
    let sized =
        journal_bytes == 0 || (journal_bytes >= 1 << 20 && journal_bytes.is_multiple_of(4096));
    if sized && (1..=256 << 10).contains(&flush_max_bytes) {
        return Ok(());
    }
    Err(format!(
        "journal_bytes must be 0 or at least 1048576 and a multiple of 4096 ({journal_bytes}); \
         journal_flush_max_bytes 1..=262144 ({flush_max_bytes})"
    ))
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn journal_sizes_are_none_or_whole_blocks_from_a_megabyte() {
        assert!(check(0, 16 << 10).is_ok());
        assert!(check(128 << 20, 16 << 10).is_ok());
        assert!(check(1 << 20, 256 << 10).is_ok());
        assert!(check((1 << 20) - 4096, 16 << 10).is_err());
        assert!(check((1 << 20) + 1, 16 << 10).is_err());
        assert!(check(128 << 20, 0).is_err());
        assert!(check(128 << 20, (256 << 10) + 1).is_err());
    }
}
