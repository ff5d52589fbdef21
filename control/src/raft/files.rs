//! The few file operations a metadata node's disk needs, behind a trait so
//! the same persistence code runs on a real directory and on a simulated
//! one that can crash between (or inside) any two of them.
//!
//! The contract is what POSIX gives after fsync, no more: bytes appended
//! or truncated are durable only after [`MetaFiles::sync`]; a
//! [`MetaFiles::replace`] is atomic and durable when it returns (old or
//! new content after a crash, never a mix).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// Named files in one directory.
pub trait MetaFiles {
    /// The whole content of `name`, or None if it does not exist.
    fn read(&mut self, name: &str) -> io::Result<Option<Vec<u8>>>;
    /// Appends to `name`, creating it if needed (durable after `sync`).
    fn append(&mut self, name: &str, bytes: &[u8]) -> io::Result<()>;
    /// Cuts `name` to `len` bytes (durable after `sync`).
    fn truncate(&mut self, name: &str, len: u64) -> io::Result<()>;
    /// Makes what was appended to or cut from `name` durable.
    fn sync(&mut self, name: &str) -> io::Result<()>;
    /// Replaces `name` with `bytes` atomically and durably (a temporary
    /// file, fsync, rename over, fsync of the directory).
    fn replace(&mut self, name: &str, bytes: &[u8]) -> io::Result<()>;
    /// A human name for messages (the directory).
    fn describe(&self) -> String;
}

/// [`MetaFiles`] on a real directory.
pub struct DirFiles {
    dir: PathBuf,
    /// Files opened for appending, kept open between appends.
    appending: HashMap<String, File>,
}

impl DirFiles {
    /// The files of `dir`, created if missing.
    pub fn open(dir: impl Into<PathBuf>) -> io::Result<DirFiles> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)?;
        Ok(DirFiles {
            dir,
            appending: HashMap::new(),
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn appender(&mut self, name: &str) -> io::Result<&mut File> {
        if !self.appending.contains_key(name) {
            let path = self.dir.join(name);
            let created = !path.exists();
            let file = OpenOptions::new().create(true).append(true).open(&path)?;
            if created {
                // The new file's name must be durable before anything
                // synced into it counts as durable.
                File::open(&self.dir)?.sync_all()?;
            }
            self.appending.insert(name.to_string(), file);
        }
        Ok(self.appending.get_mut(name).expect("just opened"))
    }
}

impl MetaFiles for DirFiles {
    fn read(&mut self, name: &str) -> io::Result<Option<Vec<u8>>> {
        match File::open(self.dir.join(name)) {
            Ok(mut file) => {
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes)?;
                Ok(Some(bytes))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn append(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.appender(name)?.write_all(bytes)
    }

    fn truncate(&mut self, name: &str, len: u64) -> io::Result<()> {
        self.appender(name)?.set_len(len)
    }

    fn sync(&mut self, name: &str) -> io::Result<()> {
        self.appender(name)?.sync_data()
    }

    fn replace(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let tmp = self.dir.join(format!("{name}.tmp"));
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, self.dir.join(name))?;
        // The handle kept for appending points at the replaced inode.
        self.appending.remove(name);
        File::open(&self.dir)?.sync_all()
    }

    fn describe(&self) -> String {
        self.dir.display().to_string()
    }
}
