//! Writing a journal entry's data back into its segment file.
//!
//! A direct write covers whole blocks, but an entry's data starts and ends
//! anywhere. The blocks it touches are read, the data laid over them, and
//! the blocks written back: every byte outside the data stays as the disk
//! had it. Writing the entry's own padding instead would put zeros over
//! bytes a later direct flush made durable there.

use std::io;

use crate::io::{align_down, align_up, AlignedBuf, DirectFile, FileSystem};

/// Writes `data` at `position` of `file`, keeping every other byte. The
/// file's size afterwards is the larger of its size before and the data's
/// end (a crash between the write and the trim leaves zeros to the padded
/// block's end, which the log's recovery cuts as it cuts preallocation).
pub async fn write_back<FS: FileSystem>(
    fs: &FS,
    file: &FS::File,
    position: u64,
    data: &[u8],
) -> io::Result<()> {
    let end = position + data.len() as u64;
    let (start, padded_end) = (align_down(position), align_up(end));
    let size_before = file.size().await?;
    let existing = file.read_at(start, (padded_end - start) as usize).await?;
    let mut blocks = fs.alloc((padded_end - start) as usize);
    lay_over(
        blocks.bytes_mut(),
        &existing,
        (position - start) as usize,
        data,
    );
    file.write_at(blocks, start).await?;
    if padded_end > size_before {
        file.truncate(size_before.max(end)).await?;
    }
    Ok(())
}

/// `existing` (zeros past its end) with `data` laid over it at `at`.
fn lay_over(out: &mut [u8], existing: &[u8], at: usize, data: &[u8]) {
    let kept = existing.len().min(out.len());
    out[..kept].copy_from_slice(&existing[..kept]);
    out[kept..].fill(0);
    out[at..at + data.len()].copy_from_slice(data);
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use futures::executor::block_on;

    use super::*;
    use crate::io::memory::MemFs;

    fn file_with(fs: &MemFs, bytes: Vec<u8>) -> <MemFs as FileSystem>::File {
        let path = Path::new("/seg.log");
        fs.set_contents(path, bytes);
        block_on(fs.open(path)).unwrap()
    }

    #[test]
    fn data_lands_between_bytes_that_stay_as_they_were() {
        let fs = MemFs::new();
        let file = file_with(&fs, vec![b'A'; 9000]);
        block_on(write_back(&fs, &file, 4090, &[b'x'; 20])).unwrap();
        let after = fs.contents(Path::new("/seg.log")).unwrap();
        assert_eq!(after.len(), 9000);
        assert!(after[..4090].iter().all(|&b| b == b'A'));
        assert!(after[4090..4110].iter().all(|&b| b == b'x'));
        assert!(after[4110..].iter().all(|&b| b == b'A'));
    }

    #[test]
    fn data_past_the_end_grows_the_file_to_its_end_only() {
        let fs = MemFs::new();
        let file = file_with(&fs, vec![b'A'; 100]);
        block_on(write_back(&fs, &file, 100, &[b'x'; 50])).unwrap();
        let after = fs.contents(Path::new("/seg.log")).unwrap();
        assert_eq!(after.len(), 150);
        assert_eq!(&after[..100], &[b'A'; 100][..]);
        assert_eq!(&after[100..], &[b'x'; 50][..]);
        // A second entry after the first, across a block boundary.
        block_on(write_back(&fs, &file, 150, &[b'y'; 8000])).unwrap();
        let after = fs.contents(Path::new("/seg.log")).unwrap();
        assert_eq!(after.len(), 8150);
        assert_eq!(&after[100..150], &[b'x'; 50][..]);
        assert!(after[150..].iter().all(|&b| b == b'y'));
    }
}
