//! Crash test: a child process appends with group commit while this test
//! SIGKILLs it at random moments. After every kill the log must reopen
//! cleanly and hold every batch the child reported durable, byte for byte
//! (by CRC-32C of the stored batch), in offset order with no gap.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use storage::batch::{split_stored, validate, CountRule};
use storage::io::dma::DmaFs;
use storage::{Log, LogConfig, Offset};

const ROUNDS: usize = 24;

#[test]
fn every_acknowledged_append_survives_kill_9() {
    let seed = support::seed("crash");
    let mut rng = SmallRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let log_dir = dir.path().join("p0");
    let mut acked: Vec<(i64, i64, u32)> = Vec::new();
    for round in 0..ROUNDS {
        let mut child = Command::new(env!("CARGO_BIN_EXE_storage-crash-writer"))
            .arg(&log_dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        // Read lines on a thread; kill at a random moment once the child
        // has recovered the log and started appending.
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Generous: in a full test run on a 2-core machine a child's start
        // once took over 20 s (why is not known; it did not repeat in 24
        // runs by hand). A child stuck for good still fails the test, with
        // its threads' wait channels and stacks to say where.
        let spawned = Instant::now();
        let ready = rx.recv_timeout(Duration::from_secs(60));
        if !ready.as_ref().is_ok_and(|l| l.starts_with("ready")) {
            let stacks = thread_stacks(child.id());
            let _ = child.kill();
            panic!("round {round}: child did not start: {ready:?}\n{stacks}");
        }
        let started = Instant::now();
        let start_took = started - spawned;
        std::thread::sleep(Duration::from_millis(rng.gen_range(1..300)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        reader.join().unwrap();
        let lines: Vec<String> = rx.try_iter().collect();
        eprintln!(
            "round {round}: started in {start_took:?}, killed after {:?}, {} acks",
            started.elapsed(),
            lines.len()
        );
        for line in &lines {
            let parts: Vec<&str> = line.split(' ').collect();
            if parts.len() != 4 || parts[0] != "ack" {
                continue; // a line cut by the kill
            }
            acked.push((
                parts[1].parse().unwrap(),
                parts[2].parse().unwrap(),
                parts[3].parse().unwrap(),
            ));
        }
        verify(&log_dir, &acked, round);
    }
    assert!(
        acked.len() > ROUNDS * 5,
        "the children acknowledged {} batches",
        acked.len()
    );
    eprintln!(
        "crash: {ROUNDS} kills, {} acknowledged batches all present",
        acked.len()
    );
}

/// Each thread of process `pid`: its name, where it waits (wchan) and its
/// kernel stack (readable by root only; empty otherwise).
fn thread_stacks(pid: u32) -> String {
    let read = |path: std::path::PathBuf| std::fs::read_to_string(path).unwrap_or_default();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return format!("process {pid} is gone");
    };
    let mut out = String::new();
    for task in tasks.flatten() {
        let dir = task.path();
        let name = read(dir.join("comm"));
        let wchan = read(dir.join("wchan"));
        let stack = read(dir.join("stack"));
        out += &format!("thread {name}waits in {wchan}\n{stack}\n");
    }
    out
}

fn verify(log_dir: &std::path::Path, acked: &[(i64, i64, u32)], round: usize) {
    let log_dir = log_dir.to_path_buf();
    let acked = acked.to_vec();
    support::on_glommio(async move {
        let config = LogConfig {
            segment_bytes: 256 * 1024,
            max_batch_bytes: 64 * 1024,
            ..LogConfig::default()
        };
        let log = Log::open(DmaFs, &log_dir, config)
            .await
            .expect("reopen after kill");
        let end = log.log_end();
        // Every batch present is whole and valid, offsets contiguous.
        let mut offset = log.log_start();
        let mut stored = std::collections::HashMap::new();
        while offset < end {
            let bytes = log.read(offset, 1 << 20, end).await.unwrap().to_bytes();
            for (header, batch) in split_stored(&bytes, 1 << 20).unwrap() {
                assert_eq!(header.base_offset, offset, "round {round}: gap or reorder");
                validate(&batch, 1 << 20, CountRule::Exact).expect("stored batch valid");
                stored.insert(
                    header.base_offset.0,
                    (header.last_offset().0, crc32c::crc32c(&batch)),
                );
                offset = header.next_offset();
            }
        }
        for (base, last, crc) in &acked {
            let found = stored.get(base);
            assert_eq!(
                found,
                Some(&(*last, *crc)),
                "round {round}: acknowledged batch at {base} lost or changed (log end {end})"
            );
        }
        assert!(acked.iter().all(|(_, last, _)| Offset(*last) < end));
    });
}
