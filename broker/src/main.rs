//! The `broker` binary. `broker` alone is `broker serve`; `broker topic ...`
//! and `broker cluster ...` are the admin subcommands (see `admin_cli`);
//! `broker dump-log DIR` prints a stopped partition's batches, `broker
//! dump-metadata DIR` a stopped broker's metadata directory.
//! SIGTERM stops the server cleanly (exit 0).

use broker::config::{BrokerConfig, CommandLine};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let command = args.first().cloned().unwrap_or_default();
    match command.as_str() {
        "--help" | "-h" | "help" => println!("{}", broker::admin_cli::USAGE),
        "topic" | "cluster" | "group" | "user" | "acl" | "quota" => {
            init_logging(false);
            let outcome = broker::admin_cli::parse_target(&args)
                .and_then(|(command, target)| broker::admin_cli::run(command, &target));
            print_or_exit(outcome);
        }
        "dump-log" => {
            init_logging(false);
            let dir = arg_or_usage(&args, "broker dump-log PARTITION_DIR");
            print_or_exit(broker::dump_log::run(dir.into()));
        }
        "dump-metadata" => {
            init_logging(false);
            let dir = arg_or_usage(&args, "broker dump-metadata METADATA_DIR");
            print_or_exit(broker::dump_metadata::run(dir.into()));
        }
        _ => {
            if command == "serve" {
                args.remove(0);
            }
            serve(args);
        }
    }
}

/// Loads the configuration from the command line, the file and the
/// environment, and runs the broker until it stops.
fn serve(args: Vec<String>) {
    let config = match CommandLine::parse(args).and_then(|line| BrokerConfig::load(&line)) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("broker: {e}");
            std::process::exit(2);
        }
    };
    init_logging(config.log_format == "json");
    std::process::exit(broker::process::serve(config));
}

/// The subcommand's one argument, or its usage and exit status 2.
fn arg_or_usage<'a>(args: &'a [String], usage: &str) -> &'a str {
    match args.get(1) {
        Some(arg) => arg,
        None => {
            eprintln!("broker: usage: {usage}");
            std::process::exit(2);
        }
    }
}

/// Prints a subcommand's output, or its error and exit status 1.
fn print_or_exit<E: std::fmt::Display>(outcome: Result<String, E>) {
    match outcome {
        Ok(out) => print!("{out}"),
        Err(e) => {
            eprintln!("broker: {e}");
            std::process::exit(1);
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
