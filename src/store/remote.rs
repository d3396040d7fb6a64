//! The remote tier of the cache: the store's entries, byte for byte and under the same names,
//! in object storage (S3 and S3-compatible servers, Google Cloud Storage, Azure Blob Storage,
//! a shared file system) through the `object_store` crate (S3, GCS and Azure each behind its
//! cargo feature, `s3`, `gcs`, `azure`, all on by default; HTTPS and signing on ring). The local store is the first tier
//! and this the second (docs/design.md, "The shared cache"):
//!
//! - read-through: an entry missing locally is fetched, verified like a local one (length and
//!   blake3) and kept locally; a damaged object is reported missing (the node is recomputed)
//!   and replaced by the recomputed entry;
//! - write-through: a new entry is uploaded in the background while the run goes on (at most
//!   [`IN_FLIGHT`] uploads at once), with put-if-absent, so concurrent writers of one key are
//!   safe; [`Remote::flush`] waits for the uploads;
//! - a remote failure never changes a result: an unreachable store (after bounded retries and
//!   timeouts) is one warning and the rest of the run uses the local tier alone; a denied
//!   write is one warning and the run goes on reading.

use super::pace::Pace;
use anyhow::{Context, Result};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Uploads in flight at once (each holds its entry in memory until it is sent).
const IN_FLIGHT: usize = 16;
/// Threads for blocking work on the I/O runtime.
const BLOCKING_THREADS: usize = 4;
/// Fetches in flight at once when many entries are wanted together.
const FETCH_IN_FLIGHT: usize = 32;

/// What the remote tier did in one run.
#[derive(Debug, Default, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RemoteCounts {
    /// Entries read from the remote tier (missing locally).
    pub hits: u64,
    /// Entries asked for and absent there too.
    pub misses: u64,
    /// Entries uploaded.
    pub uploads: u64,
    /// Objects that failed their check (recomputed and replaced).
    pub damaged: u64,
    /// Input files whose content key was taken from a claim instead of reading them
    /// ([`super::claims`]).
    #[serde(default)]
    pub claimed: u64,
}

impl RemoteCounts {
    pub fn add(&mut self, o: &RemoteCounts) {
        self.hits += o.hits;
        self.misses += o.misses;
        self.uploads += o.uploads;
        self.damaged += o.damaged;
        self.claimed += o.claimed;
    }
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    uploads: AtomicU64,
    damaged: AtomicU64,
    claimed: AtomicU64,
}

const OK: u8 = 0;
const READ_ONLY: u8 = 1;
const OFF: u8 = 2;

pub struct Remote {
    url: String,
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    rt: tokio::runtime::Runtime,
    /// [`OK`], [`READ_ONLY`] (a write was denied) or [`OFF`] (the store failed).
    state: Arc<AtomicU8>,
    /// What the tier delivered for the time the run waited on it (see [`super::pace`]).
    pace: Arc<Pace>,
    /// Set when the store refuses put-if-absent: entries are then written over (they are
    /// content-addressed, so a concurrent writer writes the same bytes).
    no_create: Arc<AtomicBool>,
    /// Names of objects found damaged in this run: their replacement is written over them.
    damaged: Mutex<HashSet<String>>,
    /// Names of objects refused in this run (damaged or untrusted): not fetched again, so that
    /// each is reported once.
    refused: Mutex<HashSet<String>>,
    permits: Arc<tokio::sync::Semaphore>,
    uploads: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    counts: Arc<Counters>,
    /// The key this machine signs the entries it uploads with
    /// (`NSYS_JAX_PIPE_CACHE_SIGNING_KEY`: the secret key file).
    signer: Option<Arc<super::signing::SigningKey>>,
    /// The keys whose entries this machine accepts (`NSYS_JAX_PIPE_CACHE_TRUSTED_KEYS`); none:
    /// any entry whose check holds.
    trust: Option<Arc<super::signing::Trust>>,
    /// Whether an untrusted entry was said (once per run).
    untrusted_said: std::sync::atomic::AtomicBool,
}

