//! Loading a `__transaction_state` partition's ids: its records replayed
//! (the last value of each id wins; a null value removes it) into the
//! rules' store, when this broker starts leading it. Everything the leader
//! holds is read, above the high watermark too, as Kafka's coordinator
//! loads (a leader never cuts its own log).

use storage::batch;

use crate::partition::served::ServedPartition;
use crate::partition::table::BATCH_BYTES_CAP;
use crate::transactions::records;
use crate::transactions::store::TxnStore;

/// Replays a partition's records into a store.
pub async fn load(
    led: &ServedPartition,
    max_timeout_ms: i32,
) -> Result<TxnStore, storage::StorageError> {
    let log = &led.partition.log;
    let end = log.log_end();
    let mut next = log.log_start();
    let mut store = TxnStore::new(max_timeout_ms);
    while next < end {
        let read = log.read(next, 1 << 20, end).await?;
        let Some(after) = read.next_offset else {
            break;
        };
        for chunk in &read.chunks {
            for (header, stored) in batch::split_stored(chunk, BATCH_BYTES_CAP)? {
                if header.next_offset() <= next || header.is_control() {
                    continue;
                }
                let Ok(records) = batch::records(&stored, header) else {
                    tracing::warn!(
                        offset = header.base_offset.0,
                        "skipping a compressed batch in __transaction_state"
                    );
                    continue;
                };
                for record in records {
                    let record = record?;
                    replay(&mut store, record.offset.0, record.key, record.value);
                }
            }
        }
        next = after;
    }
    Ok(store)
}

fn replay(store: &mut TxnStore, offset: i64, key: Option<&[u8]>, value: Option<&[u8]>) {
    let Some(id) = key.and_then(records::decode_key) else {
        tracing::warn!(
            offset,
            "skipping a __transaction_state record without a readable key"
        );
        return;
    };
    match value {
        None => store.load(&id, None),
        Some(bytes) => match records::decode_value(bytes) {
            Some(metadata) => store.load(&id, Some(metadata)),
            None => tracing::warn!(
                offset,
                id,
                "skipping an unreadable __transaction_state value"
            ),
        },
    }
}
