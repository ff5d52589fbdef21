//! The store's thread with the local directory backend: objects written,
//! read whole and by range, listed, deleted; a missing one told apart;
//! many callers at once through a small queue; the thread ends with the
//! last handle. Driven by a plain executor: the handle needs no runtime
//! of its own.

use futures::executor::block_on;

use super::*;

fn store(dir: &std::path::Path, queued: usize, concurrency: usize) -> RemoteStore {
    RemoteStore::start(&Backend::Directory(dir.join("remote")), queued, concurrency).unwrap()
}

#[test]
fn objects_are_written_read_listed_and_deleted_in_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let remote = store(dir.path(), 4, 2);
    block_on(async {
        let key = "topic-1/0/00000000000000000000-0000abcd.log";
        remote
            .put(key, Bytes::from_static(b"0123456789"))
            .await
            .unwrap();
        assert_eq!(remote.get(key, None).await.unwrap(), "0123456789");
        assert_eq!(remote.get(key, Some(3..7)).await.unwrap(), "3456");
        remote
            .put("topic-1/0/manifest", Bytes::from_static(b"m"))
            .await
            .unwrap();
        remote
            .put("topic-2/0/manifest", Bytes::from_static(b"other"))
            .await
            .unwrap();
        let listed = remote.list("topic-1").await.unwrap();
        let names: Vec<(&str, u64)> = listed.iter().map(|(n, s)| (n.as_str(), *s)).collect();
        assert_eq!(names, [(key, 10), ("topic-1/0/manifest", 1)]);
        // Replaced whole.
        remote.put(key, Bytes::from_static(b"new")).await.unwrap();
        assert_eq!(remote.get(key, None).await.unwrap(), "new");
        remote.delete(key).await.unwrap();
        remote.delete(key).await.unwrap();
        let missing = remote.get(key, None).await;
        assert!(
            matches!(missing, Err(RemoteError::NotFound(_))),
            "{missing:?}"
        );
    });
    // In a directory of its own, as files.
    let on_disk = dir.path().join("remote/topic-1/0/manifest");
    assert_eq!(std::fs::read(on_disk).unwrap(), b"m");
}

#[test]
fn many_callers_share_a_small_queue_and_the_thread_ends_with_the_last_handle() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::Directory(dir.path().join("remote"));
    let settings = StoreSettings {
        queued: 1,
        concurrency: 1,
        ..StoreSettings::default()
    };
    let (remote, thread) = RemoteStore::start_joinable(&backend, &settings).unwrap();
    let callers = (0..32).map(|i| {
        let remote = remote.clone();
        async move {
            let key = format!("many/{i:02}");
            remote
                .put(&key, Bytes::from(vec![i as u8; 100]))
                .await
                .unwrap();
            remote.get(&key, Some(99..100)).await.unwrap()
        }
    });
    let got = block_on(futures::future::join_all(callers));
    for (i, last) in got.iter().enumerate() {
        assert_eq!(last.as_ref(), [i as u8]);
    }
    assert_eq!(block_on(remote.list("many")).unwrap().len(), 32);
    drop(remote);
    thread
        .join()
        .expect("the store's thread ends once its last handle is gone");
}

#[test]
fn an_s3_store_that_cannot_be_reached_fails_the_call_not_the_caller() {
    // Nothing listens on port 9 of 127.0.0.1 here.
    let s3 = S3Settings {
        bucket: "b".into(),
        endpoint: Some("http://127.0.0.1:9".into()),
        region: "us-east-1".into(),
        access_key_id: "id".into(),
        secret_access_key: "secret".into(),
    };
    assert!(
        !format!("{s3:?}").contains("secret"),
        "the secret is never printed"
    );
    let remote = RemoteStore::start(&Backend::S3(s3), 2, 2).unwrap();
    let failed = block_on(remote.put("k", Bytes::from_static(b"v")));
    assert!(matches!(failed, Err(RemoteError::Store(_))), "{failed:?}");
}

#[test]
fn files_go_up_whole_or_in_parts_and_a_changed_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let remote = store(dir.path(), 4, 2);
    let small = dir.path().join("small.log");
    let large = dir.path().join("large.log");
    std::fs::write(&small, b"batches and then some trailing bytes").unwrap();
    let big: Vec<u8> = (0..(files::CHUNK_BYTES * 2 + 12345))
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    std::fs::write(&large, &big).unwrap();
    block_on(async {
        // Only the first `len` bytes count (a file may hold more).
        let crc = remote.checksum(small.clone(), 12).await.unwrap();
        assert_eq!(crc, crc32c::crc32c(b"batches and "));
        remote
            .put_file("t/0/small", small.clone(), 12, crc)
            .await
            .unwrap();
        assert_eq!(remote.get("t/0/small", None).await.unwrap(), "batches and ");

        let len = big.len() as u64;
        let crc = remote.checksum(large.clone(), len).await.unwrap();
        assert_eq!(crc, crc32c::crc32c(&big));
        remote
            .put_file("t/0/large", large.clone(), len, crc)
            .await
            .unwrap();
        let back = remote.get("t/0/large", None).await.unwrap();
        assert!(back == big, "the multipart upload is the file");

        let refused = remote
            .put_file("t/0/other", large.clone(), len, crc ^ 1)
            .await;
        assert!(matches!(refused, Err(RemoteError::Local(_))), "{refused:?}");
        let missing = dir.path().join("gone.log");
        let refused = remote.put_file("t/0/gone", missing, 10, 0).await;
        assert!(matches!(refused, Err(RemoteError::Local(_))), "{refused:?}");
        assert!(matches!(
            remote.get("t/0/gone", None).await,
            Err(RemoteError::NotFound(_))
        ));
    });
}

