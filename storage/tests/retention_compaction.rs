//! Retention and compaction on real segment files (glommio, O_DIRECT).

mod support;

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

use storage::batch::{records, validate, CountRule};
use storage::io::dma::DmaFs;
use storage::{
    CompactionPolicy, LeaderEpoch, Log, LogConfig, Offset, RetentionPolicy, TimestampMs,
};
use support::{batch_of, keyed, log_file_names, on_glommio};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 64 * 1024,
        index_interval_bytes: 1024,
        max_batch_bytes: 32 * 1024,
        ..LogConfig::default()
    }
}

/// A log of 200 two-record batches (about seven 64 KiB segments), flushed.
async fn log_of_200_batches(dir: &std::path::Path) -> Rc<Log<DmaFs>> {
    let log = Log::open(DmaFs, dir, config()).await.unwrap();
    for i in 0..200 {
        log.append(batch_of(2, 1000, i, i as i64), LeaderEpoch(0))
            .await
            .unwrap();
    }
    log.flush().await.unwrap();
    log
}

/// Appends rolling new segments while a retention pass deletes old ones
/// (a producer's next request appends during the pass's file I/O): the
/// pass says how many it deleted, not the change in the segment count
/// (which the rolls outgrew: an overflow that stopped the broker).
#[test]
fn retention_counts_what_it_deleted_while_appends_roll_new_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let d = dir.clone();
    on_glommio(async move {
        let log = log_of_200_batches(&d).await;
        let before = log_file_names(&d);
        let retention = log.apply_retention(RetentionPolicy {
            retention_ms: None,
            retention_bytes: Some(150 * 1024),
            ..RetentionPolicy::default()
        });
        let rolling = async {
            for i in 0..12 {
                log.append(batch_of(2, 1000, 1000 + i, 0), LeaderEpoch(0))
                    .await
                    .unwrap();
                log.roll();
            }
        };
        let (deleted, ()) = futures::join!(retention, rolling);
        let deleted = deleted.unwrap();
        log.flush().await.unwrap();
        let after = log_file_names(&d);
        let gone = before.iter().filter(|name| !after.contains(name)).count();
        assert!(deleted > 0);
        assert_eq!(deleted, gone, "{before:?} -> {after:?}");
    });
}

#[test]
fn size_retention_deletes_whole_oldest_segments_only() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let d = dir.clone();
    on_glommio(async move {
        let log = log_of_200_batches(&d).await;
        let before = log_file_names(&d);
        assert!(before.len() >= 5, "{} segments", before.len());
        let limit = 150 * 1024;
        let deleted = log
            .apply_retention(RetentionPolicy {
                retention_ms: None,
                retention_bytes: Some(limit),
                ..RetentionPolicy::default()
            })
            .await
            .unwrap();
        let after = log_file_names(&d);
        assert_eq!(before.len() - after.len(), deleted);
        assert!(deleted > 0);
        assert!(
            log.size_bytes() <= limit + 64 * 1024,
            "within one segment of the limit"
        );
        // The log start moved to the first remaining segment's base.
        let first_base: i64 = after[0].trim_end_matches(".log").parse().unwrap();
        assert_eq!(log.log_start(), Offset(first_base));
        assert_eq!(
            after.last(),
            before.last(),
            "the active segment is never deleted"
        );
        // The index and time index of deleted segments are gone too.
        let all: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(all.iter().all(|n| !n
            .starts_with(&before[0].trim_end_matches(".log").to_string())
            || deleted == 0));
        assert!(matches!(
            log.read(Offset(0), 100, log.log_end()).await,
            Err(storage::StorageError::OffsetOutOfRange { .. })
        ));
        drop(log);
        let log = Log::open(DmaFs, &d, config()).await.unwrap();
        assert_eq!(
            log.log_start(),
            Offset(first_base),
            "the start survives a restart"
        );
        assert_eq!(log.log_end(), Offset(400));
    });
}

#[test]
fn time_retention_deletes_segments_whose_newest_record_expired() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    on_glommio(async move {
        let now = Rc::new(Cell::new(10_000_000i64));
        let clock = {
            let now = now.clone();
            Rc::new(move || TimestampMs(now.get()))
        };
        let log = Log::open_with_clock(DmaFs, &dir, config(), clock)
            .await
            .unwrap();
        // Old records (timestamps around 1_000_000), then new ones (9_990_000).
        for i in 0..100 {
            log.append(batch_of(2, 1000, i, 1_000_000 + i as i64), LeaderEpoch(0))
                .await
                .unwrap();
        }
        log.roll();
        let new_start = log.log_end();
        for i in 0..100 {
            log.append(batch_of(2, 1000, i, 9_990_000 + i as i64), LeaderEpoch(0))
                .await
                .unwrap();
        }
        log.flush().await.unwrap();
        let policy = RetentionPolicy {
            retention_ms: Some(1_000_000),
            retention_bytes: None,
            ..RetentionPolicy::default()
        };
        let deleted = log.apply_retention(policy).await.unwrap();
        assert!(deleted >= 2);
        assert_eq!(
            log.log_start(),
            new_start,
            "exactly the expired segments went"
        );
        assert_eq!(
            log.apply_retention(policy).await.unwrap(),
            0,
            "nothing else expired"
        );
        now.set(now.get() + 2_000_000);
        assert!(
            log.apply_retention(policy).await.unwrap() > 0,
            "later the newer ones expire too"
        );
        assert!(log.segment_count() >= 1);
    });
}

