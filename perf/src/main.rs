//! `perf [--title T] [--notes FILE] [--svg FILE] --out FILE LOG...`: see
//! `perf --help`.
//!
//! Writes one HTML file (inline SVG, no scripts, nothing fetched) with the
//! runs' summary table, latency by percentile, latency over time and
//! throughput over time; `--svg` also writes the percentile chart alone
//! (for docs). `--completion SHELL` prints a shell completion script
//! instead: a flag, not a `completion` subcommand, because perf's other
//! arguments are file names (a subcommand would take a log named
//! `completion` for itself, and make `--out` required only sometimes).
//! A flag given twice takes its last value (`args_override_self`), as with
//! the hand-written parser this replaced.

use std::path::{Path, PathBuf};

use clap::{CommandFactory, Parser};
use clap_complete::Shell;

const EXAMPLES: &str = "Examples:
  perf --title Benchmarks --out dashboard.html --svg percentiles.svg results/mine/*.hlog
  perf --completion bash > ~/.local/share/bash-completion/completions/perf";

/// Draws loadgen's HdrHistogram interval logs as one self-contained HTML
/// dashboard: summary table, latency by percentile, latency and throughput
/// over time, several runs side by side.
#[derive(Debug, Parser)]
#[command(name = "perf", version, args_override_self = true)]
#[command(after_help = EXAMPLES)]
struct Cli {
    /// The dashboard's title.
    #[arg(long, value_name = "T", default_value = "loadgen runs")]
    title: String,
    /// An HTML fragment put under the title.
    #[arg(long, value_name = "FILE.html")]
    notes: Option<PathBuf>,
    /// Also write the latency-by-percentile chart alone, as SVG (for docs).
    #[arg(long, value_name = "FILE.svg")]
    svg: Option<PathBuf>,
    /// The dashboard to write.
    #[arg(long, value_name = "FILE.html", required = true)]
    out: Option<PathBuf>,
    /// Also print each log's latency in these spans of the run, as
    /// name:from-to in seconds since its first interval, separated by
    /// commas (e.g. before:0-10,move:10-25,after:25-40).
    #[arg(long, value_name = "SPANS")]
    phases: Option<String>,
    /// Interval logs as loadgen writes them (NAME-produce.hlog, NAME-e2e.hlog), one run each.
    #[arg(value_name = "LOG.hlog", required = true)]
    logs: Vec<PathBuf>,
    /// Print a completion script for SHELL to stdout, and nothing else.
    #[arg(long, value_name = "SHELL", exclusive = true)]
    completion: Option<Shell>,
}

fn main() {
    // clap prints --help and --version to stdout and exits 0, and a mistake
    // to stderr with the usage, exiting 2.
    let cli = Cli::parse();
    if let Some(shell) = cli.completion {
        let mut command = Cli::command();
        clap_complete::generate(shell, &mut command, "perf", &mut std::io::stdout());
        return;
    }
    if let Err(message) = run(cli) {
        eprintln!("perf: {message}");
        std::process::exit(1);
    }
}

/// Reads the logs and writes the dashboard (and the chart, with `--svg`).
fn run(cli: Cli) -> Result<(), String> {
    // clap requires --out unless --completion, which main has handled.
    let out = cli.out.ok_or("--out is required")?;
    let notes = read_notes(cli.notes.as_deref())?;
    let phases = cli.phases.as_deref().map(perf::phases::parse).transpose()?;
    let series = cli
        .logs
        .iter()
        .map(|path| perf::hlog::read(path))
        .collect::<Result<Vec<_>, _>>()?;
    std::fs::write(&out, perf::dashboard::html(&cli.title, &notes, &series))
        .map_err(|e| format!("{}: {e}", out.display()))?;
    if let Some(svg) = cli.svg {
        std::fs::write(&svg, perf::dashboard::percentile_chart(&series))
            .map_err(|e| format!("{}: {e}", svg.display()))?;
    }
    if let Some(phases) = phases {
        print!("{}", perf::phases::table(&series, &phases));
    }
    println!("wrote {} ({} runs)", out.display(), series.len());
    Ok(())
}

/// The notes file's HTML; none without `--notes`.
fn read_notes(path: Option<&Path>) -> Result<String, String> {
    let Some(path) = path else {
        return Ok(String::new());
    };
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("perf").chain(args.iter().copied()))
    }

    #[test]
    fn the_flags_parse_as_bench_sh_gives_them() {
        let cli = parse(&["--title", "T", "--out", "o", "--svg", "s", "a", "b"]).unwrap();
        assert_eq!(cli.title, "T");
        assert_eq!(cli.out, Some(PathBuf::from("o")));
        assert_eq!(cli.svg, Some(PathBuf::from("s")));
        assert_eq!(cli.logs, [PathBuf::from("a"), PathBuf::from("b")]);
        assert!(cli.notes.is_none() && cli.completion.is_none() && cli.phases.is_none());
        let defaults = parse(&["--out", "o", "a"]).unwrap();
        assert_eq!(defaults.title, "loadgen runs");
        // As before clap, a flag given twice takes its last value.
        let twice = parse(&["--out", "o", "--out", "p", "a"]).unwrap();
        assert_eq!(twice.out, Some(PathBuf::from("p")));
    }

    #[test]
    fn mistakes_and_help_are_errors_of_their_kind() {
        let kind = |args: &[&str]| parse(args).unwrap_err().kind();
        // --out and at least one log, unless --completion (which is alone).
        assert_eq!(kind(&["a"]), ErrorKind::MissingRequiredArgument);
        assert_eq!(kind(&["--out", "o"]), ErrorKind::MissingRequiredArgument);
        let alone = kind(&["--completion", "bash", "a"]);
        assert_eq!(alone, ErrorKind::ArgumentConflict);
        assert_eq!(kind(&["--bogus", "a"]), ErrorKind::UnknownArgument);
        assert_eq!(kind(&["--help"]), ErrorKind::DisplayHelp);
        let completion = parse(&["--completion", "bash"]).unwrap();
        assert_eq!(completion.completion, Some(Shell::Bash));
    }

    #[test]
    fn the_command_line_passes_clap_own_checks() {
        Cli::command().debug_assert();
    }
}
