//! `loadgen MODE [OPTIONS]`: the command line is `loadgen::options::Cli`
//! (`loadgen --help`, `loadgen MODE --help`).

use clap::Parser;
use loadgen::baseline;
use loadgen::options::{self, Cli, CliCommand, Mode};
use loadgen::run::run_load;
use loadgen::send_modes::{self, SendMode};
use loadgen::{disk_ceiling, disk_floor};
use std::time::Duration;

// The producers allocate each batch's buffers and free them once
// acknowledged, all the time: with glibc's allocator, malloc and free were
// about 43% of loadgen's samples at 1,000 partitions (docs/benchmarks.md,
// run 41), CPU that a broker on the same machine then lacks. Its options:
// `client::allocator`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // loadgen keeps what it freed: memory handed back and faulted in again
    // mid-run is CPU taken from the run, and on some VMs a stall of seconds
    // (loadgen::prefault says why).
    client::allocator::configure_purge_delay(client::allocator::NEVER_PURGE);
    // clap prints --help and --version to stdout and exits 0, and a mistake
    // to stderr with the usage, exiting 2.
    let options = match Cli::parse().command {
        CliCommand::Run(run) => run.into_options(),
        CliCommand::Completion { shell } => {
            options::write_completion(shell, &mut std::io::stdout());
            return;
        }
    };
    let outcome = match options.mode {
        Mode::TcpBaseline => tcp_baseline(options.duration),
        Mode::DiskBaseline => baseline::disk_sequential(&options.dir, options.duration)
            .and_then(|(write, read)| {
                println!(
                    "raw O_DIRECT sequential write under {}: {:.0} MB/s",
                    options.dir.display(),
                    write / 1e6
                );
                println!(
                    "raw O_DIRECT sequential read of it: {:.0} MB/s",
                    read / 1e6
                );
                let (p50, p99, p999, max) =
                    baseline::disk_sync_latency(&options.dir, Duration::from_secs(2))?;
                println!(
                    "raw 4 KiB O_DIRECT write + fdatasync latency: p50 {:.2} p99 {:.2} p99.9 {:.2} max {:.2} ms",
                    p50 as f64 / 1000.0,
                    p99 as f64 / 1000.0,
                    p999 as f64 / 1000.0,
                    max as f64 / 1000.0
                );
                Ok(())
            })
            .map_err(|e| e.to_string()),
        Mode::DiskFloor => disk_floor(&options),
        Mode::DiskCeiling => print_disk_ceiling(&options),
        Mode::SendModes => compare_send_modes(options.duration),
        _ => run_load(options).map(drop),
    };
    if let Err(message) = outcome {
        eprintln!("loadgen: {message}");
        std::process::exit(1);
    }
}

/// Prints loopback TCP's rate and its sender's CPU per GB. Loopback on a
/// small VM varies run to run: the best rate of three, and the least CPU
/// per GB of the three (each is the floor it measures).
fn tcp_baseline(duration: Duration) -> Result<(), String> {
    let all = (0..3)
        .map(|_| baseline::tcp_loopback(duration / 3))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let best = all.iter().map(|s| s.bytes_per_s).fold(0.0, f64::max);
    let least = all
        .iter()
        .map(|s| s.sender_cpu_s_per_gb)
        .fold(f64::INFINITY, f64::min);
    let rates: Vec<String> = all
        .iter()
        .map(|s| format!("{:.0}", s.bytes_per_s / 1e6))
        .collect();
    let costs: Vec<String> = all
        .iter()
        .map(|s| format!("{:.3}", s.sender_cpu_s_per_gb))
        .collect();
    println!(
        "loopback TCP, one stream: {:.0} MB/s (best of {} MB/s)",
        best / 1e6,
        rates.join(", ")
    );
    println!(
        "loopback TCP sender CPU: {least:.3} s per GB sent (least of {} s; the floor under a broker's CPU per consumed GB)",
        costs.join(", ")
    );
    Ok(())
}

