//! `cache`: what the local cache holds by node kind (and what the shared one holds and did for
//! it), trimming it, filling the shared one, and making a signing key. Functions of plain
//! requests returning what they found; the front-end prints.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::store::local::StoreStats;
use crate::store::remote::{Remote, RemoteCounts};
use crate::store::{Store, remote, signing};

/// Entries and bytes by node kind.
pub type ByKind = BTreeMap<String, (u64, u64)>;

/// What `cache stats` found.
pub struct CacheStats {
    pub dir: PathBuf,
    pub local: StoreStats,
    /// What each shared cache did for this local one, summed over its runs.
    pub recorded: BTreeMap<String, RemoteCounts>,
    /// With a shared cache given: its URL and what it holds by node kind.
    pub remote: Option<(String, ByKind)>,
}

/// `cache stats`: the local cache `dir`, and the shared one when given.
pub fn stats(dir: &Path, remote: Option<Remote>) -> Result<CacheStats> {
    let local = Store::open(dir)?.stats();
    let recorded = remote::recorded_counts(dir);
    let remote = match remote {
        Some(r) => {
            let by_kind = r
                .list("objects")
                .with_context(|| format!("remote cache {}: cannot list", r.url()))?;
            Some((r.url().to_string(), by_kind))
        }
        None => None,
    };
    Ok(CacheStats {
        dir: dir.to_path_buf(),
        local,
        recorded,
        remote,
    })
}

/// What `cache push` did: entries of the local cache, and the shared cache's counts.
pub struct Pushed {
    pub entries: u64,
    pub counts: RemoteCounts,
    pub url: String,
}

/// `cache push`: every local entry the shared cache lacks, uploaded.
pub fn push(dir: &Path, remote: Option<Remote>) -> Result<Pushed> {
    let Some(remote) = remote else {
        bail!("cache push needs the shared cache: give --cache-url URL");
    };
    let url = remote.url().to_string();
    let store = Store::open(dir)?.with_remote(Some(remote));
    let (entries, counts) = store.push();
    Ok(Pushed {
        entries,
        counts,
        url,
    })
}

/// `cache gc`: entries removed until the cache is under `max_bytes` and none is older than
/// `max_age` (least recently used first); leftovers of killed runs removed.
pub fn gc(dir: &Path, max_bytes: Option<u64>, max_age: Option<Duration>) -> Result<StoreStats> {
    if max_bytes.is_none() && max_age.is_none() {
        bail!("cache gc needs --max-size and/or --max-age");
    }
    Ok(Store::open(dir)?.gc(max_bytes, max_age))
}

/// `cache keygen`: a signing key pair named `name`; the secret written to `output` (a new
/// file, readable by its owner only), the public key returned.
pub fn keygen(name: &str, output: &Path) -> Result<String> {
    let (secret, public) = signing::keygen(name)?;
    write_secret(output, secret.as_bytes())?;
    Ok(public)
}

/// Writes a secret to a new file readable by its owner only (never over an existing file).
pub fn write_secret(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| {
            format!(
                "{}: cannot create (an existing key is never replaced)",
                path.display()
            )
        })?;
    f.write_all(bytes)
        .with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(())
}
