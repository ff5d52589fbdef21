//! The metadata node's durable state: files survive restarts, a torn log
//! tail is cut, and a quorum restarted from its files carries on.

use std::collections::{BTreeMap, VecDeque};

use ::raft::eraftpb::{Entry, HardState, Message, Snapshot};
use control::raft::disk::FileRaftDisk;
use control::raft::node::{MetadataNode, NodeConfig, NodeId, Persist};
use control::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use sim_files::SimFiles;

// Shared with the simulation, which uses all of it.
#[allow(dead_code)]
mod sim_files;

fn entry(index: u64, term: u64, data: &[u8]) -> Entry {
    Entry {
        index,
        term,
        data: data.to_vec().into(),
        ..Entry::default()
    }
}

#[test]
fn what_was_persisted_is_what_reopens() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut disk = FileRaftDisk::open(tmp.path()).unwrap();
    let mut last = 0u64;
    // A hard state's commit never goes below the snapshot (it is committed).
    let mut snapshot_index = 0u64;
    for round in 0..200u64 {
        let first = rng.gen_range(last.saturating_sub(3) + 1..=last + 1);
        let count = rng.gen_range(0..4);
        let entries: Vec<Entry> = (first..first + count)
            .map(|i| entry(i, round, &i.to_be_bytes()))
            .collect();
        last = if count > 0 { first + count - 1 } else { last };
        let hard_state = rng.gen_bool(0.5).then(|| HardState {
            term: round,
            vote: rng.gen_range(0..4),
            commit: (last / 2).max(snapshot_index),
            ..HardState::default()
        });
        disk.persist(&Persist {
            entries,
            hard_state,
            ..Persist::default()
        })
        .unwrap();
        if round % 40 == 39 {
            let mut snapshot = Snapshot::default();
            snapshot_index = last / 2;
            snapshot.mut_metadata().index = snapshot_index;
            snapshot.mut_metadata().term = round;
            snapshot.data = vec![round as u8; 10].into();
            disk.compact(&snapshot).unwrap();
        }
        if round % 7 == 0 {
            let before = disk.recovered();
            drop(disk);
            disk = FileRaftDisk::open(tmp.path()).unwrap();
            let after = disk.recovered();
            assert_eq!(after.entries, before.entries, "round {round}");
            assert_eq!(after.hard_state, before.hard_state, "round {round}");
            assert_eq!(after.snapshot, before.snapshot, "round {round}");
        }
    }
    let recovered = disk.recovered();
    let snapshot_index = recovered.snapshot.as_ref().unwrap().get_metadata().index;
    assert!(
        recovered.entries.iter().all(|e| e.index > snapshot_index),
        "the log is compacted behind the snapshot"
    );
    assert!(recovered
        .entries
        .windows(2)
        .all(|w| w[1].index == w[0].index + 1));
}

#[test]
fn a_torn_log_tail_is_cut_to_whole_records() {
    let tmp = tempfile::tempdir().unwrap();
    let mut disk = FileRaftDisk::open(tmp.path()).unwrap();
    for i in 1..=20 {
        disk.persist(&Persist {
            entries: vec![entry(i, 1, b"payload")],
            ..Persist::default()
        })
        .unwrap();
    }
    drop(disk);
    let log = tmp.path().join("raft.log");
    let full = std::fs::read(&log).unwrap();
    for cut in [full.len() - 1, full.len() - 10, full.len() / 2, 3] {
        std::fs::write(&log, &full[..cut]).unwrap();
        let disk = FileRaftDisk::open(tmp.path()).unwrap();
        let entries = disk.recovered().entries;
        assert!(entries.len() < 20, "cut at {cut}");
        assert!(
            entries
                .iter()
                .enumerate()
                .all(|(i, e)| e.index == i as u64 + 1),
            "a prefix survives"
        );
        assert!(std::fs::metadata(&log).unwrap().len() as usize <= cut);
    }
    let mut flipped = full.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0xff;
    std::fs::write(&log, &flipped).unwrap();
    // Damage followed by whole records is no torn tail: refused, not cut.
    let refused = FileRaftDisk::open(tmp.path()).err().expect("refused");
    assert!(
        refused.to_string().contains("raft.log is damaged at byte"),
        "{refused}"
    );
    // Damage inside the last record looks like a torn write: cut.
    let mut last = full.clone();
    let at = full.len() - 3;
    last[at] ^= 0xff;
    std::fs::write(&log, &last).unwrap();
    let entries = FileRaftDisk::open(tmp.path()).unwrap().recovered().entries;
    assert_eq!(entries.len(), 19, "the last record cut");
}

