//! The graph engine: node keys, node kinds and their versions, computing or loading a node
//! through the store ([`crate::store`]), and the run log.
//!
//! A node is identified by a [`Key`]: blake3 over its kind, its version (that of all the code
//! its kind's files reach, derived from the module graph at build time: [`kinds`],
//! [`versions`]), its parameters and the keys of its inputs.
//! [`Engine::node`] returns the stored value for a key when the store has a verified entry,
//! and otherwise computes it, stores it atomically and records the execution. In-process
//! memoisation and dependency tracking are salsa's job (see [`crate::graph`]).

pub mod key;
pub mod kinds;
pub mod node;
pub mod runlog;
pub mod value;
pub mod versions;

pub use crate::store::Store;
pub use key::{Key, KeyBuilder};
pub(crate) use node::node_kind;
pub use node::{Keep, Node};
pub use runlog::{NodeRecord, RunLog, RunRecord, Status};
pub use value::Value;

use crate::error::Failure;
use crate::store::{claims, filememo, remote};
use anyhow::Result;
use std::any::Any;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Instant;

/// Refuses to compute `node` from a file its kind's files do not reach (see
/// [`Engine::compute`]).
#[track_caller]
fn check_caller<N: Node>(node: &N) -> Result<()> {
    let caller = std::panic::Location::caller().file();
    let roots = node.roots();
    if roots.iter().any(|r| versions::reaches(r, caller)) {
        return Ok(());
    }
    anyhow::bail!(
        "node kind {} is computed in {caller}, which its files ({}) do not reach: its version \
         would not cover that code (a bug)",
        node.kind(),
        roots.join(", ")
    )
}

type Shared = Arc<dyn Any + Send + Sync>;

/// In-process results by node: concurrent requests for the same key compute once.
type Cells = Mutex<HashMap<(String, Key), Arc<OnceLock<Result<Shared, Failure>>>>>;

/// Values of volatile nodes, alive only as long as someone holds them.
type Held = Mutex<HashMap<(String, Key), Weak<dyn Any + Send + Sync>>>;

pub struct Engine {
    store: Option<Store>,
    /// Raised when storing an entry failed (a full disk): the run goes on without storing.
    store_failed: std::sync::atomic::AtomicBool,
    cells: Cells,
    held: Held,
    memo: filememo::FileMemo,
    /// Large files hashed by this run, whose keys [`Engine::publish_claims`] claims.
    unclaimed: Mutex<Vec<(PathBuf, std::fs::Metadata, Key)>>,
    log: RunLog,
    started: Mutex<Instant>,
}

impl Engine {
    /// An engine backed by the store at `cache_dir` (None: nothing persists).
    pub fn new(cache_dir: Option<&Path>) -> Result<Engine> {
        Engine::tiered(cache_dir, None)
    }

    /// An engine backed by the store at `cache_dir` with the remote tier at `remote_url` as its
    /// second tier (see [`remote`]).
    pub fn tiered(cache_dir: Option<&Path>, remote_url: Option<&str>) -> Result<Engine> {
        let remote = remote_url.map(remote::Remote::open).transpose()?;
        let store = match (cache_dir, remote) {
            // A cache folder that cannot be made or written (read-only, no permission) costs
            // one warning: the results do not depend on the cache.
            (Some(dir), remote) => match Store::open(dir) {
                Ok(store) => Some(store.with_remote(remote)),
                Err(e) => {
                    crate::error::warn(&format!(
                        "cache {}: cannot use it ({}); continuing without caching{}",
                        dir.display(),
                        root_cause(&e),
                        if remote.is_some() {
                            " (nor the remote cache)"
                        } else {
                            ""
                        }
                    ));
                    None
                }
            },
            (None, None) => None,
            (None, Some(_)) => {
                anyhow::bail!("a remote cache needs the local one (drop --no-cache)")
            }
        };
        let memo_file = store.as_ref().map(|s| s.root().join("file-keys.json"));
        Ok(Engine {
            memo: filememo::FileMemo::load(memo_file),
            store,
            store_failed: Default::default(),
            cells: Mutex::new(HashMap::new()),
            held: Mutex::new(HashMap::new()),
            unclaimed: Mutex::default(),
            log: RunLog::default(),
            started: Mutex::new(Instant::now()),
        })
    }

