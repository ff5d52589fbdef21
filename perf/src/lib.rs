//! `perf`: turns HdrHistogram interval logs (.hlog, as loadgen writes
//! them) into a self-contained HTML dashboard: latency by percentile,
//! latency and throughput over time, a summary table, several runs side by
//! side. No scripts, no network: inline SVG.

pub mod chart;
pub mod dashboard;
pub mod hlog;
pub mod phases;
