//! The machine's physical references, measured in the same run as the
//! broker's figures: loopback TCP bandwidth (one stream, 1 MiB writes) and
//! the sender's CPU per GB it took (the floor under a broker's CPU per
//! consumed GB), and
//! raw sequential O_DIRECT write bandwidth (1 MiB blocks, 8 in flight,
//! one fdatasync at the end, counted), raw sequential O_DIRECT read
//! bandwidth of what was written (1 MiB blocks, 8 read ahead: the ceiling
//! of a consumer reading what is not in the broker's memory), and the
//! disk's own durable-write
//! latency (4 KiB O_DIRECT write + fdatasync, one at a time): the floor
//! under any acks=all latency.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use futures::AsyncReadExt;
use futures::AsyncWriteExt;
use glommio::io::{DmaFile, DmaStreamReaderBuilder, DmaStreamWriterBuilder};

/// Bytes per write in both measurements.
const BLOCK: usize = 1 << 20;

/// What one loopback stream measured.
#[derive(Debug, Clone, Copy)]
pub struct LoopbackSend {
    /// Bytes per second the stream carried.
    pub bytes_per_s: f64,
    /// The sending thread's CPU seconds (user and system) per GB sent.
    /// On loopback the kernel delivers each segment to the receiving
    /// socket in the sender's context, so this is what a broker's
    /// consumer-facing sends cost at least: the floor under its CPU per
    /// consumed GB on this machine. (A kernel built with
    /// CONFIG_IRQ_TIME_ACCOUNTING books that receive work, done in
    /// softirq, apart from the thread, for the broker's threads too:
    /// compare figures taken on one machine.)
    pub sender_cpu_s_per_gb: f64,
}

/// Loopback TCP: one stream of 1 MiB writes for `duration`.
pub fn tcp_loopback(duration: Duration) -> std::io::Result<LoopbackSend> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let receiver = std::thread::spawn(move || -> std::io::Result<u64> {
        let (mut stream, _) = listener.accept()?;
        let mut buffer = vec![0u8; BLOCK];
        let mut total = 0u64;
        loop {
            match stream.read(&mut buffer)? {
                0 => return Ok(total),
                n => total += n as u64,
            }
        }
    });
    let mut stream = TcpStream::connect(address)?;
    let block = vec![7u8; BLOCK];
    let cpu_before = thread_cpu_seconds()?;
    let started = Instant::now();
    let mut sent = 0u64;
    while started.elapsed() < duration {
        stream.write_all(&block)?;
        sent += BLOCK as u64;
    }
    let cpu = thread_cpu_seconds()? - cpu_before;
    drop(stream);
    let received = receiver
        .join()
        .map_err(|_| std::io::Error::other("receiver panicked"))??;
    if sent == 0 || received != sent {
        let why = format!("loopback: {sent} bytes sent, {received} received");
        return Err(std::io::Error::other(why));
    }
    Ok(LoopbackSend {
        bytes_per_s: received as f64 / started.elapsed().as_secs_f64(),
        sender_cpu_s_per_gb: cpu / (sent as f64 / 1e9),
    })
}

/// The calling thread's CPU time so far (user and system), in seconds.
pub(crate) fn thread_cpu_seconds() -> std::io::Result<f64> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(now.tv_sec as f64 + now.tv_nsec as f64 / 1e9)
}

