//! The control plane of a large cluster in simulated time: 100 brokers on
//! 3 racks, 10,000 partitions of 3 replicas by default. Prints what each
//! scenario measured (sim.rs says what is simulated and what is not), then
//! how fast a metadata change reaches all of them through a quorum of 5
//! voters and observers (fanout.rs).
//!
//! ```text
//! cargo run --release -p control --example cluster_sim -- [--brokers N]
//!     [--partitions N] [--seed N]
//! ```

mod fanout;
mod scenarios;
mod sim;

use sim::Shape;

fn main() {
    let mut shape = Shape {
        brokers: 100,
        racks: 3,
        topics: 100,
        partitions_per_topic: 100,
        replication_factor: 3,
    };
    let mut seed: u64 = rand::random();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || -> u64 {
            let value = args.next().unwrap_or_else(|| usage(&flag));
            value.parse().unwrap_or_else(|_| usage(&flag))
        };
        match flag.as_str() {
            "--brokers" => shape.brokers = value() as i32,
            "--partitions" => {
                shape.partitions_per_topic = (value() as usize).div_ceil(shape.topics)
            }
            "--seed" => seed = value(),
            _ => usage(&flag),
        }
    }
    let started = std::time::Instant::now();
    let report = scenarios::run(shape, seed);
    report.print();
    // The metadata's way to every broker: 5 voters, every other broker an
    // observer.
    let voters = 5.min(shape.brokers as u64);
    fanout::run(voters, shape.brokers as u64 - voters, 200, seed).print();
    println!(
        "{:<58} {:.1} s",
        "wall time of the simulation",
        started.elapsed().as_secs_f64()
    );
}

fn usage(flag: &str) -> ! {
    eprintln!(
        "cluster_sim: bad or missing value for {flag}; flags: --brokers N --partitions N --seed N"
    );
    std::process::exit(2);
}
