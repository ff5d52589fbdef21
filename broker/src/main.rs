//! The `broker` binary: `broker` alone is `broker serve`; the other
//! subcommands (`broker --help`, and `--help` on each) are in `cli`.
//! SIGTERM stops the server cleanly (exit 0).

use broker::cli::{Action, Cli};
use broker::config::{BrokerConfig, CommandLine};
use clap::Parser;

fn main() {
    // A usage error exits 2 with clap's message (naming the flag);
    // --help and --version print to stdout and exit 0.
    let cli = Cli::parse();
    let serving = matches!(cli.command, None | Some(broker::cli::Command::Serve(_)));
    if !serving {
        init_logging(false);
    }
    match cli.action() {
        Action::Serve(line) => serve(line),
        Action::Print(outcome) => print_or_exit(outcome),
    }
}

/// Loads the configuration from the command line, the file and the
/// environment, and runs the broker until it stops.
fn serve(line: CommandLine) {
    let config = match BrokerConfig::load(&line) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("broker: {e}");
            std::process::exit(2);
        }
    };
    init_logging(config.log_format == "json");
    std::process::exit(broker::process::serve(config));
}

/// Prints a subcommand's output, or its failure in words with its exit
/// status (1 refused, 3 unreachable: `cli::failure`).
fn print_or_exit(outcome: Result<String, broker::cli::failure::Failure>) {
    match outcome {
        Ok(out) => print!("{out}"),
        Err(failure) => {
            eprintln!("broker: {}", failure.message);
            std::process::exit(failure.exit_code);
        }
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (default info). As `json`
/// (`log_format`), one JSON object per line, and every span's close as an
/// event with its busy and idle time: the produce spans
/// (`RUST_LOG=info,broker::server::handlers::produce=debug`) become traces
/// any log pipeline can ship (docs/operations.md, "Traces").
fn init_logging(json: bool) {
    use tracing_subscriber::fmt::format::FmtSpan;
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder
            .json()
            .with_span_events(FmtSpan::CLOSE)
            .with_current_span(true)
            .with_span_list(true)
            .init();
    } else {
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
    }
}