    pub fn store(&self) -> Option<&Store> {
        self.store.as_ref()
    }

    /// The content key of an input file (memoised on path, size, mtime and inode). A large
    /// file hashed here is noted, to be claimed in the remote tier for other machines by
    /// [`Engine::publish_claims`] ([`claims`]); keying writes nothing.
    pub fn file_key(&self, path: &Path) -> Result<Key> {
        self.file_key_read(path, || Ok(None))
    }

    /// [`Engine::file_key`], with `read` computing the content key when it is not memoised
    /// (None: the file is hashed as it is read); e.g. an archive read whole, whose members
    /// are keyed from the same bytes.
    pub fn file_key_read(
        &self,
        path: &Path,
        read: impl FnOnce() -> Result<Option<Key>>,
    ) -> Result<Key> {
        let (key, hashed) = self.memo.key_of_read(path, read)?;
        if let Some(md) = hashed
            && claims::wanted(&md)
            && self.remote().is_some()
        {
            let pending = (path.to_path_buf(), md, key);
            self.unclaimed.lock().unwrap().push(pending);
        }
        Ok(key)
    }

    fn remote(&self) -> Option<&remote::Remote> {
        self.store.as_ref()?.remote()
    }

    /// The run's step that claims, in the remote tier, the content keys of the large files
    /// this run hashed (so that other machines key them without reading them): the files
    /// that did not change since they were hashed. Returns how many were claimed.
    pub fn publish_claims(&self) -> usize {
        use std::os::unix::fs::MetadataExt;
        let pending = std::mem::take(&mut *self.unclaimed.lock().unwrap());
        let Some(remote) = self.remote() else {
            return 0;
        };
        let mut n = 0;
        for (path, md, key) in pending {
            let same = std::fs::metadata(&path).is_ok_and(|now| {
                (now.len(), filememo::mtime_ns(&now), now.ino())
                    == (md.len(), filememo::mtime_ns(&md), md.ino())
            });
            if let Some(fp) = claims::fingerprint(&path, &md).filter(|_| same) {
                let name = claims::object_name(&fp);
                remote.put_claim(&name, claims::encode(&name, &key));
                n += 1;
            }
        }
        n
    }

    /// Take the content keys of the large files among `paths` that the local memo does not
    /// know from their claims in the remote tier (asked all at once), so that opening them
    /// does not read them whole ([`claims`]). Files without a claim are hashed when keyed.
    pub fn claim_file_keys(&self, paths: &[&Path]) {
        use rayon::prelude::*;
        let Some(remote) = self.remote() else { return };
        let wanted: Vec<(&Path, std::fs::Metadata, String)> = paths
            .par_iter()
            .filter_map(|&p| {
                let md = std::fs::metadata(p).ok()?;
                if !claims::wanted(&md) || self.memo.knows(p, &md) {
                    return None;
                }
                let name = claims::object_name(&claims::fingerprint(p, &md)?);
                Some((p, md, name))
            })
            .collect();
        let names = wanted.iter().map(|w| w.2.clone()).collect();
        let got: HashMap<String, Vec<u8>> = remote.get_objects(names).into_iter().collect();
        let mut claimed = 0;
        for (path, md, name) in &wanted {
            let Some(bytes) = got.get(name) else { continue };
            match claims::decode(name, bytes) {
                Some(key) => {
                    self.memo.adopt(path, md, key);
                    claimed += 1;
                }
                // Damaged, or another file's claim under this one's name: the file is hashed,
                // and the claim made from that replaces it.
                None => crate::error::warn(&format!(
                    "remote cache {}: claim {name} for {} is damaged or another file's; \
                     hashing the file",
                    remote.url(),
                    path.display()
                )),
            }
        }
        remote.claimed(claimed);
    }

    /// A key derived from a file by `compute` (see [`filememo::FileMemo::derived`]).
    pub fn file_derived(
        &self,
        path: &Path,
        tag: &str,
        compute: impl FnOnce() -> Result<Key>,
    ) -> Result<Key> {
        self.memo.derived(path, tag, compute)
    }

