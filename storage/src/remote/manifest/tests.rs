//! The manifest's rules and layout; then random uploads by leaders that
//! cut their segments at different offsets, retried and expired, against
//! the invariants (every offset from the remote start to its end served
//! by exactly one segment, nothing uploaded twice, the layout round-trips).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;

fn segment(base: i64, last: i64, bytes: u64, max_timestamp: i64) -> RemoteSegment {
    RemoteSegment {
        base_offset: Offset(base),
        first_served: Offset(base),
        last_offset: Offset(last),
        max_timestamp: TimestampMs(max_timestamp),
        size_bytes: bytes,
        crc: (base as u32).wrapping_mul(2654435761),
        epochs: vec![(LeaderEpoch(1), Offset(base))],
        uploaded_by: LeaderEpoch(1),
    }
}

fn sealed(base: i64, last: i64) -> SealedSegment {
    SealedSegment {
        base_offset: Offset(base),
        last_offset: Offset(last),
    }
}

#[test]
fn segments_are_uploaded_in_order_once_committed_and_a_new_leaders_cuts_serve_what_is_new() {
    let mut m = Manifest::default();
    let local = [sealed(0, 9), sealed(10, 19), sealed(20, 29)];
    assert_eq!(
        m.to_upload(&local, Offset(25)),
        [sealed(0, 9), sealed(10, 19)],
        "below the HW"
    );
    m.add(segment(0, 9, 100, 1_000)).unwrap();
    m.add(segment(10, 19, 100, 2_000)).unwrap();
    assert_eq!(m.to_upload(&local, Offset(30)), [sealed(20, 29)]);
    // Again (a retry after a crash): nothing new, refused.
    assert_eq!(
        m.add(segment(10, 19, 100, 2_000)),
        Err(ManifestError::NothingNew(10, 19, 19))
    );
    assert_eq!(
        m.add(segment(25, 29, 1, 0)),
        Err(ManifestError::Gap(25, 19))
    );
    assert_eq!(
        m.add(segment(30, 29, 1, 0)),
        Err(ManifestError::Malformed(30, 29))
    );
    // A new leader cut its segment at 15: it serves 20 on.
    m.add(segment(15, 34, 200, 3_000)).unwrap();
    assert_eq!(m.segments()[2].first_served, Offset(20));
    assert_eq!(m.locate(Offset(17)).unwrap().base_offset, Offset(10));
    assert_eq!(m.locate(Offset(20)).unwrap().base_offset, Offset(15));
    assert_eq!(m.locate(Offset(35)), None);
    assert!(m.holds_through(Offset(34)) && !m.holds_through(Offset(35)));
    assert_eq!(
        m.segments()[0].object_stem(),
        "00000000000000000000-00000000"
    );
}

#[test]
fn total_retention_drops_the_oldest_and_keeps_what_was_uploaded_from_coming_back() {
    let mut m = Manifest::default();
    for (i, base) in [0, 10, 20].into_iter().enumerate() {
        m.add(segment(base, base + 9, 100, 1_000 * (i as i64 + 1)))
            .unwrap();
    }
    // 300 remote + 50 local over 260: the first goes.
    let dropped = m.expire((Some(260), None), 50, TimestampMs(0));
    assert_eq!(dropped.len(), 1);
    assert_eq!(m.start_offset(), Some(Offset(10)));
    // Older than 1.5 s at 4 s: the one whose newest record is from 2 s
    // goes, the one from 3 s stays.
    let dropped = m.expire((None, Some(1_500)), 0, TimestampMs(4_000));
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].base_offset, Offset(10));
    let dropped = m.expire((Some(0), None), 0, TimestampMs(0));
    assert_eq!(dropped.len(), 1);
    assert_eq!((m.segments().len(), m.last_offset()), (0, Some(Offset(29))));
    assert!(
        m.to_upload(&[sealed(20, 29)], Offset(40)).is_empty(),
        "not again"
    );
    let round = Manifest::decode(&m.encode()).unwrap();
    assert_eq!(round, m);
    m.add(segment(30, 39, 10, 0)).unwrap();
    assert_eq!(m.segments()[0].first_served, Offset(30));
}

#[test]
fn delete_records_moves_the_remote_start_and_nothing_below_it_comes_back() {
    let mut m = Manifest::default();
    for (base, last) in [(0, 9), (10, 19), (20, 29)] {
        m.add(segment(base, last, 100, last)).unwrap();
    }
    let dropped = m.trim_start(Offset(15));
    assert_eq!(
        dropped.iter().map(|s| s.base_offset.0).collect::<Vec<_>>(),
        [0]
    );
    assert_eq!(
        m.start_offset(),
        Some(Offset(15)),
        "served from the new start"
    );
    assert_eq!(m.locate(Offset(14)), None);
    assert_eq!(
        m.locate(Offset(15)).map(|s| s.base_offset),
        Some(Offset(10))
    );
    assert_eq!(m.last_offset(), Some(Offset(29)));
    assert!(
        m.trim_start(Offset(3)).is_empty(),
        "below the start: nothing"
    );
    assert_eq!(m.start_offset(), Some(Offset(15)));
    // Past everything uploaded: the remote log empties, and a local
    // segment holding the new start serves only from it once uploaded.
    assert_eq!(m.trim_start(Offset(35)).len(), 2);
    assert_eq!(
        (m.start_offset(), m.last_offset()),
        (None, Some(Offset(34)))
    );
    assert_eq!(m.to_upload(&[sealed(30, 39)], Offset(40)), [sealed(30, 39)]);
    m.add(segment(30, 39, 100, 39)).unwrap();
    assert_eq!(m.start_offset(), Some(Offset(35)));
    assert_eq!(Manifest::decode(&m.encode()), Some(m.clone()));
    let mut empty = Manifest::default();
    assert!(empty.trim_start(Offset(0)).is_empty());
    assert_eq!(empty, Manifest::default(), "nothing deleted: unchanged");
}

