//! A simulated metadata directory for crash tests: [`MetaFiles`] whose
//! files keep apart what was written and what was synced. A crash keeps
//! what was synced plus, at random, part of what was not (a torn tail,
//! sometimes with a damaged byte); one can also be armed to happen inside
//! the n-th file operation from now (that operation half-done).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::rc::Rc;

use control::raft::files::MetaFiles;
use rand::rngs::SmallRng;
use rand::Rng;

#[derive(Default, Clone)]
struct SimFile {
    /// What reads see.
    data: Vec<u8>,
    /// What a crash keeps for sure.
    durable: Vec<u8>,
}

#[derive(Default)]
struct Dir {
    files: BTreeMap<String, SimFile>,
    /// Operations left before the armed crash, and whether it lands
    /// inside that operation (half done) or just before it.
    crash_in: Option<(u32, bool)>,
    crashed: bool,
}

/// One simulated directory; clones share it (it outlives the disk that
/// uses it, as a real directory outlives a process).
#[derive(Clone, Default)]
pub struct SimFiles(Rc<RefCell<Dir>>);

/// What the armed crash did to the operation it hit.
enum Hit {
    Before,
    Inside,
}

impl SimFiles {
    /// Crashes at the `n`-th operation from now (1 = the next): inside
    /// it (an append half written, a sync or rename done but not
    /// reported) or just before it.
    pub fn arm_crash(&self, n: u32, inside: bool) {
        self.0.borrow_mut().crash_in = Some((n.max(1), inside));
    }

    /// Takes back an armed crash that has not happened.
    pub fn disarm(&self) {
        self.0.borrow_mut().crash_in = None;
    }

    /// Whether an armed crash happened (the disk's caller must stop).
    pub fn crashed(&self) -> bool {
        self.0.borrow().crashed
    }

    /// The machine goes down: each file keeps what was synced and, at
    /// random, part of what was written after (a torn tail, one byte of
    /// it sometimes damaged). Then the directory works again.
    pub fn crash(&self, rng: &mut SmallRng) {
        let mut dir = self.0.borrow_mut();
        for file in dir.files.values_mut() {
            let extra = file.data.len().saturating_sub(file.durable.len());
            let shares_prefix = file.data.starts_with(&file.durable);
            let mut kept = file.durable.clone();
            if shares_prefix && extra > 0 && rng.gen_bool(0.5) {
                let take = rng.gen_range(0..=extra);
                kept.extend_from_slice(&file.data[file.durable.len()..file.durable.len() + take]);
                if take > 0 && rng.gen_bool(0.2) {
                    let at = file.durable.len() + rng.gen_range(0..take);
                    kept[at] ^= 0x5a;
                }
            }
            file.data = kept.clone();
            file.durable = kept;
        }
        dir.crash_in = None;
        dir.crashed = false;
    }

    /// Counts down an armed crash; Err once it has happened.
    fn tick(&self) -> io::Result<Option<Hit>> {
        let mut dir = self.0.borrow_mut();
        if dir.crashed {
            return Err(io::Error::other("crashed"));
        }
        match dir.crash_in {
            Some((1, inside)) => {
                dir.crashed = true;
                dir.crash_in = None;
                Ok(Some(if inside { Hit::Inside } else { Hit::Before }))
            }
            Some((n, inside)) => {
                dir.crash_in = Some((n - 1, inside));
                Ok(None)
            }
            None => Ok(None),
        }
    }
}

fn crashed() -> io::Error {
    io::Error::other("simulated crash")
}

impl MetaFiles for SimFiles {
    fn read(&mut self, name: &str) -> io::Result<Option<Vec<u8>>> {
        if self.0.borrow().crashed {
            return Err(crashed());
        }
        Ok(self.0.borrow().files.get(name).map(|f| f.data.clone()))
    }

    fn append(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let hit = self.tick()?;
        let mut dir = self.0.borrow_mut();
        let file = dir.files.entry(name.to_string()).or_default();
        match hit {
            None => file.data.extend_from_slice(bytes),
            Some(Hit::Inside) => {
                file.data.extend_from_slice(&bytes[..bytes.len() / 2]);
                return Err(crashed());
            }
            Some(Hit::Before) => return Err(crashed()),
        }
        Ok(())
    }

    fn truncate(&mut self, name: &str, len: u64) -> io::Result<()> {
        if self.tick()?.is_some() {
            return Err(crashed());
        }
        let mut dir = self.0.borrow_mut();
        let file = dir.files.entry(name.to_string()).or_default();
        file.data.truncate(len as usize);
        Ok(())
    }

    fn sync(&mut self, name: &str) -> io::Result<()> {
        let hit = self.tick()?;
        let mut dir = self.0.borrow_mut();
        let file = dir.files.entry(name.to_string()).or_default();
        match hit {
            None => file.durable = file.data.clone(),
            // The sync completed, but the caller never learns it.
            Some(Hit::Inside) => {
                file.durable = file.data.clone();
                return Err(crashed());
            }
            Some(Hit::Before) => return Err(crashed()),
        }
        Ok(())
    }

    fn replace(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let hit = self.tick()?;
        let mut dir = self.0.borrow_mut();
        match hit {
            None => {}
            // The rename happened: atomic and durable either way.
            Some(Hit::Inside) => {
                dir.files.insert(
                    name.to_string(),
                    SimFile {
                        data: bytes.to_vec(),
                        durable: bytes.to_vec(),
                    },
                );
                return Err(crashed());
            }
            Some(Hit::Before) => return Err(crashed()),
        }
        dir.files.insert(
            name.to_string(),
            SimFile {
                data: bytes.to_vec(),
                durable: bytes.to_vec(),
            },
        );
        Ok(())
    }

    fn describe(&self) -> String {
        "simulated directory".into()
    }
}
