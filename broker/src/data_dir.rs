//! A data directory belongs to one broker process at a time, and knows
//! whose it is.
//!
//! - `.lock`, held with `flock` for the life of the process (as Kafka's
//!   `.lock` in every log directory): a second process on the same
//!   directory exits at once, naming the directory and the holder's pid,
//!   before it touches any other file. The kernel drops the lock when the
//!   holder dies, however it dies.
//! - `meta.properties` (as Kafka's): the node id, written at the first
//!   start, and the cluster id, written once the quorum has one. A broker
//!   started on the directory with another node id, or in another cluster,
//!   refuses, naming both. A directory whose metadata log is gone while
//!   `meta.properties` says it was part of a cluster refuses too: a voter
//!   that lost its log must not vote as if it had never seen one.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{flock, FlockArg};

/// The lock file's name.
pub const LOCK_FILE: &str = ".lock";
/// The identity file's name.
pub const META_FILE: &str = "meta.properties";
/// The layout version written in `meta.properties`.
const META_VERSION: u32 = 1;

/// Why a data directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    /// Another process holds the directory.
    #[error(
        "data directory {dir} is in use by another broker process (pid {holder}); \
         stop that one first, or give this one another --data-dir"
    )]
    Locked {
        /// The directory.
        dir: PathBuf,
        /// The holder's pid, as it wrote it (or "unknown").
        holder: String,
    },
    /// The directory was another node's.
    #[error(
        "data directory {dir} belongs to node {stored}, not node {configured} \
         (start it with --node-id {stored}, or give node {configured} its own directory)"
    )]
    OtherNode {
        /// The directory.
        dir: PathBuf,
        /// What meta.properties says.
        stored: i32,
        /// What this broker was started as.
        configured: i32,
    },
    /// The directory was another cluster's.
    #[error(
        "data directory {dir} belongs to cluster {stored}, but this broker's quorum is \
         cluster {quorum}: it will not mix their data"
    )]
    OtherCluster {
        /// The directory.
        dir: PathBuf,
        /// What meta.properties says.
        stored: String,
        /// What the metadata quorum says.
        quorum: String,
    },
    /// The metadata log of a directory that was part of a cluster is gone.
    #[error(
        "data directory {dir} was part of cluster {cluster}, but its metadata ({dir}/metadata) \
         is gone: restore it, or, to start a new cluster on this data, remove {dir}/{META_FILE} \
         (never on a voter of a running cluster: it would vote without the log it had)"
    )]
    MetadataLost {
        /// The directory.
        dir: PathBuf,
        /// The cluster it was part of.
        cluster: String,
    },
    /// `meta.properties` does not parse.
    #[error("{path} is damaged: {why}")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The file system refused.
    #[error("data directory {dir}: {source}")]
    Io {
        /// The directory.
        dir: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// The lock on a data directory; dropping it (or the process ending)
/// releases it.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

/// Takes the data directory's lock (creating the directory if needed), or
/// says who holds it.
pub fn lock(dir: &Path) -> Result<DataDirLock, DataDirError> {
    let io = |source| DataDirError::Io {
        dir: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join(LOCK_FILE))
        .map_err(io)?;
    match flock(file.as_raw_fd(), FlockArg::LockExclusiveNonblock) {
        Ok(()) => {}
        Err(Errno::EWOULDBLOCK) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(DataDirError::Locked {
                dir: dir.to_path_buf(),
                holder: if holder.is_empty() { "unknown" } else { holder }.to_string(),
            });
        }
        Err(e) => return Err(io(std::io::Error::from(e))),
    }
    file.set_len(0).map_err(io)?;
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    writeln!(file, "{}", std::process::id()).map_err(io)?;
    Ok(DataDirLock { _file: file })
}

/// What `meta.properties` holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Identity {
    /// The node the directory belongs to.
    pub node_id: Option<i32>,
    /// The cluster it belongs to, once known.
    pub cluster_id: Option<String>,
}

/// Reads `meta.properties` (None if the directory has none yet).
pub fn read_identity(dir: &Path) -> Result<Option<Identity>, DataDirError> {
    let path = dir.join(META_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(DataDirError::Io {
                dir: dir.to_path_buf(),
                source,
            })
        }
    };
    let damaged = |why: String| DataDirError::Damaged {
        path: path.clone(),
        why,
    };
    let mut identity = Identity::default();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .ok_or_else(|| damaged(format!("no `=` in {line:?}")))?;
        match key.trim() {
            "version" => {}
            "node.id" => {
                identity.node_id = Some(
                    value
                        .trim()
                        .parse()
                        .map_err(|_| damaged(format!("node.id {value:?} is not a number")))?,
                )
            }
            "cluster.id" => identity.cluster_id = Some(value.trim().to_string()),
            other => return Err(damaged(format!("unknown key {other:?}"))),
        }
    }
    if identity.node_id.is_none() {
        return Err(damaged("no node.id".into()));
    }
    Ok(Some(identity))
}