/// Where the signing key and the trusted keys come from.
pub const SIGNING_KEY_VAR: &str = "NSYS_JAX_PIPE_CACHE_SIGNING_KEY";
pub const TRUSTED_KEYS_VAR: &str = "NSYS_JAX_PIPE_CACHE_TRUSTED_KEYS";

impl Remote {
    /// Open the remote tier at `url` (`s3://bucket/prefix`, `gs://…`, `az://…`,
    /// `file:///path`). Credentials, region and endpoint come from the usual environment
    /// variables of each service (`AWS_*` including `AWS_ENDPOINT_URL`, `GOOGLE_*`,
    /// `AZURE_*`). Nothing is contacted here: a store that cannot be reached is found out (and
    /// warned about) at its first use.
    pub fn open(url: &str) -> Result<Remote> {
        let (store, prefix) =
            super::remote_store::build(url).with_context(|| format!("cache URL {url}"))?;
        let var = |v: &str| std::env::var(v).ok().filter(|s| !s.trim().is_empty());
        let signer = var(SIGNING_KEY_VAR)
            .map(|p| super::signing::SigningKey::load(std::path::Path::new(&p)))
            .transpose()
            .with_context(|| format!("${SIGNING_KEY_VAR}"))?
            .map(Arc::new);
        let trust = var(TRUSTED_KEYS_VAR)
            .map(|t| super::signing::Trust::parse(&t))
            .transpose()
            .with_context(|| format!("${TRUSTED_KEYS_VAR}"))?
            .map(Arc::new);
        // Few blocking threads (entries checked and kept; a shared file system's reads): a
        // large pool on a small machine only adds wake-ups and thread starts.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(BLOCKING_THREADS)
            .thread_name("remote-cache")
            .enable_all()
            .build()
            .context("cannot start the remote cache's I/O threads")?;
        Ok(Remote {
            url: url.to_string(),
            store,
            prefix,
            rt,
            state: Arc::new(AtomicU8::new(OK)),
            pace: Default::default(),
            no_create: Default::default(),
            damaged: Default::default(),
            refused: Default::default(),
            permits: Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT)),
            uploads: Default::default(),
            counts: Default::default(),
            signer,
            trust,
            untrusted_said: Default::default(),
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    fn object(&self, name: &str) -> ObjectPath {
        name.split('/')
            .fold(self.prefix.clone(), |p, part| p.join(part))
    }

    /// The object `name` (a path relative to the prefix), or None when absent or when the
    /// store failed (then warned once, and off for the rest of the run).
    pub fn get(&self, name: &str) -> Option<Vec<u8>> {
        if self.state.load(Ordering::Relaxed) == OFF {
            return None;
        }
        let path = self.object(name);
        let store = self.store.clone();
        let got = self.wait_on(async move {
            let r = store.get(&path).await?;
            r.bytes().await
        })?;
        match got {
            Ok(b) => {
                self.pace.delivered(b.len());
                Some(b.to_vec())
            }
            Err(object_store::Error::NotFound { .. }) => {
                self.pace.delivered(0);
                None
            }
            Err(e) => {
                self.fail(OFF, &e);
                None
            }
        }
    }

    /// Whether object `name` exists (asked, not fetched: a large entry, such as a process's
    /// frames, is often only asked about).
    pub fn contains(&self, name: &str) -> bool {
        if self.state.load(Ordering::Relaxed) == OFF {
            return false;
        }
        let (store, path) = (self.store.clone(), self.object(name));
        match self.rt.block_on(async move { store.head(&path).await }) {
            Ok(_) => true,
            Err(object_store::Error::NotFound { .. }) => false,
            Err(e) => {
                self.fail(OFF, &e);
                false
            }
        }
    }

    /// Which of objects `names` exist, asked [`FETCH_IN_FLIGHT`] at a time.
    pub fn present(&self, names: Vec<String>) -> Vec<String> {
        use futures::StreamExt;
        if self.state.load(Ordering::Relaxed) == OFF || names.is_empty() {
            return Vec::new();
        }
        let heads = futures::stream::iter(names.into_iter().map(|name| {
            let (store, path) = (self.store.clone(), self.object(&name));
            async move { (name, store.head(&path).await) }
        }))
        .buffer_unordered(FETCH_IN_FLIGHT);
        let mut found = Vec::new();
        self.rt.block_on(heads.for_each(|(name, head)| {
            match head {
                Ok(_) => found.push(name),
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => self.fail(OFF, &e),
            }
            futures::future::ready(())
        }));
        found
    }

    /// A cache entry (the store's bytes: header and payload), verified by `verify`; counted
    /// as a hit, a miss or a damaged object.
    pub fn get_entry(&self, name: &str, verify: impl Fn(&[u8]) -> bool) -> Option<Vec<u8>> {
        if self.refused.lock().unwrap().contains(name) {
            return None;
        }
        let Some(bytes) = self.get(name) else {
            if self.state.load(Ordering::Relaxed) != OFF {
                self.counts.misses.fetch_add(1, Ordering::Relaxed);
            }
            return None;
        };
        if !self.trusts(&bytes) {
            self.untrusted_entry(name);
            None
        } else if verify(&bytes) {
            self.counts.hits.fetch_add(1, Ordering::Relaxed);
            Some(bytes)
        } else {
            self.damaged_entry(name);
            None
        }
    }

    /// Fetch the cache entries `names`, [`FETCH_IN_FLIGHT`] at a time, handing each one to
    /// `take` as it arrives, on the I/O runtime's blocking threads (so that checking and
    /// keeping entries runs in parallel with the fetches and with each other). `take` checks
    /// the entry and returns whether it was good: absent ones are misses; damaged ones are
    /// counted, warned about and left out, as by [`Remote::get_entry`]. Returns the names
    /// found absent.
    pub fn get_entries(
        &self,
        names: Vec<String>,
        take: Arc<dyn Fn(&str, &[u8]) -> bool + Send + Sync>,
    ) -> Vec<String> {
        use futures::StreamExt;
        let mut absent = Vec::new();
        let names: Vec<String> = {
            let refused = self.refused.lock().unwrap();
            names.into_iter().filter(|n| !refused.contains(n)).collect()
        };
        if self.state.load(Ordering::Relaxed) == OFF || names.is_empty() {
            return absent;
        }
        let fetches = futures::stream::iter(names.into_iter().map(|name| {
            let (store, path, take) = (self.store.clone(), self.object(&name), take.clone());
            let (trust, pace) = (self.trust.clone(), self.pace.clone());
            async move {
                let got = async {
                    let r = store.get(&path).await?;
                    r.bytes().await
                }
                .await;
                // An absent object is an answer too (a cold run's batches are mostly that).
                match &got {
                    Ok(b) => pace.delivered(b.len()),
                    Err(object_store::Error::NotFound { .. }) => pace.delivered(0),
                    Err(_) => {}
                }
                // 1: taken; 0: damaged; 2: not signed by a trusted key (never taken).
                let good = match &got {
                    Ok(b) if trust.as_ref().is_some_and(|t| !t.accepts(b)) => 2,
                    Ok(b) => {
                        let (name, b) = (name.clone(), b.clone());
                        tokio::task::spawn_blocking(move || take(&name, &b))
                            .await
                            .unwrap_or(false) as u8
                    }
                    Err(_) => 0,
                };
                (name, got.map(|_| good))
            }
        }))
        .buffer_unordered(FETCH_IN_FLIGHT);
        // Left unfinished when the tier turns out too slow: the rest is computed locally.
        self.wait_on(fetches.for_each(|(name, got)| {
            match got {
                Ok(1) => {
                    self.counts.hits.fetch_add(1, Ordering::Relaxed);
                }
                Ok(2) => self.untrusted_entry(&name),
                Ok(_) => self.damaged_entry(&name),
                Err(object_store::Error::NotFound { .. }) => {
                    self.counts.misses.fetch_add(1, Ordering::Relaxed);
                    absent.push(name);
                }
                Err(e) => self.fail(OFF, &e),
            }
            futures::future::ready(())
        }));
        absent
    }

    /// Run `f` to its end, unless the tier turns out too slow to wait for meanwhile (see
    /// [`super::pace`]): then it is left for the rest of the run (said once), `f` is
    /// abandoned and None returned.
    fn wait_on<F: std::future::Future>(&self, f: F) -> Option<F::Output> {
        let out = self.pace.wait_on(&self.rt, f);
        if let Err(why) = &out
            && self.state.fetch_max(OFF, Ordering::SeqCst) != OFF
        {
            crate::error::warn(&format!(
                "remote cache {}: {why}; continuing with the local cache only",
                self.url
            ));
        }
        out.ok()
    }

    fn damaged_entry(&self, name: &str) {
        crate::error::warn(&format!(
            "remote cache {}: entry {name} is damaged; recomputing it",
            self.url
        ));
        self.counts.damaged.fetch_add(1, Ordering::Relaxed);
        self.refused.lock().unwrap().insert(name.to_string());
        self.replace(name);
    }

    /// Whether `bytes` may be used as far as signatures go: always without trusted keys.
    fn trusts(&self, bytes: &[u8]) -> bool {
        self.trust.as_ref().is_none_or(|t| t.accepts(bytes))
    }

    /// An entry not signed by a trusted key: refused (said once per run), recomputed, and
    /// replaced by a machine that signs.
    fn untrusted_entry(&self, name: &str) {
        if !self.untrusted_said.swap(true, Ordering::Relaxed) {
            crate::error::warn(&format!(
                "remote cache {}: entry {name} is not signed by a trusted key; refusing it and \
                 every other such entry of this run (recomputed)",
                self.url
            ));
        }
        self.counts.damaged.fetch_add(1, Ordering::Relaxed);
        self.refused.lock().unwrap().insert(name.to_string());
        self.replace(name);
    }

    /// Whether this machine uploads: not when it trusts only signed entries but signs none
    /// (its entries would be refused by every machine that trusts the same keys).
    fn writes(&self) -> bool {
        self.trust.is_none() || self.signer.is_some()
    }

    /// The next upload of `name` goes over the object there (it is not a good entry).
    pub(super) fn replace(&self, name: &str) {
        self.damaged.lock().unwrap().insert(name.to_string());
    }

    /// Upload `bytes` as `name` in the background (put-if-absent, or written over a damaged
    /// object or, with `overwrite`, always). Waits only while [`IN_FLIGHT`] uploads are
    /// running.
    pub fn put(&self, name: &str, mut bytes: Vec<u8>, overwrite: bool) {
        if !self.writes() {
            return;
        }
        if let Some(key) = &self.signer
            && super::entry::signature(&bytes).is_none()
            && let Some(hash) = super::entry::check_hash(&bytes)
        {
            let t = key.trailer(hash);
            bytes.extend_from_slice(&t);
        }
        self.upload(name, bytes, overwrite, true)
    }

    /// The objects `names` that exist (not cache entries: nothing is checked or counted),
    /// fetched [`FETCH_IN_FLIGHT`] at a time.
    pub fn get_objects(&self, names: Vec<String>) -> Vec<(String, Vec<u8>)> {
        use futures::StreamExt;
        if self.state.load(Ordering::Relaxed) == OFF || names.is_empty() {
            return Vec::new();
        }
        let gets = futures::stream::iter(names.into_iter().map(|name| {
            let (store, path, pace) = (self.store.clone(), self.object(&name), self.pace.clone());
            async move {
                let got = async { store.get(&path).await?.bytes().await }.await;
                // An absent object is an answer too (a cold run's batches are mostly that).
                match &got {
                    Ok(b) => pace.delivered(b.len()),
                    Err(object_store::Error::NotFound { .. }) => pace.delivered(0),
                    Err(_) => {}
                }
                (name, got)
            }
        }))
        .buffer_unordered(FETCH_IN_FLIGHT);
        let mut found = Vec::new();
        self.wait_on(gets.for_each(|(name, got)| {
            match got {
                Ok(b) => found.push((name, b.to_vec())),
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => self.fail(OFF, &e),
            }
            futures::future::ready(())
        }));
        // Only claims are read this way: with trusted keys, only signed ones.
        if let Some(t) = &self.trust {
            found.retain(|(_, b)| {
                super::claims::split(b)
                    .is_some_and(|(c, s)| t.accepts_trailer(super::claims::check_of(c), s))
            });
        }
        found
    }

    /// Upload the claim `bytes` as `name` in the background, over any object of that name
    /// (not counted as an entry).
    pub fn put_claim(&self, name: &str, mut bytes: Vec<u8>) {
        if !self.writes() {
            return;
        }
        if let Some(key) = &self.signer {
            let t = key.trailer(super::claims::check_of(&bytes));
            bytes.extend_from_slice(&t);
        }
        self.upload(name, bytes, true, false)
    }

    /// Count `n` input files keyed by their claims.
    pub fn claimed(&self, n: u64) {
        self.counts.claimed.fetch_add(n, Ordering::Relaxed);
    }

    fn upload(&self, name: &str, bytes: Vec<u8>, overwrite: bool, counted: bool) {
        if self.state.load(Ordering::Relaxed) != OK {
            return;
        }
        let replacing = self.damaged.lock().unwrap().remove(name);
        if replacing {
            // What this process writes over it may be read again.
            self.refused.lock().unwrap().remove(name);
        }
        let overwrite = overwrite || replacing;
        let permit = self
            .rt
            .block_on(self.permits.clone().acquire_owned())
            .expect("the semaphore is never closed");
        // The store may have failed while this upload waited for its turn.
        if self.state.load(Ordering::Relaxed) != OK {
            return;
        }
        let (store, path) = (self.store.clone(), self.object(name));
        let (state, no_create, counts) = (
            self.state.clone(),
            self.no_create.clone(),
            self.counts.clone(),
        );
        let (url, pace) = (self.url.clone(), self.pace.clone());
        let task = self.rt.spawn(async move {
            let _permit = permit;
            let size = bytes.len();
            let payload = PutPayload::from(bytes);
            let create = !overwrite && !no_create.load(Ordering::Relaxed);
            let mode = if create {
                PutMode::Create
            } else {
                PutMode::Overwrite
            };
            let opts = PutOptions::from(mode);
            let mut r = store.put_opts(&path, payload.clone(), opts).await;
            if create && matches!(r, Err(object_store::Error::NotImplemented { .. })) {
                no_create.store(true, Ordering::Relaxed);
                r = store
                    .put_opts(&path, payload, PutMode::Overwrite.into())
                    .await;
            }
            if r.is_ok() {
                pace.delivered(size);
            }
            match r {
                Ok(_) => {
                    if counted {
                        counts.uploads.fetch_add(1, Ordering::Relaxed);
                    }
                }
                // Another writer stored it first: the same bytes.
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ) => {}
                Err(e) => {
                    let to = if is_denied(&e) { READ_ONLY } else { OFF };
                    fail_state(&state, &url, to, &e);
                }
            }
        });
        self.uploads.lock().unwrap().push(task);
    }

