//! One consumer group's heartbeats: the refusals, a join, a second member
//! taking partitions only once the first let them go, a lost answer, a
//! leave; then random groups of clients that join, leave, crash, change
//! their subscriptions and lose answers while topics grow: never one
//! partition owned by two clients, everyone at the target once changes
//! stop, and replaying the records rebuilds the group exactly.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;

const T: TopicId = [1; 16];
const U: TopicId = [2; 16];

fn topics(t: u32, u: u32) -> TopicView {
    BTreeMap::from([("t".to_string(), (T, t)), ("u".to_string(), (U, u))])
}

fn join(member: &str, names: &[&str]) -> Request {
    Request {
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(names.iter().map(|n| n.to_string()).collect()),
        subscribed_topic_regex: Some(String::new()),
        owned: Some(BTreeSet::new()),
        client_id: "c".into(),
        client_host: "/h".into(),
        ..Request::default()
    }
}

fn beat(member: &str, epoch: i32, owned: &BTreeSet<Partition>) -> Request {
    Request {
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: Some(owned.clone()),
        client_id: "c".into(),
        client_host: "/h".into(),
        ..Request::default()
    }
}

/// Decides and, when accepted, replays (as the coordinator does once the
/// records are durable); every record also goes to `log`.
fn apply(
    group: &mut ConsumerGroup,
    log: &mut Vec<Record>,
    req: &Request,
    topics: &TopicView,
) -> Result<Answer, Code> {
    validate("g", req)?;
    let decision = group.heartbeat("g", req, topics, &BTreeMap::new, None)?;
    for (key, value) in &decision.records {
        group.replay(key, value.as_ref());
    }
    log.extend(decision.records);
    Ok(decision.answer)
}

fn all(topic: TopicId, n: i32) -> BTreeSet<Partition> {
    (0..n).map(|p| (topic, p)).collect()
}

#[test]
fn malformed_heartbeats_are_refused_before_the_group_is_read() {
    let invalid = Err(ResponseError::InvalidRequest.code());
    assert_eq!(validate("", &join("m", &["t"])), invalid, "no group id");
    assert_eq!(validate("g", &join("", &["t"])), invalid, "no member id");
    let mut r = join("m", &["t"]);
    r.rebalance_timeout_ms = -1;
    assert_eq!(validate("g", &r), invalid, "a join without its timeout");
    let mut r = join("m", &["t"]);
    r.owned = Some(all(T, 1));
    assert_eq!(validate("g", &r), invalid, "a join owning partitions");
    let mut r = join("m", &["t"]);
    (r.subscribed_topic_names, r.subscribed_topic_regex) = (None, None);
    assert_eq!(
        validate("g", &r),
        invalid,
        "a join subscribing to nothing said"
    );
    assert_eq!(
        validate("g", &beat("m", -2, &BTreeSet::new())),
        invalid,
        "-2 is for static members"
    );
    assert_eq!(validate("g", &beat("m", -3, &BTreeSet::new())), invalid);
    let mut r = join("m", &["t"]);
    r.instance_id = Some(String::new());
    assert_eq!(validate("g", &r), invalid, "an empty instance id");
    let mut r = join("m", &["t"]);
    r.server_assignor = Some("sticky".into());
    assert_eq!(
        validate("g", &r),
        Err(ResponseError::UnsupportedAssignor.code())
    );
    let mut r = join("m", &["t"]);
    r.subscribed_topic_regex = Some("t.*(".into());
    assert_eq!(
        validate("g", &r),
        Err(ResponseError::InvalidRegularExpression.code()),
    );
    r.subscribed_topic_regex = Some("^t.*".into());
    assert_eq!(validate("g", &r), Ok(()));
    assert_eq!(
        validate("g", &join("m", &[])),
        Ok(()),
        "subscribed to nothing is allowed"
    );
}