#[test]
fn retention_never_passes_the_high_watermark() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    on_glommio(async move {
        let replicated = LogConfig {
            high_watermark_follows_flush: false,
            ..config()
        };
        let log = Log::open(DmaFs, &dir, replicated).await.unwrap();
        for i in 0..200 {
            log.append(batch_of(2, 1000, i, 0), LeaderEpoch(0))
                .await
                .unwrap();
        }
        log.flush().await.unwrap();
        log.set_high_watermark(Offset(10));
        let policy = RetentionPolicy {
            retention_ms: Some(0),
            retention_bytes: Some(0),
            ..RetentionPolicy::default()
        };
        log.apply_retention(policy).await.unwrap();
        assert_eq!(
            log.log_start(),
            Offset(0),
            "the first segment holds offsets above the HW"
        );
        log.set_high_watermark(log.log_end());
        assert!(log.apply_retention(policy).await.unwrap() > 0);
    });
}

/// (offset, key, value) of every record in the log.
async fn all_records(log: &Log<DmaFs>) -> Vec<(i64, String, Option<String>)> {
    let mut out = Vec::new();
    for (header, batch) in support::all_batches(log).await {
        validate(&batch, 1 << 20, CountRule::AtMost).expect("every batch keeps a valid CRC");
        for r in records(&batch, header).unwrap() {
            let r = r.unwrap();
            out.push((
                r.offset.0,
                String::from_utf8(r.key.unwrap().to_vec()).unwrap(),
                r.value.map(|v| String::from_utf8(v.to_vec()).unwrap()),
            ));
        }
    }
    out
}

#[test]
fn compaction_keeps_the_newest_value_per_key_and_every_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    on_glommio(async move {
        let now = 100_000_000i64;
        let clock = Rc::new(move || TimestampMs(now));
        let log = Log::open_with_clock(DmaFs, &dir, config(), clock.clone())
            .await
            .unwrap();
        let pad = "x".repeat(900);
        let mut expected: HashMap<String, (i64, Option<String>)> = HashMap::new();
        let mut offset = 0i64;
        for round in 0..60 {
            let mut batch = Vec::new();
            for k in 0..5 {
                let key = format!("k{}", (round * 3 + k) % 11);
                batch.push((key, Some(format!("{round}-{pad}"))));
            }
            // "gone" is written in round 10 and deleted long ago in round 20;
            // "recent" is written in round 40 and deleted just now in round 58.
            match round {
                10 | 40 => batch.push((
                    if round == 10 { "gone" } else { "recent" }.to_string(),
                    Some("v".into()),
                )),
                20 => batch.push(("gone".to_string(), None)),
                58 => batch.push(("recent".to_string(), None)),
                _ => {}
            }
            let timestamp = if round == 58 {
                now - 1_000
            } else {
                now - 10_000_000 + round
            };
            let refs: Vec<(&str, Option<&str>)> = batch
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_deref()))
                .collect();
            log.append(keyed(&refs, timestamp), LeaderEpoch(0))
                .await
                .unwrap();
            for (key, value) in batch {
                expected.insert(key, (offset, value));
                offset += 1;
            }
        }
        log.flush().await.unwrap();
        let before = all_records(&log).await;
        let active_base = {
            let names = log_file_names(&dir);
            names
                .last()
                .unwrap()
                .trim_end_matches(".log")
                .parse::<i64>()
                .unwrap()
        };
        let stats = log
            .compact(CompactionPolicy {
                delete_retention_ms: 1_000_000,
            })
            .await
            .unwrap();
        assert!(
            stats.segments_rewritten > 0 && stats.records_removed > 0,
            "{stats:?}"
        );
        assert!(stats.bytes_after < stats.bytes_before);
        let after = all_records(&log).await;
        check_compacted(&before, &after, &expected, active_base);
        assert_eq!(log.log_end(), Offset(offset), "the log end never moves");
        drop(log);
        // The cleaned segments were swapped in durably: same content after a restart.
        let log = Log::open_with_clock(DmaFs, &dir, config(), clock)
            .await
            .unwrap();
        assert_eq!(all_records(&log).await, after);
        let leftovers: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".cleaned") || n.ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    });
}

fn check_compacted(
    before: &[(i64, String, Option<String>)],
    after: &[(i64, String, Option<String>)],
    newest: &HashMap<String, (i64, Option<String>)>,
    active_base: i64,
) {
    // Offsets keep their order and their records: `after` is a subsequence of `before`.
    let by_offset: HashMap<i64, &(i64, String, Option<String>)> =
        before.iter().map(|r| (r.0, r)).collect();
    assert!(
        after.windows(2).all(|w| w[0].0 < w[1].0),
        "offsets stay in order"
    );
    for record in after {
        assert_eq!(by_offset[&record.0], record, "a kept record is unchanged");
    }
    for record in before {
        let (offset, key, value) = record;
        let kept = after.iter().any(|r| r.0 == *offset);
        let is_newest = newest[key].0 == *offset;
        if *offset >= active_base {
            assert!(kept, "the active segment is not compacted: {offset}");
        } else if !is_newest {
            assert!(!kept, "superseded record at {offset} ({key}) was kept");
        } else if value.is_none() && key == "gone" {
            assert!(!kept, "an old tombstone is removed");
        } else {
            assert!(kept, "the newest record of {key} at {offset} was lost");
        }
    }
    // The recent tombstone stays; the old one and what it deleted are gone.
    let (recent_offset, recent_value) = &newest["recent"];
    assert!(recent_value.is_none());
    assert!(
        after.iter().any(|r| r.0 == *recent_offset),
        "a recent tombstone stays"
    );
    assert!(
        after.iter().all(|r| r.1 != "gone"),
        "an old tombstone and its key are gone"
    );
}
