//! Classic members in a consumer group: a classic group converted with
//! its partitions in place, a consumer protocol member joining it and
//! partitions moving only once given up, the way back to a classic
//! group; then random mixed groups of eager, cooperative and consumer
//! protocol clients against a model: never one partition owned by two
//! clients, everyone at the target once changes stop, and the records
//! rebuild the group.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::super::{Answer, ConsumerGroup, Partition, Record, Request, TopicId, TopicView};
use super::{ClassicJoin, ClassicJoined};
use crate::groups::consumer_protocol::{self, encode_assignment, encode_subscription};
use crate::groups::membership::{GroupSnapshot, GroupState, MemberSnapshot};
use crate::groups::records::{self, Key, Value};
use crate::groups::store::PartitionGroups;
use crate::kafka::Code;

const T: TopicId = [1; 16];

fn view(partitions: u32) -> TopicView {
    BTreeMap::from([("t".to_string(), (T, partitions))])
}

fn no_racks() -> crate::groups::modern::assign::PartitionRacks<TopicId> {
    BTreeMap::new()
}

/// A subscription to "t" (version 1) owning `owned`.
fn subscription(owned: &BTreeSet<Partition>) -> Vec<u8> {
    let mut out = 1i16.to_be_bytes().to_vec();
    out.extend(1i32.to_be_bytes());
    out.extend(1i16.to_be_bytes());
    out.push(b't');
    out.extend((-1i32).to_be_bytes()); // user data
    let partitions: Vec<i32> = owned.iter().map(|(_, p)| *p).collect();
    match partitions.is_empty() {
        true => out.extend(0i32.to_be_bytes()),
        false => {
            out.extend(1i32.to_be_bytes());
            out.extend(1i16.to_be_bytes());
            out.push(b't');
            out.extend((partitions.len() as i32).to_be_bytes());
            for p in partitions {
                out.extend(p.to_be_bytes());
            }
        }
    }
    out
}

fn classic_join(member: &str, owned: &BTreeSet<Partition>) -> ClassicJoin {
    ClassicJoin {
        member_id: member.into(),
        client_id: "c".into(),
        client_host: "/h".into(),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), subscription(owned))],
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        ..ClassicJoin::default()
    }
}

/// Joins and replays; (member id, generation).
fn join(
    group: &mut ConsumerGroup,
    log: &mut Vec<Record>,
    j: &ClassicJoin,
) -> Result<(String, i32), Code> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let mut new_id = || {
        let next = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{}-new{next}", j.client_id)
    };
    let racks = no_racks;
    match group.classic_join("g", j, &mut new_id, (&view(6), &racks))? {
        ClassicJoined::Joined {
            records,
            member_id,
            generation,
            ..
        } => {
            replay(group, log, records);
            Ok((member_id, generation))
        }
        ClassicJoined::MemberIdRequired(id) => Ok((id, -1)),
    }
}

fn replay(group: &mut ConsumerGroup, log: &mut Vec<Record>, records: Vec<Record>) {
    for (key, value) in &records {
        group.replay(key, value.as_ref());
    }
    log.extend(records);
}

/// SyncGroup's partitions for `member` at `generation`.
fn sync(group: &ConsumerGroup, member: &str, generation: i32) -> Result<BTreeSet<Partition>, Code> {
    let bytes = group.classic_sync(
        (member, None, generation),
        (Some("consumer"), None),
        &view(6),
    )?;
    let topics = consumer_protocol::assigned_partitions(&bytes).expect("an assignment");
    let each = topics
        .into_iter()
        .flat_map(|(_, ps)| ps.into_iter().map(|p| (T, p)));
    Ok(each.collect())
}

fn heartbeat_of(member: &str, epoch: i32) -> Request {
    Request {
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["t".into()]),
        subscribed_topic_regex: Some(String::new()),
        owned: Some(BTreeSet::new()),
        client_id: "c".into(),
        client_host: "/h".into(),
        ..Request::default()
    }
}

fn beat(group: &mut ConsumerGroup, log: &mut Vec<Record>, req: &Request) -> Result<Answer, Code> {
    let decision = group.heartbeat("g", req, &view(6), &no_racks, None)?;
    replay(group, log, decision.records);
    Ok(decision.answer)
}

fn rebuilt(log: &[Record]) -> ConsumerGroup {
    let mut group = ConsumerGroup::default();
    for (key, value) in log {
        group.replay(key, value.as_ref());
    }
    group
}