#[test]
fn the_layout_round_trips_and_damaged_or_forged_objects_are_refused() {
    let mut m = Manifest::default();
    m.add(segment(0, 9, 100, 5)).unwrap();
    m.add(segment(5, 19, 150, 6)).unwrap();
    let bytes = m.encode();
    assert_eq!(Manifest::decode(&bytes), Some(m.clone()));
    for cut in 0..bytes.len() {
        assert_eq!(Manifest::decode(&bytes[..cut]), None, "cut at {cut}");
    }
    for at in 0..bytes.len() {
        let mut flipped = bytes.clone();
        flipped[at] ^= 0x10;
        assert_eq!(Manifest::decode(&flipped), None, "byte {at} flipped");
    }
    // A forged count, with a good CRC.
    let with_crc = |body: &[u8]| {
        let mut out = body.to_vec();
        out.extend_from_slice(&crc32c::crc32c(body).to_be_bytes());
        out
    };
    let mut forged = bytes[..bytes.len() - 4].to_vec();
    forged[12..16].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(Manifest::decode(&with_crc(&forged)), None);
    // Segments out of order, with a good CRC: the second serving from 5.
    let mut disordered = bytes[..bytes.len() - 4].to_vec();
    let second = 16 + 52 + 12;
    disordered[second + 8..second + 16].copy_from_slice(&5i64.to_be_bytes());
    assert_eq!(Manifest::decode(&with_crc(&disordered)), None);
}

#[test]
fn random_leaders_uploads_and_retention_keep_every_offset_served_once() {
    let seed = crate::test_seed();
    let mut rng = SmallRng::seed_from_u64(seed);
    for _ in 0..200 {
        let mut m = Manifest::default();
        let mut log_end = 0i64;
        let mut expired_through: Option<i64> = None;
        for _ in 0..60 {
            // A leader's sealed segments, cut at its own offsets.
            log_end += rng.gen_range(0..30);
            let mut cuts = vec![0i64];
            while *cuts.last().unwrap() < log_end {
                let next = cuts.last().unwrap() + rng.gen_range(1..12);
                cuts.push(next.min(log_end));
            }
            let local: Vec<SealedSegment> =
                cuts.windows(2).map(|w| sealed(w[0], w[1] - 1)).collect();
            let high_watermark = Offset(rng.gen_range(0..=log_end));
            let planned = m.to_upload(&local, high_watermark);
            for s in &planned {
                assert!(s.last_offset < high_watermark, "SEED={seed}: uncommitted");
                assert!(
                    m.last_offset().is_none_or(|e| s.last_offset > e),
                    "SEED={seed}"
                );
            }
            // Uploaded in order, some more than once (a retry).
            for s in planned {
                let upload = segment(s.base_offset.0, s.last_offset.0, 10, s.last_offset.0);
                let before = m.last_offset();
                let added = m.add(upload.clone());
                match before {
                    Some(end) if s.base_offset.0 > end.0 + 1 => {
                        assert!(added.is_err(), "SEED={seed}: a gap added")
                    }
                    _ => assert!(added.is_ok(), "SEED={seed}: {added:?}"),
                }
                if rng.gen_bool(0.2) {
                    assert!(m.add(upload).is_err(), "SEED={seed}: uploaded twice");
                }
            }
            if rng.gen_bool(0.2) {
                let dropped = m.expire((Some(rng.gen_range(0..300)), None), 0, TimestampMs(0));
                if let Some(last) = dropped.last() {
                    expired_through = Some(last.last_offset.0);
                }
            }
            if rng.gen_bool(0.1) {
                // DeleteRecords, anywhere up to the log end.
                let start = rng.gen_range(0..=log_end);
                m.trim_start(Offset(start));
                if start > 0 {
                    expired_through = expired_through.max(Some(start - 1));
                }
            }
            check(&m, expired_through, seed);
        }
    }
}

/// Every offset from the remote start to its end is served by exactly
/// one segment (the served ranges follow each other, each within its
/// segment), `locate` finds it, and the layout round-trips.
fn check(m: &Manifest, expired_through: Option<i64>, seed: u64) {
    assert_eq!(
        Manifest::decode(&m.encode()).as_ref(),
        Some(m),
        "SEED={seed}"
    );
    let (Some(start), Some(end)) = (m.start_offset(), m.last_offset()) else {
        return;
    };
    if let Some(expired) = expired_through {
        assert!(start.0 > expired, "SEED={seed}: an expired offset served");
    }
    let mut next = start.0;
    for s in m.segments() {
        assert_eq!(
            s.first_served.0, next,
            "SEED={seed}: served ranges follow each other"
        );
        assert!(s.base_offset <= s.first_served && s.first_served <= s.last_offset);
        for offset in [s.first_served.0, s.last_offset.0] {
            assert_eq!(m.locate(Offset(offset)), Some(s), "SEED={seed}: {offset}");
        }
        next = s.last_offset.0 + 1;
    }
    assert_eq!(next, end.0 + 1, "SEED={seed}: up to the end");
    assert_eq!(m.locate(Offset(end.0 + 1)), None);
    assert_eq!(m.locate(Offset(start.0 - 1)), None);
}
