//! A simulated partition: three replicas with in-memory logs, a controller
//! that elects leaders from the ISR and commits ISR changes only from the
//! current leader and epoch, acks=all producers (min.insync.replicas = 2),
//! followers fetching, and faults at random: crashes, restarts, a leader
//! paused past its session (deposed while it still believes it leads),
//! rapid double failovers, followers learning of a new leader late, and a
//! leader learning late that the controller committed its ISR change (and
//! of fences that shrank its ISR).
//!
//! The records are an idempotent producer's batches (one record each, its
//! value the batch's sequence), with at most five unacknowledged; it
//! resends them in order, with their sequences, to whichever replica it
//! believes leads, at any point of a failover. Every replica keeps the
//! producer state the broker keeps (storage's `ProducerState`): a leader
//! checks each batch against it (a retry of one of the last five is
//! answered with its original offsets, a gap refused), followers record
//! what they copy, and a truncation or a restart rebuilds it from the log.
//! A leader's append happens in two steps, as the broker's does (accepted
//! in its epoch, then appended once there is room), with other events in
//! between; the second step asks again whether it still leads in that
//! epoch. (The producer never bumps its epoch: librdkafka's bump after
//! skipped sequences is kept from happening by the broker's answers, and
//! the fault test runs librdkafka itself.)
//!
//! Checked after every step: every acknowledged record is in every live
//! in-sync replica at its offset; no two replicas differ below both their
//! high watermarks; no log holds a batch twice (checked as each is
//! stored). At the end, healed and
//! drained, every log is the same, holds every acknowledged record, and
//! each batch at most once. Seeds are printed; `SEED=n` replays.

mod sim;

use replication::LeaderEpoch;
use sim::{Role, Sim, REPLICAS};

