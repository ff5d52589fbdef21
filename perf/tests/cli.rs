//! The built `perf` binary's command line, run as scripts/bench.sh runs it:
//! help, mistakes refused with status 2 and named, `--completion SHELL`,
//! and a dashboard (with its notes) and a chart written from a log.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;

/// Runs perf with `args`.
fn perf(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_perf"))
        .args(args)
        .output()
        .expect("the perf binary runs")
}

/// Its stdout and stderr, as text.
fn text(out: &Output) -> (String, String) {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (stdout, stderr)
}

/// Writes a three-second interval log, as loadgen does.
fn write_log(path: &Path) {
    let mut bytes = Vec::new();
    {
        let mut serializer = V2DeflateSerializer::new();
        let builder = IntervalLogWriterBuilder::new();
        let mut writer = builder.begin_log_with(&mut bytes, &mut serializer).unwrap();
        for second in 0..3u64 {
            let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
            for v in 0..100 {
                h.record(1000 + v).unwrap();
            }
            writer
                .write_histogram(
                    &h,
                    Duration::from_secs(second),
                    Duration::from_secs(1),
                    Tag::new("produce"),
                )
                .unwrap();
        }
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn help_exits_0_with_the_usage_the_flags_and_examples() {
    let out = perf(&["--help"]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let wanted = [
        "Usage",
        "--title",
        "--notes",
        "--svg",
        "--out",
        "--completion",
        "Examples",
    ];
    for expected in wanted {
        assert!(stdout.contains(expected), "{expected}\n{stdout}");
    }
}

#[test]
fn mistakes_exit_2_and_name_what_is_wrong() {
    let out = perf(&["--bogus", "--out", "d.html", "a.hlog"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr.contains("--bogus"), "{stderr}");
    let out = perf(&["a.hlog"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr.contains("--out"), "{stderr}");
}

#[test]
fn version_exits_0_with_the_version() {
    let out = perf(&["--version"]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout.contains(env!("CARGO_PKG_VERSION")), "{stdout}");
}

#[test]
fn completion_prints_a_script() {
    let out = perf(&["--completion", "bash"]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout.contains("complete"), "{stdout}");
    assert!(stdout.contains("--out"), "{stdout}");
}

#[test]
fn a_log_becomes_a_dashboard_with_its_notes_and_a_chart() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("perf-cli");
    std::fs::create_dir_all(&dir).unwrap();
    let (log, notes) = (dir.join("A-produce.hlog"), dir.join("notes.html"));
    write_log(&log);
    std::fs::write(&notes, "<p>the notes</p>").unwrap();
    let (html, svg) = (dir.join("dashboard.html"), dir.join("percentiles.svg"));
    let out = Command::new(env!("CARGO_BIN_EXE_perf"))
        .args(["--title", "CLI test", "--notes"])
        .arg(notes)
        .arg("--out")
        .arg(&html)
        .arg("--svg")
        .arg(&svg)
        .arg(log)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let page = std::fs::read_to_string(html).unwrap();
    for expected in ["<h1>CLI test</h1>", "<p>the notes</p>", "A-produce"] {
        assert!(page.contains(expected), "{expected}\n{page}");
    }
    let chart = std::fs::read_to_string(svg).unwrap();
    assert!(chart.starts_with("<svg"), "{chart}");
}
