//! What workers measure each second, and what the run reports: a line per
//! second, HdrHistogram interval logs and a JSON summary.
//!
//! Latencies are in microseconds (1 µs to 60 s, 3 significant digits).

use std::cell::RefCell;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::rc::Rc;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant, SystemTime};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;

/// A latency histogram in microseconds.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
}

/// One worker's counts and latencies over one interval.
#[derive(Debug, Clone)]
pub struct Interval {
    /// Messages acknowledged.
    pub produced: u64,
    /// Their value bytes.
    pub produced_bytes: u64,
    /// Messages that failed.
    pub errors: u64,
    /// Messages consumed.
    pub consumed: u64,
    /// Their value bytes.
    pub consumed_bytes: u64,
    /// Send (intended time) to acknowledgement.
    pub produce_latency: Histogram<u64>,
    /// Of that, paced runs only: the intended time to the start of
    /// building the request that carried the message (late, lingering,
    /// its partition's turn, room in flight, retries).
    pub produce_queued: Histogram<u64>,
    /// And the rest: that request's building, writing and round trip.
    pub produce_request: Histogram<u64>,
    /// Send (intended time) to consumption.
    pub e2e_latency: Histogram<u64>,
}

impl Default for Interval {
    fn default() -> Self {
        Interval {
            produced: 0,
            produced_bytes: 0,
            errors: 0,
            consumed: 0,
            consumed_bytes: 0,
            produce_latency: latency_histogram(),
            produce_queued: latency_histogram(),
            produce_request: latency_histogram(),
            e2e_latency: latency_histogram(),
        }
    }
}

impl Interval {
    /// Adds another interval's counts and latencies.
    pub fn merge(&mut self, other: &Interval) {
        self.produced += other.produced;
        self.produced_bytes += other.produced_bytes;
        self.errors += other.errors;
        self.consumed += other.consumed;
        self.consumed_bytes += other.consumed_bytes;
        // Same bounds on both sides: adding cannot fail.
        let _ = self.produce_latency.add(&other.produce_latency);
        let _ = self.produce_queued.add(&other.produce_queued);
        let _ = self.produce_request.add(&other.produce_request);
        let _ = self.e2e_latency.add(&other.e2e_latency);
    }
}

/// Records a latency, clamped into the histogram's range.
pub fn record(histogram: &mut Histogram<u64>, micros: u64) {
    let _ = histogram.record(micros.clamp(1, histogram.high()));
}

/// The percentiles reported.
pub const PERCENTILES: [f64; 5] = [50.0, 90.0, 99.0, 99.9, 99.99];

fn latency_line(h: &Histogram<u64>) -> String {
    if h.is_empty() {
        return "-".into();
    }
    let ms = |v: u64| v as f64 / 1000.0;
    format!(
        "p50 {:.2} p99 {:.2} p99.9 {:.2} max {:.2} ms",
        ms(h.value_at_quantile(0.5)),
        ms(h.value_at_quantile(0.99)),
        ms(h.value_at_quantile(0.999)),
        ms(h.max())
    )
}

/// The whole run: each second's merged interval, printed as it comes and
/// kept for the logs and the summary.
pub struct Run {
    started: SystemTime,
    warmup: Duration,
    /// Intervals starting at or after this (the producers' stop, and the
    /// drain after it) are printed but not measured.
    end: Duration,
    message_bytes: usize,
    /// (seconds since the start, the interval), warm-up included.
    intervals: Vec<(Duration, Duration, Interval)>,
    /// This process's CPU time (user + system) when the run began and as
    /// each interval was added: (interval end, CPU time).
    cpu_marks: Vec<(Duration, Duration)>,
}

impl Run {
    /// A run that began now, measured from `warmup` on for `duration`.
    pub fn new(warmup: Duration, duration: Duration, message_bytes: usize) -> Run {
        Run {
            started: SystemTime::now(),
            warmup,
            end: warmup + duration,
            message_bytes,
            intervals: Vec::new(),
            cpu_marks: vec![(Duration::ZERO, process_cpu())],
        }
    }

    /// Adds the interval `[start, start + length)` (since the run began)
    /// and prints its line.
    pub fn add(&mut self, start: Duration, length: Duration, interval: Interval) {
        let secs = length.as_secs_f64().max(1e-9);
        let warm = if start < self.warmup {
            " (warm-up)"
        } else if start >= self.end {
            " (drain)"
        } else {
            ""
        };
        let mut line = format!("{:>6.1}s", (start + length).as_secs_f64());
        if interval.produced > 0 || interval.errors > 0 {
            let _ = write!(
                line,
                " | produced {:>10.0} msg/s {:>8.1} MB/s {}",
                interval.produced as f64 / secs,
                interval.produced_bytes as f64 / secs / 1e6,
                latency_line(&interval.produce_latency)
            );
        }
        if interval.errors > 0 {
            let _ = write!(line, " errors {}", interval.errors);
        }
        if interval.consumed > 0 {
            let _ = write!(
                line,
                " | consumed {:>10.0} msg/s {:>8.1} MB/s e2e {}",
                interval.consumed as f64 / secs,
                interval.consumed_bytes as f64 / secs / 1e6,
                latency_line(&interval.e2e_latency)
            );
        }
        println!("{line}{warm}");
        self.intervals.push((start, length, interval));
        self.cpu_marks.push((start + length, process_cpu()));
    }

