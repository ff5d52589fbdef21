//! `loadgen`: drives any Kafka-protocol broker with a fixed workload and
//! measures it. Producers and consumers run on threads of their own (each a
//! glommio executor, pinned to a core with core_affinity only when `--pin`
//! asks); every second they report
//! interval histograms, which are printed, written as HdrHistogram interval
//! logs (.hlog) and summed into a JSON summary.
//!
//! Latency is measured from a message's *intended* send time: in open-loop
//! mode (a fixed rate) a stalled broker makes the waiting messages late, and
//! that lateness is counted (no coordinated omission).

pub mod baseline;
pub mod consume;
pub mod disk_ceiling;
pub mod disk_floor;
pub mod options;
pub mod payload;
pub mod prefault;
pub mod produce;
pub mod report;
pub mod run;
pub mod send_modes;
pub mod verify;