/// Writes `meta.properties` atomically (temporary file, fsync, rename,
/// directory fsync).
pub fn write_identity(dir: &Path, identity: &Identity) -> Result<(), DataDirError> {
    let io = |source| DataDirError::Io {
        dir: dir.to_path_buf(),
        source,
    };
    let mut text = format!(
        "# This broker's identity, written by the broker; do not edit.\nversion={META_VERSION}\n"
    );
    if let Some(node) = identity.node_id {
        text.push_str(&format!("node.id={node}\n"));
    }
    if let Some(cluster) = &identity.cluster_id {
        text.push_str(&format!("cluster.id={cluster}\n"));
    }
    let tmp = dir.join(format!("{META_FILE}.tmp"));
    let mut file = File::create(&tmp).map_err(io)?;
    file.write_all(text.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&tmp, dir.join(META_FILE)).map_err(io)?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(io)
}

/// At start, before anything else touches the directory (the lock held):
/// checks the directory is this node's, and that a directory that was part
/// of a cluster still has its metadata; records the node id on a first
/// start. Returns the identity.
pub fn claim(dir: &Path, node_id: i32, metadata_dir: &Path) -> Result<Identity, DataDirError> {
    match read_identity(dir)? {
        Some(identity) => {
            let stored = identity.node_id.expect("read_identity requires node.id");
            if stored != node_id {
                return Err(DataDirError::OtherNode {
                    dir: dir.to_path_buf(),
                    stored,
                    configured: node_id,
                });
            }
            if let Some(cluster) = &identity.cluster_id {
                if !holds_metadata(metadata_dir) {
                    return Err(DataDirError::MetadataLost {
                        dir: dir.to_path_buf(),
                        cluster: cluster.clone(),
                    });
                }
            }
            Ok(identity)
        }
        None => {
            let identity = Identity {
                node_id: Some(node_id),
                cluster_id: None,
            };
            write_identity(dir, &identity)?;
            Ok(identity)
        }
    }
}

/// Once the quorum's cluster id is known: records it on a directory that
/// has none, or refuses one that belongs to another cluster.
pub fn join_cluster(dir: &Path, node_id: i32, cluster_id: &str) -> Result<(), DataDirError> {
    let identity = read_identity(dir)?.unwrap_or_default();
    match &identity.cluster_id {
        Some(stored) if stored == cluster_id => Ok(()),
        Some(stored) => Err(DataDirError::OtherCluster {
            dir: dir.to_path_buf(),
            stored: stored.clone(),
            quorum: cluster_id.to_string(),
        }),
        None => write_identity(
            dir,
            &Identity {
                node_id: Some(node_id),
                cluster_id: Some(cluster_id.to_string()),
            },
        ),
    }
}

fn holds_metadata(metadata_dir: &Path) -> bool {
    ["raft.log", "snapshot"]
        .iter()
        .any(|name| std::fs::metadata(metadata_dir.join(name)).is_ok_and(|m| m.len() > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_holder_and_a_dropped_one_frees_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let held = lock(dir.path()).unwrap();
        let refused = lock(dir.path()).unwrap_err().to_string();
        assert!(
            refused.contains(&format!("pid {}", std::process::id())),
            "{refused}"
        );
        assert!(
            refused.contains(&dir.path().display().to_string()),
            "{refused}"
        );
        drop(held);
        lock(dir.path()).unwrap();
    }

    #[test]
    fn identity_is_written_once_and_checked_after() {
        let dir = tempfile::tempdir().unwrap();
        let metadata = dir.path().join("metadata");
        claim(dir.path(), 5, &metadata).unwrap();
        let other = claim(dir.path(), 1, &metadata).unwrap_err().to_string();
        assert!(other.contains("belongs to node 5, not node 1"), "{other}");
        join_cluster(dir.path(), 5, "abc").unwrap();
        join_cluster(dir.path(), 5, "abc").unwrap();
        let foreign = join_cluster(dir.path(), 5, "xyz").unwrap_err().to_string();
        assert!(
            foreign.contains("cluster abc") && foreign.contains("cluster xyz"),
            "{foreign}"
        );
        // The cluster is recorded but the metadata is gone.
        let lost = claim(dir.path(), 5, &metadata).unwrap_err().to_string();
        assert!(lost.contains("metadata") && lost.contains("gone"), "{lost}");
        std::fs::create_dir_all(&metadata).unwrap();
        std::fs::write(metadata.join("raft.log"), b"x").unwrap();
        assert_eq!(
            claim(dir.path(), 5, &metadata)
                .unwrap()
                .cluster_id
                .as_deref(),
            Some("abc")
        );
        std::fs::write(dir.path().join(META_FILE), "node.id=seven\n").unwrap();
        assert!(claim(dir.path(), 5, &metadata)
            .unwrap_err()
            .to_string()
            .contains("damaged"));
    }
}