#[test]
fn a_second_member_gets_partitions_only_once_the_first_let_them_go() {
    let (mut group, mut log, topics) = (ConsumerGroup::default(), Vec::new(), topics(4, 0));
    let a = apply(&mut group, &mut log, &join("a", &["t"]), &topics).unwrap();
    assert_eq!((a.member_epoch, a.assignment.clone()), (1, Some(all(T, 4))));
    let b = apply(&mut group, &mut log, &join("b", &["t"]), &topics).unwrap();
    assert_eq!(b.member_epoch, 2, "b joins at the new target's epoch");
    assert_eq!(b.assignment, Some(BTreeSet::new()), "a still owns them all");
    // a is told to give two up, keeping its epoch until it has.
    let a_owned = all(T, 4);
    let a2 = apply(&mut group, &mut log, &beat("a", 1, &a_owned), &topics).unwrap();
    assert_eq!(a2.member_epoch, 1);
    let kept = a2.assignment.clone().unwrap();
    assert_eq!(kept.len(), 2);
    let still = apply(&mut group, &mut log, &beat("a", 1, &a_owned), &topics).unwrap();
    assert_eq!(still.member_epoch, 1, "still owns what it must give up");
    let b2 = apply(
        &mut group,
        &mut log,
        &beat("b", 2, &BTreeSet::new()),
        &topics,
    )
    .unwrap();
    assert_eq!(
        b2.assignment, None,
        "nothing released yet: nothing new to tell"
    );
    let a3 = apply(&mut group, &mut log, &beat("a", 1, &kept), &topics).unwrap();
    assert_eq!(a3.member_epoch, 2, "let go: a moves to the target's epoch");
    let b3 = apply(
        &mut group,
        &mut log,
        &beat("b", 2, &BTreeSet::new()),
        &topics,
    )
    .unwrap();
    let given = b3.assignment.unwrap();
    assert_eq!(given.len(), 2);
    assert!(given.is_disjoint(&kept));
    // A stale epoch, an unknown member, a lost answer.
    let fenced = apply(&mut group, &mut log, &beat("b", 7, &given), &topics);
    assert_eq!(fenced, Err(ResponseError::FencedMemberEpoch.code()));
    let unknown = apply(
        &mut group,
        &mut log,
        &beat("z", 1, &BTreeSet::new()),
        &topics,
    );
    assert_eq!(unknown, Err(ResponseError::UnknownMemberId.code()));
    let replayed = apply(&mut group, &mut log, &beat("a", 1, &kept), &topics).unwrap();
    assert_eq!(
        replayed.member_epoch, 2,
        "a's answer was lost: its previous epoch is accepted"
    );
    // b leaves (the group epoch moves to 3): a gets everything.
    let left = apply(
        &mut group,
        &mut log,
        &beat("b", -1, &BTreeSet::new()),
        &topics,
    )
    .unwrap();
    assert_eq!(left.member_epoch, -1);
    assert!(!group.members.contains_key("b"));
    let a4 = apply(&mut group, &mut log, &beat("a", 2, &kept), &topics).unwrap();
    assert_eq!((a4.member_epoch, a4.assignment), (3, Some(all(T, 4))));
    assert_eq!(rebuilt(&log), group);
}

#[test]
fn more_partitions_or_a_new_subscription_make_a_new_target() {
    let (mut group, mut log) = (ConsumerGroup::default(), Vec::new());
    let a = apply(&mut group, &mut log, &join("a", &["t"]), &topics(2, 3)).unwrap();
    assert_eq!(a.assignment, Some(all(T, 2)));
    let grown = topics(3, 3);
    let a2 = apply(&mut group, &mut log, &beat("a", 1, &all(T, 2)), &grown).unwrap();
    assert_eq!((a2.member_epoch, a2.assignment), (2, Some(all(T, 3))));
    let mut both = beat("a", 2, &all(T, 3));
    both.subscribed_topic_names = Some(vec!["t".into(), "u".into()]);
    let a3 = apply(&mut group, &mut log, &both, &grown).unwrap();
    let expected: BTreeSet<Partition> = all(T, 3).into_iter().chain(all(U, 3)).collect();
    assert_eq!((a3.member_epoch, a3.assignment), (3, Some(expected)));
    assert_eq!(rebuilt(&log), group);
}

/// The group as a new coordinator loads it: every record replayed.
fn rebuilt(log: &[Record]) -> ConsumerGroup {
    let mut group = ConsumerGroup::default();
    for (key, value) in log {
        group.replay(key, value.as_ref());
    }
    group
}