/// What one persist wrote lands whole or not at all: a crash that kept a
/// later page of the write but not an earlier one (unsynced writes land in
/// any order) is a torn tail, cut, not damage in the middle of the log.
#[test]
fn a_write_torn_in_its_middle_is_cut_as_a_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let mut disk = FileRaftDisk::open(tmp.path()).unwrap();
    for i in 1..=10 {
        disk.persist(&Persist {
            entries: vec![entry(i, 1, b"payload")],
            ..Persist::default()
        })
        .unwrap();
    }
    let before_last = std::fs::metadata(tmp.path().join("raft.log"))
        .unwrap()
        .len() as usize;
    disk.persist(&Persist {
        entries: (11..=15).map(|i| entry(i, 2, &[i as u8; 300])).collect(),
        hard_state: Some(HardState {
            term: 2,
            vote: 1,
            commit: 12,
            ..HardState::default()
        }),
        ..Persist::default()
    })
    .unwrap();
    drop(disk);
    let log = tmp.path().join("raft.log");
    let full = std::fs::read(&log).unwrap();
    assert_eq!(
        last_record_start(&full),
        before_last,
        "one record per persist"
    );
    // The write's first bytes lost (zeroed), its last ones durable.
    let mut torn = full.clone();
    torn[before_last..before_last + 600].fill(0);
    std::fs::write(&log, &torn).unwrap();
    let recovered = FileRaftDisk::open(tmp.path()).unwrap().recovered();
    let indexes: Vec<u64> = recovered.entries.iter().map(|e| e.index).collect();
    assert_eq!(indexes, (1..=10).collect::<Vec<_>>());
    assert_eq!(recovered.hard_state, HardState::default());
    assert_eq!(std::fs::metadata(&log).unwrap().len() as usize, before_last);
}

/// Three nodes on real files, delivering messages in order, no faults.
struct Cluster {
    dirs: Vec<tempfile::TempDir>,
    nodes: BTreeMap<NodeId, (MetadataNode, FileRaftDisk)>,
    mail: VecDeque<Message>,
}

impl Cluster {
    fn start(dirs: Vec<tempfile::TempDir>) -> Cluster {
        let ids: Vec<NodeId> = vec![1, 2, 3];
        let mut nodes = BTreeMap::new();
        for (id, dir) in ids.iter().zip(&dirs) {
            let disk = FileRaftDisk::open(dir.path()).unwrap();
            let config = NodeConfig {
                snapshot_every_entries: 10,
                election_timeout_ticks: (10 + 4 * *id as usize, 11 + 4 * *id as usize),
                ..NodeConfig::new(*id, ids.clone())
            };
            let node = MetadataNode::start(&config, disk.recovered()).unwrap();
            nodes.insert(*id, (node, disk));
        }
        Cluster {
            dirs,
            nodes,
            mail: VecDeque::new(),
        }
    }

    fn run(&mut self, ticks: usize, mut propose: impl FnMut(&mut MetadataNode)) {
        for _ in 0..ticks {
            for (node, _) in self.nodes.values_mut() {
                node.tick();
            }
            while let Some(message) = self.mail.pop_front() {
                let _ = self.nodes.get_mut(&message.to).unwrap().0.step(message);
            }
            if let Some((leader, _)) = self.nodes.values_mut().find(|(n, _)| n.is_leader()) {
                propose(leader);
            }
            for (node, disk) in self.nodes.values_mut() {
                while let Some(output) = node.ready() {
                    self.mail.extend(output.send);
                    disk.persist(&output.persist).unwrap();
                    self.mail.extend(output.after_persist);
                    let persisted = node.persisted();
                    self.mail.extend(persisted.send);
                    disk.persist(&persisted.persist).unwrap();
                }
            }
        }
    }
}

