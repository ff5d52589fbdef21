//! `broker dump-metadata DIR`: prints what a stopped broker's metadata
//! directory (`DATA_DIR/metadata`) holds, without changing it: the
//! snapshot (its index, term, voters, and the state in it), the hard
//! state, and every log entry after the snapshot with its record. The
//! tool to compare the voters of a quorum, or to see why one does not
//! start.

use std::fmt::Write as _;
use std::path::PathBuf;

use control::raft::disk::load;
use control::raft::files::DirFiles;
use control::{Metadata, MetadataRecord};
use raft::eraftpb::EntryType;

/// Dumps the metadata directory `dir`.
pub fn run(dir: PathBuf) -> Result<String, String> {
    if !dir.join("raft.log").exists() && !dir.join("snapshot").exists() {
        return Err(format!(
            "{} holds no metadata (no raft.log, no snapshot)",
            dir.display()
        ));
    }
    let mut files = DirFiles::open(&dir).map_err(|e| e.to_string())?;
    let loaded = load(&mut files).map_err(|e| e.to_string())?;
    let recovered = &loaded.recovered;
    let mut out = String::new();
    match &recovered.snapshot {
        Some(snapshot) => {
            let meta = snapshot.get_metadata();
            let _ = writeln!(
                out,
                "snapshot index {} term {} voters {:?}",
                meta.index,
                meta.term,
                meta.get_conf_state().voters
            );
            match Metadata::decode(&snapshot.data) {
                Ok(metadata) => describe(&mut out, &metadata),
                Err(e) => {
                    let _ = writeln!(out, "  state does not decode: {e}");
                }
            }
        }
        None => out.push_str("no snapshot\n"),
    }
    let hs = &recovered.hard_state;
    let _ = writeln!(
        out,
        "hard_state term {} vote {} commit {}",
        hs.term, hs.vote, hs.commit
    );
    let _ = writeln!(
        out,
        "raft.log {} bytes, {} valid; {} entries after the snapshot{}",
        loaded.log_bytes,
        loaded.log_valid_bytes,
        recovered.entries.len(),
        if loaded.dropped_divergent > 0 {
            format!(
                " ({} dropped: they disagree with the snapshot)",
                loaded.dropped_divergent
            )
        } else {
            String::new()
        }
    );
    if let Err(why) = recovered.check() {
        let _ = writeln!(out, "INCONSISTENT: {why}");
    }
    for entry in &recovered.entries {
        let what = match entry.get_entry_type() {
            EntryType::EntryNormal if entry.data.is_empty() => "(leader's empty entry)".into(),
            EntryType::EntryNormal => match MetadataRecord::decode(&entry.data) {
                Ok(record) => summary(&record),
                Err(e) => format!("undecodable: {e}"),
            },
            other => format!("{other:?}"),
        };
        let _ = writeln!(out, "{} {} {what}", entry.index, entry.term);
    }
    Ok(out)
}

fn describe(out: &mut String, metadata: &Metadata) {
    let cluster = metadata
        .cluster_id
        .map_or("(none yet)".into(), |id| id.to_string());
    let _ = writeln!(out, "  cluster {cluster}");
    for broker in metadata.brokers.values() {
        let r = &broker.registration;
        let _ = writeln!(
            out,
            "  broker {} incarnation {} {}{} at {} rack {:?}",
            r.id,
            r.incarnation.0,
            if broker.fenced { "fenced" } else { "live" },
            if metadata.cordoned_brokers.contains(&r.id) {
                " cordoned"
            } else {
                ""
            },
            r.listener,
            r.rack
        );
        if let Some(endpoints) = metadata.broker_endpoints.get(&r.id) {
            let named: Vec<String> = endpoints
                .iter()
                .map(|e| format!("{}={}", e.listener, e.address))
                .collect();
            let _ = writeln!(out, "    listeners {}", named.join(","));
        }
    }
    for topic in metadata.topics.values() {
        let _ = writeln!(
            out,
            "  topic {} id {} partitions {}",
            topic.name,
            topic.id,
            topic.partitions.len()
        );
        for (index, p) in topic.partitions.iter().enumerate() {
            let _ = writeln!(
                out,
                "    {index}: leader {:?} epoch {} replicas {:?} isr {:?}",
                p.leader.map(|b| b.0),
                p.leader_epoch.0,
                p.replicas.iter().map(|b| b.0).collect::<Vec<_>>(),
                p.isr.iter().map(|b| b.0).collect::<Vec<_>>()
            );
        }
    }
    let _ = writeln!(
        out,
        "  deleted topics {} unclean elections {}",
        metadata.deleted_topics.len(),
        metadata.unclean_leader_elections
    );
    let _ = writeln!(out, "  acls {}", metadata.acls.len());
    for (user, by_mechanism) in &metadata.scram_credentials {
        let mechanisms: Vec<_> = by_mechanism.keys().map(|m| m.name()).collect();
        let _ = writeln!(out, "  user {user:?} {}", mechanisms.join(" "));
    }
}