/// Raw sequential O_DIRECT writes into a scratch file under `dir` for
/// `duration`, then reads of it back from its start for at most as long:
/// bytes per second written (the closing fdatasync included) and read.
pub fn disk_sequential(dir: &Path, duration: Duration) -> std::io::Result<(f64, f64)> {
    let path = dir.join(format!("loadgen-disk-baseline-{}.bin", std::process::id()));
    let result = glommio::LocalExecutorBuilder::default()
        .io_memory(16 << 20)
        .make()
        .map_err(|e| std::io::Error::other(e.to_string()))?
        .run(async {
            let file = DmaFile::create(&path)
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            let mut writer = DmaStreamWriterBuilder::new(file)
                .with_buffer_size(BLOCK)
                .with_write_behind(8)
                .build();
            let block = vec![7u8; BLOCK];
            let started = Instant::now();
            let mut written = 0u64;
            while started.elapsed() < duration {
                writer.write_all(&block).await?;
                written += BLOCK as u64;
            }
            writer.sync().await?;
            let seconds = started.elapsed().as_secs_f64();
            writer.close().await?;
            let read = read_back(&path, duration).await?;
            Ok::<_, std::io::Error>((written as f64 / seconds, read))
        });
    let _ = std::fs::remove_file(&path);
    result
}

/// Sequential O_DIRECT reads of the file at `path` from its start, for at
/// most `duration`: bytes per second.
async fn read_back(path: &Path, duration: Duration) -> std::io::Result<f64> {
    let file = DmaFile::open(path)
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut reader = DmaStreamReaderBuilder::new(file)
        .with_buffer_size(BLOCK)
        .with_read_ahead(8)
        .build();
    let mut block = vec![0u8; BLOCK];
    let started = Instant::now();
    let mut read = 0u64;
    while started.elapsed() < duration {
        match reader.read(&mut block).await? {
            0 => break,
            n => read += n as u64,
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    reader
        .close()
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(read as f64 / seconds)
}

/// Latency of one durable small write (4 KiB O_DIRECT write, then
/// fdatasync), one after another for `duration`: (p50, p99, p99.9, max)
/// in microseconds.
pub fn disk_sync_latency(dir: &Path, duration: Duration) -> std::io::Result<(u64, u64, u64, u64)> {
    let path = dir.join(format!("loadgen-sync-baseline-{}.bin", std::process::id()));
    let result = glommio::LocalExecutorBuilder::default()
        .io_memory(1 << 20)
        .make()
        .map_err(|e| std::io::Error::other(e.to_string()))?
        .run(async {
            let file = DmaFile::create(&path)
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            let mut latencies = crate::report::latency_histogram();
            let started = Instant::now();
            let mut position = 0u64;
            while started.elapsed() < duration {
                let mut buffer = file.alloc_dma_buffer(4096);
                buffer.as_bytes_mut().fill(7);
                let one = Instant::now();
                file.write_at(buffer, position)
                    .await
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                file.fdatasync()
                    .await
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                crate::report::record(&mut latencies, one.elapsed().as_micros() as u64);
                position += 4096;
            }
            file.close()
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            Ok::<_, std::io::Error>((
                latencies.value_at_quantile(0.5),
                latencies.value_at_quantile(0.99),
                latencies.value_at_quantile(0.999),
                latencies.max(),
            ))
        });
    let _ = std::fs::remove_file(&path);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_s_cpu_time_grows_with_its_work_only() {
        let before = thread_cpu_seconds().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let slept = thread_cpu_seconds().unwrap() - before;
        assert!(slept < 0.05, "sleeping cost {slept} s of CPU");
        // Spinning is counted: 50 ms of CPU is reached (bounded by wall
        // time, for a loaded machine).
        let started = Instant::now();
        let mut x = 0u64;
        while thread_cpu_seconds().unwrap() - before < 0.05 {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "spinning was not counted"
            );
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }

    #[test]
    fn loopback_send_reports_its_rate_and_the_sender_s_cpu_per_gb() {
        let measured = tcp_loopback(Duration::from_millis(200)).unwrap();
        assert!(measured.bytes_per_s > 1e6, "{measured:?}");
        // Sending costs CPU: no machine sends a GB in under a millisecond
        // of it, nor (one thread at a time) in more than 20 s.
        let per_gb = measured.sender_cpu_s_per_gb;
        assert!(per_gb > 0.001 && per_gb < 20.0, "{measured:?}");
    }
}
