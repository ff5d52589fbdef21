//! `broker dump-log DIR`: prints a stopped partition's batches, one line
//! each (`base last epoch records bytes crc32c`), after its log start and
//! end. Opening the log runs the same recovery a broker's start would, so
//! point it only at a partition no broker has open: in a broker's data
//! directory it takes the directory's lock and first replays the shards'
//! journals, as a start does (a recovery without them would cut the log
//! at the first batch only a journal holds). Comparing the dumps of a
//! partition's replicas shows whether they diverged.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use storage::io::dma::DmaFs;
use storage::{batch, Log, LogConfig, Offset};

use crate::cluster::PARTITIONS_DIR;
use crate::partition::journals::replay_all;
use crate::partition::table::BATCH_BYTES_CAP;

/// Dumps the log in `dir`.
pub fn run(dir: PathBuf) -> Result<String, String> {
    let _no_broker = match data_dir_of(&dir) {
        Some(data) => {
            let lock = crate::data_dir::lock(&data).map_err(|e| e.to_string())?;
            let partitions = data.join(PARTITIONS_DIR);
            replay_all(&data, &partitions).map_err(|e| format!("replaying the journals: {e}"))?;
            Some(lock)
        }
        None => {
            if dir.join(storage::journal::JOURNAL_ID_FILE).exists() {
                eprintln!("dump-log: {} used a journal, and no broker data directory holds it here: batches only the journal held are cut", dir.display());
            }
            None
        }
    };
    glommio::LocalExecutorBuilder::default()
        .io_memory(2 << 20)
        .make()
        .map_err(|e| format!("glommio: {e}"))?
        .run(async move { dump(dir).await })
}

/// The data directory holding partition directory `dir`
/// (`DATA/partitions/<topic>/<index>`), if it is laid out as a broker's.
fn data_dir_of(dir: &Path) -> Option<PathBuf> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let partitions = dir.parent()?.parent()?;
    let data = partitions.parent()?;
    (partitions.file_name()? == PARTITIONS_DIR).then(|| data.to_path_buf())
}

async fn dump(dir: PathBuf) -> Result<String, String> {
    if !dir.is_dir() {
        return Err(format!("{} is not a partition directory", dir.display()));
    }
    let config = LogConfig {
        max_batch_bytes: BATCH_BYTES_CAP,
        ..LogConfig::default()
    };
    let log = Log::open(DmaFs, &dir, config)
        .await
        .map_err(|e| e.to_string())?;
    let (start, end) = (log.log_start(), log.log_end());
    let mut out = format!("log_start {} log_end {}\n", start.0, end.0);
    let mut next = start;
    while next < end {
        let read = log
            .read(next, 1 << 20, end)
            .await
            .map_err(|e| e.to_string())?;
        let Some(after) = read.next_offset else {
            break;
        };
        for chunk in &read.chunks {
            for (header, stored) in
                batch::split_stored(chunk, BATCH_BYTES_CAP).map_err(|e| e.to_string())?
            {
                let _ = writeln!(
                    out,
                    "{} {} {} {} {} {:08x}",
                    header.base_offset.0,
                    header.last_offset().0,
                    header.leader_epoch.0,
                    header.records_count,
                    stored.len(),
                    crc32c::crc32c(&stored),
                );
            }
        }
        next = after.max(Offset(next.0 + 1));
    }
    log.close().await.map_err(|e| e.to_string())?;
    Ok(out)
}