#[test]
fn uploads_keep_to_the_bandwidth_limit() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("segment.log");
    std::fs::write(&file, vec![1u8; 300_000]).unwrap();
    let backend = Backend::Directory(dir.path().join("remote"));
    // 1 MB/s: 3 x 300 kB take at least 0.6 s after the first goes at once.
    let settings = StoreSettings {
        queued: 4,
        concurrency: 4,
        upload_bytes_per_second: 1_000_000,
        ..StoreSettings::default()
    };
    let remote = RemoteStore::start_with(&backend, &settings).unwrap();
    let started = std::time::Instant::now();
    block_on(async {
        let crc = remote.checksum(file.clone(), 300_000).await.unwrap();
        let uploads = (0..3).map(|i| {
            let (remote, file) = (remote.clone(), file.clone());
            async move { remote.put_file(&format!("s/{i}"), file, 300_000, crc).await }
        });
        for done in futures::future::join_all(uploads).await {
            done.unwrap();
        }
    });
    let took = started.elapsed();
    assert!(took >= std::time::Duration::from_millis(590), "{took:?}");
}

#[test]
fn reads_through_the_disk_cache_outlive_the_store_and_a_restart_and_deletes_drop_them() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::Directory(dir.path().join("remote"));
    let cache_dir = dir.path().join("cache");
    let settings = StoreSettings {
        queued: 4,
        concurrency: 2,
        disk_cache: Some((cache_dir.clone(), 1 << 20)),
        ..StoreSettings::default()
    };
    let key = "t/0/00000000000000000000-0000abcd.log";
    let (remote, thread) = RemoteStore::start_joinable(&backend, &settings).unwrap();
    block_on(async {
        remote
            .put(key, Bytes::from_static(b"0123456789"))
            .await
            .unwrap();
        assert_eq!(
            remote.get_cached(key, Some(2..6)).await.unwrap(),
            (Bytes::from_static(b"2345"), false)
        );
        assert_eq!(
            remote.get_cached(key, None).await.unwrap(),
            (Bytes::from_static(b"0123456789"), false)
        );
    });
    // Gone from the store underneath: the cache still answers, and after a
    // restart too.
    std::fs::remove_file(dir.path().join("remote").join(key)).unwrap();
    drop(remote);
    thread.join().unwrap();
    let remote = RemoteStore::start_with(&backend, &settings).unwrap();
    block_on(async {
        assert_eq!(
            remote.get_cached(key, Some(2..6)).await.unwrap(),
            (Bytes::from_static(b"2345"), true)
        );
        assert!(
            remote.get_cached(key, None).await.unwrap().1,
            "whole, from the cache"
        );
        let other = remote.get_cached(key, Some(0..2)).await;
        assert!(
            matches!(other, Err(RemoteError::NotFound(_))),
            "another range is not cached: {other:?}"
        );
        remote.delete(key).await.unwrap();
        let deleted = remote.get_cached(key, Some(2..6)).await;
        assert!(
            matches!(deleted, Err(RemoteError::NotFound(_))),
            "a delete drops the cached chunks: {deleted:?}"
        );
    });
    let left = std::fs::read_dir(cache_dir.join("t/0")).unwrap().count();
    assert_eq!(left, 0, "their files too");
}

#[test]
fn reads_keep_to_the_download_limit_and_the_disk_cache_is_not_held_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::Directory(dir.path().join("remote"));
    // 1 MB/s: 3 x 300 kB take at least 0.6 s after the first goes at once.
    let settings = StoreSettings {
        queued: 4,
        concurrency: 4,
        download_bytes_per_second: 1_000_000,
        disk_cache: Some((dir.path().join("cache"), 1 << 30)),
        ..StoreSettings::default()
    };
    let remote = RemoteStore::start_with(&backend, &settings).unwrap();
    block_on(async {
        for i in 0..3 {
            let object = Bytes::from(vec![i as u8; 300_000]);
            remote.put(&format!("s/{i}"), object).await.unwrap();
        }
    });
    let read_all = || {
        let started = std::time::Instant::now();
        block_on(async {
            let reads = (0..3).map(|i| {
                let remote = remote.clone();
                async move { remote.get_cached(&format!("s/{i}"), None).await }
            });
            for read in futures::future::join_all(reads).await {
                assert_eq!(read.unwrap().0.len(), 300_000);
            }
        });
        started.elapsed()
    };
    let from_store = read_all();
    assert!(
        from_store >= std::time::Duration::from_millis(590),
        "{from_store:?}"
    );
    let from_cache = read_all();
    assert!(
        from_cache < std::time::Duration::from_millis(590),
        "from the disk cache: {from_cache:?}"
    );
}
