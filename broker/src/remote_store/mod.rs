//! Tiered storage's object store, off the shards (docs/tiered-storage.md):
//! the `object_store` crate's client (a local directory, the embedded
//! default, or S3 and S3-compatible servers) runs on a thread of its own
//! with a current-thread tokio runtime; shards hand it calls through a
//! bounded queue and await each answer, so a shard never blocks on the
//! network or on blocking file I/O. At most `concurrency` calls run at
//! once; a full queue makes the caller wait (backpressure), it never
//! grows. The thread ends when the last [`RemoteStore`] handle is gone.
//! Remote reads go through its disk cache ([`disk_cache`]) when it has
//! one.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures::channel::{mpsc, oneshot};
use futures::{SinkExt, StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};

use disk_cache::DiskCache;
use files::Pacer;

pub mod disk_cache;
mod files;

/// How the store's thread runs.
#[derive(Debug, Clone, Default)]
pub struct StoreSettings {
    /// Calls waiting at most (callers wait beyond).
    pub queued: usize,
    /// Calls running at once at most.
    pub concurrency: usize,
    /// Upload bandwidth (0: unlimited).
    pub upload_bytes_per_second: u64,
    /// Download bandwidth of reads from the store (0: unlimited; the disk
    /// cache's answers do not count).
    pub download_bytes_per_second: u64,
    /// The disk cache of remote reads: its directory and byte budget
    /// (None: none).
    pub disk_cache: Option<(PathBuf, u64)>,
}

/// Where objects are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// A local directory (made if missing).
    Directory(PathBuf),
    /// An S3 (or S3-compatible) bucket.
    S3(S3Settings),
}

/// An S3 bucket and how to reach it.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Settings {
    /// The bucket.
    pub bucket: String,
    /// The endpoint (None: AWS's for the region).
    pub endpoint: Option<String>,
    /// The region.
    pub region: String,
    /// The access key id.
    pub access_key_id: String,
    /// The secret access key (never printed).
    pub secret_access_key: String,
}

impl std::fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Settings")
            .field("bucket", &self.bucket)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RemoteError {
    /// No such object.
    #[error("no object {0}")]
    NotFound(String),
    /// The store refused or failed the call.
    #[error("object store: {0}")]
    Store(String),
    /// The store's thread is gone.
    #[error("the object store's thread stopped")]
    Stopped,
    /// A local file could not be read for an upload.
    #[error("local file: {0}")]
    Local(String),
}

impl From<object_store::Error> for RemoteError {
    fn from(e: object_store::Error) -> RemoteError {
        match e {
            object_store::Error::NotFound { path, .. } => RemoteError::NotFound(path),
            other => RemoteError::Store(other.to_string()),
        }
    }
}

type Reply<T> = oneshot::Sender<Result<T, RemoteError>>;

/// One call for the store's thread.
enum Call {
    Put(String, Bytes, Reply<()>),
    Get(String, Option<Range<u64>>, Reply<Bytes>),
    GetCached(String, Option<Range<u64>>, Reply<(Bytes, bool)>),
    ForgetCached(String, Reply<()>),
    Delete(String, Reply<()>),
    List(String, Reply<Vec<(String, u64)>>),
    Checksum(PathBuf, u64, Reply<u32>),
    PutFile(String, (PathBuf, u64, u32), Reply<()>),
}

/// A handle on the object store's thread (cheap to clone).
#[derive(Clone)]
pub struct RemoteStore {
    calls: mpsc::Sender<Call>,
}

impl RemoteStore {
    /// Starts the store's thread: at most `queued` calls waiting, at most
    /// `concurrency` running, no pacing, no disk cache.
    pub fn start(
        backend: &Backend,
        queued: usize,
        concurrency: usize,
    ) -> Result<RemoteStore, RemoteError> {
        let settings = StoreSettings {
            queued,
            concurrency,
            ..StoreSettings::default()
        };
        Self::start_with(backend, &settings)
    }

    /// Starts the store's thread as `settings` say (the disk cache's
    /// directory is made and indexed first, on the caller's thread).
    pub fn start_with(
        backend: &Backend,
        settings: &StoreSettings,
    ) -> Result<RemoteStore, RemoteError> {
        Self::start_joinable(backend, settings).map(|(store, _detached)| store)
    }