#[test]
fn a_quorum_restarted_from_its_files_keeps_its_metadata_and_carries_on() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut cluster = Cluster::start(dirs);
    let mut next = 1;
    cluster.run(200, |leader| {
        if next <= 30 {
            let record = MetadataRecord::RegisterBroker(BrokerRegistration {
                id: BrokerId(next % 5),
                incarnation: Incarnation(next as u64),
                listener: "127.0.0.1:9092".into(),
                rack: None,
                shards: 1,
            });
            if leader.propose(&record).is_ok() {
                next += 1;
            }
        }
    });
    assert_eq!(next, 31, "all thirty registrations were proposed");
    let before: Vec<Vec<u8>> = cluster
        .nodes
        .values()
        .map(|(n, _)| n.metadata().encode())
        .collect();
    assert!(before.windows(2).all(|w| w[0] == w[1]), "the nodes agree");
    let incarnations = cluster.nodes[&1].0.metadata().brokers[&BrokerId(0)]
        .registration
        .incarnation;
    assert_eq!(incarnations, Incarnation(30));
    // Restart every node from its directory.
    let dirs = std::mem::take(&mut cluster.dirs);
    drop(cluster);
    let mut cluster = Cluster::start(dirs);
    cluster.run(100, |_| {});
    let after: Vec<Vec<u8>> = cluster
        .nodes
        .values()
        .map(|(n, _)| n.metadata().encode())
        .collect();
    assert_eq!(after, before, "the metadata survived the restart");
    let snapshots = cluster
        .dirs
        .iter()
        .filter(|d| d.path().join("snapshot").exists())
        .count();
    assert_eq!(
        snapshots, 3,
        "every node compacted its log behind a snapshot"
    );
    let mut proposed = false;
    cluster.run(50, |leader| {
        if !proposed {
            let record = MetadataRecord::RegisterBroker(BrokerRegistration {
                id: BrokerId(9),
                incarnation: Incarnation(1),
                listener: "127.0.0.1:1".into(),
                rack: None,
                shards: 1,
            });
            proposed = leader.propose(&record).is_ok();
        }
    });
    assert!(
        cluster
            .nodes
            .values()
            .all(|(n, _)| n.metadata().brokers.contains_key(&BrokerId(9))),
        "it carries on"
    );
}

#[test]
fn a_deleted_topic_is_gone_after_a_restart() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut cluster = Cluster::start(dirs);
    let mut step = 0;
    cluster.run(150, |leader| {
        let record = match step {
            0 => MetadataRecord::RegisterBroker(BrokerRegistration {
                id: BrokerId(1),
                incarnation: Incarnation(1),
                listener: "127.0.0.1:9092".into(),
                rack: None,
                shards: 1,
            }),
            1 => MetadataRecord::UnfenceBroker {
                id: BrokerId(1),
                incarnation: Incarnation(1),
            },
            2 => MetadataRecord::CreateTopic {
                id: TopicId([3; 16]),
                name: "doomed".into(),
                config: Box::default(),
                partitions: control::model::placement::place(leader.metadata(), 2, 1)
                    .unwrap_or_default(),
            },
            3 => MetadataRecord::DeleteTopic {
                id: TopicId([3; 16]),
            },
            _ => return,
        };
        // Propose a step only once the previous one is applied.
        let metadata = leader.metadata();
        let ready = match step {
            0 => true,
            1 => metadata.brokers.contains_key(&BrokerId(1)),
            2 => metadata.live_brokers().count() == 1,
            _ => metadata.topics.contains_key(&TopicId([3; 16])),
        };
        if ready && leader.propose(&record).is_ok() {
            step += 1;
        }
    });
    assert_eq!(step, 4);
    assert!(cluster
        .nodes
        .values()
        .all(|(n, _)| n.metadata().topic_by_name("doomed").is_err()));
    let dirs = std::mem::take(&mut cluster.dirs);
    drop(cluster);
    let mut cluster = Cluster::start(dirs);
    cluster.run(100, |_| {});
    for (node, _) in cluster.nodes.values() {
        assert!(
            node.metadata().topic_by_name("doomed").is_err(),
            "deleted for good"
        );
        assert!(
            node.metadata().brokers.contains_key(&BrokerId(1)),
            "the rest survived"
        );
    }
}

