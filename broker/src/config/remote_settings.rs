//! Tiered storage's object store from the broker's `remote_*` settings:
//! a local directory by default (so `remote.storage.enable` works on one
//! machine with no settings), an S3 bucket when configured, or none.

use std::path::{Path, PathBuf};

use super::{BrokerConfig, Secret};
use crate::remote_store::{Backend, S3Settings};

/// The default local store's directory name, in the data directory.
pub const LOCAL_STORE_DIR: &str = "remote-store";

/// The default disk cache's directory name, in the data directory.
pub const CACHE_DIR: &str = "remote-cache";

/// The disk cache's default budget in front of a bucket.
pub const S3_DISK_CACHE_BYTES: u64 = 20 << 30;

/// The settings' mistakes, in words.
pub fn check(config: &BrokerConfig) -> Result<(), String> {
    if config.remote_concurrency == 0 {
        return Err("remote_concurrency must be at least 1".into());
    }
    match config.remote_store.as_str() {
        "local" | "none" => Ok(()),
        "s3" if config.remote_s3_bucket.as_deref().is_none_or(str::is_empty) => {
            Err("remote_store = \"s3\" needs remote_s3_bucket".into())
        }
        "s3" => Ok(()),
        other => Err(format!(
            "remote_store must be local, s3 or none, got {other:?}"
        )),
    }
}

/// The store the settings name, None for `none`. S3 credentials are read
/// here (the file, else the environment): a missing one is an error that
/// names both places.
pub fn backend(config: &BrokerConfig) -> Result<Option<Backend>, String> {
    match config.remote_store.as_str() {
        "none" => Ok(None),
        "s3" => s3(config).map(|s3| Some(Backend::S3(s3))),
        _ => {
            let dir = config
                .remote_store_dir
                .clone()
                .unwrap_or_else(|| config.data_dir.join(LOCAL_STORE_DIR));
            Ok(Some(Backend::Directory(dir)))
        }
    }
}

/// The disk cache of remote reads in front of `backend`: its directory and
/// byte budget, None when the budget is 0 (the default in front of a
/// local directory, which is on a disk already).
pub fn disk_cache(config: &BrokerConfig, backend: &Backend) -> Option<(PathBuf, u64)> {
    let default = match backend {
        Backend::S3(_) => S3_DISK_CACHE_BYTES,
        Backend::Directory(_) => 0,
    };
    let budget = config.remote_disk_cache_bytes.unwrap_or(default);
    let dir = config
        .remote_cache_dir
        .clone()
        .unwrap_or_else(|| config.data_dir.join(CACHE_DIR));
    (budget > 0).then_some((dir, budget))
}

fn s3(config: &BrokerConfig) -> Result<S3Settings, String> {
    let (access_key_id, Secret(secret_access_key)) = match &config.remote_s3_credentials_file {
        Some(file) => credentials_file(file)?,
        None => {
            let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
            match (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) {
                (Some(id), Some(secret)) => (id, Secret(secret)),
                _ => {
                    return Err("remote_store = \"s3\" needs credentials: \
                         remote_s3_credentials_file, or AWS_ACCESS_KEY_ID and \
                         AWS_SECRET_ACCESS_KEY in the environment"
                        .into())
                }
            }
        }
    };
    Ok(S3Settings {
        bucket: config.remote_s3_bucket.clone().unwrap_or_default(),
        endpoint: config.remote_s3_endpoint.clone(),
        region: config.remote_s3_region.clone(),
        access_key_id,
        secret_access_key,
    })
}

/// The `[default]` profile's keys of a credentials file as AWS's.
fn credentials_file(file: &Path) -> Result<(String, Secret), String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("remote_s3_credentials_file {}: {e}", file.display()))?;
    parse_credentials(&text).ok_or_else(|| {
        format!(
            "remote_s3_credentials_file {}: no aws_access_key_id and aws_secret_access_key \
             in its [default] profile",
            file.display()
        )
    })
}

fn parse_credentials(text: &str) -> Option<(String, Secret)> {
    let (mut profile, mut id, mut secret) = ("default".to_string(), None, None);
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            profile = name.trim().to_string();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if profile != "default" {
            continue;
        }
        match key.trim() {
            "aws_access_key_id" => id = Some(value.trim().to_string()),
            "aws_secret_access_key" => secret = Some(Secret(value.trim().to_string())),
            _ => {}
        }
    }
    Some((id?, secret?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_a_directory_of_its_own_in_the_data_directory() {
        let config = BrokerConfig {
            data_dir: "/var/lib/broker".into(),
            ..BrokerConfig::default()
        };
        assert_eq!(check(&config), Ok(()));
        assert_eq!(
            backend(&config),
            Ok(Some(Backend::Directory(
                "/var/lib/broker/remote-store".into()
            )))
        );
        let none = BrokerConfig {
            remote_store: "none".into(),
            ..BrokerConfig::default()
        };
        assert_eq!(backend(&none), Ok(None));
    }

    #[test]
    fn the_disk_cache_is_on_in_front_of_a_bucket_and_off_in_front_of_a_directory() {
        let mut config = BrokerConfig {
            data_dir: "/var/lib/broker".into(),
            ..BrokerConfig::default()
        };
        let directory = Backend::Directory("/var/lib/broker/remote-store".into());
        assert_eq!(disk_cache(&config, &directory), None);
        let s3 = Backend::S3(S3Settings {
            bucket: "logs".into(),
            endpoint: None,
            region: "us-east-1".into(),
            access_key_id: "id".into(),
            secret_access_key: "secret".into(),
        });
        assert_eq!(
            disk_cache(&config, &s3),
            Some(("/var/lib/broker/remote-cache".into(), S3_DISK_CACHE_BYTES))
        );
        config.remote_disk_cache_bytes = Some(1 << 30);
        config.remote_cache_dir = Some("/cache".into());
        assert_eq!(
            disk_cache(&config, &directory),
            Some(("/cache".into(), 1 << 30))
        );
        config.remote_disk_cache_bytes = Some(0);
        assert_eq!(disk_cache(&config, &s3), None, "0: none");
    }

    #[test]
    fn s3_needs_a_bucket_and_credentials_and_reads_the_default_profile() {
        let mut config = BrokerConfig {
            remote_store: "s3".into(),
            ..BrokerConfig::default()
        };
        assert!(check(&config).unwrap_err().contains("remote_s3_bucket"));
        config.remote_s3_bucket = Some("logs".into());
        assert_eq!(check(&config), Ok(()));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("credentials");
        std::fs::write(
            &file,
            "[other]\naws_access_key_id = wrong\n[default]\naws_access_key_id = AKID\n\
             aws_secret_access_key = s3cr3t\n",
        )
        .unwrap();
        config.remote_s3_credentials_file = Some(file.clone());
        config.remote_s3_endpoint = Some("http://127.0.0.1:9000".into());
        let Ok(Some(Backend::S3(s3))) = backend(&config) else {
            panic!("an S3 backend");
        };
        assert_eq!(
            (s3.bucket.as_str(), s3.access_key_id.as_str()),
            ("logs", "AKID")
        );
        assert_eq!(s3.secret_access_key, "s3cr3t");
        assert!(
            !format!("{s3:?}").contains("s3cr3t"),
            "the secret is never printed"
        );
        std::fs::write(&file, "[default]\naws_access_key_id = AKID\n").unwrap();
        assert!(backend(&config)
            .unwrap_err()
            .contains("aws_secret_access_key"));
        let bad = BrokerConfig {
            remote_store: "tape".into(),
            ..BrokerConfig::default()
        };
        assert!(check(&bad).is_err());
    }
}