fn summary(record: &MetadataRecord) -> String {
    match record {
        MetadataRecord::RegisterBroker(r) => {
            format!("RegisterBroker {} incarnation {}", r.id, r.incarnation.0)
        }
        MetadataRecord::FenceBroker { id, incarnation } => {
            format!("FenceBroker {id} incarnation {}", incarnation.0)
        }
        MetadataRecord::UnfenceBroker { id, incarnation } => {
            format!("UnfenceBroker {id} incarnation {}", incarnation.0)
        }
        MetadataRecord::CreateTopic {
            id,
            name,
            partitions,
            ..
        } => format!("CreateTopic {name} id {id} partitions {}", partitions.len()),
        MetadataRecord::DeleteTopic { id } => format!("DeleteTopic {id}"),
        MetadataRecord::CreatePartitions { topic, partitions } => {
            format!("CreatePartitions {topic} +{}", partitions.len())
        }
        MetadataRecord::AlterTopicConfig { topic, .. } => format!("AlterTopicConfig {topic}"),
        // Decoding turns these into the two above.
        MetadataRecord::CreateTopicV1 { name, .. } => format!("CreateTopic (first layout) {name}"),
        MetadataRecord::AlterTopicConfigV1 { topic, .. } => {
            format!("AlterTopicConfig (first layout) {topic}")
        }
        MetadataRecord::SetClusterId { id } => format!("SetClusterId {id}"),
        MetadataRecord::AllocateProducerIds {
            broker,
            first,
            size,
        } => format!("AllocateProducerIds {broker} [{first}, +{size})"),
        MetadataRecord::ChangePartition(c) | MetadataRecord::ElectUnclean(c) => format!(
            "{} {}-{} leader {:?} isr {:?} from epoch {}",
            match record {
                MetadataRecord::ElectUnclean(_) => "ElectUnclean",
                _ => "ChangePartition",
            },
            c.topic,
            c.partition.0,
            c.leader.map(|b| b.0),
            c.isr.iter().map(|b| b.0).collect::<Vec<_>>(),
            c.expected_epoch.0
        ),
        MetadataRecord::SetBrokerCordoned { id, cordoned } => {
            format!("SetBrokerCordoned {id} {cordoned}")
        }
        MetadataRecord::SetQuorumAddress { node, address } => {
            format!("SetQuorumAddress {node} {address}")
        }
        MetadataRecord::BeginReassignment {
            topic,
            partition,
            expected_epoch,
            target,
        } => format!(
            "BeginReassignment {topic} {} to {:?} from epoch {}",
            partition.0,
            target.replicas.iter().map(|b| b.0).collect::<Vec<_>>(),
            expected_epoch.0
        ),
        MetadataRecord::FinishReassignment { change, cancelled } => format!(
            "FinishReassignment {} {}{} leader {:?} isr {:?}",
            change.topic,
            change.partition.0,
            if *cancelled { " (cancelled)" } else { "" },
            change.leader.map(|b| b.0),
            change.isr.iter().map(|b| b.0).collect::<Vec<_>>()
        ),
        // Never the keys: they are what a login is checked against.
        MetadataRecord::SetScramCredential(c) => format!(
            "SetScramCredential {:?} {} iterations {}",
            c.user, c.mechanism, c.iterations
        ),
        MetadataRecord::DeleteScramCredential { user, mechanism } => {
            format!("DeleteScramCredential {user:?} {mechanism}")
        }
        MetadataRecord::CreateAcls(acls) => format!("CreateAcls {}", acls.len()),
        MetadataRecord::DeleteAcls(acls) => format!("DeleteAcls {}", acls.len()),
        MetadataRecord::SetClientQuota { entity, key, value } => {
            format!("SetClientQuota {entity:?} {key} {value:?}")
        }
        MetadataRecord::SetGroupConfig { group, key, value } => {
            format!("SetGroupConfig {group} {key} {value:?}")
        }
        MetadataRecord::SetBrokerEndpoints {
            id,
            incarnation,
            endpoints,
        } => {
            let listeners: Vec<String> = endpoints
                .iter()
                .map(|e| format!("{}={}", e.listener, e.address))
                .collect();
            format!(
                "SetBrokerEndpoints {id} incarnation {} {}",
                incarnation.0,
                listeners.join(",")
            )
        }
    }
}
