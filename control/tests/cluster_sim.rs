//! The control plane of a cluster in simulated time, at a size the test
//! command runs (the program control/examples/cluster_sim runs it at 100
//! brokers and 10,000 partitions; docs/benchmarks.md has its figures):
//! placement balanced and rack-aware, a lost broker's or rack's
//! partitions re-elected within a second of the session's expiry, a
//! rolling restart that never leaves a partition without a leader and
//! ends with leadership balanced again, a new controller that fences
//! nobody alive and still fences the dead. The seed (printed) chooses
//! the broker and rack lost; CLUSTER_SIM_SEED replays one.

#[path = "../examples/cluster_sim/fanout.rs"]
mod fanout;
#[path = "../examples/cluster_sim/scenarios.rs"]
mod scenarios;
#[path = "../examples/cluster_sim/sim.rs"]
#[allow(dead_code)]
mod sim;

use sim::{Shape, SESSION_MS};

#[test]
fn a_simulated_cluster_fails_over_within_a_second_of_the_session_and_stays_balanced() {
    let seed = std::env::var("CLUSTER_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("CLUSTER_SIM_SEED={seed}");
    let shape = Shape {
        brokers: 12,
        racks: 3,
        topics: 20,
        partitions_per_topic: 30,
        replication_factor: 3,
    };
    let report = scenarios::run(shape, seed);
    report.print();
    assert!(report.placed.replicas <= 0.05, "{report:?}");
    assert!(report.placed.leaders <= 0.05, "{report:?}");
    assert_eq!(report.placed.rack_violations, 0);
    assert!(report.broker_loss_reelection_ms <= 1_000, "{report:?}");
    assert!(report.broker_loss_partitions > 0);
    assert!(report.rack_loss_reelection_ms <= 1_000, "{report:?}");
    assert_eq!(
        report.rack_loss_leaderless, 0,
        "three racks, three replicas"
    );
    assert_eq!(
        report.rolling_leaderless_max, 0,
        "controlled shutdowns move leaders first"
    );
    assert!(
        report.rolling_off_preferred.0 > 0,
        "the restart moved leaders"
    );
    assert_eq!(
        report.rolling_off_preferred.1, 0,
        "the rebalance moved them back"
    );
    assert_eq!(report.failover_spurious_fences, 0);
    assert!(report.failover_fence_ms <= SESSION_MS + 1_000, "{report:?}");
}

#[test]
fn a_change_reaches_every_observer_within_two_seconds() {
    let seed = std::env::var("CLUSTER_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("CLUSTER_SIM_SEED={seed}");
    let report = fanout::run(3, 17, 50, seed);
    report.print();
    let (_, p99, max) = report.applied_everywhere_ms;
    assert!(max <= 2_000.0, "{report:?}");
    assert!(p99 > 0.0, "measured");
    assert!(
        report.failover_applied_everywhere_ms <= 2_000.0 + 1_000.0,
        "{report:?}"
    );
}
