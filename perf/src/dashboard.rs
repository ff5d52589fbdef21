//! The dashboard: charts and a table of one or more runs' logs.

use std::fmt::Write as _;

use crate::chart::{line_chart, Axis, Line, PALETTE};
use crate::hlog::Series;

/// The deepest percentile charted: 99.999%, or less when a run has too
/// few values to say anything that deep.
const MAX_NINES: f64 = 5.0;

fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

fn color(i: usize) -> String {
    PALETTE[i % PALETTE.len()].to_string()
}

/// The shallowest percentile charted: the median (log10(2) nines).
const MIN_NINES: f64 = std::f64::consts::LOG10_2;

/// Latency by percentile, on a "nines" axis (50%, 90%, 99%, 99.9%, ...).
pub fn percentile_chart(series: &[Series]) -> String {
    let mut lines = Vec::new();
    let mut low = f64::MAX;
    let mut high: f64 = 0.0;
    let mut deepest: f64 = 1.0;
    for (i, s) in series.iter().enumerate() {
        let nines = (s.total.len() as f64).log10().clamp(1.0, MAX_NINES);
        deepest = deepest.max(nines);
        let mut points = Vec::new();
        let mut n = MIN_NINES;
        while n <= nines + 1e-9 {
            let q = 1.0 - 10f64.powf(-n);
            let v = ms(s.total.value_at_quantile(q)).max(0.001);
            low = low.min(v);
            high = high.max(v);
            points.push((n, v));
            n += 0.05;
        }
        lines.push(Line {
            name: s.name.clone(),
            points,
            color: color(i),
            dash: None,
        });
    }
    let mut ticks = vec![(MIN_NINES, "50%".to_string())];
    ticks.extend((1..=deepest.ceil() as i32).map(|n| {
        let label = format!("{}%", 100.0 - 100.0 * 10f64.powi(-n));
        (n as f64, label)
    }));
    let x = Axis {
        label: "percentile".into(),
        min: MIN_NINES,
        max: deepest.ceil(),
        log: false,
        ticks,
    };
    let y = Axis::log10("latency (ms)", low.max(0.001), high.max(0.01));
    line_chart("Latency by percentile", &x, &y, &lines)
}

/// p50, p99 and max of each interval, over time.
pub fn latency_over_time_chart(series: &[Series]) -> String {
    let mut lines = Vec::new();
    let mut low = f64::MAX;
    let mut high: f64 = 0.0;
    let mut end: f64 = 1.0;
    for (i, s) in series.iter().enumerate() {
        let origin = s.origin();
        for (label, q, dash) in [
            ("p50", Some(0.5), None),
            ("p99", Some(0.99), Some("6,3")),
            ("max", None, Some("2,2")),
        ] {
            let points: Vec<(f64, f64)> = s
                .intervals
                .iter()
                .filter(|(_, _, h)| !h.is_empty())
                .map(|(start, length, h)| {
                    let at = (*start + *length).saturating_sub(origin).as_secs_f64();
                    let v = match q {
                        Some(q) => h.value_at_quantile(q),
                        None => h.max(),
                    };
                    (at, ms(v).max(0.001))
                })
                .collect();
            for (at, v) in &points {
                low = low.min(*v);
                high = high.max(*v);
                end = end.max(*at);
            }
            lines.push(Line {
                name: format!("{} {label}", s.name),
                points,
                color: color(i),
                dash: dash.map(String::from),
            });
        }
    }
    let x = Axis::linear("seconds", 0.0, end);
    let y = Axis::log10("latency (ms)", low.max(0.001), high.max(0.01));
    line_chart("Latency over time (p50, p99, max)", &x, &y, &lines)
}

/// Messages per second of each interval, over time.
pub fn throughput_chart(series: &[Series]) -> String {
    let mut lines = Vec::new();
    let mut high: f64 = 1.0;
    let mut end: f64 = 1.0;
    for (i, s) in series.iter().enumerate() {
        let points = s.throughput();
        for (at, rate) in &points {
            high = high.max(*rate);
            end = end.max(*at);
        }
        lines.push(Line {
            name: s.name.clone(),
            points,
            color: color(i),
            dash: None,
        });
    }
    let x = Axis::linear("seconds", 0.0, end);
    let y = Axis::linear("messages per second", 0.0, high * 1.1);
    line_chart("Throughput over time", &x, &y, &lines)
}

/// The summary table.
pub fn table(series: &[Series]) -> String {
    let mut html = String::from(
        "<table>\n<tr><th>run</th><th>messages</th><th>msg/s</th><th>p50 ms</th><th>p90</th><th>p99</th><th>p99.9</th><th>p99.99</th><th>max</th></tr>\n",
    );
    for s in series {
        let h = &s.total;
        let q = |p: f64| format!("{:.3}", ms(h.value_at_percentile(p)));
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td></tr>",
            escape(&s.name),
            h.len(),
            s.mean_throughput(),
            q(50.0),
            q(90.0),
            q(99.0),
            q(99.9),
            q(99.99),
            ms(h.max())
        );
    }
    html.push_str("</table>\n");
    html
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The whole page: title, optional notes (already HTML), table, charts.
pub fn html(title: &str, notes: &str, series: &[Series]) -> String {
    format!(
        r#"<!doctype html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 24px; color: #222; }}
table {{ border-collapse: collapse; margin: 12px 0 24px; }}
td, th {{ border: 1px solid #ccc; padding: 4px 8px; text-align: right; }}
td:first-child, th:first-child {{ text-align: left; }}
.charts svg {{ display: block; margin-bottom: 18px; }}
</style></head>
<body>
<h1>{title}</h1>
{notes}
{table}
<div class="charts">
{percentiles}
{over_time}
{throughput}
</div>
</body></html>
"#,
        title = escape(title),
        notes = notes,
        table = table(series),
        percentiles = percentile_chart(series),
        over_time = latency_over_time_chart(series),
        throughput = throughput_chart(series),
    )
}
