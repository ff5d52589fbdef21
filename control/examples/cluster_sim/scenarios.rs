//! The scenarios the cluster simulation runs, in order on one cluster,
//! and the figures each gives: a broker lost and back, a rack lost and
//! back, a rolling restart, an active controller failing over.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use control::BrokerId;

use crate::sim::{
    balance, Balance, LogGrowth, Shape, Sim, CATCH_UP_MS, REBALANCE_MS, SESSION_MS, TICK_MS,
};

/// Figures of one run (times in simulated ms).
#[derive(Clone, Debug)]
pub struct Report {
    /// The seed that chose the broker and rack lost.
    pub seed: u64,
    /// Placement of the topics as created.
    pub placed: Balance,
    /// From a killed broker's session expiry to every partition it led
    /// having a new leader.
    pub broker_loss_reelection_ms: u64,
    /// Its partitions.
    pub broker_loss_partitions: usize,
    /// From its restart to leading its preferred partitions again (the
    /// next rebalance check after it caught up).
    pub broker_return_rebalance_ms: u64,
    /// The same for a whole rack killed at once.
    pub rack_loss_reelection_ms: u64,
    /// The rack's brokers and the partitions they led.
    pub rack_loss_brokers: usize,
    /// Partitions the rack led.
    pub rack_loss_partitions: usize,
    /// Partitions left without a leader after the rack's loss.
    pub rack_loss_leaderless: usize,
    /// A rolling restart (controlled shutdowns, one broker at a time, each
    /// caught up before the next): the most partitions without a leader,
    /// looked at right after each shutdown and each catch-up.
    pub rolling_leaderless_max: usize,
    /// Partitions off their preferred leader right after it, and once the
    /// next rebalance ran.
    pub rolling_off_preferred: (usize, usize),
    /// After a failover, from the new controller's start to fencing a
    /// broker killed then.
    pub failover_fence_ms: u64,
    /// Brokers fenced while they ran, over the whole run (two failovers
    /// included: to a controller that never led, then back to the first).
    pub failover_spurious_fences: usize,
    /// The metadata log over the whole run.
    pub log: LogGrowth,
    /// The snapshot of the final state.
    pub snapshot_bytes: usize,
    /// The controller's time per record it decided.
    pub controller_us_per_record: f64,
    /// The controller's time per simulated second (its ticks' scans
    /// included).
    pub controller_ms_per_second: f64,
    /// Partitions, brokers.
    pub partitions: usize,
    /// Brokers.
    pub brokers: i32,
}

/// Runs every scenario on a cluster of `shape`.
pub fn run(shape: Shape, seed: u64) -> Report {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut sim = Sim::new(shape);
    let placed = balance(&sim.metadata);
    let partitions = sim
        .metadata
        .topics
        .values()
        .map(|t| t.partitions.len())
        .sum();
    // Everyone caught up and on its preferred leader first.
    sim.advance(CATCH_UP_MS + TICK_MS);

    let lost = BrokerId(rng.gen_range(1..=shape.brokers));
    let (broker_loss_reelection_ms, broker_loss_partitions) = lose(&mut sim, &[lost]);
    let broker_return_rebalance_ms = bring_back(&mut sim, &[lost]);

    let rack = rng.gen_range(0..shape.racks);
    let racked: Vec<BrokerId> = (1..=shape.brokers)
        .filter(|id| (id - 1) % shape.racks == rack)
        .map(BrokerId)
        .collect();
    let (rack_loss_reelection_ms, rack_loss_partitions) = lose(&mut sim, &racked);
    let rack_loss_leaderless = sim.leaderless();
    bring_back(&mut sim, &racked);

    let mut rolling_leaderless_max = 0;
    for id in 1..=shape.brokers {
        sim.shut_down(BrokerId(id));
        rolling_leaderless_max = rolling_leaderless_max.max(sim.leaderless());
        sim.advance(TICK_MS);
        sim.restart(BrokerId(id));
        let caught_up = sim.until(60_000, |s| in_every_isr(s, BrokerId(id)));
        caught_up.expect("a restarted broker catches up");
        rolling_leaderless_max = rolling_leaderless_max.max(sim.leaderless());
    }
    let off_after_rolling = sim.off_preferred();
    sim.until(REBALANCE_MS + TICK_MS, |s| s.off_preferred() == 0);
    let rolling_off_preferred = (off_after_rolling, sim.off_preferred());

    sim.fail_over();
    let victim = BrokerId(rng.gen_range(1..=shape.brokers));
    sim.kill(victim);
    let failover_fence_ms = sim
        .until(2 * SESSION_MS, |s| s.metadata.brokers[&victim].fenced)
        .expect("the new controller fences a dead broker");
    // Back to the first controller, whose memory of heartbeats is now
    // older than a session.
    sim.advance(2 * SESSION_MS);
    sim.fail_over();
    sim.advance(SESSION_MS + TICK_MS);

    Report {
        seed,
        placed,
        broker_loss_reelection_ms,
        broker_loss_partitions,
        broker_return_rebalance_ms,
        rack_loss_reelection_ms,
        rack_loss_brokers: racked.len(),
        rack_loss_partitions,
        rack_loss_leaderless,
        rolling_leaderless_max,
        rolling_off_preferred,
        failover_fence_ms,
        failover_spurious_fences: sim.live_brokers_fenced,
        log: sim.log,
        snapshot_bytes: sim.metadata.encode().len(),
        controller_us_per_record: sim.controller_time.as_secs_f64() * 1e6
            / sim.decided.max(1) as f64,
        controller_ms_per_second: sim.controller_time.as_secs_f64() * 1e6
            / sim.now_ms.max(1) as f64,
        partitions,
        brokers: shape.brokers,
    }
}

