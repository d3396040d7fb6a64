//! The object store behind a cache URL (`s3://`, `gs://`, `az://`, `file:///`), with the
//! remote tier's timeouts and retries; S3, GCS and Azure each behind its cargo feature.

use anyhow::{Context, Result, bail};
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use std::sync::Arc;
#[cfg(feature = "cloud")]
use std::time::Duration;

#[cfg(feature = "cloud")]
/// Bounded retries: a store that does not answer costs seconds, not minutes (with
/// [`CONNECT_TIMEOUT`] and [`READ_TIMEOUT`], a request that gets no byte fails within about
/// 7 s, and the remote tier is then left for the rest of the run).
fn retry() -> object_store::RetryConfig {
    object_store::RetryConfig {
        backoff: object_store::BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            base: 2.0,
        },
        max_retries: 2,
        retry_timeout: Duration::from_secs(4),
    }
}

/// How long a connection may take to open.
#[cfg(feature = "cloud")]
const CONNECT_TIMEOUT: &str = "3s";
/// How long a request may wait for its first byte, or between two bytes: a server that
/// accepts and never answers, or stalls mid-answer.
#[cfg(feature = "cloud")]
const READ_TIMEOUT: &str = "3s";

pub(super) type Built = (Arc<dyn ObjectStore>, ObjectPath);

/// HTTPS for the cloud stores: reqwest is built without a crypto provider of its own, and
/// takes the process's, ring's (installed once; a provider already installed stays).
#[cfg(feature = "cloud")]
fn https() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The object prefix of a cloud URL: what follows its bucket or container.
#[cfg(feature = "cloud")]
fn prefix_of(rest: &str) -> Result<ObjectPath> {
    let p = rest.split_once('/').map(|(_, p)| p).unwrap_or("");
    Ok(ObjectPath::parse(p.trim_matches('/'))?)
}

pub(super) fn build(url: &str) -> Result<Built> {
    let Some((scheme, rest)) = url.split_once("://") else {
        bail!("not a URL (s3://bucket/prefix, gs://…, az://…, file:///path)");
    };
    let feature = match scheme {
        "s3" | "s3a" if cfg!(not(feature = "s3")) => Some("s3"),
        "gs" if cfg!(not(feature = "gcs")) => Some("gcs"),
        "az" | "azure" | "abfs" | "abfss" if cfg!(not(feature = "azure")) => Some("azure"),
        _ => None,
    };
    if let Some(f) = feature {
        bail!("this nsys-jax-pipe was built without {scheme}:// caches (cargo feature `{f}`)");
    }
    #[cfg(feature = "cloud")]
    use object_store::ClientConfigKey::{ConnectTimeout, ReadTimeout, Timeout};
    match scheme {
        #[cfg(feature = "s3")]
        "s3" | "s3a" => {
            https();
            use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey as K};
            // Our defaults first, then the user's AWS_* variables over them.
            let mut b = AmazonS3Builder::new()
                .with_retry(retry())
                .with_config(K::Client(Timeout), "60s")
                .with_config(K::Client(ConnectTimeout), CONNECT_TIMEOUT)
                .with_config(K::Client(ReadTimeout), READ_TIMEOUT);
            let mut endpoint = None;
            for (k, v) in std::env::vars() {
                if let Some(key) = k.strip_prefix("AWS_").map(|_| k.to_ascii_lowercase())
                    && let Ok(key) = key.parse::<K>()
                {
                    if key == K::Endpoint {
                        endpoint = Some(v.clone());
                    }
                    b = b.with_config(key, v);
                }
            }
            // An endpoint the user named with http:// is meant to be used over http.
            if endpoint.is_some_and(|e| e.starts_with("http://")) {
                b = b.with_allow_http(true);
            }
            let store = b.with_url(url).build()?;
            Ok((Arc::new(store), prefix_of(rest)?))
        }
        #[cfg(feature = "gcs")]
        "gs" => {
            https();
            use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey as K};
            let store = GoogleCloudStorageBuilder::from_env()
                .with_retry(retry())
                .with_config(K::Client(ConnectTimeout), CONNECT_TIMEOUT)
                .with_config(K::Client(ReadTimeout), READ_TIMEOUT)
                .with_url(url)
                .build()?;
            Ok((Arc::new(store), prefix_of(rest)?))
        }
        #[cfg(feature = "azure")]
        "az" | "azure" | "abfs" | "abfss" => {
            https();
            use object_store::azure::{AzureConfigKey as K, MicrosoftAzureBuilder};
            let store = MicrosoftAzureBuilder::from_env()
                .with_retry(retry())
                .with_config(K::Client(ConnectTimeout), CONNECT_TIMEOUT)
                .with_config(K::Client(ReadTimeout), READ_TIMEOUT)
                .with_url(url)
                .build()?;
            Ok((Arc::new(store), prefix_of(rest)?))
        }
        "file" => {
            let dir = std::path::Path::new(rest);
            if !dir.is_absolute() {
                bail!("a file:// URL names an absolute folder (file:///shared/cache)");
            }
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let store = object_store::local::LocalFileSystem::new_with_prefix(dir)?
                .with_automatic_cleanup(true);
            Ok((Arc::new(store), ObjectPath::default()))
        }
        other => bail!("unknown scheme {other}:// (s3, gs, az or file)"),
    }
}
