//! The DMA adapter's opens while another thread moves their directory
//! away and back: glommio 0.9's open panics if the directory goes between
//! its open and a statfs of the path (an `unwrap`), which ended the
//! broker; through the adapter such an open fails instead.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use storage::io::dma::DmaFs;
use storage::io::FileSystem;

#[test]
fn an_open_whose_directory_moves_meanwhile_fails_or_succeeds_and_never_panics() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("partition");
    let aside = root.path().join("partition.removing");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("segment.log"), vec![0u8; 4096]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mover = std::thread::spawn({
        let (dir, aside, stop) = (dir.clone(), aside.clone(), stop.clone());
        move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::rename(&dir, &aside);
                let _ = std::fs::rename(&aside, &dir);
            }
        }
    });
    // As the broker's hook: the panics the adapter catches are not reported.
    std::panic::set_hook(Box::new(|info| {
        if !storage::io::caught_open::is_the_caught_open_panic(info) {
            eprintln!("{info}");
        }
    }));
    let path = dir.join("segment.log");
    let (opened, failed, caught) = support::on_glommio(async move {
        let (mut opened, mut failed, mut caught) = (0, 0, 0);
        // Until one open raced the move (about one in ten here), for at
        // most 100,000 opens or 20 s: a busy machine races less often.
        let started = std::time::Instant::now();
        for _ in 0..100_000 {
            if caught > 0 && opened > 0 || started.elapsed().as_secs() >= 20 {
                break;
            }
            match DmaFs.open_existing(&path).await {
                Ok(file) => {
                    drop(file);
                    opened += 1;
                }
                // The runtime's `unwrap` panicked, and the open failed.
                Err(e) if e.to_string().contains("unwrap()") => caught += 1,
                Err(_) => failed += 1,
            }
        }
        (opened, failed, caught)
    });
    stop.store(true, Ordering::Relaxed);
    mover.join().unwrap();
    println!("opened {opened}, failed {failed}, failed after the runtime's panic {caught}");
    assert!(opened > 0, "some opens found the directory in place");
    // The race is real, and survived.
    assert!(caught > 0, "no open raced the move (nothing shown)");
}
