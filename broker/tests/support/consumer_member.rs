//! A consumer group member of the KIP-848 protocol in a process of its
//! own (tests/python/consumer_member.py, confluent-kafka with
//! `group.protocol=consumer`), and what it reports of its assignment.

use std::process::Command;
use std::time::{Duration, Instant};

/// A consumer process (tests/python/consumer_member.py) and the lines it
/// prints, read on a thread of their own.
pub struct Member {
    /// The process.
    pub child: std::process::Child,
    /// What it printed, line by line.
    pub lines: std::sync::mpsc::Receiver<String>,
}

impl Member {
    /// A member of `group` subscribed to `topic` (6 partitions, made if
    /// missing).
    pub fn start(bootstrap: &str, topic: &str, group: &str) -> Member {
        Member::start_as(bootstrap, topic, group, None)
    }

    /// A member with `group.instance.id` `instance` if given.
    pub fn start_as(bootstrap: &str, topic: &str, group: &str, instance: Option<&str>) -> Member {
        let python = std::env::var("KAFKA_PYTHON").unwrap_or_else(|_| "python3".into());
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/python/consumer_member.py"
        );
        let mut child = Command::new(&python)
            .args([script, bootstrap, topic, group, "120"])
            .args(instance)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{python}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let _ = tx.send(line);
            }
        });
        Member { child, lines }
    }

    /// Waits (at most `limit`) until it reports `count` partitions.
    pub fn wait_assigned(&self, count: usize, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let wanted = format!("assigned {count}");
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) if line == wanted => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    }

    /// Waits (at most `limit`) until it owns `count` partitions; its
    /// "owns" line.
    pub fn owning(&self, count: usize, limit: Duration) -> Option<String> {
        let deadline = Instant::now() + limit;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with("owns ") => {
                    let owned = line["owns ".len()..].split(',').filter(|p| !p.is_empty());
                    if owned.count() == count {
                        return Some(line);
                    }
                }
                Ok(_) => {}
                Err(_) => return None,
            }
        }
        None
    }

    /// Closes it with SIGTERM (a static member leaves for now) and waits
    /// for it to exit.
    pub fn close(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let _ = self.child.wait();
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
