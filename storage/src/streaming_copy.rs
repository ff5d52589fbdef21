//! Copying a batch into the write buffer, past the cache.
//!
//! The write buffer's chunks are written by the CPU and then read by the
//! device (a direct write); the CPU reads back only a flush's last partial
//! block, which the next flush carries. An ordinary copy first reads every
//! destination line into the cache (to own it) and later writes it back:
//! on a producer's 1 MiB batches that copy was 27% of the broker's CPU per
//! produced GB (docs/benchmarks.md, run 49). Non-temporal stores write
//! whole lines straight to memory, without reading them and without
//! pushing the request's own bytes out of the cache. glibc's memcpy uses
//! them only above a threshold derived from the last-level cache's size,
//! which on large shared caches no batch reaches.

/// Copies shorter than this take the ordinary copy: a small batch's
/// block is read again soon (the next flush carries the partial block).
pub const STREAMING_MIN_BYTES: usize = 16 * 1024;

/// Copies `src` into `dst` (of the same length). Lengths of at least
/// [`STREAMING_MIN_BYTES`] bypass the cache where the CPU allows it; the
/// stores are complete and ordered before anything the caller does next
/// (such as submitting the buffer's write) when it returns.
pub fn copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "a copy between slices of one length");
    if src.len() < STREAMING_MIN_BYTES {
        dst.copy_from_slice(src);
        return;
    }
    copy_streaming(dst, src);
}

#[cfg(target_arch = "x86_64")]
fn copy_streaming(dst: &mut [u8], src: &[u8]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    const LINE: usize = 64;
    // The head up to the first whole line of `dst`, so that each store in
    // the loop fills part of one line and every line is filled whole.
    let head = dst.as_ptr().align_offset(LINE).min(dst.len());
    dst[..head].copy_from_slice(&src[..head]);
    let lines = (dst.len() - head) / LINE;
    let body_end = head + lines * LINE;
    // SAFETY: SSE2 is part of x86_64. Every pointer below stays inside
    // `src[head..body_end]` or `dst[head..body_end]`; the stores are to
    // 16-byte aligned addresses (a line-aligned start plus multiples of
    // 16), as `_mm_stream_si128` requires; loads may be unaligned.
    unsafe {
        let mut from = src.as_ptr().add(head);
        let mut to = dst.as_mut_ptr().add(head);
        for _ in 0..lines {
            let a = _mm_loadu_si128(from as *const __m128i);
            let b = _mm_loadu_si128(from.add(16) as *const __m128i);
            let c = _mm_loadu_si128(from.add(32) as *const __m128i);
            let d = _mm_loadu_si128(from.add(48) as *const __m128i);
            _mm_stream_si128(to as *mut __m128i, a);
            _mm_stream_si128(to.add(16) as *mut __m128i, b);
            _mm_stream_si128(to.add(32) as *mut __m128i, c);
            _mm_stream_si128(to.add(48) as *mut __m128i, d);
            from = from.add(LINE);
            to = to.add(LINE);
        }
        // Non-temporal stores are weakly ordered: fence them before anything
        // after this copy (the write's submission) can see the buffer.
        _mm_sfence();
    }
    dst[body_end..].copy_from_slice(&src[body_end..]);
}

#[cfg(not(target_arch = "x86_64"))]
fn copy_streaming(dst: &mut [u8], src: &[u8]) {
    dst.copy_from_slice(src);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Lengths around the threshold and the line, at several offsets on
    /// both sides, give the source's bytes and leave the destination's
    /// other bytes alone. (The vector's own alignment is the allocator's,
    /// so the offsets are relative; the random test covers the rest.)
    #[test]
    fn copies_exactly_at_every_alignment_and_length() {
        let seed = crate::test_seed();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let source: Vec<u8> = (0..STREAMING_MIN_BYTES * 4).map(|_| rng.gen()).collect();
        let lengths = [
            0,
            1,
            63,
            64,
            65,
            STREAMING_MIN_BYTES - 1,
            STREAMING_MIN_BYTES,
            STREAMING_MIN_BYTES + 1,
            STREAMING_MIN_BYTES + 63,
            STREAMING_MIN_BYTES * 2 + 17,
            STREAMING_MIN_BYTES * 3,
        ];
        for &len in &lengths {
            for src_at in [0, 1, 15, 16, 33, 63] {
                for dst_at in [0, 1, 8, 16, 31, 48, 63] {
                    let mut dst = vec![0xA5u8; len + 2 * 64 + 64];
                    let src = &source[src_at..src_at + len];
                    copy(&mut dst[64 + dst_at..64 + dst_at + len], src);
                    assert_eq!(
                        &dst[64 + dst_at..64 + dst_at + len],
                        src,
                        "len {len} src+{src_at} dst+{dst_at}"
                    );
                    assert!(
                        dst[..64 + dst_at].iter().all(|&b| b == 0xA5),
                        "bytes before touched: len {len}"
                    );
                    assert!(
                        dst[64 + dst_at + len..].iter().all(|&b| b == 0xA5),
                        "bytes after touched: len {len}"
                    );
                }
            }
        }
    }

    /// Random lengths and positions against copy_from_slice.
    #[test]
    fn matches_an_ordinary_copy_at_random() {
        let seed = crate::test_seed();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let source: Vec<u8> = (0..1 << 20).map(|_| rng.gen()).collect();
        for _ in 0..200 {
            let len = rng.gen_range(0..source.len() / 2);
            let src_at = rng.gen_range(0..source.len() - len);
            let dst_at = rng.gen_range(0..4096);
            let mut ours = vec![0u8; dst_at + len + 100];
            let mut model = ours.clone();
            copy(
                &mut ours[dst_at..dst_at + len],
                &source[src_at..src_at + len],
            );
            model[dst_at..dst_at + len].copy_from_slice(&source[src_at..src_at + len]);
            assert!(ours == model, "len {len} src+{src_at} dst+{dst_at}");
        }
    }

    #[test]
    #[should_panic(expected = "one length")]
    fn refuses_slices_of_different_lengths() {
        copy(&mut [0u8; 4], &[1u8; 3]);
    }
}
