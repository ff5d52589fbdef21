//! `broker topic reassign` and `broker topic reassignments`: partitions
//! moved to new replicas (or their moves cancelled), each partition's
//! outcome printed, optionally waiting until the moves finish; and the
//! moves under way.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use client::cluster::Cluster;
use client::connection::ClientError;
use kafka_protocol::ResponseError;

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
                "{topic}-{}: error code {}: {why}",
                outcome.partition, outcome.error_code
            ));
        }
    }
    if let Some(first) = outcomes.iter().find(|o| o.error_code != 0) {
        return Err(ClientError::Refused(first.error_code, refused.join("; ")));
    }
    if wait {
        let started = Instant::now();
        let named = |m: &client::reassignments::OngoingMove| {
            m.topic == topic && moves.iter().any(|(p, _)| *p == m.partition)
        };
        while cluster.list_reassignments().await?.iter().any(named) {
            if started.elapsed() > WAIT_MAX {
                return Err(ClientError::Refused(
                    ResponseError::RequestTimedOut.code(),
                    format!("the moves did not finish within {WAIT_MAX:?}"),
                ));
            }
            glommio::timer::sleep(WAIT_STEP).await;
        }
        let _ = writeln!(out, "finished in {:.1} s", started.elapsed().as_secs_f64());
    }
    Ok(out)
}

/// The moves under way, one line each.
pub async fn list(cluster: &Cluster) -> Result<String, ClientError> {
    let moves = cluster.list_reassignments().await?;
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
