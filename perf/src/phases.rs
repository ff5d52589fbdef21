//! Latency by phase of a run: the intervals of a log that end within each
//! named span of seconds (since the log's first interval), added together,
//! as a table. A benchmark that does something in the middle of a run (a
//! partition moved, a broker restarted) compares before, during and after.

use std::fmt::Write;

use hdrhistogram::Histogram;

use crate::hlog::Series;

/// A named span of a run, in seconds since its first interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// Its name in the table.
    pub name: String,
    /// Where it starts (inclusive).
    pub from: f64,
    /// Where it ends (exclusive).
    pub to: f64,
}

/// Parses `name:from-to,...` (seconds, decimals allowed).
pub fn parse(text: &str) -> Result<Vec<Phase>, String> {
    let bad = |part: &str| format!("a phase is name:from-to in seconds, got {part:?}");
    let mut phases = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, span) = part.split_once(':').ok_or_else(|| bad(part))?;
        let (from, to) = span.split_once('-').ok_or_else(|| bad(part))?;
        let from: f64 = from.trim().parse().map_err(|_| bad(part))?;
        let to: f64 = to.trim().parse().map_err(|_| bad(part))?;
        if name.is_empty() || from.partial_cmp(&to) != Some(std::cmp::Ordering::Less) {
            return Err(bad(part));
        }
        phases.push(Phase {
            name: name.to_string(),
            from,
            to,
        });
    }
    if phases.is_empty() {
        return Err("no phases given".into());
    }
    Ok(phases)
}

/// One row per log and phase: messages, rate and latency percentiles
/// (ms); a phase no interval ends in says so.
pub fn table(series: &[Series], phases: &[Phase]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<24} {:<10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8}",
        "run", "phase", "messages", "msg/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms"
    );
    for run in series {
        for phase in phases {
            let _ = writeln!(
                out,
                "{:<24} {:<10} {}",
                run.name,
                phase.name,
                row(run, phase)
            );
        }
    }
    out
}

/// A phase's figures in one run.
fn row(run: &Series, phase: &Phase) -> String {
    let origin = run.origin();
    let mut sum: Option<Histogram<u64>> = None;
    let mut seconds = 0.0;
    for (start, length, histogram) in &run.intervals {
        let end = (*start + *length).saturating_sub(origin).as_secs_f64();
        if end < phase.from || end >= phase.to {
            continue;
        }
        seconds += length.as_secs_f64();
        let sum = sum.get_or_insert_with(|| Histogram::new_from(histogram));
        // Histograms of one log share their bounds: adding cannot fail.
        let _ = sum.add(histogram);
    }
    let Some(sum) = sum.filter(|h| !h.is_empty()) else {
        return "no messages in this span".into();
    };
    let ms = |q: f64| sum.value_at_quantile(q) as f64 / 1000.0;
    format!(
        "{:>10} {:>10.0} {:>8.2} {:>8.2} {:>8.2} {:>8.2}",
        sum.len(),
        sum.len() as f64 / seconds.max(1e-9),
        ms(0.5),
        ms(0.99),
        ms(0.999),
        sum.max() as f64 / 1000.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn interval(start_s: u64, latency_us: u64, count: u64) -> (Duration, Duration, Histogram<u64>) {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        h.record_n(latency_us, count).unwrap();
        (Duration::from_secs(start_s), Duration::from_secs(1), h)
    }

    #[test]
    fn phases_parse_and_mistakes_are_refused() {
        let phases = parse("before:0-10, move:10-22.5,after:22.5-40").unwrap();
        assert_eq!(phases.len(), 3);
        assert_eq!(phases[1].name, "move");
        assert_eq!((phases[1].from, phases[1].to), (10.0, 22.5));
        for bad in ["", "x", "x:1", "x:2-1", ":0-1", "x:a-2"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn each_phase_sums_the_intervals_ending_in_it() {
        // Seconds 100..110 at 1 ms, then 110..115 at 50 ms (the move).
        let mut intervals: Vec<_> = (100..110).map(|s| interval(s, 1_000, 100)).collect();
        intervals.extend((110..115).map(|s| interval(s, 50_000, 100)));
        let total = Histogram::new_from(&intervals[0].2);
        let run = Series {
            name: "r".into(),
            intervals,
            total,
        };
        let phases = parse("before:0-10,move:10-16,later:16-30").unwrap();
        let text = table(&[run], &phases);
        let lines: Vec<&str> = text.lines().collect();
        // Interval 100..101 ends at 1 s: before holds nine of them, move six.
        assert!(
            lines[1].contains(" 900 ") && lines[1].contains(" 1.00 "),
            "{text}"
        );
        assert!(
            lines[2].contains(" 600 ") && lines[2].contains(" 50.02 "),
            "{text}"
        );
        assert!(lines[3].ends_with("no messages in this span"), "{text}");
    }
}
