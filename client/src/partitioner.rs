//! The Java client's default key partitioner: murmur2 of the key bytes,
//! made positive, modulo the partition count. Identical results matter:
//! a key must land on the same partition whichever client produced it.

/// Kafka's murmur2 (the Java client's `Utils.murmur2`), 32-bit, seed
/// 0x9747b28c.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = data.len() as u32;
    let mut h: u32 = SEED ^ length;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes(chunk.try_into().expect("4 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= (tail[2] as u32) << 16;
    }
    if tail.len() >= 2 {
        h ^= (tail[1] as u32) << 8;
    }
    if !tail.is_empty() {
        h ^= tail[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of a keyed record: `(murmur2(key) & 0x7fffffff) % partitions`.
pub fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    assert!(partitions > 0, "a topic has at least one partition");
    (murmur2(key) as u32 & 0x7fff_ffff) % partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values the Java client's own tests check (UtilsTest.testMurmur2).
    #[test]
    fn matches_the_java_clients_murmur2() {
        let cases: [(&str, i32); 6] = [
            ("21", -973_932_308),
            ("foobar", -790_332_482),
            ("a-little-bit-long-string", -985_981_536),
            ("a-little-bit-longer-string", -1_486_304_829),
            (
                "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            ("abc", 479_470_107),
        ];
        for (key, expected) in cases {
            assert_eq!(murmur2(key.as_bytes()), expected, "{key}");
        }
    }

    #[test]
    fn partitions_are_in_range_and_stable() {
        for i in 0..10_000u32 {
            let key = i.to_be_bytes();
            let p = partition_for_key(&key, 8);
            assert!(p < 8);
            assert_eq!(p, partition_for_key(&key, 8));
        }
    }
}
