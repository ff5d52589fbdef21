//! The membership state machine driven through joins, syncs, heartbeats,
//! leaves and timeouts, with a clock the tests move.

use super::*;

const SESSION: Duration = Duration::from_secs(10);
const REBALANCE: Duration = Duration::from_secs(30);
const DELAY: Duration = Duration::from_secs(3);

fn join(member_id: &str, instance: Option<&str>, protocols: &[&str]) -> Join {
    Join {
        member_id: member_id.to_string(),
        instance_id: instance.map(String::from),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|p| (p.to_string(), Bytes::from(format!("meta-{p}"))))
            .collect(),
        session_timeout: SESSION,
        rebalance_timeout: REBALANCE,
        require_known_member_id: false,
    }
}

/// Joins `n` new members and completes the first generation; returns
/// their ids, the leader first.
fn stable_group(n: usize, t0: Instant) -> (Group, Vec<MemberId>) {
    let mut group = Group::new("g", DELAY);
    for _ in 0..n {
        assert!(matches!(
            group.join(join("", None, &["range"]), t0),
            JoinStep::Wait(_)
        ));
    }
    assert!(
        group.poll(t0).0.is_empty(),
        "the initial delay holds the first generation"
    );
    let (answers, _) = group.poll(t0 + DELAY);
    assert_eq!(answers.len(), n);
    let leader = answers[0].leader.clone();
    assert!(answers
        .iter()
        .all(|a| a.generation == 1 && a.leader == leader && a.error == 0));
    let leader_view = answers.iter().find(|a| a.member_id == leader).unwrap();
    assert_eq!(leader_view.members.len(), n, "the leader sees every member");
    assert!(answers
        .iter()
        .filter(|a| a.member_id != leader)
        .all(|a| a.members.is_empty()));
    let mut ids: Vec<MemberId> = answers.iter().map(|a| a.member_id.clone()).collect();
    ids.sort_by_key(|id| *id != leader);
    // Followers sync first and wait; the leader's sync hands out everything.
    for follower in &ids[1..] {
        assert_eq!(
            group.sync(follower, None, 1, vec![], t0 + DELAY).0,
            SyncStep::Wait
        );
    }
    let assignments = ids
        .iter()
        .map(|id| (id.clone(), Bytes::from(format!("for {id}"))))
        .collect();
    let (mine, released) = group.sync(&ids[0], None, 1, assignments, t0 + DELAY);
    assert_eq!(
        mine,
        SyncStep::Answer(0, Bytes::from(format!("for {}", ids[0])))
    );
    assert_eq!(released.len(), n - 1);
    for (id, assignment) in released {
        assert_eq!(assignment, Bytes::from(format!("for {id}")));
    }
    assert_eq!(group.state(), GroupState::Stable);
    (group, ids)
}

#[test]
fn members_join_one_generation_and_get_the_leaders_assignment() {
    let t0 = Instant::now();
    let (mut group, ids) = stable_group(3, t0);
    assert_eq!(group.protocol(), Some("range"));
    for id in &ids {
        assert_eq!(group.heartbeat(id, None, 1, t0 + DELAY), 0);
    }
    assert_eq!(
        group.heartbeat(&ids[1], None, 0, t0),
        ResponseError::IllegalGeneration.code()
    );
    assert_eq!(
        group.heartbeat("stranger", None, 1, t0),
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(group.may_commit(&ids[1], None, 1), Ok(()));
    assert_eq!(
        group.may_commit(&ids[1], None, 0),
        Err(ResponseError::IllegalGeneration.code())
    );
}

#[test]
fn a_new_member_makes_everyone_rejoin_into_the_next_generation() {
    let t0 = Instant::now();
    let (mut group, ids) = stable_group(2, t0);
    let t1 = t0 + Duration::from_secs(4);
    assert!(matches!(
        group.join(join("", None, &["range"]), t1),
        JoinStep::Wait(_)
    ));
    assert_eq!(
        group.heartbeat(&ids[0], None, 1, t1),
        ResponseError::RebalanceInProgress.code()
    );
    assert_eq!(
        group.may_commit(&ids[0], None, 1),
        Err(ResponseError::RebalanceInProgress.code())
    );
    assert!(
        group.poll(t1).0.is_empty(),
        "one member has not rejoined yet"
    );
    group.join(join(&ids[0], None, &["range"]), t1);
    group.join(join(&ids[1], None, &["range"]), t1);
    let (answers, _) = group.poll(t1);
    assert_eq!(answers.len(), 3, "everyone rejoined: no need to wait");
    assert!(answers.iter().all(|a| a.generation == 2));
}

#[test]
fn a_silent_member_is_removed_after_its_session_and_the_rest_rebalance() {
    let t0 = Instant::now();
    let (mut group, ids) = stable_group(2, t0);
    let mut now = t0 + DELAY;
    // Only the first member heartbeats.
    for _ in 0..12 {
        now += Duration::from_secs(1);
        group.heartbeat(&ids[0], None, 1, now);
        group.poll(now);
    }
    assert_eq!(group.state(), GroupState::PreparingRebalance);
    assert_eq!(
        group.heartbeat(&ids[1], None, 1, now),
        ResponseError::UnknownMemberId.code()
    );
    group.join(join(&ids[0], None, &["range"]), now);
    let (answers, _) = group.poll(now);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].generation, 2);
    assert_eq!(group.member_ids(), vec![ids[0].clone()]);
}