    /// Upload `bytes` as `name` now, over any object of that name. Errors are returned, not
    /// warned.
    pub fn put_now(&self, name: &str, bytes: Vec<u8>) -> Result<()> {
        let (store, path) = (self.store.clone(), self.object(name));
        self.rt
            .block_on(async move { store.put(&path, PutPayload::from(bytes)).await })?;
        Ok(())
    }

    /// Upload the file at `file` as `name` unless an object of that name exists (blobs are
    /// named by their content), streaming it in parts. Errors are returned, not warned.
    pub fn put_file(&self, name: &str, file: &std::path::Path) -> Result<()> {
        use object_store::WriteMultipart;
        use std::io::Read;
        let path = self.object(name);
        let store = self.store.clone();
        let file = file.to_path_buf();
        self.rt.block_on(async move {
            if store.head(&path).await.is_ok() {
                return Ok(());
            }
            let mut f = std::fs::File::open(&file)
                .with_context(|| format!("{}: cannot read", file.display()))?;
            let upload = store.put_multipart(&path).await?;
            let mut w = WriteMultipart::new(upload);
            let mut buf = vec![0u8; 8 << 20];
            loop {
                let n = f
                    .read(&mut buf)
                    .with_context(|| format!("{}: cannot read", file.display()))?;
                if n == 0 {
                    break;
                }
                w.wait_for_capacity(4).await?;
                w.write(&buf[..n]);
            }
            w.finish().await?;
            Ok(())
        })
    }