    /// Whether [`Engine::file_derived`] would find the key of `path` under `tag` memoised
    /// (and not run its computation).
    pub fn file_derived_known(&self, path: &Path, tag: &str) -> bool {
        self.memo.recorded(path, tag).is_some()
    }

    /// Whether the file at `path` is, unchanged, the output this engine recorded with `key`
    /// (see [`Engine::record_output`]).
    pub fn output_is(&self, path: &Path, key: Key) -> bool {
        self.store.is_some() && self.memo.recorded(path, "written-output") == Some(key)
    }

    /// Saves the file-key memo (as [`Engine::finish`] does), for outputs recorded after it.
    pub fn save_memo(&self) {
        self.memo.save();
        if let Some(s) = &self.store {
            s.save_verified();
        }
    }

    /// Record that the file at `path` was written with content key `key`, so that a later
    /// run producing the same content can leave it as it is.
    pub fn record_output(&self, path: &Path, key: Key) -> Result<()> {
        self.memo.record(path, "written-output", key)
    }

    /// The key and value of `node`, kept as its kind says ([`Keep`]; see [`Engine::node`],
    /// [`Engine::volatile_node`] and [`Engine::transient`]).
    ///
    /// The file calling it must be reached from the kind's files: else the code computing the
    /// value would not be part of the kind's version, and an edit of it would not reach the
    /// stored values (a bug, refused).
    #[track_caller]
    pub fn compute<N: Node>(
        &self,
        node: &N,
        label: &str,
        compute: impl FnOnce() -> Result<N::Value>,
    ) -> Result<(Key, Arc<N::Value>)>
    where
        N::Value: Value,
    {
        check_caller(node)?;
        let key = node.key();
        let value = match N::KEEP {
            Keep::Stored => self.node(node.kind(), label, key, compute),
            Keep::Volatile => self.volatile_node(node.kind(), label, key, compute),
            Keep::Transient => self.transient(node.kind(), label, key, compute),
            Keep::Held => self.weakly_held(node.kind(), label, key, || {
                self.transient(node.kind(), label, key, compute)
            }),
        }?;
        Ok((key, value))
    }

    /// The key and value of a node whose values are never stored ([`Keep::Transient`]).
    #[track_caller]
    pub fn compute_transient<N: Node>(
        &self,
        node: &N,
        label: &str,
        compute: impl FnOnce() -> Result<N::Value>,
    ) -> Result<(Key, Arc<N::Value>)> {
        debug_assert_eq!(N::KEEP, Keep::Transient, "{} is stored", node.kind());
        check_caller(node)?;
        let key = node.key();
        Ok((key, self.transient(node.kind(), label, key, compute)?))
    }

    /// Ask the shared cache, many at once, whether it holds `nodes` (see
    /// [`Store::prefetch_presence`]): a run about to ask [`Engine::stored`] of each.
    pub fn prefetch_presence(&self, nodes: &[(String, Key)]) {
        if let Some(store) = &self.store
            && store.remote().is_some()
        {
            store.prefetch_presence(nodes);
        }
    }

    /// Fetch the stored values of `nodes` from the shared cache, many at once, when there is
    /// one and they are not local (see [`Store::prefetch`]): a run about to read them one by
    /// one then finds them locally.
    pub fn prefetch(&self, nodes: &[(String, Key)]) {
        if let Some(store) = &self.store
            && store.remote().is_some()
        {
            store.prefetch(nodes);
        }
    }

    /// Whether a shared cache is behind the local one.
    pub fn has_remote(&self) -> bool {
        self.store.as_ref().is_some_and(|s| s.remote().is_some())
    }

    /// Whether the store holds a value for `node` (without reading it).
    pub fn is_stored<N: Node>(&self, node: &N) -> bool {
        self.stored(node.kind(), &node.key())
    }

