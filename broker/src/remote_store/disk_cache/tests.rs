//! The disk cache on a real directory: kept and read back, the budget held
//! by deleting the least recently used files, damaged or missing files
//! read as misses, an object's files dropped with it, and what a restart
//! finds (temporary files gone, the rest indexed, the budget applied).

use super::*;

fn run<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    walk(dir, dir, &mut found).unwrap();
    let mut names: Vec<String> = found.into_iter().map(|(name, _, _)| name).collect();
    names.sort();
    names
}

#[test]
fn chunks_are_kept_read_back_and_the_budget_holds() {
    let dir = tempfile::tempdir().unwrap();
    // Three files of 100 bytes (96 and a CRC) fit; a fourth does not.
    let cache = DiskCache::open(dir.path(), 300).unwrap();
    run(async {
        for i in 0..3u8 {
            let name = format!("t/0/1-ab.log.{}-{}", i as u64 * 96, (i as u64 + 1) * 96);
            cache.put(name, &Bytes::from(vec![i; 96])).await;
        }
        assert_eq!(cache.held_bytes(), 300);
        let first = cache.get("t/0/1-ab.log.0-96").await.unwrap();
        assert_eq!(first, vec![0; 96], "read back whole");
        cache
            .put("t/0/1-ab.index.whole".into(), &Bytes::from(vec![9; 96]))
            .await;
        assert_eq!(cache.held_bytes(), 300);
        assert!(
            cache.get("t/0/1-ab.log.96-192").await.is_none(),
            "the least recently used went"
        );
        assert!(
            cache.get("t/0/1-ab.log.0-96").await.is_some(),
            "used lately: kept"
        );
    });
    assert_eq!(
        files_in(dir.path()),
        [
            "t/0/1-ab.index.whole",
            "t/0/1-ab.log.0-96",
            "t/0/1-ab.log.192-288"
        ],
        "on disk as indexed"
    );
}

#[test]
fn damaged_and_missing_files_are_misses_and_an_objects_files_go_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::open(dir.path(), 1 << 20).unwrap();
    run(async {
        for name in ["o.log.0-10", "o.log.10-20", "o.index.whole", "p.log.0-10"] {
            cache
                .put(name.into(), &Bytes::from_static(b"0123456789"))
                .await;
        }
        let mut damaged = std::fs::read(dir.path().join("o.log.0-10")).unwrap();
        damaged[3] ^= 1;
        std::fs::write(dir.path().join("o.log.0-10"), damaged).unwrap();
        assert!(
            cache.get("o.log.0-10").await.is_none(),
            "a damaged file is a miss"
        );
        assert!(!dir.path().join("o.log.0-10").exists(), "and is removed");
        std::fs::remove_file(dir.path().join("o.index.whole")).unwrap();
        assert!(
            cache.get("o.index.whole").await.is_none(),
            "a missing one too"
        );
        assert_eq!(cache.held_bytes(), 28, "both forgotten");
        cache.forget_object("o.log").await;
        assert!(cache.get("o.log.10-20").await.is_none());
        assert!(
            cache.get("p.log.0-10").await.is_some(),
            "another object's kept"
        );
    });
    assert_eq!(files_in(dir.path()), ["p.log.0-10"]);
}

#[test]
fn a_restart_finds_the_files_drops_temporaries_and_applies_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let cache = DiskCache::open(dir.path(), 1 << 20).unwrap();
        for name in ["t/0/a.log.0-10", "t/0/b.log.0-10", "t/0/c.log.0-10"] {
            cache
                .put(name.into(), &Bytes::from_static(b"0123456789"))
                .await;
            // Modification times a restart can order.
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    });
    std::fs::write(dir.path().join("t/0/c.log.0-10.7.tmp"), b"half").unwrap();
    std::fs::write(dir.path().join("unrelated"), b"left alone").unwrap();
    // Room for two of the three 14-byte files: the oldest goes.
    let cache = DiskCache::open(dir.path(), 30).unwrap();
    assert!(
        !dir.path().join("t/0/c.log.0-10.7.tmp").exists(),
        "temporaries removed"
    );
    assert_eq!(cache.held_bytes(), 28);
    run(async {
        assert!(
            cache.get("t/0/a.log.0-10").await.is_none(),
            "the oldest went"
        );
        assert_eq!(cache.get("t/0/c.log.0-10").await.unwrap(), "0123456789");
    });
    let mut left: Vec<_> = files_in(dir.path());
    left.sort();
    assert_eq!(left, ["t/0/b.log.0-10", "t/0/c.log.0-10"]);
    assert!(dir.path().join("unrelated").exists());
}

#[test]
fn the_budget_keeps_to_half_of_the_room_on_the_disk() {
    assert_eq!(budget_within(100, 1_000, 0), 100, "room enough");
    assert_eq!(
        budget_within(1_000, 600, 200),
        400,
        "half of the free and the held"
    );
    assert_eq!(budget_within(1_000, 0, 0), 0, "a full disk: nothing");
}
