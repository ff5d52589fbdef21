//! The share sessions' side of ShareFetch and ShareAcknowledge: the
//! session step of a request (on the shard keeping that member's session,
//! `Partitions::share_session_shard`), acknowledgements as the wire
//! carries them, applied on each partition's shard, and a member's
//! records given back when its session ends (closed, replaced, or its
//! connection gone).

use std::collections::BTreeSet;
use std::rc::Rc;

use control::TopicId;
use kafka_protocol::messages::GroupId;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::access::Caller;
use crate::cluster::routing::Route;
use crate::kafka::Code;
use crate::partition::share_states::Acknowledgement;
use crate::runtime::sharded::LocalFuture;
use crate::server::connection::share_link::ShareLink;
use crate::server::shard::Shard;
use crate::share::partition::Ack;
use crate::share::sessions::{SessionKey, SessionPartition, Step};

/// A request's session step: a fetch's (`Some((added, forgotten,
/// acknowledges))`) or an acknowledgement's (None).
pub type Asked = Option<(Vec<SessionPartition>, Vec<SessionPartition>, bool)>;

/// Takes the session step of a request of `key` at `epoch` over
/// `caller`'s connection; a session opened is remembered on the
/// connection, and the records of one it replaced are given back.
pub async fn step(
    shard: &Shard,
    caller: &Caller<'_>,
    (key, epoch): (&SessionKey, i32),
    asked: Asked,
) -> Result<Step, Code> {
    let connection = caller.share_link.map_or(0, |link| link.borrow().connection);
    let owner = shard.partitions.share_session_shard(key);
    let session_key = key.clone();
    let taken = shard
        .partitions
        .on_shard(
            owner,
            move |partitions| -> LocalFuture<Result<Step, Code>> {
                let mut sessions = partitions.share_sessions.borrow_mut();
                let step = match asked {
                    Some((added, forgotten, acknowledges)) => sessions.fetch(
                        &session_key,
                        (epoch, connection),
                        acknowledges,
                        (&added, &forgotten),
                    ),
                    None => sessions.acknowledge(&session_key, epoch),
                };
                Box::pin(std::future::ready(step))
            },
        )
        .await
        .unwrap_or_else(|_| Err(ResponseError::CoordinatorNotAvailable.code()))?;
    if let Step::Opened { replaced, .. } = &taken {
        if let Some(link) = caller.share_link {
            link.borrow_mut().keys.insert(key.clone());
        }
        if let Some(partitions) = replaced {
            release(shard, key, partitions).await;
        }
    }
    Ok(taken)
}

/// The route of a session partition.
pub fn route_of(shard: &Shard, (topic, index): SessionPartition) -> Route {
    shard.cluster.route_by_id(TopicId(topic), index)
}

/// Gives back what member `key` holds on `partitions`.
pub async fn release(shard: &Shard, key: &SessionKey, partitions: &BTreeSet<SessionPartition>) {
    let asked = partitions
        .iter()
        .map(|p| (route_of(shard, *p), key.clone()));
    let work = |owner: Rc<crate::partition::Partitions>,
                led: crate::partition::served::ServedPartition,
                (group, member): SessionKey|
     -> LocalFuture<Result<(), Code>> {
        Box::pin(async move {
            (owner.share_states)
                .release_member(&led, (&group, &member))
                .await;
            Ok(())
        })
    };
    // A partition no longer led here holds nothing of it.
    let _ = shard.partitions.fan_out(asked, true, work).await;
}

/// Ends the share sessions that lived on a closed connection and gives
/// their members' records back (in the background: the connection is
/// gone).
pub fn connection_closed(shard: &Rc<Shard>, link: ShareLink) {
    if link.keys.is_empty() {
        return;
    }
    let shard = shard.clone();
    glommio::spawn_local(async move {
        for key in link.keys {
            let owner = shard.partitions.share_session_shard(&key);
            let connection = link.connection;
            let ended = shard
                .partitions
                .on_shard(owner, move |partitions| -> LocalFuture<_> {
                    let mut sessions = partitions.share_sessions.borrow_mut();
                    let ended = sessions.connection_closed(connection);
                    Box::pin(std::future::ready(ended))
                })
                .await
                .unwrap_or_default();
            for (key, partitions) in ended {
                release(&shard, &key, &partitions).await;
            }
        }
    })
    .detach();
}

/// A partition named in a request, with its acknowledgements (or why
/// they are refused).
pub type PartitionAcks = (SessionPartition, Result<Vec<Acknowledgement>, Code>);

/// A request's session key: its group and member ids.
pub fn session_key(group: Option<&GroupId>, member: Option<&StrBytes>) -> SessionKey {
    let group = group.map(|g| g.to_string()).unwrap_or_default();
    (group, member.map(|m| m.to_string()).unwrap_or_default())
}