    /// Download object `name` into `dest` (through a temporary file beside it); false when
    /// there is no such object.
    pub fn get_file(&self, name: &str, dest: &std::path::Path) -> Result<bool> {
        use futures::StreamExt;
        use std::io::Write;
        let path = self.object(name);
        let store = self.store.clone();
        let dir = dest.parent().expect("a file in a folder").to_path_buf();
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let tmp = crate::tmpfiles::TempFile::new_in(&dir, crate::tmpfiles::SUFFIX)
            .with_context(|| format!("cannot write in {}", dir.display()))?;
        let found = self.rt.block_on(async {
            let r = match store.get(&path).await {
                Ok(r) => r,
                Err(object_store::Error::NotFound { .. }) => return Ok(false),
                Err(e) => return Err(anyhow::Error::from(e)),
            };
            let mut w = std::io::BufWriter::new(tmp.file());
            let mut s = r.into_stream();
            while let Some(chunk) = s.next().await {
                w.write_all(&chunk?)?;
            }
            w.flush()?;
            Ok(true)
        })?;
        if found {
            tmp.commit(dest, false)
                .with_context(|| format!("cannot write {}", dest.display()))?;
        }
        Ok(found)
    }

    /// Wait for the uploads started so far; the counts since the last flush.
    pub fn flush(&self) -> RemoteCounts {
        let tasks: Vec<_> = std::mem::take(&mut *self.uploads.lock().unwrap());
        let aborts: Vec<_> = tasks.iter().map(|t| t.abort_handle()).collect();
        let done = self.wait_on(async {
            for t in tasks {
                let _ = t.await;
            }
        });
        if done.is_none() {
            // Too slow: what is not uploaded yet is left to the next machine to compute.
            for a in aborts {
                a.abort();
            }
        }
        let c = &self.counts;
        RemoteCounts {
            hits: c.hits.swap(0, Ordering::Relaxed),
            misses: c.misses.swap(0, Ordering::Relaxed),
            uploads: c.uploads.swap(0, Ordering::Relaxed),
            damaged: c.damaged.swap(0, Ordering::Relaxed),
            claimed: c.claimed.swap(0, Ordering::Relaxed),
        }
    }