    /// Whether `node`'s value is at hand without computing it: held in this process or in
    /// the store.
    pub fn has_value<N: Node>(&self, node: &N) -> bool {
        let id = (node.kind().to_string(), node.key());
        let in_cell =
            (self.cells.lock().unwrap().get(&id)).is_some_and(|c| matches!(c.get(), Some(Ok(_))));
        let held = (self.held.lock().unwrap().get(&id)).is_some_and(|w| w.strong_count() > 0);
        in_cell || held || self.stored(&id.0, &id.1)
    }

    /// Whether the store holds a value of kind `kind` for `key`.
    pub fn stored(&self, kind: &str, key: &Key) -> bool {
        self.store.as_ref().is_some_and(|s| s.contains(kind, key))
    }

    /// The value of node `(kind, key)`: from the store when present and intact, else computed
    /// by `compute`, stored and recorded as executed. Within one process, concurrent and later
    /// requests for the same node share one computation (nodes of identical content, such as
    /// the same HLO dump in several ranks, are computed once).
    fn node<T: Value>(
        &self,
        kind: &str,
        label: &str,
        key: Key,
        compute: impl FnOnce() -> Result<T>,
    ) -> Result<Arc<T>> {
        self.shared(kind, label, key, || {
            self.node_uncached(kind, label, key, compute)
        })
    }

    /// Like [`Engine::node`] for a large value (a process's frames): shared within the process
    /// only while some caller still holds it, so that a run over many processes keeps only
    /// the frames in use in memory. A later request after the last holder let go loads it
    /// from the store again.
    fn volatile_node<T: Value>(
        &self,
        kind: &str,
        label: &str,
        key: Key,
        compute: impl FnOnce() -> Result<T>,
    ) -> Result<Arc<T>> {
        self.weakly_held(kind, label, key, || self.node(kind, label, key, compute))
    }