fn seed() -> u64 {
    std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

/// One randomized run: 1500 steps with faults, then healed and drained.
fn run_seed(seed: u64) -> Sim {
    let mut sim = Sim::new(seed);
    // Some runs fail over rapidly, some calmly.
    let fault_rate = [0.002, 0.01, 0.05][(seed % 3) as usize];
    for _ in 0..1500 {
        sim.step(fault_rate);
    }
    sim.heal_and_drain();
    sim
}

#[test]
fn seeds_that_once_failed() {
    // A deposed leader, refused as "not the leader" when it asked again
    // for an ISR whose earlier commit it had not heard of, stopped
    // counting the member it had asked for and acknowledged records the
    // elected member lacked (in-sync replica 2 lost offset 18).
    const SEEDS: &[u64] = &[1796230640141610991];
    for seed in SEEDS {
        println!("SEED={seed}");
        run_seed(*seed);
    }
}

#[test]
fn no_acknowledged_record_is_lost_and_logs_never_diverge_under_random_faults() {
    let base = seed();
    println!("SEED={base}");
    let mut acked = 0;
    let mut faults = 0;
    let mut elections = 0;
    let mut duplicates = 0;
    let mut fenced = 0;
    let runs = std::env::var("SIM_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300u64);
    for run in 0..runs {
        let seed = base.wrapping_add(run);
        let result = std::panic::catch_unwind(|| run_seed(seed));
        let sim = match result {
            Ok(sim) => sim,
            Err(e) => {
                eprintln!("failed with SEED={seed} (run {run})");
                std::panic::resume_unwind(e);
            }
        };
        acked += sim.acked.len();
        faults += sim.faults;
        elections += sim.elections;
        duplicates += sim.duplicates_recognised;
        fenced += sim.fenced_appends;
    }
    println!(
        "{runs} runs: {acked} batches acknowledged, {faults} faults, {elections} elections, \
         {duplicates} retries recognised as duplicates, {fenced} appends fenced at their second \
         step; none lost, none diverged, none stored twice"
    );
    assert!(fenced > 0, "no append ever found its leadership gone");
    assert!(
        duplicates as u64 > runs,
        "retries of stored batches were checked: {duplicates}"
    );
    assert!(
        acked as u64 > runs * 30,
        "the runs made progress: {acked} acknowledged"
    );
    assert!(elections as u64 >= runs, "leaders changed: {elections}");
}

#[test]
fn a_rapid_double_failover_truncates_without_losing_committed_records() {
    // Replica 1 leads epoch 1 and commits 0..3 (all three have them); it
    // then appends 3..6 that only replica 2 fetches. 1 dies: 3 is elected
    // (epoch 2, it lacks 3..6) and writes 3..5 of its own, uncommitted,
    // then dies too: 2 is elected (epoch 3) holding 1's records.
    let mut sim = Sim::new(1);
    for _ in 0..3 {
        sim.produce();
    }
    for _ in 0..4 {
        for id in [2, 3] {
            sim.fetch(id);
        }
    }
    assert_eq!(sim.acked.len(), 3);
    for _ in 0..3 {
        sim.produce();
    }
    sim.fetch(2);
    sim.fetch(2);
    assert_eq!(sim.replicas[1].log.len(), 6);
    assert_eq!(sim.replicas[2].log.len(), 3);
    // 1 dies; the controller picks 3.
    sim.replica(1).alive = false;
    sim.controller.isr.remove(&1);
    sim.controller.leader = Some(3);
    sim.controller.epoch = LeaderEpoch(2);
    for id in [2, 3] {
        sim.refresh(id);
    }
    sim.produce();
    sim.produce();
    assert_eq!(sim.replicas[2].log.len(), 5);
    // 3 dies before 2 fetched from it; 2 leads epoch 3.
    sim.replica(3).alive = false;
    sim.controller.isr.remove(&3);
    sim.controller.leader = Some(2);
    sim.controller.epoch = LeaderEpoch(3);
    sim.refresh(2);
    sim.produce();
    sim.check();
    // Both come back and follow 2: 3 cuts its epoch-2 records, 1 keeps all.
    sim.heal_and_drain();
    let log: Vec<LeaderEpoch> = sim.replicas[2].log.iter().map(|e| e.0).collect();
    assert_eq!(
        log[..3],
        [LeaderEpoch(1); 3],
        "the committed records stayed"
    );
    assert!(
        !log.contains(&LeaderEpoch(2)),
        "replica 3's uncommitted epoch-2 records were cut: {log:?}"
    );
}

#[test]
fn a_deposed_leader_keeps_counting_the_members_it_asked_for() {
    // Leader 1 knows the ISR {1, 2}; it asks for {1, 2, 3}, and the
    // controller commits it, but the answer is lost. 1 is then deposed
    // (3 elected from {2, 3}) before it hears of either; 2 has not heard
    // yet and still fetches from 1. 1 asks again and is refused as
    // deposed: that says nothing of its earlier request, so 1 must keep
    // counting 3 for its high watermark, and acknowledge nothing 3 lacks.
    let mut sim = Sim::new(1);
    sim.controller.isr = [1, 2].into_iter().collect();
    sim.refresh(1);
    let Role::Leader(state) = &mut sim.replica(1).role else {
        panic!("1 leads");
    };
    state.isr_requested(REPLICAS.iter().copied().collect());
    sim.controller.isr = REPLICAS.iter().copied().collect();
    // Deposed: fenced out, 3 elected in epoch 2; only 3 hears.
    sim.controller.isr.remove(&1);
    sim.controller.leader = Some(3);
    sim.controller.epoch = LeaderEpoch(2);
    sim.refresh(3);
    sim.isr_maintenance(1);
    let value = sim.next_plain;
    sim.next_plain += 1;
    let epoch = sim.accept(1).expect("1 still believes it leads");
    assert!(sim.append(1, epoch, value));
    // A truncation round, a fetch that copies the record, one that
    // tells 1 that 2 holds it.
    for _ in 0..3 {
        sim.fetch(2);
    }
    assert_eq!(sim.replicas[1].log.len(), 1, "2 copied the record");
    sim.check();
    assert!(
        sim.acked.is_empty(),
        "the deposed leader acknowledged a record its successor lacks"
    );
}
