//! What the leader's uploader needs of a log: its sealed segments (whole,
//! flushed, no longer written), each with the bytes of its indexes and
//! the leader epochs of its batches, read from memory (the segment file
//! itself is read off the shard, by the object store's thread).

use std::path::PathBuf;

use crate::files::{self, LOG_SUFFIX, TXN_INDEX_SUFFIX};
use crate::io::FileSystem;
use crate::log::Log;
use crate::txn_index;
use crate::types::{LeaderEpoch, Offset, TimestampMs};

/// One sealed segment, as the uploader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedFile {
    /// Its base offset.
    pub base_offset: Offset,
    /// Its last offset.
    pub last_offset: Offset,
    /// Its largest record timestamp.
    pub max_timestamp: TimestampMs,
    /// The bytes of its `.log` file (the file holds exactly these).
    pub size_bytes: u64,
    /// The `.log` file.
    pub path: PathBuf,
    /// Its `.txnindex` file and the file's length, when it indexes
    /// aborted transactions.
    pub txn_index: Option<(PathBuf, u64)>,
    /// Its offset index, encoded as the `.index` file is.
    pub offset_index: Vec<u8>,
    /// Its time index, encoded as the `.timeindex` file is.
    pub time_index: Vec<u8>,
    /// The leader epochs of its batches: (epoch, first offset in it).
    pub epochs: Vec<(LeaderEpoch, Offset)>,
}

impl<FS: FileSystem> Log<FS> {
    /// The sealed segments (every one but the active, once flushed and its
    /// indexes written), oldest first.
    pub fn sealed_segments(&self) -> Vec<SealedFile> {
        let st = self.state.borrow();
        let epochs = st.epochs.entries().to_vec();
        let count = st.segments.len().saturating_sub(1);
        st.segments[..count]
            .iter()
            .take_while(|s| s.writer.is_none() && s.sealed)
            .filter(|s| !s.is_empty())
            .map(|s| {
                let last_offset = Offset(s.next_offset.0 - 1);
                SealedFile {
                    base_offset: s.base,
                    last_offset,
                    max_timestamp: s.max_timestamp,
                    size_bytes: s.size,
                    path: files::segment_path(&self.dir, s.base, LOG_SUFFIX),
                    txn_index: s.aborts_indexed.filter(|n| *n > 0).map(|n| {
                        let path = files::segment_path(&self.dir, s.base, TXN_INDEX_SUFFIX);
                        (path, txn_index::encoded_len(n as u64))
                    }),
                    offset_index: s.index.encode(),
                    time_index: s.final_time_index().encode(),
                    epochs: epochs_within(&epochs, s.base, last_offset),
                }
            })
            .collect()
    }
}

/// The epochs of `[base, last]`: the one in force at `base` (starting
/// there), and those starting inside.
pub fn epochs_within(
    epochs: &[(LeaderEpoch, Offset)],
    base: Offset,
    last: Offset,
) -> Vec<(LeaderEpoch, Offset)> {
    let in_force = epochs.partition_point(|(_, start)| *start <= base);
    let first = in_force.saturating_sub(1);
    epochs[first..]
        .iter()
        .take_while(|(_, start)| *start <= last)
        .map(|(epoch, start)| (*epoch, (*start).max(base)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_gets_the_epoch_in_force_at_its_base_and_those_starting_inside() {
        let epochs = [
            (LeaderEpoch(0), Offset(0)),
            (LeaderEpoch(2), Offset(50)),
            (LeaderEpoch(3), Offset(120)),
        ];
        assert_eq!(
            epochs_within(&epochs, Offset(40), Offset(99)),
            vec![(LeaderEpoch(0), Offset(40)), (LeaderEpoch(2), Offset(50))]
        );
        assert_eq!(
            epochs_within(&epochs, Offset(50), Offset(119)),
            vec![(LeaderEpoch(2), Offset(50))]
        );
        assert_eq!(
            epochs_within(&epochs, Offset(200), Offset(300)),
            vec![(LeaderEpoch(3), Offset(200))]
        );
        assert_eq!(epochs_within(&[], Offset(0), Offset(9)), vec![]);
    }
}
