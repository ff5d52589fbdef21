//! Reading an interval log: each interval's histogram, and their sum.

use std::path::Path;
use std::time::Duration;

use base64::Engine;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

/// One run's log.
pub struct Series {
    /// Its name (the file's stem).
    pub name: String,
    /// (start since the log's base, length, histogram) per interval.
    pub intervals: Vec<(Duration, Duration, Histogram<u64>)>,
    /// Every interval added together.
    pub total: Histogram<u64>,
}

impl Series {
    /// Messages per second of each interval: (seconds since the first
    /// interval's start, rate).
    pub fn throughput(&self) -> Vec<(f64, f64)> {
        let origin = self.origin();
        self.intervals
            .iter()
            .map(|(start, length, h)| {
                (
                    (*start + *length).saturating_sub(origin).as_secs_f64(),
                    h.len() as f64 / length.as_secs_f64().max(1e-9),
                )
            })
            .collect()
    }

    /// When the first interval starts.
    pub fn origin(&self) -> Duration {
        self.intervals
            .first()
            .map_or(Duration::ZERO, |(start, _, _)| *start)
    }

    /// Messages per second over the whole log.
    pub fn mean_throughput(&self) -> f64 {
        let seconds: f64 = self.intervals.iter().map(|(_, l, _)| l.as_secs_f64()).sum();
        self.total.len() as f64 / seconds.max(1e-9)
    }
}

/// Parses a log's text.
pub fn parse(name: &str, bytes: &[u8]) -> Result<Series, String> {
    let mut deserializer = Deserializer::new();
    let mut intervals = Vec::new();
    let mut total: Option<Histogram<u64>> = None;
    for entry in IntervalLogIterator::new(bytes) {
        let entry = entry.map_err(|e| format!("{name}: {e:?}"))?;
        let LogEntry::Interval(interval) = entry else {
            continue;
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(interval.encoded_histogram())
            .map_err(|e| format!("{name}: {e}"))?;
        let histogram: Histogram<u64> = deserializer
            .deserialize(&mut raw.as_slice())
            .map_err(|e| format!("{name}: {e:?}"))?;
        match &mut total {
            Some(sum) => sum.add(&histogram).map_err(|e| format!("{name}: {e:?}"))?,
            None => {
                let mut sum = Histogram::new_from(&histogram);
                sum.add(&histogram).map_err(|e| format!("{name}: {e:?}"))?;
                total = Some(sum);
            }
        }
        intervals.push((interval.start_timestamp(), interval.duration(), histogram));
    }
    let total = total.ok_or_else(|| format!("{name}: no intervals"))?;
    Ok(Series {
        name: name.to_string(),
        intervals,
        total,
    })
}

/// Reads a log file; its name is the file's stem.
pub fn read(path: &Path) -> Result<Series, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let name = path
        .file_stem()
        .map_or("run".to_string(), |s| s.to_string_lossy().to_string());
    parse(&name, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
    use hdrhistogram::serialization::V2DeflateSerializer;

    #[test]
    fn a_written_log_reads_back_interval_by_interval() {
        let mut bytes = Vec::new();
        {
            let mut serializer = V2DeflateSerializer::new();
            let builder = IntervalLogWriterBuilder::new();
            let mut writer = builder.begin_log_with(&mut bytes, &mut serializer).unwrap();
            for second in 0..3u64 {
                let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
                for v in 0..(100 * (second + 1)) {
                    h.record(1000 + v).unwrap();
                }
                writer
                    .write_histogram(
                        &h,
                        Duration::from_secs(second + 2),
                        Duration::from_secs(1),
                        Tag::new("produce"),
                    )
                    .unwrap();
            }
        }
        let series = parse("run", &bytes).unwrap();
        assert_eq!(series.intervals.len(), 3);
        assert_eq!(series.total.len(), 600);
        assert_eq!(series.origin(), Duration::from_secs(2));
        let rates: Vec<f64> = series.throughput().iter().map(|(_, r)| *r).collect();
        assert_eq!(rates, vec![100.0, 200.0, 300.0]);
        assert_eq!(series.mean_throughput(), 200.0);
        assert!(parse("empty", b"#just a comment\n").is_err());
    }
}