/// The group as a new coordinator loads it from a compacted log: only
/// each key's last record, in the order those were written.
fn rebuilt_compacted(log: &[Record]) -> ConsumerGroup {
    let last: BTreeMap<&ConsumerKey, usize> =
        log.iter().enumerate().map(|(i, (k, _))| (k, i)).collect();
    let mut kept: Vec<usize> = last.into_values().collect();
    kept.sort_unstable();
    let compacted: Vec<Record> = kept.into_iter().map(|i| log[i].clone()).collect();
    rebuilt(&compacted)
}

/// A consumer as librdkafka runs one: it owns what it was last told,
/// except a slow one, which keeps revoked partitions a few heartbeats
/// longer (still saying it owns them).
struct Client {
    id: String,
    epoch: i32,
    owned: BTreeSet<Partition>,
    names: Vec<&'static str>,
    /// Its subscription changed since its last answer.
    resubscribed: bool,
    /// Its last answer was lost: the next request is a full one.
    full_next: bool,
    /// What it was told to keep, and heartbeats until it lets go.
    revoking: Option<(BTreeSet<Partition>, u32)>,
    /// Its static instance id, if it is a static member.
    instance: Option<String>,
    /// The regular expression it subscribes with, if any.
    regex: Option<&'static str>,
}

impl Client {
    fn new(id: String, names: Vec<&'static str>) -> Client {
        Client {
            id,
            epoch: 0,
            owned: BTreeSet::new(),
            names,
            resubscribed: false,
            full_next: false,
            revoking: None,
            instance: None,
            regex: None,
        }
    }

    /// The topics of `view` it subscribes to, by name or expression.
    fn subscribed(&self, view: &TopicView) -> BTreeSet<TopicId> {
        let by_regex = |name: &String| self.regex.is_some_and(|r| topic_regex::matches(r, name));
        let subscribed = view
            .iter()
            .filter(|(name, _)| self.names.contains(&name.as_str()) || by_regex(name));
        subscribed.map(|(_, (id, _))| *id).collect()
    }

    fn request(&mut self) -> Request {
        if let Some((keep, left)) = &mut self.revoking {
            match left.checked_sub(1) {
                Some(n) => *left = n,
                None => {
                    self.owned = keep.clone();
                    self.revoking = None;
                }
            }
        }
        let mut req = match self.epoch {
            0 => join(&self.id, &self.names),
            epoch => beat(&self.id, epoch, &self.owned),
        };
        if self.epoch == 0 || self.resubscribed || self.full_next {
            req.subscribed_topic_names = Some(self.names.iter().map(|n| n.to_string()).collect());
            req.subscribed_topic_regex = Some(self.regex.unwrap_or("").to_string());
        }
        if self.full_next {
            req.rebalance_timeout_ms = 30_000;
        }
        if self.epoch == 0 || self.full_next {
            req.instance_id = self.instance.clone();
        }
        req
    }

    fn told(&mut self, answer: Result<Answer, Code>, slow: bool) {
        match answer {
            Ok(answer) => {
                self.epoch = answer.member_epoch;
                self.resubscribed = false;
                self.full_next = false;
                match answer.assignment {
                    Some(keep) if slow && keep.is_subset(&self.owned) && keep != self.owned => {
                        self.revoking = Some((keep, 2));
                    }
                    Some(assignment) => {
                        self.owned = assignment;
                        self.revoking = None;
                    }
                    None => {}
                }
            }
            Err(_) => {
                // Fenced or unknown: it drops everything and rejoins.
                self.epoch = 0;
                self.owned.clear();
                self.revoking = None;
            }
        }
    }
}