/// Prints the disk's own latency under the options' rate (see `disk_floor`).
fn disk_floor(options: &options::Options) -> Result<(), String> {
    let rate = options.rate.ok_or("disk-floor needs --rate")?;
    let load = disk_floor::Load {
        messages_per_s: rate as f64,
        message_bytes: options.message_bytes,
        writers: options.partitions.max(1) as usize,
        duration: options.duration,
    };
    let floor = disk_floor::measure(&options.dir, load).map_err(|e| e.to_string())?;
    println!(
        "disk floor, {rate} msg/s of {} B group-committed to {} files for {} s: \
         message {}; flush (O_DIRECT write + fdatasync) {}, {} flushes",
        load.message_bytes,
        load.writers,
        load.duration.as_secs(),
        percentiles(&floor.message_latency),
        percentiles(&floor.flush_latency),
        floor.flushes
    );
    Ok(())
}

/// Prints the disk's ceiling under one partition's appends (see
/// `disk_ceiling`): for each flush size, into new and into written blocks.
fn print_disk_ceiling(options: &options::Options) -> Result<(), String> {
    use disk_ceiling::Blocks;
    const MIB: u64 = 1 << 20;
    // New files as large as the broker's segments; the written file,
    // written whole before each of its measures (not timed), smaller.
    const NEW_FILE_BYTES: u64 = 1 << 30;
    const WRITTEN_FILE_BYTES: u64 = 256 * MIB;
    let sizes = [MIB, 4 * MIB, 16 * MIB];
    let each = options.duration / (2 * sizes.len() as u32);
    println!(
        "disk ceiling under {} (direct writes of at most 1 MiB issued together, then fdatasync; \
         new blocks: 1 GiB files; written blocks: a 256 MiB file written first; \
         no broker), {:.1} s each:",
        options.dir.display(),
        each.as_secs_f64()
    );
    for flush_bytes in sizes {
        let mut row = format!("  {:>2} MiB per flush:", flush_bytes / MIB);
        for (blocks, name) in [
            (Blocks::New, "new blocks"),
            (Blocks::Written, "written blocks"),
        ] {
            let shape = disk_ceiling::Shape {
                flush_bytes,
                file_bytes: match blocks {
                    Blocks::New => NEW_FILE_BYTES,
                    Blocks::Written => WRITTEN_FILE_BYTES,
                },
                blocks,
                duration: each,
                most_flushes: u64::MAX,
            };
            let c = disk_ceiling::measure(&options.dir, shape).map_err(|e| e.to_string())?;
            row += &format!(
                " {name} {:.0} MB/s (write {:.2} + fdatasync {:.2} ms, {} flushes);",
                c.bytes_per_s / 1e6,
                c.mean_write.as_secs_f64() * 1e3,
                c.mean_sync.as_secs_f64() * 1e3,
                c.flushes
            );
        }
        println!("{}", row.trim_end_matches(';'));
    }
    Ok(())
}

/// "p50 .. p99 .. p99.9 .. max .. ms" of a histogram in microseconds.
fn percentiles(h: &hdrhistogram::Histogram<u64>) -> String {
    let ms = |us: u64| us as f64 / 1000.0;
    format!(
        "p50 {:.2} p99 {:.2} p99.9 {:.2} max {:.2} ms",
        ms(h.value_at_quantile(0.5)),
        ms(h.value_at_quantile(0.99)),
        ms(h.value_at_quantile(0.999)),
        ms(h.max())
    )
}

/// Loopback TCP sent three ways, alternating for three rounds within
/// `duration` (this VM's loopback varies minute to minute, so the modes
/// take turns rather than run one after another).
fn compare_send_modes(duration: Duration) -> Result<(), String> {
    const ROUNDS: u32 = 3;
    let each = duration / (ROUNDS * SendMode::ALL.len() as u32);
    for round in 1..=ROUNDS {
        for mode in SendMode::ALL {
            let figures =
                send_modes::measure(mode, each).map_err(|e| format!("{}: {e}", mode.name()))?;
            let (sender, receiver) = figures.cpu_per_gb();
            let copied = if mode == SendMode::UringSendZc {
                format!(
                    "; {} of {} zero-copy sends copied by the kernel",
                    figures.copied, figures.notifications
                )
            } else {
                String::new()
            };
            println!(
                "round {round}, loopback TCP by {}: {:.0} MB/s; CPU per GB: sender {sender:.3} s, \
                 receiver {receiver:.3} s{copied}",
                mode.name(),
                figures.bytes_per_s() / 1e6,
            );
        }
    }
    Ok(())
}
