//! The faults of replication_faults.rs: SIGKILLs of a partition leader,
//! a follower, two brokers at once, or the active controller and, during
//! its failover, a second node (each restarted), and SIGSTOP past the
//! session timeout; at random intervals from the run's seed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::Rng;

use super::{metadata, BROKERS, PARTITIONS, SESSION_TIMEOUT_MS};
use crate::fault_reports::Timeline;
use crate::support;
use crate::support::cluster::Cluster;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    KillLeader,
    KillFollower,
    Pause,
    /// Two brokers at once (a rack's power), both restarted.
    KillTwo,
    /// The active controller, and a second node (a broker, or with
    /// separate controllers either kind) while the metadata quorum elects
    /// a new leader; both restarted.
    KillControllerInFailover,
}

/// The metadata quorum's leader as a live broker sees it.
fn active_controller(cluster: &Cluster, rng: &mut StdRng) -> Option<i32> {
    let first = rng.gen_range(1..=BROKERS);
    (0..BROKERS)
        .map(|i| (first - 1 + i) % BROKERS + 1)
        .filter(|id| cluster.is_running(*id))
        .find_map(|id| {
            let leader =
                support::cluster::try_counter(cluster.node(id).http, "metadata_leader_id")?;
            (1..=cluster.size() as u64)
                .contains(&leader)
                .then_some(leader as i32)
        })
}

/// Sleeps for a random time in `range` (ms).
fn pause_ms(rng: &mut StdRng, range: std::ops::Range<u64>) {
    std::thread::sleep(Duration::from_millis(rng.gen_range(range)));
}

/// The nemesis: `faults` faults at random intervals, each noted in the
/// timeline. Returns each leader kill as (when, partition, killed leader).
pub fn nemesis(
    cluster: &mut Cluster,
    rng: &mut StdRng,
    faults: usize,
    counts: &mut BTreeMap<&'static str, usize>,
    timeline: &mut Timeline,
) -> Vec<(Instant, i32, i32)> {
    let mut leader_kills = Vec::new();
    let addresses = cluster.addresses();
    for _ in 0..faults {
        pause_ms(rng, 400..1200);
        let fault = match rng.gen_range(0..5) {
            0 => Fault::KillLeader,
            1 => Fault::KillFollower,
            2 => Fault::Pause,
            3 => Fault::KillTwo,
            _ => Fault::KillControllerInFailover,
        };
        let partition = rng.gen_range(0..PARTITIONS);
        let leaders = support::on_glommio(metadata(&addresses, rng.gen_range(0..3)));
        let leader = leaders
            .as_ref()
            .map(|l| l[partition as usize].0)
            .filter(|l| *l > 0);
        match fault {
            Fault::KillLeader => {
                let victim = leader.unwrap_or_else(|| rng.gen_range(1..=BROKERS));
                cluster.kill9(victim);
                timeline.note(format!(
                    "SIGKILL {victim} (leader of partition {partition})"
                ));
                leader_kills.push((Instant::now(), partition, victim));
                *counts.entry("kill-leader").or_default() += 1;
                pause_ms(rng, 1500..3000);
                cluster.restart(victim);
                timeline.note(format!("restart {victim}"));
            }
            Fault::KillFollower => {
                let followers: Vec<i32> = (1..=BROKERS).filter(|b| Some(*b) != leader).collect();
                let victim = followers[rng.gen_range(0..followers.len())];
                cluster.kill9(victim);
                timeline.note(format!(
                    "SIGKILL {victim} (a follower of partition {partition})"
                ));
                *counts.entry("kill-follower").or_default() += 1;
                pause_ms(rng, 500..2500);
                cluster.restart(victim);
                timeline.note(format!("restart {victim}"));
            }
            Fault::Pause => {
                let victim = rng.gen_range(1..=cluster.size());
                cluster.signal(victim, libc::SIGSTOP);
                timeline.note(format!("SIGSTOP {victim}"));
                *counts.entry("pause").or_default() += 1;
                pause_ms(rng, SESSION_TIMEOUT_MS + 300..SESSION_TIMEOUT_MS + 1500);
                cluster.signal(victim, libc::SIGCONT);
                timeline.note(format!("SIGCONT {victim}"));
            }
            Fault::KillTwo => {
                let spared = rng.gen_range(1..=BROKERS);
                let victims: Vec<i32> = (1..=BROKERS).filter(|b| *b != spared).collect();
                for victim in &victims {
                    cluster.kill9(*victim);
                }
                timeline.note(format!("SIGKILL {victims:?} together"));
                *counts.entry("kill-two").or_default() += 1;
                pause_ms(rng, 500..3000);
                cluster.restart_all(&victims);
                timeline.note(format!("restart {victims:?}"));
            }
            Fault::KillControllerInFailover => {
                let nodes = cluster.size();
                let controller =
                    active_controller(cluster, rng).unwrap_or_else(|| rng.gen_range(1..=nodes));
                cluster.kill9(controller);
                timeline.note(format!("SIGKILL {controller} (the active controller)"));
                // Within the metadata election (300-600 ms without a leader).
                pause_ms(rng, 50..600);
                let others: Vec<i32> = (1..=nodes).filter(|b| *b != controller).collect();
                let second = others[rng.gen_range(0..others.len())];
                cluster.kill9(second);
                timeline.note(format!(
                    "SIGKILL {second} (during the controller's failover)"
                ));
                *counts.entry("kill-controller-in-failover").or_default() += 1;
                pause_ms(rng, 500..2500);
                cluster.restart_all(&[controller, second]);
                timeline.note(format!("restart {controller} and {second}"));
            }
        }
    }
    leader_kills
}