/// A partition's acknowledgement batches (first, last, types) as
/// acknowledgements, all or none: in order and not overlapping (Kafka's
/// check; it also bounds the work to the offsets in flight).
pub fn partition_acks<'a>(
    partition: SessionPartition,
    batches: impl Iterator<Item = (i64, i64, &'a [i8])>,
) -> PartitionAcks {
    let mut all = Vec::new();
    for (first, last, types) in batches {
        if all
            .last()
            .is_some_and(|a: &Acknowledgement| first <= a.last)
        {
            return (partition, Err(ResponseError::InvalidRequest.code()));
        }
        match acknowledgements(first, last, types) {
            Ok(acks) => all.extend(acks),
            Err(code) => return (partition, Err(code)),
        }
    }
    (partition, Ok(all))
}

/// One acknowledgement batch as the wire carries it: `first..=last` with
/// one type for all, or one per offset. INVALID_REQUEST for anything
/// else, renew (4) included: v1 has no renew (Kafka's checks).
pub fn acknowledgements(first: i64, last: i64, types: &[i8]) -> Result<Vec<Acknowledgement>, Code> {
    let invalid = ResponseError::InvalidRequest.code();
    if first > last || types.is_empty() {
        return Err(invalid);
    }
    let ack_of = |id: i8| Ack::of_id(id).filter(|a| *a != Ack::Renew).ok_or(invalid);
    if types.len() == 1 {
        let ack = ack_of(types[0])?;
        return Ok(vec![Acknowledgement { first, last, ack }]);
    }
    if last.checked_sub(first).and_then(|d| d.checked_add(1)) != Some(types.len() as i64) {
        return Err(invalid);
    }
    let mut runs: Vec<Acknowledgement> = Vec::new();
    for (offset, id) in (first..=last).zip(types) {
        let ack = ack_of(*id)?;
        match runs.last_mut() {
            Some(run) if run.ack == ack => run.last = offset,
            _ => runs.push(Acknowledgement {
                first: offset,
                last: offset,
                ack,
            }),
        }
    }
    Ok(runs)
}

/// Applies `acks` of member `key` on each partition (None: nothing to
/// acknowledge there), in the order given; each partition's outcome.
pub async fn acknowledge(
    shard: &Shard,
    key: &SessionKey,
    asked: Vec<(Route, Result<Vec<Acknowledgement>, Code>)>,
) -> Vec<Result<(), Code>> {
    let asked = asked.into_iter().map(|(route, acks)| match acks {
        Ok(acks) => (route, (acks, key.clone())),
        Err(code) => (Err(code), (Vec::new(), key.clone())),
    });
    let work = |owner: Rc<crate::partition::Partitions>,
                led: crate::partition::served::ServedPartition,
                (acks, (group, member)): (Vec<Acknowledgement>, SessionKey)|
     -> LocalFuture<Result<(), Code>> {
        Box::pin(async move {
            (owner.share_states)
                .acknowledge(&led, (&group, &member), &acks)
                .await
        })
    };
    shard.partitions.fan_out(asked, true, work).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledgement_batches_become_runs_or_are_refused() {
        let one = |first, last, ack| Acknowledgement { first, last, ack };
        assert_eq!(
            acknowledgements(3, 9, &[1]),
            Ok(vec![one(3, 9, Ack::Accept)])
        );
        assert_eq!(
            acknowledgements(3, 6, &[1, 1, 0, 2]),
            Ok(vec![
                one(3, 4, Ack::Accept),
                one(5, 5, Ack::Gap),
                one(6, 6, Ack::Release)
            ])
        );
        let invalid = Err(ResponseError::InvalidRequest.code());
        assert_eq!(
            acknowledgements(3, 6, &[1, 1]),
            invalid,
            "one type per offset or one for all"
        );
        assert_eq!(acknowledgements(3, 2, &[1]), invalid);
        assert_eq!(acknowledgements(3, 3, &[]), invalid);
        assert_eq!(acknowledgements(3, 3, &[9]), invalid, "no such type");
        assert_eq!(acknowledgements(3, 3, &[4]), invalid, "no renew in v1");
        let p = ([1; 16], 0);
        type Batches = [(i64, i64, &'static [i8])];
        const ORDERED: &Batches = &[(1, 2, &[1]), (3, 3, &[2])];
        const OVERLAPPING: &Batches = &[(1, 2, &[1]), (2, 3, &[1])];
        const BACKWARDS: &Batches = &[(5, 6, &[1]), (1, 2, &[1])];
        let in_order = partition_acks(p, ORDERED.iter().copied());
        assert_eq!(
            in_order.1,
            Ok(vec![one(1, 2, Ack::Accept), one(3, 3, Ack::Release)])
        );
        for refused in [OVERLAPPING, BACKWARDS] {
            let refused = partition_acks(p, refused.iter().copied());
            assert_eq!(refused.1, invalid, "overlapping or out of order");
        }
        assert_eq!(acknowledgements(i64::MIN, i64::MAX, &[1, 1]), invalid);
    }
}
