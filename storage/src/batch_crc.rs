//! The CRC-32C of a record batch's body (attributes to the end).
//!
//! Every produced batch is checked before it is appended, so on a
//! producer's 1 MiB batches the check was 17% of the broker's CPU per
//! produced GB (docs/benchmarks.md, run 49). The crc32c crate, the
//! project's CRC elsewhere, runs the CPU's CRC32 instruction three streams
//! wide (about 31 GB/s on cache-hot bytes here); crc-fast folds the bytes
//! with carry-less multiplication over 512-bit registers where the CPU has
//! them (about 120 GB/s here) and falls back to narrower folding or the
//! CRC32 instruction where it does not. It is used only from
//! [`LARGE_BODY_BYTES`] up, where its width pays.

/// Bodies at least this long go to crc-fast.
pub const LARGE_BODY_BYTES: usize = 4096;

/// The CRC-32C (Castagnoli) of `body`.
pub fn crc32c(body: &[u8]) -> u32 {
    if body.len() >= LARGE_BODY_BYTES {
        // The 32-bit CRC comes back widened to u64.
        crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, body) as u32
    } else {
        crc32c::crc32c(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Both sides of the threshold and random lengths up to 1 MiB agree
    /// with the crc32c crate, at any start within a word.
    #[test]
    fn agrees_with_the_crc32c_crate() {
        let seed = rand::random::<u64>();
        println!("seed {seed}");
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

    /// The check value of CRC-32C (Castagnoli), over a body long enough
    /// to take the wide path: "123456789" repeated, against the crc32c
    /// crate, and the catalogue's check value for the short path.
    #[test]
    fn gives_the_castagnoli_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        let long = b"123456789".repeat(1000);
        assert_eq!(crc32c(&long), crc32c::crc32c(&long));
    }
}