    /// Number and total size of the objects under `under` (relative to the prefix), by the
    /// extension of their names.
    pub fn list(&self, under: &str) -> Result<std::collections::BTreeMap<String, (u64, u64)>> {
        use futures::StreamExt;
        let store = self.store.clone();
        let path = self.object(under);
        self.rt.block_on(async move {
            let mut by_kind = std::collections::BTreeMap::new();
            let mut s = store.list(Some(&path));
            while let Some(meta) = s.next().await {
                let meta = meta?;
                let kind = meta.location.extension().unwrap_or_default().to_string();
                let e: &mut (u64, u64) = by_kind.entry(kind).or_default();
                e.0 += 1;
                e.1 += meta.size;
            }
            Ok(by_kind)
        })
    }

    /// The objects under `under` (relative to the prefix): each name relative to `under` and
    /// when it was last written [ms since the Unix epoch].
    pub fn list_names(&self, under: &str) -> Result<Vec<(String, i64)>> {
        use futures::StreamExt;
        let store = self.store.clone();
        let path = self.object(under);
        let prefix = format!("{}/", path.as_ref().trim_end_matches('/'));
        self.rt.block_on(async move {
            let mut out = Vec::new();
            let mut s = store.list(Some(&path));
            while let Some(meta) = s.next().await {
                let meta = meta?;
                let full = meta.location.as_ref();
                let name = full.strip_prefix(&prefix).unwrap_or(full).to_string();
                out.push((name, meta.last_modified.timestamp_millis()));
            }
            Ok(out)
        })
    }