fn part(ps: &[i32]) -> BTreeSet<Partition> {
    ps.iter().map(|p| (T, *p)).collect()
}

/// A stable classic group at generation 4: a owns 0-2, b 3-5.
fn classic_group() -> GroupSnapshot {
    let member = |id: &str, ps: Vec<i32>| MemberSnapshot {
        member_id: id.into(),
        instance_id: None,
        client_id: "c".into(),
        client_host: "/h".into(),
        session_timeout: Duration::from_secs(10),
        rebalance_timeout: Duration::from_secs(30),
        subscription: Bytes::from(encode_subscription(&["t".to_string()])),
        assignment: Bytes::from(encode_assignment(&[("t".to_string(), ps)])),
    };
    GroupSnapshot {
        state: GroupState::Stable,
        protocol_type: "consumer".into(),
        generation: 4,
        protocol: Some("range".into()),
        leader: Some("a".into()),
        members: vec![member("a", vec![0, 1, 2]), member("b", vec![3, 4, 5])],
    }
}

fn protocols(_: &str) -> Vec<(String, Vec<u8>)> {
    vec![("range".into(), encode_subscription(&["t".to_string()]))]
}

#[test]
fn a_classic_group_converts_with_its_partitions_in_place_and_back() {
    let (mut group, records) =
        ConsumerGroup::from_classic("g", &classic_group(), &protocols, &view(6)).unwrap();
    let mut log = records;
    assert_eq!(rebuilt(&log), group, "the records make the group");
    assert_eq!((group.epoch, group.assignment_epoch), (4, 4));
    assert_eq!(group.members["a"].assignment.assigned, part(&[0, 1, 2]));
    assert_eq!(group.members["a"].assignment.epoch, 4);
    assert_eq!(group.targets["b"], part(&[3, 4, 5]));
    // Nothing to do until something changes.
    assert_eq!(group.classic_heartbeat("a", None, 4), Ok(()));
    assert_eq!(sync(&group, "a", 4), Ok(part(&[0, 1, 2])));
    // A consumer protocol member joins: a new epoch, but partitions move
    // only as they are given up.
    let c = beat(&mut group, &mut log, &heartbeat_of("c", 0)).unwrap();
    assert_eq!(c.member_epoch, 5);
    assert_eq!(c.assignment, Some(BTreeSet::new()), "all still held");
    let rebalance = Err(ResponseError::RebalanceInProgress.code());
    assert_eq!(group.classic_heartbeat("a", None, 4), rebalance);
    // a joins again still owning everything: told to keep two, at its epoch.
    let (a, generation) =
        join(&mut group, &mut log, &classic_join("a", &part(&[0, 1, 2]))).unwrap();
    assert_eq!((a.as_str(), generation), ("a", 4));
    let kept = sync(&group, "a", 4).unwrap();
    assert_eq!(kept.len(), 2);
    assert_eq!(
        group.classic_heartbeat("a", None, 4),
        rebalance,
        "still revoking"
    );
    // It gave one up: the next join moves it on.
    let (_, generation) = join(&mut group, &mut log, &classic_join("a", &kept)).unwrap();
    assert_eq!(generation, 5);
    assert_eq!(sync(&group, "a", 5), Ok(kept.clone()));
    assert_eq!(group.classic_heartbeat("a", None, 5), Ok(()));
    assert_eq!(
        group.classic_heartbeat("a", None, 4),
        Err(ResponseError::IllegalGeneration.code())
    );
    assert_eq!(
        group.may_commit("a", 4),
        Err(ResponseError::IllegalGeneration.code())
    );
    assert_eq!(group.may_commit("a", 5), Ok(()));
    // The consumer member's next heartbeat gets the partition a let go.
    let c = beat(&mut group, &mut log, &heartbeat_of("c", 5)).unwrap();
    assert_eq!(c.assignment.map(|a| a.len()), Some(1));
    assert_eq!(rebuilt(&log), group);
    // A consumer protocol heartbeat with a classic member's id, and a
    // classic join with a consumer member's id, are strangers.
    let unknown = Err(ResponseError::UnknownMemberId.code());
    assert_eq!(
        beat(&mut group, &mut log, &heartbeat_of("a", 5)).map(drop),
        unknown
    );
    assert_eq!(
        join(&mut group, &mut log, &classic_join("c", &BTreeSet::new())).map(drop),
        unknown
    );
    // The last consumer protocol member leaves: a classic group again,
    // at the epoch as its generation, each member with its target.
    let (tombstones, snapshot) = group.downgraded("g", "c", &view(6)).unwrap();
    assert_eq!(snapshot.generation, group.epoch);
    assert_eq!(snapshot.protocol.as_deref(), Some("range"));
    let ids: Vec<&str> = snapshot
        .members
        .iter()
        .map(|m| m.member_id.as_str())
        .collect();
    assert_eq!(ids, ["a", "b"]);
    // Targets without the leaver: its partitions are someone's already.
    let sizes: Vec<usize> = (snapshot.members.iter())
        .map(|m| {
            consumer_protocol::assigned_partitions(&m.assignment).unwrap()[0]
                .1
                .len()
        })
        .collect();
    assert_eq!(sizes, [3, 3]);
    replay(&mut group, &mut log, tombstones);
    assert!(
        rebuilt(&log).members.is_empty(),
        "the consumer group's records are gone"
    );
    // No downgrade while a consumer protocol member stays.
    let mut two = rebuilt(&log[..0]);
    beat(&mut two, &mut Vec::new(), &heartbeat_of("x", 0)).unwrap();
    beat(&mut two, &mut Vec::new(), &heartbeat_of("y", 0)).unwrap();
    assert!(two.downgraded("g", "x", &view(6)).is_none());
}