#[test]
fn a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() {
    let t0 = Instant::now();
    let (mut group, ids) = stable_group(2, t0);
    let t1 = t0 + DELAY;
    group.join(join(&ids[0], None, &["range"]), t1);
    // The other keeps heartbeating but never rejoins: the join phase
    // still ends at the rebalance timeout, not later.
    let mut now = t1;
    while now < t1 + REBALANCE {
        assert!(group.poll(now).0.is_empty());
        assert_eq!(
            group.heartbeat(&ids[1], None, 1, now),
            ResponseError::RebalanceInProgress.code()
        );
        now += Duration::from_secs(1);
    }
    let (answers, _) = group.poll(t1 + REBALANCE);
    assert_eq!(answers.len(), 1);
    assert_eq!(group.member_ids(), vec![ids[0].clone()]);
}

#[test]
fn a_static_member_coming_back_replaces_its_old_self_without_a_rebalance() {
    let t0 = Instant::now();
    let mut group = Group::new("g", Duration::ZERO);
    group.join(join("", Some("consumer-a"), &["range"]), t0);
    group.join(join("", Some("consumer-b"), &["range"]), t0);
    let (answers, _) = group.poll(t0);
    let leader = answers[0].leader.clone();
    let follower = answers
        .iter()
        .find(|a| a.member_id != leader)
        .unwrap()
        .member_id
        .clone();
    let follower_instance = if group.statics["consumer-a"] == follower {
        "consumer-a"
    } else {
        "consumer-b"
    };
    group.sync(&follower, Some(follower_instance), 1, vec![], t0);
    group.sync(
        &leader,
        None,
        1,
        vec![(follower.clone(), Bytes::from_static(b"p0,p1"))],
        t0,
    );
    // The follower restarts: same instance id, no member id.
    let step = group.join(join("", Some(follower_instance), &["range"]), t0);
    let JoinStep::Answer(answer) = step else {
        panic!("answered at once: {step:?}")
    };
    assert_eq!(answer.generation, 1, "no rebalance");
    assert_ne!(answer.member_id, follower);
    assert_eq!(group.state(), GroupState::Stable);
    let (again, _) = group.sync(&answer.member_id, Some(follower_instance), 1, vec![], t0);
    assert_eq!(
        again,
        SyncStep::Answer(0, Bytes::from_static(b"p0,p1")),
        "same assignment"
    );
    // Its old life is fenced.
    assert_eq!(
        group.heartbeat(&follower, Some(follower_instance), 1, t0),
        ResponseError::FencedInstanceId.code()
    );
    // The leader restarts too: still no rebalance; it sees the members
    // but is told to keep the current assignment.
    let leader_instance = if follower_instance == "consumer-a" {
        "consumer-b"
    } else {
        "consumer-a"
    };
    let step = group.join(join("", Some(leader_instance), &["range"]), t0);
    let JoinStep::Answer(answer) = step else {
        panic!("answered at once: {step:?}")
    };
    assert_eq!(answer.generation, 1, "no rebalance");
    assert!(answer.skip_assignment);
    assert_eq!(answer.leader, answer.member_id, "still the leader");
    assert_eq!(answer.members.len(), 2);
    // A static member rejoining with its current id is an ordinary
    // rejoin: the leader's asks for a rebalance.
    let step = group.join(
        join(&answer.member_id, Some(leader_instance), &["range"]),
        t0,
    );
    assert!(matches!(step, JoinStep::Wait(_)), "{step:?}");
    assert_eq!(group.state(), GroupState::PreparingRebalance);
}

#[test]
fn protocols_member_ids_and_leaving_follow_kafkas_rules() {
    let t0 = Instant::now();
    let mut group = Group::new("g", Duration::ZERO);
    // v4+: a new member first learns its id.
    let mut first = join("", None, &["range", "roundrobin"]);
    first.require_known_member_id = true;
    let JoinStep::Answer(told) = group.join(first.clone(), t0) else {
        panic!()
    };
    assert_eq!(told.error, ResponseError::MemberIdRequired.code());
    first.member_id = told.member_id.clone();
    assert!(matches!(group.join(first, t0), JoinStep::Wait(_)));
    // Members vote: "roundrobin" is the only protocol both support.
    assert!(matches!(
        group.join(join("", None, &["roundrobin"]), t0),
        JoinStep::Wait(_)
    ));
    let JoinStep::Answer(refused) = group.join(join("", None, &["sticky"]), t0) else {
        panic!()
    };
    assert_eq!(
        refused.error,
        ResponseError::InconsistentGroupProtocol.code()
    );
    let (answers, _) = group.poll(t0);
    assert_eq!(answers.len(), 2);
    assert_eq!(group.protocol(), Some("roundrobin"));
    let JoinStep::Answer(unknown) = group.join(join("made-up", None, &["roundrobin"]), t0) else {
        panic!()
    };
    assert_eq!(unknown.error, ResponseError::UnknownMemberId.code());
    // Leaving makes the rest rebalance; the last one out empties the group.
    let ids = group.member_ids();
    assert_eq!(group.leave(&ids[0], None, t0), 0);
    assert_eq!(group.state(), GroupState::PreparingRebalance);
    assert_eq!(group.leave(&ids[1], None, t0), 0);
    assert_eq!(group.poll(t0).0.len(), 0);
    assert_eq!(group.state(), GroupState::Empty);
    assert_eq!(
        group.leave(&ids[1], None, t0),
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(
        group.may_commit("", None, -1),
        Ok(()),
        "simple consumers commit to empty groups"
    );
}