    /// The value `get` gives (computed once for concurrent requests, through the node's
    /// cell), then shared only while some caller holds it.
    fn weakly_held<T: Send + Sync + 'static>(
        &self,
        kind: &str,
        label: &str,
        key: Key,
        get: impl FnOnce() -> Result<Arc<T>>,
    ) -> Result<Arc<T>> {
        let id = (kind.to_string(), key);
        let alive = self.held.lock().unwrap().get(&id).and_then(Weak::upgrade);
        if let Some(v) = alive {
            self.record(kind, label, key, Status::Reused, Instant::now());
            return Ok(v.downcast::<T>().expect("one value type per node kind"));
        }
        let v = get();
        // From now on the value is found through the weak entry; the cell (which would keep
        // it alive) goes. Entries whose values died are dropped on each insertion.
        let mut held = self.held.lock().unwrap();
        if let Ok(v) = &v {
            held.retain(|_, w| w.strong_count() > 0);
            let any: Shared = v.clone();
            held.insert(id.clone(), Arc::downgrade(&any));
        }
        self.cells.lock().unwrap().remove(&id);
        v
    }

    /// Like [`Engine::node`] for a value that is cheaper to recompute than to store and load
    /// (e.g. a decoded HLO module): shared within the process, never persisted.
    fn transient<T: Send + Sync + 'static>(
        &self,
        kind: &str,
        label: &str,
        key: Key,
        compute: impl FnOnce() -> Result<T>,
    ) -> Result<Arc<T>> {
        self.shared(kind, label, key, || {
            let t0 = Instant::now();
            let v = compute()?;
            self.record(kind, label, key, Status::Executed, t0);
            Ok(Arc::new(v))
        })
    }

    fn shared<T: Send + Sync + 'static>(
        &self,
        kind: &str,
        label: &str,
        key: Key,
        compute: impl FnOnce() -> Result<Arc<T>>,
    ) -> Result<Arc<T>> {
        let cell = self
            .cells
            .lock()
            .unwrap()
            .entry((kind.to_string(), key))
            .or_default()
            .clone();
        let mut ran = false;
        let result = cell.get_or_init(|| {
            ran = true;
            compute().map(|v| v as Shared).map_err(Failure::from)
        });
        if !ran {
            self.record(kind, label, key, Status::Reused, Instant::now());
        }
        match result {
            Ok(v) => Ok(v
                .clone()
                .downcast::<T>()
                .expect("one value type per node kind")),
            Err(e) => Err(e.clone().into()),
        }
    }

    fn node_uncached<T: Value>(
        &self,
        kind: &str,
        label: &str,
        key: Key,
        compute: impl FnOnce() -> Result<T>,
    ) -> Result<Arc<T>> {
        let t0 = Instant::now();
        if let Some(store) = &self.store
            && let Some(bytes) = store.get(kind, &key)
        {
            match T::decode_shared(bytes) {
                Ok(v) => {
                    self.record(kind, label, key, Status::Reused, t0);
                    return Ok(Arc::new(v));
                }
                Err(e) => {
                    tracing::warn!(
                        "cache entry for {kind} {} unreadable ({e}); recomputing",
                        key.short()
                    );
                    // Whole and bound to its key, yet not a value of this kind: its
                    // replacement goes over it, here and in a shared cache.
                    store.discard(kind, &key);
                }
            }
        }
        let mut value = compute()?;
        if let Some(store) = &self.store {
            // What is kept is the value read back from what is stored: a large value and its
            // stored bytes are not both held (docs/design.md, "Bounded memory").
            let bytes;
            (bytes, value) = value.encode_owned()?;
            self.put(store, kind, &key, &bytes);
        }
        self.record(kind, label, key, Status::Executed, t0);
        Ok(Arc::new(value))
    }

    /// Store an entry. The first failure (a full disk, a read-only or foreign cache folder)
    /// is reported in one line and ends storing for the run, which goes on uncached: the
    /// results do not depend on the cache.
    fn put(&self, store: &Store, kind: &str, key: &Key, payload: &[u8]) {
        use std::sync::atomic::Ordering;
        if self.store_failed.load(Ordering::Relaxed) {
            return;
        }
        if let Err(e) = store.put(kind, key, payload)
            && !self.store_failed.swap(true, Ordering::SeqCst)
        {
            eprintln!(
                "nsys-jax-pipe: warning: cache {}: cannot store entries ({}); continuing without caching",
                store.root().display(),
                root_cause(&e)
            );
        }
    }

    fn record(&self, kind: &str, label: &str, key: Key, status: Status, t0: Instant) {
        self.log.push(NodeRecord {
            kind: kind.to_string(),
            label: label.to_string(),
            key,
            status,
            ms: t0.elapsed().as_secs_f64() * 1e3,
        });
    }

    /// Start the next run of a long-lived engine: its record counts from here.
    pub fn restart(&self) {
        self.log.clear();
        *self.started.lock().unwrap() = Instant::now();
    }

    /// Finish the run: wait for the remote tier's uploads, save the file-key memo and return
    /// the run record.
    pub fn finish(&self) -> RunRecord {
        // The run's last steps: claims of the files it hashed, then the shared tier flushed.
        self.publish_claims();
        let remote = self.store.as_ref().and_then(|s| {
            let r = s.remote()?;
            let counts = r.flush();
            remote::record_counts(s.root(), r.url(), &counts);
            Some(runlog::RemoteRecord {
                url: r.url().to_string(),
                counts,
            })
        });
        self.memo.save();
        if let Some(s) = &self.store {
            s.save_verified();
        }
        let wall = self.started.lock().unwrap().elapsed();
        let mut record = self.log.finish(wall.as_secs_f64() * 1e3);
        record.remote = remote;
        record
    }
}

/// The innermost cause of `e`, an OS error without its number: "No space left on device".
fn root_cause(e: &anyhow::Error) -> String {
    crate::error::without_os_code(e.root_cause().to_string())
}

/// The cache directory: `--cache-dir`, else `$NSYS_JAX_PIPE_CACHE`, else `cache/` of the
/// checkout the binary was built from when that still exists, else the user's cache folder.
pub fn default_cache_dir(flag: Option<&Path>) -> PathBuf {
    if let Some(p) = flag {
        return p.to_path_buf();
    }
    if let Some(p) = std::env::var_os("NSYS_JAX_PIPE_CACHE").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("cache");
    if checkout.is_dir() {
        return checkout;
    }
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("nsys-jax-pipe")
}
