//! Helpers shared by the control tests that run on glommio.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use control::*;

/// How long a test waits for a cluster to do something before failing.
pub const WAIT_MAX: Duration = Duration::from_secs(20);

/// Polls `check` every `step` until it holds or `WAIT_MAX` passes.
pub async fn wait_until(what: &str, step: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < WAIT_MAX, "timed out waiting for {what}");
        glommio::timer::sleep(step).await;
    }
}

/// Runs a future on a glommio executor on this thread.
pub fn on_glommio<T>(fut: impl std::future::Future<Output = T>) -> T {
    glommio::LocalExecutorBuilder::default()
        .io_memory(2 << 20)
        .make()
        .expect("glommio executor")
        .run(fut)
}

/// A registration of broker `id`, first life, one shard.
pub fn register(id: i32) -> MetadataRecord {
    MetadataRecord::RegisterBroker(BrokerRegistration {
        id: BrokerId(id),
        incarnation: Incarnation(1),
        listener: format!("127.0.0.1:{}", 9000 + id),
        rack: None,
        shards: 1,
    })
}
