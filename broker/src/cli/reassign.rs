//! `broker topic reassign` and `broker topic reassignments`: partitions
//! moved to new replicas (or their moves cancelled), by an explicit plan
//! or one that balances the topic (`--balance`), each partition's outcome
//! printed, optionally waiting until the moves finish; the moves under
//! way; and `broker cluster decommission` (cordon, then every replica off
//! the broker).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use client::cluster::Cluster;
use client::connection::ClientError;
use kafka_protocol::ResponseError;

use super::move_plan::{self, Brokers, Placed};

/// How long `--wait` waits for moves to finish.
const WAIT_MAX: Duration = Duration::from_secs(600);
/// How often it looks.
const WAIT_STEP: Duration = Duration::from_millis(500);

/// A partition and its target replicas (None: cancel its move).
pub type Move = (i32, Option<Vec<i32>>);

/// The moves the command line asks for: each --partition with its
/// --replicas (in order), or all cancelled.
pub fn plan(
    partitions: &[i32],
    replicas: &[String],
    cancel: bool,
) -> Result<Vec<Move>, ClientError> {
    let invalid = |why: String| ClientError::Refused(ResponseError::InvalidRequest.code(), why);
    if cancel {
        return Ok(partitions.iter().map(|p| (*p, None)).collect());
    }
    if replicas.len() != partitions.len() {
        return Err(invalid(format!(
            "each --partition needs its --replicas: {} partitions, {} replica lists",
            partitions.len(),
            replicas.len()
        )));
    }
    let mut moves = Vec::new();
    for (partition, list) in partitions.iter().zip(replicas) {
        let target: Result<Vec<i32>, _> = list.split(',').map(|b| b.trim().parse()).collect();
        let target = target.map_err(|_| {
            invalid(format!(
                "--replicas {list:?}: expected broker ids such as 2,3,4"
            ))
        })?;
        moves.push((*partition, Some(target)));
    }
    Ok(moves)
}

/// Asks for the moves, prints each partition's outcome, and with `wait`
/// waits until none of them is under way. Fails if any partition was refused.
pub async fn run(
    cluster: &Cluster,
    topic: &str,
    moves: &[Move],
    wait: bool,
) -> Result<String, ClientError> {
    let outcomes = cluster.reassign_partitions(topic, moves).await?;
    let mut out = String::new();
    let mut refused = Vec::new();
    for outcome in &outcomes {
        let what = match moves.iter().find(|(p, _)| *p == outcome.partition) {
            Some((_, Some(target))) => format!("moving to {target:?}"),
            _ => "move cancelled".to_string(),
        };
        if outcome.error_code == 0 {
            let _ = writeln!(out, "{topic}-{}: {what}", outcome.partition);
        } else {
            let why = outcome.message.clone().unwrap_or_default();
            refused.push(format!(
                "{topic}-{}: {}: {why}",
                outcome.partition,
                client::connection::error_name(outcome.error_code)
            ));
        }
    }
    if let Some(first) = outcomes.iter().find(|o| o.error_code != 0) {
        return Err(ClientError::Refused(first.error_code, refused.join("; ")));
    }
    if wait {
        let placed: Vec<Placed> = (moves.iter())
            .map(|(partition, target)| Placed {
                topic: topic.to_string(),
                partition: *partition,
                replicas: target.clone().unwrap_or_default(),
            })
            .collect();
        out.push_str(&wait_for_moves(cluster, &placed).await?);
    }
    Ok(out)
}

/// The brokers that may receive replicas (live and not cordoned), and
/// every broker's rack.
async fn brokers(cluster: &Cluster) -> Result<Brokers, ClientError> {
    let description = cluster.describe_cluster().await?;
    let mut candidates = Vec::new();
    for broker in &description.brokers {
        if !matches!(cluster.broker_cordoned(broker.id).await, Ok(true)) {
            candidates.push(broker.id);
        }
    }
    Ok(Brokers {
        candidates,
        racks: description.racks,
    })
}

/// Every partition's replicas (of `topic` only, if named).
async fn placements(cluster: &Cluster, topic: Option<&str>) -> Result<Vec<Placed>, ClientError> {
    let topics = cluster.list_topics().await?;
    Ok(topics
        .iter()
        .filter(|t| topic.is_none_or(|name| t.name == name))
        .flat_map(|t| {
            t.partitions.iter().enumerate().map(|(i, p)| Placed {
                topic: t.name.clone(),
                partition: i as i32,
                replicas: p.replicas.clone(),
            })
        })
        .collect())
}

/// `--balance`: moves that spread `topic`'s replicas evenly over the live,
/// uncordoned brokers without a partition losing a rack.
pub async fn balance(cluster: &Cluster, topic: &str, wait: bool) -> Result<String, ClientError> {
    let placed = placements(cluster, Some(topic)).await?;
    if placed.is_empty() {
        return Err(ClientError::Refused(
            ResponseError::UnknownTopicOrPartition.code(),
            format!("no topic {topic}"),
        ));
    }
    let plan = move_plan::balance(&brokers(cluster).await?, &placed);
    if plan.is_empty() {
        return Ok(format!("{topic} is balanced: nothing to move\n"));
    }
    submit(cluster, &plan, wait).await
}