    fn fail(&self, to: u8, e: &object_store::Error) {
        fail_state(&self.state, &self.url, to, e);
    }
}

/// Move to state `to` (never back), warning once per state reached.
/// The file in a local cache that sums, by remote URL, what the remote tier did in the runs
/// that used it (shown by `cache stats`).
const COUNTS_FILE: &str = "remote-counts.json";

type CountsByUrl = std::collections::BTreeMap<String, RemoteCounts>;

/// The remote tier's counts summed over the runs of the local cache at `root`, by URL.
pub fn recorded_counts(root: &std::path::Path) -> CountsByUrl {
    std::fs::read(root.join(COUNTS_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Add one run's counts to those recorded in the local cache at `root` (best effort: the
/// counts are information, not results).
pub fn record_counts(root: &std::path::Path, url: &str, counts: &RemoteCounts) {
    let mut all = recorded_counts(root);
    all.entry(url.to_string()).or_default().add(counts);
    if let Ok(bytes) = serde_json::to_vec_pretty(&all) {
        let _ = crate::tmpfiles::write_atomic(&root.join(COUNTS_FILE), &bytes);
    }
}

fn fail_state(state: &AtomicU8, url: &str, to: u8, e: &object_store::Error) {
    let before = state.fetch_max(to, Ordering::SeqCst);
    if before >= to {
        return;
    }
    let what = if to == READ_ONLY {
        "cannot write; reading only from now on"
    } else {
        "unavailable; continuing with the local cache only"
    };
    crate::error::warn(&format!("remote cache {url}: {what} ({})", short_error(e)));
}

fn is_denied(e: &object_store::Error) -> bool {
    matches!(
        e,
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. }
    ) || {
        let s = e.to_string();
        s.contains("AccessDenied") || s.contains("403 Forbidden") || s.contains("Read-only")
    }
}

/// The error's innermost cause, which says what happened ("Connection refused").
fn short_error(e: &object_store::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(c) = cause.source() {
        cause = c;
    }
    let s = cause.to_string();
    let s = s.split(" (os error").next().unwrap_or(&s);
    s.replace('\n', " ").chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked() {
        for (url, problem) in [
            ("bucket/prefix", "not a URL"),
            ("ftp://host/x", "unknown scheme"),
            ("file://relative/x", "absolute folder"),
        ] {
            let e = format!("{:#}", Remote::open(url).err().unwrap());
            assert!(e.contains(problem), "{url}: {e}");
            assert!(e.contains(url), "{url}: {e}");
        }
    }

    #[test]
    fn file_store_round_trip_put_if_absent_and_damage() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().join("remote").display());
        let r = Remote::open(&url).unwrap();
        let name = "objects/ab/cd.k";
        let counts = |c: RemoteCounts| (c.hits, c.misses, c.uploads, c.damaged);
        assert_eq!(r.get_entry(name, |_| true), None);
        r.put(name, b"one".to_vec(), false);
        assert_eq!(counts(r.flush()), (0, 1, 1, 0));
        // Put-if-absent: a second writer of the same name leaves the first object.
        r.put(name, b"two".to_vec(), false);
        assert_eq!(counts(r.flush()), (0, 0, 0, 0));
        assert_eq!(r.get(name).unwrap(), b"one");
        // A damaged object is reported missing, and its replacement is written over it.
        assert_eq!(r.get_entry(name, |b| b == b"two"), None);
        r.put(name, b"two".to_vec(), false);
        assert_eq!(counts(r.flush()), (0, 0, 1, 1));
        assert_eq!(r.get_entry(name, |b| b == b"two").unwrap(), b"two");
        assert_eq!(counts(r.flush()), (1, 0, 0, 0));
        let listed = r.list("objects").unwrap();
        assert_eq!(listed["k"], (1, 3));
    }
}
