//! `perf [--title T] [--notes FILE] [--svg PERCENTILES.svg] --out DASHBOARD.html LOG.hlog...`
//!
//! Writes one HTML file (inline SVG, no scripts, nothing fetched) with the
//! runs' summary table, latency by percentile, latency over time and
//! throughput over time; `--svg` also writes the percentile chart alone
//! (for docs).

use std::path::PathBuf;

const USAGE: &str =
    "usage: perf [--title T] [--notes FILE.html] [--svg FILE.svg] --out FILE.html LOG.hlog...";

fn main() {
    if let Err(message) = run(std::env::args().skip(1).collect()) {
        eprintln!("perf: {message}");
        std::process::exit(1);
    }
}

fn run(args: Vec<String>) -> Result<(), String> {
    let mut title = "loadgen runs".to_string();
    let mut notes = String::new();
    let mut svg: Option<PathBuf> = None;
    let mut out: Option<PathBuf> = None;
    let mut logs = Vec::new();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or(format!("{arg} needs a value\n{USAGE}"));
        match arg.as_str() {
            "--title" => title = value()?,
            "--notes" => {
                let path = value()?;
                notes = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
            }
            "--svg" => svg = Some(PathBuf::from(value()?)),
            "--out" => out = Some(PathBuf::from(value()?)),
            flag if flag.starts_with("--") => {
                return Err(format!("unknown option {flag}\n{USAGE}"))
            }
            log => logs.push(PathBuf::from(log)),
        }
    }
    let out = out.ok_or(USAGE)?;
    if logs.is_empty() {
        return Err(USAGE.into());
    }
    let series = logs
        .iter()
        .map(|path| perf::hlog::read(path))
        .collect::<Result<Vec<_>, _>>()?;
    std::fs::write(&out, perf::dashboard::html(&title, &notes, &series))
        .map_err(|e| format!("{}: {e}", out.display()))?;
    if let Some(svg) = svg {
        std::fs::write(&svg, perf::dashboard::percentile_chart(&series))
            .map_err(|e| format!("{}: {e}", svg.display()))?;
    }
    println!("wrote {} ({} runs)", out.display(), series.len());
    Ok(())
}