    fn counts(&self, start: Duration) -> bool {
        start >= self.warmup && start < self.end
    }

    /// The intervals after the warm-up, merged, and the time they span.
    pub fn measured(&self) -> (Interval, Duration) {
        let mut total = Interval::default();
        let mut span = Duration::ZERO;
        for (start, length, interval) in &self.intervals {
            if self.counts(*start) {
                total.merge(interval);
                span += *length;
            }
        }
        (total, span)
    }

    /// loadgen's own CPU seconds (user + system, all its threads) over the
    /// measured intervals: from the mark at the first one's start (the
    /// warm-up's last interval added, or the run's start) to the mark at
    /// the last one's end. Marks are taken as intervals are added, each a
    /// moment after its second ends.
    pub fn measured_cpu(&self) -> Option<Duration> {
        let counted: Vec<_> = (self.intervals.iter())
            .filter(|(start, ..)| self.counts(*start))
            .collect();
        let (first, last) = (counted.first()?, counted.last()?);
        let mark = |at: Duration| {
            self.cpu_marks
                .iter()
                .find(|(end, _)| *end == at)
                .map(|m| m.1)
        };
        Some(mark(last.0 + last.1)?.saturating_sub(mark(first.0)?))
    }

    /// Writes `DIR/NAME-produce.hlog` and `DIR/NAME-e2e.hlog` (the
    /// intervals after the warm-up that have data).
    pub fn write_logs(&self, dir: &Path, name: &str) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        for (suffix, pick) in [
            (
                "produce",
                (|i: &Interval| &i.produce_latency) as fn(&Interval) -> &Histogram<u64>,
            ),
            ("e2e", |i: &Interval| &i.e2e_latency),
        ] {
            let measured: Vec<_> = self
                .intervals
                .iter()
                .filter(|(start, _, i)| self.counts(*start) && !pick(i).is_empty())
                .collect();
            if measured.is_empty() {
                continue;
            }
            let mut file = std::fs::File::create(dir.join(format!("{name}-{suffix}.hlog")))?;
            let mut serializer = V2DeflateSerializer::new();
            let mut builder = IntervalLogWriterBuilder::new();
            builder
                .add_comment(&format!("loadgen {name}: {suffix} latency in microseconds"))
                .with_start_time(self.started)
                .with_base_time(self.started);
            let mut writer = builder
                .begin_log_with(&mut file, &mut serializer)
                .map_err(std::io::Error::other)?;
            let tag = Tag::new(suffix);
            for (start, length, interval) in measured {
                writer
                    .write_histogram(pick(interval), *start, *length, tag)
                    .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
            }
            drop(writer);
            file.flush()?;
        }
        Ok(())
    }

    /// The summary as JSON (written by hand: a flat object of numbers).
    pub fn summary_json(&self, name: &str, mode: &str, extra: &[(&str, String)]) -> String {
        let (total, span) = self.measured();
        let secs = span.as_secs_f64().max(1e-9);
        let mut json = String::from("{\n");
        let _ = writeln!(json, "  \"name\": \"{}\",", escape(name));
        let _ = writeln!(json, "  \"mode\": \"{}\",", escape(mode));
        let _ = writeln!(json, "  \"message_bytes\": {},", self.message_bytes);
        let _ = writeln!(json, "  \"measured_seconds\": {:.3},", secs);
        for (key, value) in extra {
            let _ = writeln!(json, "  \"{}\": {},", escape(key), value);
        }
        let cpu = self.measured_cpu().map(|c| c.as_secs_f64());
        let gb = (total.produced_bytes + total.consumed_bytes) as f64 / 1e9;
        let _ = writeln!(
            json,
            "  \"cpu_seconds\": {},",
            cpu.map_or("null".into(), |c| format!("{c:.3}"))
        );
        let _ = writeln!(
            json,
            "  \"cpu_s_per_gb\": {},",
            cpu.filter(|_| gb > 0.0)
                .map_or("null".into(), |c| format!("{:.3}", c / gb))
        );
        let _ = writeln!(json, "  \"produced\": {},", total.produced);
        let _ = writeln!(json, "  \"errors\": {},", total.errors);
        let _ = writeln!(
            json,
            "  \"produce_msgs_per_s\": {:.1},",
            total.produced as f64 / secs
        );
        let _ = writeln!(
            json,
            "  \"produce_mb_per_s\": {:.3},",
            total.produced_bytes as f64 / secs / 1e6
        );
        let _ = writeln!(json, "  \"consumed\": {},", total.consumed);
        let _ = writeln!(
            json,
            "  \"consume_msgs_per_s\": {:.1},",
            total.consumed as f64 / secs
        );
        let _ = writeln!(
            json,
            "  \"consume_mb_per_s\": {:.3},",
            total.consumed_bytes as f64 / secs / 1e6
        );
        let _ = writeln!(
            json,
            "  \"produce_latency_us\": {},",
            percentiles_json(&total.produce_latency)
        );
        let _ = writeln!(
            json,
            "  \"produce_queued_us\": {},",
            percentiles_json(&total.produce_queued)
        );
        let _ = writeln!(
            json,
            "  \"produce_request_us\": {},",
            percentiles_json(&total.produce_request)
        );
        let _ = writeln!(
            json,
            "  \"e2e_latency_us\": {}",
            percentiles_json(&total.e2e_latency)
        );
        json.push_str("}\n");
        json
    }
}