    /// [`RemoteStore::start_with`], with the thread's handle (it ends once
    /// the last [`RemoteStore`] is dropped and its calls are answered).
    fn start_joinable(
        backend: &Backend,
        settings: &StoreSettings,
    ) -> Result<(RemoteStore, std::thread::JoinHandle<()>), RemoteError> {
        let store = client(backend)?;
        let disk_cache = match &settings.disk_cache {
            Some((dir, budget)) => Some(DiskCache::open(dir, *budget).map_err(|e| {
                RemoteError::Local(format!("the remote read cache in {}: {e}", dir.display()))
            })?),
            None => None,
        };
        let (calls, waiting) = mpsc::channel(settings.queued.max(1));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| RemoteError::Store(e.to_string()))?;
        let (upload_rate, concurrency) = (settings.upload_bytes_per_second, settings.concurrency);
        let download_rate = settings.download_bytes_per_second;
        let thread = std::thread::Builder::new()
            .name("remote-store".into())
            .spawn(move || {
                let serving = Serving {
                    store,
                    pacer: Pacer::new(upload_rate),
                    download_pacer: Pacer::new(download_rate),
                    disk_cache,
                };
                runtime.block_on(serve(&serving, waiting, concurrency.max(1)))
            })
            .map_err(|e| RemoteError::Store(e.to_string()))?;
        Ok((RemoteStore { calls }, thread))
    }

    async fn call<T>(&self, call: impl FnOnce(Reply<T>) -> Call) -> Result<T, RemoteError> {
        let (reply, answer) = oneshot::channel();
        let mut calls = self.calls.clone();
        calls
            .send(call(reply))
            .await
            .map_err(|_| RemoteError::Stopped)?;
        answer.await.map_err(|_| RemoteError::Stopped)?
    }

    /// Writes `key` (whole, replacing what was there).
    pub async fn put(&self, key: &str, bytes: Bytes) -> Result<(), RemoteError> {
        self.call(|reply| Call::Put(key.to_string(), bytes, reply))
            .await
    }

    /// Reads `key`, or its `range` of bytes.
    pub async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes, RemoteError> {
        self.call(|reply| Call::Get(key.to_string(), range, reply))
            .await
    }

    /// Reads `key`, or its `range`, through the disk cache (when there is
    /// one): the bytes, and whether the cache had them. For objects that
    /// never change (segments and their indexes), not the manifest.
    pub async fn get_cached(
        &self,
        key: &str,
        range: Option<Range<u64>>,
    ) -> Result<(Bytes, bool), RemoteError> {
        self.call(|reply| Call::GetCached(key.to_string(), range, reply))
            .await
    }

    /// Drops what the disk cache holds of `key` (found damaged: the next
    /// read fetches it from the store again).
    pub async fn forget_cached(&self, key: &str) -> Result<(), RemoteError> {
        self.call(|reply| Call::ForgetCached(key.to_string(), reply))
            .await
    }

    /// Deletes `key` (one that is not there is not an error), and what the
    /// disk cache holds of it.
    pub async fn delete(&self, key: &str) -> Result<(), RemoteError> {
        self.call(|reply| Call::Delete(key.to_string(), reply))
            .await
    }

    /// The CRC-32C of the first `len` bytes of a local file (read off the
    /// shard).
    pub async fn checksum(&self, path: PathBuf, len: u64) -> Result<u32, RemoteError> {
        self.call(|reply| Call::Checksum(path, len, reply)).await
    }

    /// Writes the first `len` bytes of a local file as `key` (read off the
    /// shard, in chunks, paced to the upload bandwidth), refused if they
    /// no longer have the CRC-32C `crc`.
    pub async fn put_file(
        &self,
        key: &str,
        path: PathBuf,
        len: u64,
        crc: u32,
    ) -> Result<(), RemoteError> {
        self.call(|reply| Call::PutFile(key.to_string(), (path, len, crc), reply))
            .await
    }

    /// The objects under `prefix`, with their sizes, in name order.
    pub async fn list(&self, prefix: &str) -> Result<Vec<(String, u64)>, RemoteError> {
        self.call(|reply| Call::List(prefix.to_string(), reply))
            .await
    }
}

/// The `object_store` client of `backend`.
fn client(backend: &Backend) -> Result<Arc<dyn ObjectStore>, RemoteError> {
    let store: Arc<dyn ObjectStore> = match backend {
        Backend::Directory(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| RemoteError::Store(e.to_string()))?;
            Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir)?)
        }
        Backend::S3(s3) => {
            let mut builder = object_store::aws::AmazonS3Builder::new()
                .with_bucket_name(&s3.bucket)
                .with_region(&s3.region)
                .with_access_key_id(&s3.access_key_id)
                .with_secret_access_key(&s3.secret_access_key);
            // Bounded: a store that is down fails a call in seconds (the
            // caller retries on its next pass), never holds it for minutes.
            let retry = object_store::RetryConfig {
                max_retries: 3,
                retry_timeout: std::time::Duration::from_secs(15),
                ..object_store::RetryConfig::default()
            };
            let options = object_store::ClientOptions::new()
                .with_connect_timeout(std::time::Duration::from_secs(5))
                .with_timeout(std::time::Duration::from_secs(60));
            builder = builder.with_retry(retry).with_client_options(options);
            if let Some(endpoint) = &s3.endpoint {
                let plain = endpoint.starts_with("http://");
                builder = builder.with_endpoint(endpoint).with_allow_http(plain);
            }
            Arc::new(builder.build()?)
        }
    };
    Ok(store)
}

