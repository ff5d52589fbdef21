//! The `broker` binary. `broker` alone is `broker serve`; `broker topic ...`
//! and `broker cluster ...` are the admin subcommands (see `admin_cli`);
//! `broker dump-log DIR` prints a stopped partition's batches, `broker
//! dump-metadata DIR` a stopped broker's metadata directory.
//! SIGTERM stops the server cleanly (exit 0).

use broker::config::{BrokerConfig, CommandLine};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args
        .first()
        .is_some_and(|a| a == "--help" || a == "-h" || a == "help")
    {
        println!("{}", broker::admin_cli::USAGE);
        return;
    }
    if args.first().is_some_and(|a| {
        matches!(
            a.as_str(),
            "topic" | "cluster" | "group" | "dump-log" | "dump-metadata"
        )
    }) {
        init_logging(false);
    }
    if args
        .first()
        .is_some_and(|a| a == "topic" || a == "cluster" || a == "group")
    {
        let outcome = broker::admin_cli::parse(&args)
            .and_then(|(command, brokers)| broker::admin_cli::run(command, &brokers));
        match outcome {
            Ok(out) => print!("{out}"),
            Err(e) => {
                eprintln!("broker: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    if args.first().is_some_and(|a| a == "dump-log") {
        let Some(dir) = args.get(1) else {
            eprintln!("broker: usage: broker dump-log PARTITION_DIR");
            std::process::exit(2);
        };
        match broker::dump_log::run(dir.into()) {
            Ok(out) => print!("{out}"),
            Err(e) => {
                eprintln!("broker: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    if args.first().is_some_and(|a| a == "dump-metadata") {
        let Some(dir) = args.get(1) else {
            eprintln!("broker: usage: broker dump-metadata METADATA_DIR");
            std::process::exit(2);
        };
        match broker::dump_metadata::run(dir.into()) {
            Ok(out) => print!("{out}"),
            Err(e) => {
                eprintln!("broker: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    if args.first().is_some_and(|a| a == "serve") {
        args.remove(0);
    }
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