#[test]
fn classic_groups_the_broker_cannot_carry_on_are_not_converted() {
    let refused = Err(ResponseError::GroupIdNotFound.code());
    let convert =
        |g: &GroupSnapshot| ConsumerGroup::from_classic("g", g, &protocols, &view(6)).map(drop);
    let mut connect = classic_group();
    connect.protocol_type = "connect".into();
    assert_eq!(convert(&connect), refused, "not a consumer group");
    let mut custom = classic_group();
    let mut with_user_data = encode_assignment(&[("t".to_string(), vec![0])]);
    with_user_data.truncate(with_user_data.len() - 4);
    with_user_data.extend([0, 0, 0, 1, 7]);
    custom.members[0].assignment = Bytes::from(with_user_data);
    assert_eq!(convert(&custom), refused, "a custom assignor's user data");
    let mut garbage = classic_group();
    garbage.members[1].subscription = Bytes::from_static(&[0, 0, 0, 0, 0, 9]);
    assert_eq!(
        convert(&garbage),
        refused,
        "a subscription that does not parse"
    );
    // A partition claimed twice goes to the first member only.
    let mut twice = classic_group();
    twice.members[1].assignment = Bytes::from(encode_assignment(&[("t".to_string(), vec![2, 3])]));
    let (group, _) = ConsumerGroup::from_classic("g", &twice, &protocols, &view(6)).unwrap();
    assert_eq!(group.members["b"].assignment.assigned, part(&[3]));
}

#[test]
fn classic_joins_follow_kafkas_member_id_rules() {
    let (mut group, mut log) = (ConsumerGroup::default(), Vec::new());
    beat(&mut group, &mut log, &heartbeat_of("c", 0)).unwrap();
    let mut new = classic_join("", &BTreeSet::new());
    new.require_known_member_id = true;
    let (told, generation) = join(&mut group, &mut log, &new).unwrap();
    assert_eq!(generation, -1, "told its id first (MEMBER_ID_REQUIRED)");
    assert!(!group.members.contains_key(&told), "nothing stored yet");
    let (joined, _) = join(&mut group, &mut log, &classic_join(&told, &BTreeSet::new())).unwrap();
    assert_eq!(joined, told);
    assert!(group.members[&told].metadata.classic.is_some());
    // A protocol the other classic member does not speak.
    let mut other = classic_join("", &BTreeSet::new());
    other.protocols[0].0 = "roundrobin".into();
    assert_eq!(
        join(&mut group, &mut log, &other).map(drop),
        Err(ResponseError::InconsistentGroupProtocol.code())
    );
    // A static member's new process takes the old one's place.
    let mut first = classic_join("", &BTreeSet::new());
    first.instance_id = Some("i".into());
    let (old, _) = join(&mut group, &mut log, &first).unwrap();
    let (new_id, _) = join(&mut group, &mut log, &first).unwrap();
    assert_ne!(old, new_id);
    assert!(!group.members.contains_key(&old));
    let mut impostor = classic_join(&old, &BTreeSet::new());
    impostor.instance_id = Some("i".into());
    assert_eq!(
        join(&mut group, &mut log, &impostor).map(drop),
        Err(ResponseError::FencedInstanceId.code())
    );
    // A consumer protocol static member rolled back to a classic client
    // under the same instance id: the classic process takes its place.
    let mut static_consumer = heartbeat_of("s", 0);
    static_consumer.instance_id = Some("j".into());
    beat(&mut group, &mut log, &static_consumer).unwrap();
    let mut rolled_back = classic_join("", &BTreeSet::new());
    rolled_back.instance_id = Some("j".into());
    let (taker, _) = join(&mut group, &mut log, &rolled_back).unwrap();
    assert!(!group.members.contains_key("s"));
    assert!(group.members[&taker].metadata.classic.is_some());
    assert_eq!(rebuilt(&log), group);
}