/// What the store's thread serves calls with.
struct Serving {
    store: Arc<dyn ObjectStore>,
    /// Uploads' bandwidth.
    pacer: Pacer,
    /// Reads' bandwidth.
    download_pacer: Pacer,
    disk_cache: Option<DiskCache>,
}

/// Runs the calls as they come, `concurrency` at a time.
async fn serve(serving: &Serving, calls: mpsc::Receiver<Call>, concurrency: usize) {
    calls
        .for_each_concurrent(concurrency, |call| run(serving, call))
        .await;
}

/// `key`, or its `range`, from the store, paced to the download
/// bandwidth (a read's bytes delay the ones after it).
async fn get(
    serving: &Serving,
    key: &str,
    range: Option<Range<u64>>,
) -> Result<Bytes, RemoteError> {
    let path = ObjectPath::from(key);
    let store = &*serving.store;
    let got = match range {
        Some(range) => store.get_range(&path, range).await,
        None => match store.get(&path).await {
            Ok(object) => object.bytes().await,
            Err(e) => Err(e),
        },
    };
    let bytes = got.map_err(RemoteError::from)?;
    serving.download_pacer.take(bytes.len()).await;
    Ok(bytes)
}

/// `key`, or its `range`, from the disk cache, else from the store (then
/// kept in the cache before the caller has it: a caller that finds it
/// damaged and drops it from the cache finds it there to drop; only
/// whole ranges are kept).
async fn get_cached(
    serving: &Serving,
    key: String,
    range: Option<Range<u64>>,
    reply: Reply<(Bytes, bool)>,
) {
    let Some(cache) = &serving.disk_cache else {
        let got = get(serving, &key, range).await;
        let _ = reply.send(got.map(|bytes| (bytes, false)));
        return;
    };
    let name = disk_cache::file_name(&key, range.as_ref());
    if let Some(bytes) = cache.get(&name).await {
        let _ = reply.send(Ok((bytes, true)));
        return;
    }
    let got = get(serving, &key, range.clone()).await;
    if let Ok(bytes) = &got {
        let whole = range.is_none_or(|r| r.end - r.start == bytes.len() as u64);
        if whole {
            cache.put(name, bytes).await;
        }
    }
    let _ = reply.send(got.map(|bytes| (bytes, false)));
}

async fn run(serving: &Serving, call: Call) {
    let (store, pacer) = (&*serving.store, &serving.pacer);
    match call {
        Call::Checksum(path, len, reply) => {
            let _ = reply.send(files::checksum(path, len).await);
        }
        Call::PutFile(key, file, reply) => {
            let _ = reply.send(files::put_file(store, pacer, &key, file).await);
        }
        Call::Put(key, bytes, reply) => {
            let put = store
                .put(&ObjectPath::from(key), PutPayload::from(bytes))
                .await;
            let _ = reply.send(put.map(drop).map_err(RemoteError::from));
        }
        Call::Get(key, range, reply) => {
            let _ = reply.send(get(serving, &key, range).await);
        }
        Call::GetCached(key, range, reply) => get_cached(serving, key, range, reply).await,
        Call::ForgetCached(key, reply) => {
            if let Some(cache) = &serving.disk_cache {
                cache.forget_object(&key).await;
            }
            let _ = reply.send(Ok(()));
        }
        Call::Delete(key, reply) => {
            if let Some(cache) = &serving.disk_cache {
                cache.forget_object(&key).await;
            }
            let deleted = match store.delete(&ObjectPath::from(key)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(RemoteError::from(e)),
            };
            let _ = reply.send(deleted);
        }
        Call::List(prefix, reply) => {
            let listed: Result<Vec<_>, _> = store
                .list(Some(&ObjectPath::from(prefix)))
                .map_ok(|meta| (meta.location.to_string(), meta.size))
                .try_collect()
                .await;
            let _ = reply.send(listed.map_err(RemoteError::from).map(|mut all: Vec<_>| {
                all.sort();
                all
            }));
        }
    }
}

#[cfg(test)]
mod tests;