/// The coordinator's side: no partition assigned to, or pending
/// revocation from, two members.
fn no_partition_held_twice(group: &ConsumerGroup, seed: u64, step: usize) {
    let mut seen = BTreeSet::new();
    for m in group.members.values() {
        for p in m
            .assignment
            .assigned
            .iter()
            .chain(&m.assignment.pending_revocation)
        {
            assert!(seen.insert(*p), "SEED={seed} step {step}: {p:?} held twice");
        }
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

const NAME_SETS: [&[&str]; 3] = [&["t"], &["u"], &["t", "u"]];

/// What clients subscribing by regular expression use ("t2" is created
/// during a run).
const REGEXES: [&str; 2] = ["t.*", "u|t2"];

/// The session of the static member `instance` (away, at -2) lapses.
fn expire_instance(group: &mut ConsumerGroup, log: &mut Vec<Record>, instance: &str) {
    let held = group.members.iter().find(|(_, m)| {
        m.metadata.instance_id.as_deref() == Some(instance) && m.assignment.epoch == LEFT_FOR_NOW
    });
    let Some((id, _)) = held else {
        return; // it came back meanwhile
    };
    let decision = group.leave("g", &id.clone(), -1).unwrap();
    for (key, value) in &decision.records {
        group.replay(key, value.as_ref());
    }
    log.extend(decision.records);
}

#[test]
fn random_groups_never_give_a_partition_to_two_clients_and_settle() {
    let seed = crate::groups::modern::test_seed();
    let mut rng = SmallRng::seed_from_u64(seed);
    for _ in 0..100 {
        let (mut group, mut log) = (ConsumerGroup::default(), Vec::new());
        let mut view = topics(rng.gen_range(1..6), rng.gen_range(1..6));
        // "t2" appears during the changes, or after them.
        let early_t2 = rng.gen_bool(0.5);
        let mut clients: Vec<Client> = Vec::new();
        // Static members gone for now: instance id and subscription.
        let mut away: Vec<(String, Vec<&'static str>, Option<&'static str>)> = Vec::new();
        for step in 0..200 {
            match rng.gen_range(0..24) {
                0 | 1 if clients.len() < 5 => {
                    let mut client =
                        Client::new(format!("m{step}"), NAME_SETS[rng.gen_range(0..3)].to_vec());
                    if rng.gen_bool(0.5) {
                        client.instance = Some(format!("i{step}"));
                    }
                    if rng.gen_bool(0.25) {
                        client.names.clear();
                        client.regex = Some(REGEXES[rng.gen_range(0..REGEXES.len())]);
                    }
                    clients.push(client);
                }
                5 if clients.iter().any(|c| c.instance.is_some()) => {
                    // A static member closes for now (-2).
                    let statics = clients
                        .iter()
                        .enumerate()
                        .filter(|(_, c)| c.instance.is_some());
                    let statics: Vec<usize> = statics.map(|(i, _)| i).collect();
                    let client = clients.remove(statics[rng.gen_range(0..statics.len())]);
                    let request = Request {
                        member_id: client.id.clone(),
                        member_epoch: LEFT_FOR_NOW,
                        instance_id: client.instance.clone(),
                        ..beat(&client.id, LEFT_FOR_NOW, &BTreeSet::new())
                    };
                    if apply(&mut group, &mut log, &request, &view).is_ok() {
                        away.push((client.instance.unwrap(), client.names, client.regex));
                    }
                }
                6 if !away.is_empty() && clients.len() < 5 => {
                    // It comes back: a new process, a new member id.
                    let (instance, names, regex) = away.remove(rng.gen_range(0..away.len()));
                    let mut client = Client::new(format!("m{step}"), names);
                    (client.instance, client.regex) = (Some(instance), regex);
                    clients.push(client);
                }
                7 if !away.is_empty() => {
                    let (instance, _, _) = away.remove(rng.gen_range(0..away.len()));
                    expire_instance(&mut group, &mut log, &instance);
                }
                2 if !clients.is_empty() => {
                    // Leaves, or crashes and its session expires.
                    let client = clients.remove(rng.gen_range(0..clients.len()));
                    let Ok(decision) = group.leave("g", &client.id, -1) else {
                        continue; // it never joined
                    };
                    for (key, value) in &decision.records {
                        group.replay(key, value.as_ref());
                    }
                    log.extend(decision.records);
                }
                3 if !clients.is_empty() => {
                    let i = rng.gen_range(0..clients.len());
                    clients[i].names = NAME_SETS[rng.gen_range(0..3)].to_vec();
                    if clients[i].regex.is_some() {
                        clients[i].regex = Some(REGEXES[rng.gen_range(0..REGEXES.len())]);
                    }
                    clients[i].resubscribed = true;
                }
                4 => {
                    let (_, t) = view["t"];
                    view.get_mut("t").unwrap().1 = t + u32::from(t < 12);
                }
                8 if early_t2 && !view.contains_key("t2") => {
                    // A topic some expressions match is created.
                    view.insert("t2".into(), ([3; 16], rng.gen_range(1..4)));
                }
                _ if !clients.is_empty() => {
                    let i = rng.gen_range(0..clients.len());
                    let mut request = clients[i].request();
                    if rng.gen_bool(0.05) {
                        // Its connection moved: new metadata, often no
                        // new assignment (record 5 after its last 8).
                        request.client_host = format!("/h{step}");
                    }
                    let answer = apply(&mut group, &mut log, &request, &view);
                    if rng.gen_bool(0.1) && answer.is_ok() {
                        clients[i].full_next = true;
                        continue; // the answer is lost
                    }
                    clients[i].told(answer, rng.gen_bool(0.3));
                }
                _ => {}
            }
            no_partition_owned_twice(&clients, seed, step);
            no_partition_held_twice(&group, seed, step);
        }
        // Changes stop: the sessions of those away lapse (also of those
        // whose new process crashed before it joined), and a few rounds
        // of heartbeats reach the target.
        let held = group
            .members
            .values()
            .filter(|m| m.assignment.epoch == LEFT_FOR_NOW);
        let held: Vec<String> = held
            .filter_map(|m| m.metadata.instance_id.clone())
            .collect();
        for instance in held {
            expire_instance(&mut group, &mut log, &instance);
        }
        if !view.contains_key("t2") {
            view.insert("t2".into(), ([3; 16], rng.gen_range(1..4)));
        }
        for _ in 0..6 {
            for i in 0..clients.len() {
                let request = clients[i].request();
                let answer = apply(&mut group, &mut log, &request, &view);
                clients[i].told(answer, false);
                no_partition_owned_twice(&clients, seed, 200);
                no_partition_held_twice(&group, seed, 200);
            }
        }
        for client in &clients {
            let member = &group.members[&client.id];
            assert!(
                member.assignment.is_reconciled_to(group.assignment_epoch),
                "SEED={seed}: {} not settled: {member:?}",
                client.id
            );
            assert_eq!(client.owned, group.targets[&client.id], "SEED={seed}");
        }
        let subscribed: BTreeSet<TopicId> =
            clients.iter().flat_map(|c| c.subscribed(&view)).collect();
        let owned: usize = clients.iter().map(|c| c.owned.len()).sum();
        let expected: u32 = view
            .values()
            .filter(|(id, _)| subscribed.contains(id))
            .map(|(_, n)| n)
            .sum();
        assert_eq!(
            owned, expected as usize,
            "SEED={seed}: every subscribed partition owned"
        );
        assert_eq!(
            rebuilt(&log),
            group,
            "SEED={seed}: replay rebuilds the group"
        );
        assert_eq!(
            rebuilt_compacted(&log),
            group,
            "SEED={seed}: so does a compacted log"
        );
    }
}

#[test]
fn offsets_are_committed_by_members_at_their_epoch() {
    let (mut group, mut log, topics) = (ConsumerGroup::default(), Vec::new(), topics(2, 0));
    assert_eq!(
        group.may_commit("", -1),
        Ok(()),
        "no members: an admin commits"
    );
    apply(&mut group, &mut log, &join("a", &["t"]), &topics).unwrap();
    assert_eq!(group.may_commit("a", 1), Ok(()));
    assert_eq!(
        group.may_commit("a", 0),
        Err(ResponseError::StaleMemberEpoch.code())
    );
    assert_eq!(
        group.may_commit("z", 1),
        Err(ResponseError::UnknownMemberId.code())
    );
    assert_eq!(
        group.may_commit("", -1),
        Err(ResponseError::UnknownMemberId.code())
    );
}

#[test]
fn the_group_state_follows_its_epochs_and_members() {
    let mut group = ConsumerGroup::default();
    let mut log = Vec::new();
    let view = topics(2, 0);
    assert_eq!(group.state(), GroupState::Empty);
    let first = apply(&mut group, &mut log, &join("a", &["t"]), &view).unwrap();
    assert_eq!(group.state(), GroupState::Stable);
    apply(&mut group, &mut log, &join("b", &["t"]), &view).unwrap();
    assert_eq!(group.state(), GroupState::Reconciling, "a owes b one");
    let owned = first.assignment.unwrap();
    let revoked = apply(
        &mut group,
        &mut log,
        &beat("a", first.member_epoch, &owned),
        &view,
    );
    let kept = revoked.unwrap().assignment.unwrap();
    let moved = apply(
        &mut group,
        &mut log,
        &beat("a", first.member_epoch, &kept),
        &view,
    );
    let epoch = moved.unwrap().member_epoch;
    let got = apply(
        &mut group,
        &mut log,
        &beat("b", epoch, &BTreeSet::new()),
        &view,
    );
    let got = got.unwrap().assignment.unwrap();
    apply(&mut group, &mut log, &beat("b", epoch, &got), &view).unwrap();
    assert_eq!(group.state(), GroupState::Stable);
    let left = group.leave("g", "b", -1).unwrap();
    for (key, value) in &left.records {
        group.replay(key, value.as_ref());
    }
    assert_eq!(
        group.state(),
        GroupState::Assigning,
        "targets not recomputed yet"
    );
    let left = group.leave("g", "a", -1).unwrap();
    for (key, value) in &left.records {
        group.replay(key, value.as_ref());
    }
    assert_eq!(group.state(), GroupState::Empty);
}

/// Heartbeats of `ids`, each owning what the group assigned it, until
/// every one is at the target.
fn settle(group: &mut ConsumerGroup, log: &mut Vec<Record>, view: &TopicView, ids: &[&str]) {
    for _ in 0..4 {
        for id in ids {
            let a = &group.members[*id].assignment;
            let req = beat(id, a.epoch, &a.assigned.clone());
            apply(group, log, &req, view).unwrap();
        }
    }
    assert_eq!(group.state(), GroupState::Stable, "{group:?}");
}

fn static_join(member: &str, instance: &str) -> Request {
    Request {
        instance_id: Some(instance.into()),
        ..join(member, &["t"])
    }
}

#[test]
fn a_static_member_back_under_its_instance_id_gets_its_partitions_without_a_new_epoch() {
    let (mut group, mut log, view) = (ConsumerGroup::default(), Vec::new(), topics(4, 0));
    apply(&mut group, &mut log, &static_join("a1", "ia"), &view).unwrap();
    apply(&mut group, &mut log, &join("b", &["t"]), &view).unwrap();
    settle(&mut group, &mut log, &view, &["a1", "b"]);
    let epoch = group.epoch;
    let held = group.members["a1"].assignment.assigned.clone();
    assert_eq!(held.len(), 2);
    // While a1 is there its instance id is taken.
    let code = |e: ResponseError| Err(e.code());
    let taken = apply(&mut group, &mut log, &static_join("a2", "ia"), &view);
    assert_eq!(taken, code(ResponseError::UnreleasedInstanceId));
    let claimed = Request {
        instance_id: Some("ia".into()),
        ..beat("a2", epoch, &BTreeSet::new())
    };
    let claimed = apply(&mut group, &mut log, &claimed, &view);
    assert_eq!(claimed, code(ResponseError::FencedInstanceId));
    // a1 leaves for now: its partitions are held for it.
    let leave = Request {
        instance_id: Some("ia".into()),
        ..beat("a1", LEFT_FOR_NOW, &BTreeSet::new())
    };
    let left = apply(&mut group, &mut log, &leave, &view).unwrap();
    assert_eq!(left.member_epoch, LEFT_FOR_NOW);
    assert_eq!(group.members["a1"].assignment.assigned, held);
    assert_eq!(group.epoch, epoch, "leaving for now is no new epoch");
    let b = group.members["b"].assignment.clone();
    let steady = apply(
        &mut group,
        &mut log,
        &beat("b", b.epoch, &b.assigned),
        &view,
    );
    assert!(steady.unwrap().assignment.is_none(), "b gets none of them");
    // A new process under the same instance id takes a1's place.
    let back = apply(&mut group, &mut log, &static_join("a2", "ia"), &view).unwrap();
    assert_eq!(back.assignment, Some(held));
    assert_eq!(back.member_epoch, group.assignment_epoch);
    assert_eq!(group.epoch, epoch, "coming back is no new epoch either");
    assert!(!group.members.contains_key("a1"));
    assert_eq!(group.state(), GroupState::Stable);
    assert_eq!(rebuilt(&log), group, "replay rebuilds the replacement");
    // A static member's leave for now needs its own member id.
    let wrong = Request {
        instance_id: Some("ia".into()),
        ..beat("b", LEFT_FOR_NOW, &BTreeSet::new())
    };
    let wrong = apply(&mut group, &mut log, &wrong, &view);
    assert_eq!(wrong, code(ResponseError::FencedInstanceId));
}
