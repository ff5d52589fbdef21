//! Line charts as inline SVG, with linear or log-10 axes.

use std::fmt::Write as _;

/// An axis: its range (in data units), scale and labelled ticks.
#[derive(Debug, Clone)]
pub struct Axis {
    /// Shown beside the axis.
    pub label: String,
    /// Lowest value shown.
    pub min: f64,
    /// Highest value shown.
    pub max: f64,
    /// Log-10 scale (min must then be positive).
    pub log: bool,
    /// (value, label) of each tick.
    pub ticks: Vec<(f64, String)>,
}

impl Axis {
    /// A linear axis over `[min, max]` with about five round ticks.
    pub fn linear(label: &str, min: f64, max: f64) -> Axis {
        let max = if max > min { max } else { min + 1.0 };
        let raw = (max - min) / 5.0;
        let magnitude = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * magnitude)
            .find(|s| *s >= raw)
            .unwrap_or(raw);
        let mut ticks = Vec::new();
        let mut v = (min / step).ceil() * step;
        while v <= max + step * 1e-9 {
            ticks.push((v, short(v)));
            v += step;
        }
        Axis {
            label: label.to_string(),
            min,
            max,
            log: false,
            ticks,
        }
    }

    /// A log-10 axis covering `[min, max]` (widened to powers of ten).
    pub fn log10(label: &str, min: f64, max: f64) -> Axis {
        let low = min.max(1e-9).log10().floor() as i32;
        let high = max.max(min * 10.0).log10().ceil() as i32;
        let ticks = (low..=high)
            .map(|e| (10f64.powi(e), short(10f64.powi(e))))
            .collect();
        Axis {
            label: label.to_string(),
            min: 10f64.powi(low),
            max: 10f64.powi(high.max(low + 1)),
            log: true,
            ticks,
        }
    }

    /// Where `v` falls, from 0 (min) to 1 (max).
    fn fraction(&self, v: f64) -> f64 {
        let f = if self.log {
            (v.max(self.min).log10() - self.min.log10()) / (self.max.log10() - self.min.log10())
        } else {
            (v - self.min) / (self.max - self.min)
        };
        f.clamp(0.0, 1.0)
    }
}

/// A number as a short label.
pub fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e3 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Line {
    /// Its legend.
    pub name: String,
    /// (x, y) in data units.
    pub points: Vec<(f64, f64)>,
    /// Stroke colour.
    pub color: String,
    /// Stroke dash pattern, if dashed.
    pub dash: Option<String>,
}

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 360.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 90.0;

/// Colours for runs, in order.
pub const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// An SVG line chart.
pub fn line_chart(title: &str, x: &Axis, y: &Axis, lines: &[Line]) -> String {
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let px = |v: f64| LEFT + x.fraction(v) * plot_w;
    let py = |v: f64| TOP + (1.0 - y.fraction(v)) * plot_h;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="20" font-size="14" font-weight="bold">{}</text>"#,
        LEFT,
        escape(title)
    );
    // Grid and ticks.
    for (v, label) in &x.ticks {
        let p = px(*v);
        let _ = writeln!(
            svg,
            r##"<line x1="{p:.1}" y1="{TOP}" x2="{p:.1}" y2="{:.1}" stroke="#ddd"/><text x="{p:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + plot_h,
            TOP + plot_h + 15.0,
            escape(label)
        );
    }
    for (v, label) in &y.ticks {
        let p = py(*v);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{p:.1}" x2="{:.1}" y2="{p:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 5.0,
            p + 4.0,
            escape(label)
        );
    }
    let _ = writeln!(
        svg,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888"/>"##
    );
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        TOP + plot_h + 32.0,
        escape(&x.label)
    );
    let _ = writeln!(
        svg,
        r#"<text x="14" y="{:.1}" text-anchor="middle" transform="rotate(-90 14 {:.1})">{}</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        escape(&y.label)
    );
    // Lines and legend.
    for (i, line) in lines.iter().enumerate() {
        let points: Vec<String> = line
            .points
            .iter()
            .filter(|(a, b)| a.is_finite() && b.is_finite())
            .map(|(a, b)| format!("{:.1},{:.1}", px(*a), py(*b)))
            .collect();
        let dash = line
            .dash
            .as_ref()
            .map(|d| format!(r#" stroke-dasharray="{d}""#))
            .unwrap_or_default();
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.6"{dash} points="{}"/>"#,
            line.color,
            points.join(" ")
        );
        let column = (i % 3) as f64;
        let row = (i / 3) as f64;
        let lx = LEFT + column * 230.0;
        let ly = TOP + plot_h + 50.0 + row * 14.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"#,
            ly - 4.0,
            lx + 22.0,
            ly - 4.0,
            line.color,
            lx + 27.0,
            ly,
            escape(&line.name)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_place_values_and_label_ticks() {
        let log = Axis::log10("ms", 0.3, 250.0);
        assert_eq!((log.min, log.max), (0.1, 1000.0));
        assert!((log.fraction(10.0) - 2.0 / 4.0).abs() < 1e-9);
        let linear = Axis::linear("msg/s", 0.0, 1_040_000.0);
        assert_eq!(linear.ticks.first().unwrap().1, "0");
        assert!(
            linear.ticks.iter().any(|(_, l)| l == "1M"),
            "{:?}",
            linear.ticks
        );
        assert_eq!(short(1_500.0), "1.5k");
        let svg = line_chart(
            "t <1>",
            &linear,
            &log,
            &[Line {
                name: "a".into(),
                points: vec![(0.0, 1.0), (1e6, 100.0)],
                color: PALETTE[0].into(),
                dash: None,
            }],
        );
        assert!(svg.starts_with("<svg") && svg.contains("polyline") && svg.contains("t &lt;1&gt;"));
    }
}