/// A client of either protocol, as the model sees it.
struct Client {
    id: String,
    classic: Option<Classic>,
    /// Its epoch (consumer protocol) or generation (classic).
    epoch: i32,
    owned: BTreeSet<Partition>,
}

/// How a classic client rebalances.
#[derive(Clone, Copy)]
struct Classic {
    /// Gives up everything before it joins (eager), or only what its
    /// assignment leaves out (cooperative).
    eager: bool,
    /// Where it stands: its next request.
    phase: Phase,
}

/// A classic client's next request (others' requests come between).
#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Join,
    Sync,
    Heartbeat,
}

impl Client {
    /// One request: a consumer protocol heartbeat, or a classic client's
    /// next one (JoinGroup, SyncGroup or Heartbeat).
    fn step(&mut self, group: &mut ConsumerGroup, log: &mut Vec<Record>) {
        let Some(classic) = self.classic else {
            let mut req = heartbeat_of(&self.id, self.epoch);
            req.owned = Some(self.owned.clone());
            match beat(group, log, &req) {
                Ok(answer) => {
                    self.epoch = answer.member_epoch;
                    if let Some(a) = answer.assignment {
                        self.owned = a;
                    }
                }
                Err(_) => (self.epoch, self.owned) = (0, BTreeSet::new()),
            }
            return;
        };
        let next = match classic.phase {
            Phase::Heartbeat => match group.classic_heartbeat(&self.id, None, self.epoch) {
                Ok(()) => Phase::Heartbeat,
                Err(code) => self.on_error(code),
            },
            Phase::Join => {
                if classic.eager {
                    self.owned.clear();
                }
                match join(group, log, &classic_join(&self.id, &self.owned)) {
                    Ok((_, generation)) => {
                        self.epoch = generation;
                        Phase::Sync
                    }
                    Err(code) => self.on_error(code),
                }
            }
            Phase::Sync => match sync(group, &self.id, self.epoch) {
                Ok(assigned) => {
                    // Partitions left out are given up; then it joins again.
                    let gave_up = !self.owned.is_subset(&assigned);
                    self.owned = assigned;
                    match gave_up {
                        true => Phase::Join,
                        false => Phase::Heartbeat,
                    }
                }
                Err(code) => self.on_error(code),
            },
        };
        self.classic = Some(Classic {
            phase: next,
            ..classic
        });
    }

    /// Told to rebalance it joins again; fenced it first drops everything.
    fn on_error(&mut self, code: Code) -> Phase {
        if code != ResponseError::RebalanceInProgress.code() {
            self.owned.clear();
        }
        Phase::Join
    }
}

fn no_partition_owned_twice(clients: &[Client], seed: u64, step: usize) {
    let mut seen = BTreeSet::new();
    for client in clients {
        for p in &client.owned {
            assert!(
                seen.insert(*p),
                "SEED={seed} step {step}: {p:?} owned twice"
            );
        }
    }
}

