//! The `broker` binary: `broker` alone is `broker serve`; the other
//! subcommands (`broker --help`, and `--help` on each) are in `cli`.
//! SIGTERM stops the server cleanly (exit 0).

use broker::cli::{Action, Cli};
use broker::config::{BrokerConfig, CommandLine};
use broker::traces::OtlpSettings;
use clap::Parser;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    client::allocator::configure();
    // A usage error exits 2 with clap's message (naming the flag);
    // --help and --version print to stdout and exit 0.
    let cli = Cli::parse();
    let serving = matches!(cli.command, None | Some(broker::cli::Command::Serve(_)));
    if !serving {
        let _ = init_logging(false, None);
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
    let otlp = config
        .otlp_endpoint
        .as_deref()
        .map(|endpoint| OtlpSettings {
            endpoint,
            protocol: &config.otlp_protocol,
            sample_ratio: config.otlp_sample_ratio,
            node_id: config.node_id,
        });
    let traces = match init_logging(config.log_format == "json", otlp) {
        Ok(traces) => traces,
        Err(e) => {
            eprintln!("broker: {e}");
            std::process::exit(2);
        }
    };
    let code = broker::process::serve(config);
    // The spans still batched go out before the process ends.
    if let Some(provider) = traces {
        let _ = provider.shutdown();
    }
    std::process::exit(code);
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
/// any log pipeline can ship (docs/operations.md, "Traces"). With `otlp`,
/// the produce and fetch spans are also exported over OTLP (whatever
/// `RUST_LOG` says): the provider returned flushes them at the end.
fn init_logging(
    json: bool,
    otlp: Option<OtlpSettings<'_>>,
) -> Result<Option<opentelemetry_sdk::trace::SdkTracerProvider>, String> {
    use tracing_subscriber::fmt::format::FmtSpan;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{Layer, Registry};
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let lines: Box<dyn Layer<Registry> + Send + Sync> = if json {
        let json = lines
            .json()
            .with_span_events(FmtSpan::CLOSE)
            .with_current_span(true)
            .with_span_list(true);
        Box::new(json.with_filter(filter))
    } else {
        let text = lines.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
        Box::new(text.with_filter(filter))
    };
    let mut layers = vec![lines];
    let provider = match otlp {
        Some(settings) => {
            let (exported, provider) = broker::traces::layer(&settings)?;
            layers.push(exported);
            Some(provider)
        }
        None => None,
    };
    tracing_subscriber::registry().with(layers).init();
    Ok(provider)
}