/// Runs a lone voter on `dir` until it has led and applied everything
/// its log holds (or `ticks` pass); returns it.
fn run_lone(
    dir: &std::path::Path,
    ticks: usize,
    mut propose: impl FnMut(&mut MetadataNode),
) -> Result<MetadataNode, String> {
    let mut disk = FileRaftDisk::open(dir).map_err(|e| e.to_string())?;
    let config = NodeConfig {
        snapshot_every_entries: 8,
        election_ticks: 3,
        election_timeout_ticks: (3, 4),
        ..NodeConfig::new(1, vec![1])
    };
    let mut node = MetadataNode::start(&config, disk.recovered())?;
    for _ in 0..ticks {
        node.tick();
        if node.is_leader() {
            propose(&mut node);
        }
        while let Some(output) = node.ready() {
            disk.persist(&output.persist).map_err(|e| e.to_string())?;
            let persisted = node.persisted();
            disk.persist(&persisted.persist)
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(node)
}

fn register(id: i32, incarnation: u64) -> MetadataRecord {
    MetadataRecord::RegisterBroker(BrokerRegistration {
        id: BrokerId(id),
        incarnation: Incarnation(incarnation),
        listener: "127.0.0.1:9092".into(),
        rack: None,
        shards: 1,
    })
}

/// Damage of every kind to every metadata file, 240 rounds: the node
/// either refuses to start with an error, or starts with a state that is a
/// prefix of what was committed (never garbage, never a panic); garbage
/// appended to the log (a torn tail) loses nothing, and damage inside the
/// log followed by whole records is always refused.
#[test]
fn damaged_metadata_is_refused_or_recovered_never_garbage() {
    let original = tempfile::tempdir().unwrap();
    // Commit 40 registrations one at a time, remembering each state.
    let mut next = 1u64;
    let mut states: Vec<Vec<u8>> = vec![Metadata::default().encode()];
    let node = run_lone(original.path(), 300, |leader| {
        let idle = leader.applied_index() == leader.last_index();
        if next <= 40 && idle && leader.propose(&register(next as i32 % 7, next)).is_ok() {
            next += 1;
        }
    })
    .unwrap();
    assert_eq!(next, 41);
    // Every state the records went through, by replaying them.
    let mut replay = Metadata::default();
    for i in 1..=40u64 {
        replay.apply(&register(i as i32 % 7, i)).unwrap();
        states.push(replay.encode());
    }
    let full = node.metadata().encode();
    assert_eq!(&full, states.last().unwrap());
    drop(node);
    let log = std::fs::read(original.path().join("raft.log")).unwrap();
    let snapshot = std::fs::read(original.path().join("snapshot")).unwrap();
    let last_record_at = last_record_start(&log);
    let mut rng = SmallRng::seed_from_u64(0x5eed);
    let mut outcomes = BTreeMap::<&str, usize>::new();
    for round in 0..240 {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, mut snapshot) = (log.clone(), snapshot.clone());
        let damage_log = rng.gen_bool(0.7);
        let target = if damage_log { &mut log } else { &mut snapshot };
        let kind = rng.gen_range(0..3);
        let mut mid_log_flip = false;
        match kind {
            0 => {
                let at = rng.gen_range(0..target.len());
                target[at] ^= rng.gen_range(1..=255u8);
                mid_log_flip = damage_log && at < last_record_at;
            }
            1 => {
                let len = rng.gen_range(0..target.len());
                target.truncate(len);
            }
            _ => {
                let garbage: Vec<u8> = (0..rng.gen_range(1..64)).map(|_| rng.gen()).collect();
                target.extend_from_slice(&garbage);
            }
        }
        std::fs::write(dir.path().join("raft.log"), &log).unwrap();
        std::fs::write(dir.path().join("snapshot"), &snapshot).unwrap();
        match run_lone(dir.path(), 30, |_| {}) {
            Err(why) => {
                assert!(!why.is_empty());
                assert!(
                    !(damage_log && kind == 2),
                    "round {round}: garbage after the log's end is a torn tail, yet refused: {why}"
                );
                *outcomes.entry("refused").or_default() += 1;
            }
            Ok(node) => {
                let state = node.metadata().encode();
                assert!(
                    states.contains(&state),
                    "round {round}: started with a state that was never committed"
                );
                assert!(
                    !mid_log_flip,
                    "round {round}: damage mid-log was cut, not refused"
                );
                if damage_log && kind == 2 {
                    assert_eq!(state, full, "round {round}: a torn tail lost a record");
                }
                *outcomes
                    .entry(if state == full { "whole" } else { "prefix" })
                    .or_default() += 1;
            }
        }
    }
    eprintln!("240 damaged directories: {outcomes:?}");
    assert!(outcomes.get("refused").is_some_and(|n| *n > 0));
    assert!(outcomes.get("whole").is_some_and(|n| *n > 0));
}

/// Where the last whole record of a raft.log starts.
fn last_record_start(log: &[u8]) -> usize {
    let mut at = 0;
    let mut last = 0;
    while at + 8 <= log.len() {
        let len = u32::from_be_bytes(log[at..at + 4].try_into().unwrap()) as usize;
        last = at;
        at += 8 + len;
    }
    last
}

/// A received snapshot's install cut short after its file was replaced
/// left the old log, whose entry at the snapshot's index disagrees with
/// it. Opening settled that in memory only, so the next open found the
/// disagreeing entry again and dropped everything appended since, the
/// committed entries included (the simulation's seed 1796626363659907058:
/// "the hard state's commit index 36 is past the log's last index 25").
#[test]
fn entries_appended_after_an_interrupted_snapshot_install_survive_the_next_restart() {
    let files = SimFiles::default();
    let mut disk = FileRaftDisk::open_files(files.clone()).unwrap();
    let entries = (1..=25).map(|i| entry(i, if i > 23 { 3 } else { 1 }, b"old"));
    let hard_state = HardState {
        term: 3,
        vote: 1,
        commit: 23,
        ..HardState::default()
    };
    let persist = Persist {
        entries: entries.collect(),
        hard_state: Some(hard_state),
        ..Persist::default()
    };
    disk.persist(&persist).unwrap();
    // A leader of term 4 sends a snapshot at index 25; the crash lands
    // inside the replacement of the snapshot file (done, not reported).
    let mut snapshot = Snapshot::default();
    snapshot.mut_metadata().index = 25;
    snapshot.mut_metadata().term = 4;
    snapshot.data = vec![4; 10].into();
    files.arm_crash(1, true);
    let install = Persist {
        received_snapshot: Some(snapshot),
        ..Persist::default()
    };
    assert!(disk.persist(&install).is_err());
    drop(disk);
    files.crash(&mut SmallRng::seed_from_u64(1));
    let mut disk = FileRaftDisk::open_files(files.clone()).unwrap();
    assert!(disk.recovered().entries.is_empty());
    let hard_state = HardState {
        term: 4,
        commit: 30,
        ..HardState::default()
    };
    let persist = Persist {
        entries: (26..=30).map(|i| entry(i, 4, b"new")).collect(),
        hard_state: Some(hard_state),
        ..Persist::default()
    };
    disk.persist(&persist).unwrap();
    drop(disk);
    let disk = FileRaftDisk::open_files(files.clone()).unwrap();
    let recovered = disk.recovered();
    let indexes: Vec<u64> = recovered.entries.iter().map(|e| e.index).collect();
    assert_eq!(indexes, (26..=30).collect::<Vec<_>>());
    recovered.check().unwrap();
}