#[test]
fn random_mixed_groups_never_give_a_partition_to_two_clients_and_settle() {
    let seed = crate::groups::modern::test_seed();
    let mut rng = SmallRng::seed_from_u64(seed);
    for _ in 0..100 {
        let (mut group, mut log) = (ConsumerGroup::default(), Vec::new());
        let mut clients: Vec<Client> = Vec::new();
        for step in 0..150 {
            match rng.gen_range(0..10) {
                0 if clients.len() < 5 => {
                    let classic = (clients.is_empty() || rng.gen_bool(0.6)).then(|| Classic {
                        eager: rng.gen_bool(0.5),
                        phase: Phase::Join,
                    });
                    let id = format!("m{step}");
                    clients.push(Client {
                        id,
                        classic,
                        epoch: 0,
                        owned: BTreeSet::new(),
                    });
                }
                1 if clients.len() > 1 => {
                    // Leaves, or crashes and its session expires.
                    let client = clients.remove(rng.gen_range(0..clients.len()));
                    if let Ok(decision) = group.leave("g", &client.id, -1) {
                        replay(&mut group, &mut log, decision.records);
                    }
                }
                _ if !clients.is_empty() => {
                    let i = rng.gen_range(0..clients.len());
                    clients[i].step(&mut group, &mut log);
                }
                _ => {}
            }
            no_partition_owned_twice(&clients, seed, step);
        }
        // Changes stop: a few rounds reach the target.
        for _ in 0..16 {
            for client in clients.iter_mut() {
                client.step(&mut group, &mut log);
                no_partition_owned_twice_one(&group, seed);
            }
        }
        no_partition_owned_twice(&clients, seed, 150);
        for client in &clients {
            let member = &group.members[&client.id];
            assert!(
                member.assignment.is_reconciled_to(group.assignment_epoch),
                "SEED={seed}: {} not settled: {member:?}",
                client.id
            );
            assert_eq!(client.owned, group.targets[&client.id], "SEED={seed}");
        }
        let owned: usize = clients.iter().map(|c| c.owned.len()).sum();
        assert_eq!(owned, 6, "SEED={seed}: every partition owned");
        assert_eq!(
            rebuilt(&log),
            group,
            "SEED={seed}: replay rebuilds the group"
        );
    }
}

/// The coordinator's side: no partition assigned to, or pending
/// revocation from, two members.
fn no_partition_owned_twice_one(group: &ConsumerGroup, seed: u64) {
    let mut seen = BTreeSet::new();
    for m in group.members.values() {
        let held = m
            .assignment
            .assigned
            .iter()
            .chain(&m.assignment.pending_revocation);
        for p in held {
            assert!(seen.insert(*p), "SEED={seed}: {p:?} held twice");
        }
    }
}

/// What a new coordinator reads back: the partition's records in log
/// order, through the store's replay (classic and consumer records alike).
fn loaded(log: &[(Key, Option<Value>)]) -> PartitionGroups {
    let mut groups = PartitionGroups::new(Duration::ZERO);
    for (offset, (key, value)) in log.iter().enumerate() {
        let value = value.as_ref().map(records::encode_value);
        let key = records::encode_key(key);
        groups
            .replay(offset as i64, &key, value.as_deref(), Instant::now())
            .unwrap();
    }
    groups
}

fn consumer_keys(records: Vec<Record>) -> Vec<(Key, Option<Value>)> {
    let each = records.into_iter();
    each.map(|(k, v)| (Key::Consumer(k), v.map(Value::Consumer)))
        .collect()
}

#[test]
fn a_migrated_group_reloads_from_its_records_either_way() {
    let classic = classic_group();
    let mut log = vec![(Key::Group("g".into()), Some(Value::Group(classic.clone())))];
    // Upgraded, then a consumer protocol member joins.
    let (mut group, conversion) =
        ConsumerGroup::from_classic("g", &classic, &protocols, &view(6)).unwrap();
    log.push((Key::Group("g".into()), None));
    log.extend(consumer_keys(conversion));
    let mut consumer_log = Vec::new();
    beat(&mut group, &mut consumer_log, &heartbeat_of("c", 0)).unwrap();
    log.extend(consumer_keys(consumer_log));
    let groups = loaded(&log);
    let entry = groups.get("g").unwrap();
    assert!(!entry.has_classic_members(), "the classic membership ended");
    assert_eq!(
        entry.consumer_group(),
        Some(&group),
        "the consumer group as it was"
    );
    // Downgraded as c leaves.
    let (tombstones, snapshot) = group.downgraded("g", "c", &view(6)).unwrap();
    log.extend(consumer_keys(tombstones));
    log.push((Key::Group("g".into()), Some(Value::Group(snapshot.clone()))));
    let groups = loaded(&log);
    let entry = groups.get("g").unwrap();
    assert!(entry.consumer.is_none(), "the consumer group ended");
    assert_eq!(
        entry.membership.snapshot(),
        snapshot,
        "the classic group as written"
    );
    assert_eq!(entry.membership.generation(), group.epoch);
}