/// `broker cluster decommission N`: cordons the broker (no new replicas),
/// then moves every replica it holds to another live, uncordoned broker.
pub async fn decommission(
    cluster: &Cluster,
    broker: i32,
    wait: bool,
) -> Result<String, ClientError> {
    cluster.set_broker_cordoned(broker, true).await?;
    let placed = placements(cluster, None).await?;
    let (plan, stuck) = move_plan::drain(&brokers(cluster).await?, &placed, broker);
    let mut out = format!("broker {broker} cordoned: no new replicas go to it\n");
    if !stuck.is_empty() {
        let names: Vec<String> = (stuck.iter())
            .map(|p| format!("{}-{}", p.topic, p.partition))
            .collect();
        return Err(ClientError::Refused(
            ResponseError::InvalidReplicaAssignment.code(),
            format!(
                "no broker can take these partitions' replicas off broker {broker} without \
                 losing a rack: {}",
                names.join(", ")
            ),
        ));
    }
    if plan.is_empty() {
        let _ = writeln!(out, "broker {broker} holds no replica: nothing to move");
        return Ok(out);
    }
    out.push_str(&submit(cluster, &plan, wait).await?);
    Ok(out)
}

/// Asks for the moves of `plan`, topic by topic, then waits for them all.
async fn submit(cluster: &Cluster, plan: &[Placed], wait: bool) -> Result<String, ClientError> {
    let mut topics: Vec<&str> = plan.iter().map(|p| p.topic.as_str()).collect();
    topics.dedup();
    let mut out = String::new();
    for topic in &topics {
        let moves: Vec<Move> = (plan.iter())
            .filter(|p| p.topic == *topic)
            .map(|p| (p.partition, Some(p.replicas.clone())))
            .collect();
        out.push_str(&run(cluster, topic, &moves, false).await?);
    }
    if wait {
        out.push_str(&wait_for_moves(cluster, plan).await?);
    }
    Ok(out)
}

/// Waits until none of `moves` is under way and each moved partition has
/// its target replicas (at most [`WAIT_MAX`]): the broker asked may see
/// the metadata a moment after another.
async fn wait_for_moves(cluster: &Cluster, moves: &[Placed]) -> Result<String, ClientError> {
    let started = Instant::now();
    let named = |m: &client::reassignments::OngoingMove| {
        moves
            .iter()
            .any(|p| p.topic == m.topic && p.partition == m.partition)
    };
    loop {
        let under_way = cluster.list_reassignments().await?.iter().any(named);
        if !under_way && placed_as(cluster, moves).await? {
            break;
        }
        if started.elapsed() > WAIT_MAX {
            return Err(ClientError::Refused(
                ResponseError::RequestTimedOut.code(),
                format!("the moves did not finish within {WAIT_MAX:?}"),
            ));
        }
        glommio::timer::sleep(WAIT_STEP).await;
    }
    Ok(format!(
        "finished in {:.1} s\n",
        started.elapsed().as_secs_f64()
    ))
}

/// Whether every partition of `moves` has the replicas given there (an
/// empty list: any, a cancelled move).
async fn placed_as(cluster: &Cluster, moves: &[Placed]) -> Result<bool, ClientError> {
    let mut topics: Vec<&str> = moves.iter().map(|p| p.topic.as_str()).collect();
    topics.sort_unstable();
    topics.dedup();
    cluster.refresh(Some(&topics), false).await?;
    Ok(moves.iter().all(|p| {
        p.replicas.is_empty()
            || cluster.topic(&p.topic).is_some_and(|t| {
                (t.partitions.get(p.partition as usize))
                    .is_some_and(|now| now.replicas == p.replicas)
            })
    }))
}

/// The moves under way, one line each (or a JSON list).
pub async fn list(cluster: &Cluster, json: bool) -> Result<String, ClientError> {
    let moves = cluster.list_reassignments().await?;
    if json {
        let listed: Vec<serde_json::Value> = (moves.iter())
            .map(|m| {
                serde_json::json!({
                    "topic": m.topic,
                    "partition": m.partition,
                    "replicas": m.replicas,
                    "adding": m.adding,
                    "removing": m.removing,
                })
            })
            .collect();
        return Ok(super::output::json_document(&listed));
    }
    let mut out = String::new();
    if moves.is_empty() {
        let _ = writeln!(out, "no partition is being reassigned");
    }
    for m in moves {
        let _ = writeln!(
            out,
            "{}-{} replicas {:?} adding {:?} removing {:?}",
            m.topic, m.partition, m.replicas, m.adding, m.removing
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::plan;

    #[test]
    fn each_partition_takes_its_replica_list() {
        let replicas = vec!["2,3,4".to_string(), "4, 1,2".to_string()];
        assert_eq!(
            plan(&[0, 5], &replicas, false).unwrap(),
            vec![(0, Some(vec![2, 3, 4])), (5, Some(vec![4, 1, 2]))]
        );
        assert_eq!(plan(&[1], &[], true).unwrap(), vec![(1, None)]);
        assert!(
            plan(&[0, 1], &replicas[..1], false).is_err(),
            "one list short"
        );
        assert!(plan(&[0], &["2,x".to_string()], false).is_err());
    }
}
