//! The CRC-32C of a record batch's body (attributes to the end).
//!
//! Every produced batch is checked before it is appended, so on a
//! producer's 1 MiB batches the check was 17% of the broker's CPU per
//! produced GB (docs/benchmarks.md, run 49). The crc32c crate, the
//! project's CRC elsewhere, runs the CPU's CRC32 instruction three streams
//! wide (about 31 GB/s on cache-hot bytes here); crc-fast folds the bytes
//! with carry-less multiplication over 512-bit registers where the CPU has
//! them (about 120 GB/s here), over 128-bit ones where it has only those.
//! Without carry-less multiplication it would fall back to a table, slower
//! than the crc32c crate, so it is used only where the CPU has it, and only
//! from [`LARGE_BODY_BYTES`] up, where its width pays.

/// Bodies at least this long go to crc-fast.
pub const LARGE_BODY_BYTES: usize = 4096;

/// The CRC-32C (Castagnoli) of `body`.
pub fn crc32c(body: &[u8]) -> u32 {
    if body.len() >= LARGE_BODY_BYTES && folds_with_carry_less_multiply() {
        // The 32-bit CRC comes back widened to u64.
        crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, body) as u32
    } else {
        crc32c::crc32c(body)
    }
}

/// Whether this CPU has the instructions crc-fast folds with (the answer
/// is detected once and cached by the standard library).
fn folds_with_carry_less_multiply() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("pclmulqdq");
    #[cfg(target_arch = "aarch64")]
    return std::arch::is_aarch64_feature_detected!("aes");
    #[allow(unreachable_code)]
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Both sides of the threshold and random lengths up to 1 MiB agree
    /// with the crc32c crate, at any start within a word.
    #[test]
    fn agrees_with_the_crc32c_crate() {
        let seed = crate::test_seed();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let bytes: Vec<u8> = (0..(1 << 20) + 64).map(|_| rng.gen()).collect();
        let mut lengths = vec![
            0,
            1,
            7,
            64,
            LARGE_BODY_BYTES - 1,
            LARGE_BODY_BYTES,
            LARGE_BODY_BYTES + 1,
            1 << 20,
        ];
        lengths.extend((0..200).map(|_| rng.gen_range(0..1 << 20)));
        for len in lengths {
            let at = rng.gen_range(0..64);
            let body = &bytes[at..at + len];
            assert_eq!(crc32c(body), crc32c::crc32c(body), "len {len} at +{at}");
        }
    }

    /// The catalogue's check value of CRC-32C (Castagnoli) on the short
    /// path; on the long path, the check string followed by zeros gives
    /// the check value continued over the zeros.
    #[test]
    fn gives_the_castagnoli_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        let mut long = b"123456789".to_vec();
        long.resize(LARGE_BODY_BYTES * 3 + 5, 0);
        let continued = crc32c::crc32c_append(0xE306_9283, &long[9..]);
        assert_eq!(crc32c(&long), continued);
    }
}