/// This process's CPU time so far, all threads, user and system.
fn process_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

fn percentiles_json(h: &Histogram<u64>) -> String {
    if h.is_empty() {
        return "null".into();
    }
    let mut parts: Vec<String> = PERCENTILES
        .iter()
        .map(|p| format!("\"p{}\": {}", p, h.value_at_percentile(*p)))
        .collect();
    parts.push(format!("\"max\": {}", h.max()));
    parts.push(format!("\"mean\": {:.1}", h.mean()));
    format!("{{{}}}", parts.join(", "))
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Sends the interval so far every second (aligned on `begin`); the
/// worker sends the rest when it is done ([`send_rest`]).
pub async fn report_every_second(
    current: Rc<RefCell<Interval>>,
    begin: Instant,
    reports: Sender<Interval>,
) {
    let mut tick = 1u32;
    loop {
        let at = begin + Duration::from_secs(tick as u64);
        let now = Instant::now();
        if at > now {
            glommio::timer::sleep(at - now).await;
        }
        let interval = std::mem::take(&mut *current.borrow_mut());
        if reports.send(interval).is_err() {
            return;
        }
        tick += 1;
    }
}

/// Sends whatever the worker measured since its last report.
pub fn send_rest(current: &Rc<RefCell<Interval>>, reports: &Sender<Interval>) {
    let rest = std::mem::take(&mut *current.borrow_mut());
    let _ = reports.send(rest);
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

    #[test]
    fn warm_up_is_left_out_and_the_logs_read_back() {
        let mut run = Run::new(Duration::from_secs(1), Duration::from_secs(2), 100);
        for second in 0..4u64 {
            let mut interval = Interval {
                produced: 1000,
                produced_bytes: 100_000,
                ..Interval::default()
            };
            for v in 1..=1000 {
                record(&mut interval.produce_latency, v * (second + 1));
            }
            run.add(
                Duration::from_secs(second),
                Duration::from_secs(1),
                interval,
            );
        }
        let (total, span) = run.measured();
        assert_eq!(span, Duration::from_secs(2));
        assert_eq!(total.produced, 2000);
        assert_eq!(total.produce_latency.len(), 2000);
        let json = run.summary_json("t", "produce", &[]);
        assert!(json.contains("\"produce_msgs_per_s\": 1000.0"), "{json}");
        let dir = std::env::temp_dir().join(format!("loadgen-test-{}", std::process::id()));
        run.write_logs(&dir, "t").unwrap();
        let bytes = std::fs::read(dir.join("t-produce.hlog")).unwrap();
        let intervals: Vec<_> = IntervalLogIterator::new(&bytes)
            .filter_map(|e| match e.unwrap() {
                LogEntry::Interval(i) => Some(i.start_timestamp()),
                _ => None,
            })
            .collect();
        assert_eq!(
            intervals,
            vec![Duration::from_secs(1), Duration::from_secs(2)]
        );
        assert!(!dir.join("t-e2e.hlog").exists(), "no e2e data, no e2e log");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn cpu_is_counted_over_the_measured_intervals_only() {
        // Burns `ms` of this process's CPU time (not wall time: a busy
        // machine must not make it burn less).
        let burn = |ms: u64| {
            let until = process_cpu() + Duration::from_millis(ms);
            let mut x = 0u64;
            while process_cpu() < until {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        };
        let second = |s: u64| Duration::from_secs(s);
        let mut run = Run::new(second(1), second(1), 100);
        burn(200); // the warm-up's
        run.add(second(0), second(1), Interval::default());
        burn(100); // the measured second's
        run.add(second(1), second(1), Interval::default());
        burn(200); // the drain's
        run.add(second(2), second(1), Interval::default());
        let cpu = run.measured_cpu().expect("a measured interval");
        assert!(cpu >= Duration::from_millis(100), "{cpu:?}");
        assert!(
            cpu < Duration::from_millis(190),
            "{cpu:?}: warm-up or drain counted"
        );
        let json = run.summary_json("t", "produce", &[]);
        assert!(json.contains("\"cpu_seconds\": 0.1"), "{json}");
        assert!(json.contains("\"cpu_s_per_gb\": null"), "no bytes: {json}");
    }
}
