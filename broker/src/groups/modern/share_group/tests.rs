//! Share group heartbeats: joins, several members on one partition,
//! fencing, a lost answer, leaving; and the records rebuild the group.

use super::*;

const T: TopicId = [1; 16];

fn topics(partitions: u32) -> TopicView {
    BTreeMap::from([("t".to_string(), (T, partitions))])
}

fn join(member: &str) -> ShareRequest {
    ShareRequest {
        member_id: member.into(),
        member_epoch: 0,
        subscribed_topic_names: Some(vec!["t".into()]),
        client_id: "c".into(),
        client_host: "/h".into(),
        ..ShareRequest::default()
    }
}

fn beat(member: &str, epoch: i32) -> ShareRequest {
    ShareRequest {
        member_id: member.into(),
        member_epoch: epoch,
        client_id: "c".into(),
        client_host: "/h".into(),
        ..ShareRequest::default()
    }
}

fn apply(
    group: &mut ShareGroup,
    log: &mut Vec<ShareRecord>,
    req: &ShareRequest,
    view: &TopicView,
) -> Result<ShareAnswer, Code> {
    validate("g", req)?;
    let decision = group.heartbeat("g", req, view)?;
    for (key, value) in &decision.records {
        group.replay(key, value.as_ref());
    }
    // What the records make is what the decision meant.
    assert_eq!(*group, decision.intended, "{req:?}");
    log.extend(decision.records);
    Ok(decision.answer)
}

fn rebuilt(log: &[ShareRecord]) -> ShareGroup {
    let mut group = ShareGroup::default();
    for (key, value) in log {
        group.replay(key, value.as_ref());
    }
    group
}

fn all(n: i32) -> BTreeSet<Partition> {
    (0..n).map(|p| (T, p)).collect()
}

#[test]
fn members_share_one_partition_and_spread_over_several() {
    let (mut group, mut log, one) = (ShareGroup::default(), Vec::new(), topics(1));
    let a = apply(&mut group, &mut log, &join("a"), &one).unwrap();
    assert_eq!((a.member_epoch, a.assignment), (1, Some(all(1))));
    // Four members on one partition: all of them get it.
    for m in ["b", "c", "d"] {
        let answer = apply(&mut group, &mut log, &join(m), &one).unwrap();
        assert_eq!(answer.assignment, Some(all(1)), "{m}");
    }
    assert_eq!(group.epoch, 4);
    // a is behind: its next heartbeat brings it to the epoch, its
    // partition unchanged (so not repeated).
    let a = apply(&mut group, &mut log, &beat("a", 1), &one).unwrap();
    assert_eq!((a.member_epoch, a.assignment), (4, None));
    assert_eq!(rebuilt(&log), group, "the records rebuild the group");
    // Four partitions over four members: one each, none twice; a keeps
    // the one it had (its answer says nothing new), the others are told.
    let four = topics(4);
    let mut seen = BTreeSet::new();
    for (m, epoch) in [("a", 4), ("b", 2), ("c", 3), ("d", 4)] {
        let answer = apply(&mut group, &mut log, &beat(m, epoch), &four).unwrap();
        assert_eq!(answer.assignment.is_none(), m == "a", "{m}");
        let got = &group.members[m].assigned;
        assert_eq!(got.len(), 1, "{m}");
        assert!(seen.insert(*got.iter().next().unwrap()));
    }
    assert_eq!(rebuilt(&log), group);
}

#[test]
fn refusals_fencing_a_lost_answer_and_leaving() {
    let invalid = Err(ResponseError::InvalidRequest.code());
    assert_eq!(
        validate("g", &beat("a", 0)),
        invalid,
        "a join subscribing to nothing"
    );
    assert_eq!(validate("g", &beat("", 1)), invalid);
    assert_eq!(validate("g", &beat("a", -2)), invalid, "no static members");
    let (mut group, mut log, view) = (ShareGroup::default(), Vec::new(), topics(2));
    assert_eq!(
        apply(&mut group, &mut log, &beat("x", 3), &view),
        Err(ResponseError::UnknownMemberId.code())
    );
    apply(&mut group, &mut log, &join("a"), &view).unwrap();
    apply(&mut group, &mut log, &join("b"), &view).unwrap();
    let a = apply(&mut group, &mut log, &beat("a", 1), &view).unwrap();
    assert_eq!(a.member_epoch, 2);
    // Its answer was lost, twice: at its previous epoch it is told in
    // full each time.
    for _ in 0..2 {
        let again = apply(&mut group, &mut log, &beat("a", 1), &view).unwrap();
        let told = again.assignment.map(|a| a.len());
        assert_eq!((again.member_epoch, told), (2, Some(1)));
    }
    // A steady heartbeat writes nothing.
    let steady = group.heartbeat("g", &beat("a", 2), &view).unwrap();
    assert!(steady.records.is_empty(), "{:?}", steady.records);
    assert_eq!(
        apply(&mut group, &mut log, &beat("a", 7), &view),
        Err(ResponseError::FencedMemberEpoch.code())
    );
    // b leaves: a new epoch; a gets both partitions at its next heartbeat.
    let left = apply(&mut group, &mut log, &beat("b", -1), &view).unwrap();
    assert_eq!(left.member_epoch, -1);
    assert!(!group.members.contains_key("b") && !group.targets.contains_key("b"));
    let a = apply(&mut group, &mut log, &beat("a", 2), &view).unwrap();
    assert_eq!(a.assignment, Some(all(2)));
    assert_eq!(rebuilt(&log), group);
}

#[test]
fn a_group_holds_at_most_kafkas_share_group_size() {
    let (mut group, mut log, view) = (ShareGroup::default(), Vec::new(), topics(1));
    for i in 0..MAX_MEMBERS {
        apply(&mut group, &mut log, &join(&format!("m{i}")), &view).unwrap();
    }
    assert_eq!(
        apply(&mut group, &mut log, &join("one-more"), &view),
        Err(ResponseError::GroupMaxSizeReached.code())
    );
}

/// The group as a new coordinator loads it: each record through its
/// bytes, only each key's last one kept (a compacted log).
fn loaded_compacted(log: &[ShareRecord]) -> ShareGroup {
    use super::super::share_records::{ShareKey, ShareValue};
    let last: BTreeMap<&ShareKey, usize> =
        log.iter().enumerate().map(|(i, (k, _))| (k, i)).collect();
    let mut kept: Vec<usize> = last.into_values().collect();
    kept.sort_unstable();
    let mut group = ShareGroup::default();
    for i in kept {
        let (key, value) = &log[i];
        let key = ShareKey::decode(&key.encode()).unwrap();
        let value = value
            .as_ref()
            .map(|v| ShareValue::decode(&key, &v.encode()).unwrap());
        group.replay(&key, value.as_ref());
    }
    group
}

#[test]
fn a_group_loads_back_from_its_encoded_and_compacted_records() {
    let (mut group, mut log) = (ShareGroup::default(), Vec::new());
    let (one, three) = (topics(1), topics(3));
    for m in ["a", "b", "c"] {
        apply(&mut group, &mut log, &join(m), &one).unwrap();
    }
    apply(&mut group, &mut log, &beat("a", 1), &three).unwrap();
    apply(&mut group, &mut log, &beat("b", -1), &three).unwrap();
    apply(&mut group, &mut log, &beat("c", 3), &three).unwrap();
    assert_eq!(loaded_compacted(&log), group);
}