/// Kills `brokers` at once; returns the longest any of them took, from
/// its session's expiry (its last heartbeat + the session), until every
/// partition it led had another leader, and how many they led.
fn lose(sim: &mut Sim, brokers: &[BrokerId]) -> (u64, usize) {
    let led: usize = brokers.iter().map(|b| sim.led_by(*b)).sum();
    for b in brokers {
        sim.kill(*b);
    }
    let started = sim.now_ms;
    let mut waiting: Vec<BrokerId> = brokers.to_vec();
    let mut longest = 0;
    while !waiting.is_empty() {
        assert!(
            sim.now_ms - started < 2 * SESSION_MS,
            "leaderships stay on dead brokers"
        );
        sim.step();
        let now = sim.now_ms;
        waiting.retain(|b| {
            if sim.led_by(*b) > 0 {
                return true;
            }
            let expiry = sim.last_heartbeat_ms[b] + SESSION_MS;
            longest = longest.max(now.saturating_sub(expiry));
            false
        });
    }
    (longest, led)
}

/// Restarts `brokers`; returns how long until every partition is led by
/// its preferred replica again.
fn bring_back(sim: &mut Sim, brokers: &[BrokerId]) -> u64 {
    for b in brokers {
        sim.restart(*b);
    }
    let back = sim.until(REBALANCE_MS + CATCH_UP_MS + 10_000, |s| {
        s.off_preferred() == 0 && s.leaderless() == 0
    });
    back.unwrap_or_else(|| {
        panic!(
            "leadership did not spread back: {} off preferred, {} leaderless",
            sim.off_preferred(),
            sim.leaderless()
        )
    })
}

fn in_every_isr(sim: &Sim, id: BrokerId) -> bool {
    crate::sim::partitions(&sim.metadata)
        .iter()
        .all(|(_, _, p)| !p.replicas.contains(&id) || p.isr.contains(&id))
}

impl Report {
    /// The figures, one per line.
    pub fn print(&self) {
        let p = |name: &str, value: String| println!("{name:<58} {value}");
        p("seed", self.seed.to_string());
        p(
            "brokers, partitions",
            format!("{}, {}", self.brokers, self.partitions),
        );
        p(
            "placement: replicas / preferred leaders per broker, max off mean",
            format!(
                "{:.1}% / {:.1}%",
                self.placed.replicas * 100.0,
                self.placed.leaders * 100.0
            ),
        );
        p(
            "placement: partitions with two replicas in one rack",
            self.placed.rack_violations.to_string(),
        );
        p(
            "broker lost: re-elected after its session expired",
            format!(
                "{} ms ({} partitions)",
                self.broker_loss_reelection_ms, self.broker_loss_partitions
            ),
        );
        p(
            "broker back: all on preferred leaders after its restart",
            format!("{} ms", self.broker_return_rebalance_ms),
        );
        p(
            "rack lost: re-elected after the sessions expired",
            format!(
                "{} ms ({} brokers, {} partitions, {} left leaderless)",
                self.rack_loss_reelection_ms,
                self.rack_loss_brokers,
                self.rack_loss_partitions,
                self.rack_loss_leaderless
            ),
        );
        p(
            "rolling restart: most partitions leaderless (after each step)",
            self.rolling_leaderless_max.to_string(),
        );
        p(
            "rolling restart: off preferred after it / after the rebalance",
            format!(
                "{} / {}",
                self.rolling_off_preferred.0, self.rolling_off_preferred.1
            ),
        );
        p(
            "failover: new controller fences a broker killed then",
            format!(
                "{} ms ({} wrongly fenced, also after failing back)",
                self.failover_fence_ms, self.failover_spurious_fences
            ),
        );
        p(
            "metadata log over the run: records, bytes",
            format!("{}, {}", self.log.records, self.log.bytes),
        );
        p(
            "snapshot of the final state",
            format!("{} bytes", self.snapshot_bytes),
        );
        p(
            "controller time per record decided",
            format!("{:.1} us", self.controller_us_per_record),
        );
        p(
            "controller time per simulated second",
            format!("{:.2} ms", self.controller_ms_per_second),
        );
    }
}
