//! The persistent, content-addressed store: one file per node value, named by its key.
//!
//! Entry format: `MAGIC`, payload length (u64 LE), blake3 of the payload (32 bytes), payload.
//! Entries are written to a temporary file in the store's root (see [`crate::tmpfiles`]: the
//! only place where the store's temporary files lie, so cleaning the leftovers of killed
//! processes lists one small folder) and renamed into place, so a reader never sees a partial
//! entry and concurrent writers of the same key are harmless (both write identical content). Entries are not fsync'ed: an entry torn by a crash fails its
//! checksum and is recomputed. A read verifies length and hash; a damaged entry is deleted and
//! reported as missing, so the caller recomputes it.

use super::entry::{self, HEADER, verify};
use super::key::Key;
use super::packs::{PackWriter, Packs};
use super::verified::Verified;
use crate::tmpfiles::{self, TempFile};
use anyhow::{Context, Result};
use bytes::Bytes;
use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// A prefetch of at least this many entries is kept locally as one pack (see [`super::packs`]).
const PACK_AT_LEAST: usize = 64;

pub struct Store {
    root: PathBuf,
    /// Temporary files of killed processes removed when the store was opened.
    cleaned: u64,
    /// The second tier, shared between machines (see [`super::remote`]).
    remote: Option<super::remote::Remote>,
    /// Entries fetched from the second tier and written here by this process.
    kept: Arc<Kept>,
    /// Entries the second tier was found to hold (an object once there stays there).
    present: Mutex<HashSet<String>>,
    /// Entries the second tier was found not to hold when this run asked for many at once:
    /// not asked for again (one that another machine stores meanwhile is computed here).
    absent: Mutex<HashSet<String>>,
    /// Entries fetched from the second tier in batches, kept as packs.
    packs: Packs,
    /// Local entries verified as they are now (see [`super::verified`]).
    verified: Verified,
}

/// How finely `gc` tells entries' last uses apart: a read marks an entry used only when its
/// last mark is older (a mark rewrites the file's metadata).
const USED_GRANULARITY: Duration = Duration::from_secs(60);

/// Where entries fetched from the remote tier are written locally, by several threads at once.
struct Kept {
    root: PathBuf,
    /// Entry folders known to exist.
    dirs: Mutex<HashSet<PathBuf>>,
    /// Names written by this process after they were verified: read back without a second
    /// check, and their modification time is already recent.
    fresh: Mutex<HashSet<String>>,
}

impl Kept {
    /// Write an entry fetched from the remote tier (best effort: a failure only means it is
    /// fetched again next time).
    fn keep(&self, name: &str, bytes: &[u8]) {
        let path = self.root.join(name);
        if let Some(dir) = path.parent()
            && !self.dirs.lock().unwrap().contains(dir)
        {
            if fs::create_dir_all(dir).is_err() {
                return;
            }
            self.dirs.lock().unwrap().insert(dir.to_path_buf());
        }
        if let Ok(tmp) = TempFile::new_in(&self.root, tmpfiles::SUFFIX)
            && (&mut tmp.file()).write_all(bytes).is_ok()
            && tmp.commit(&path, false).is_ok()
        {
            self.fresh.lock().unwrap().insert(name.to_string());
        }
    }
}

/// What `gc` and `stats` report.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct StoreStats {
    pub entries: u64,
    pub bytes: u64,
    pub removed_entries: u64,
    pub removed_bytes: u64,
    /// Temporary files and folders of killed processes removed.
    pub removed_leftovers: u64,
    pub by_kind: std::collections::BTreeMap<String, (u64, u64)>,
}

impl Store {
    /// Open (creating if needed) a store rooted at `root`, removing the temporary files that
    /// killed processes left there.
    pub fn open(root: &Path) -> Result<Store> {
        let objects = root.join("objects");
        fs::create_dir_all(&objects)
            .with_context(|| format!("cannot create cache directory {}", objects.display()))?;
        let cleaned = tmpfiles::clean_once(root).items;
        Ok(Store {
            root: root.to_path_buf(),
            cleaned,
            remote: None,
            kept: Arc::new(Kept {
                root: root.to_path_buf(),
                dirs: Default::default(),
                fresh: Default::default(),
            }),
            present: Default::default(),
            absent: Default::default(),
            packs: Packs::new(root),
            verified: Verified::new(root.join("verified-entries.json")),
        })
    }

    /// This store with `remote` as its second tier.
    pub fn with_remote(mut self, remote: Option<super::remote::Remote>) -> Store {
        self.remote = remote;
        self
    }

    pub fn remote(&self) -> Option<&super::remote::Remote> {
        self.remote.as_ref()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The entry's name relative to the store's root (the same in the remote tier): one flat
    /// folder. A folder per leading byte of the key (as git lays out its objects) made a cold
    /// run create a folder for nearly every entry it stored, and creating a folder costs more
    /// than the small entry in it (docs/design.md, "The cold path"); a directory index finds a
    /// name among thousands as fast.
    pub(super) fn name_of(kind: &str, key: &Key) -> String {
        format!("objects/{}.{}", key.hex(), sanitize(kind))
    }

    #[cfg(test)]
    fn path_of(&self, kind: &str, key: &Key) -> PathBuf {
        self.root.join(Self::name_of(kind, key))
    }

    /// The verified payload stored under `(kind, key)`, or None when absent or damaged: read
    /// locally, else fetched from the remote tier (and then kept locally).
    pub fn get(&self, kind: &str, key: &Key) -> Option<Bytes> {
        self.get_local(kind, key)
            .or_else(|| Some(entry::payload(self.fetch(kind, key)?)))
    }

    /// Fetch from the remote tier, many at once, the entries among `wanted` that are not
    /// local, and keep them locally (a large batch as one pack): what a run is about to read
    /// one by one.
    pub fn prefetch(&self, wanted: &[(String, Key)]) {
        let Some(remote) = &self.remote else { return };
        let names = self.not_local(wanted, |_| true);
        let pack = if names.len() >= PACK_AT_LEAST {
            self.packs.writer(&self.root).ok()
        } else {
            None
        };
        let pack: Arc<Mutex<Option<PackWriter>>> = Arc::new(Mutex::new(pack));
        let (kept, into) = (self.kept.clone(), pack.clone());
        let absent = remote.get_entries(
            names,
            Arc::new(move |name: &str, bytes: &[u8]| {
                let good = verify(name, bytes).is_some();
                if good {
                    let mut pack = into.lock().unwrap();
                    let packed = pack.as_mut().is_some_and(|w| w.add(name, bytes).is_ok());
                    if !packed {
                        // Not written to the pack (there is none, or writing failed): loose.
                        *pack = None;
                        drop(pack);
                        kept.keep(name, bytes);
                    }
                }
                good
            }),
        );
        self.absent.lock().unwrap().extend(absent);
        let writer = pack.lock().unwrap().take();
        if let Some(writer) = writer
            && let Err(e) = self.packs.commit(writer)
        {
            tracing::warn!("{e:#}: the entries fetched are fetched again when read");
        }
    }

    /// The remote tier's verified entry for `(kind, key)`, written to the local tier.
    fn fetch(&self, kind: &str, key: &Key) -> Option<Vec<u8>> {
        let remote = self.remote.as_ref()?;
        let name = Self::name_of(kind, key);
        if self.absent.lock().unwrap().contains(&name) {
            return None;
        }
        let bytes = remote.get_entry(&name, |b| verify(&name, b).is_some())?;
        self.kept.keep(&name, &bytes);
        Some(bytes)
    }

    fn get_local(&self, kind: &str, key: &Key) -> Option<Bytes> {
        let name = Self::name_of(kind, key);
        let path = self.root.join(&name);
        // The metadata of the file read, not of the path (which another process may replace
        // meanwhile).
        let Some((bytes, md)) = fs::File::open(&path).ok().and_then(|mut f| {
            let md = f.metadata().ok()?;
            let mut bytes = Vec::with_capacity(md.len() as usize);
            std::io::Read::read_to_end(&mut f, &mut bytes).ok()?;
            Some((bytes, md))
        }) else {
            return self.packs.get(&name);
        };
        if bytes.len() >= HEADER && self.kept.fresh.lock().unwrap().contains(&name) {
            return Some(entry::payload(bytes));
        }
        if bytes.len() as u64 == md.len() && self.verified.holds(&name, &md) {
            self.mark_used(&name, &path, &md);
            return Some(entry::payload(bytes));
        }
        match verify(&name, &bytes) {
            Some(()) => {
                self.verified.record(&name, &md);
                self.mark_used(&name, &path, &md);
                Some(entry::payload(bytes))
            }
            None => {
                tracing::warn!("cache entry {} is damaged; recomputing it", path.display());
                self.verified.forget(&name);
                let _ = fs::remove_file(&path);
                None
            }
        }
    }

    /// Mark a verified entry as recently used, for `gc`: its modification time set to now
    /// when it is older than [`USED_GRANULARITY`] (and its verified stamp moved along).
    fn mark_used(&self, name: &str, path: &Path, md: &fs::Metadata) {
        let now = SystemTime::now();
        let recent = md
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .is_some_and(|age| age < USED_GRANULARITY);
        if recent {
            return;
        }
        if let Ok(f) = fs::File::options().write(true).open(path)
            && f.set_modified(super::verified::backdated()).is_ok()
            && let Ok(md) = f.metadata()
        {
            self.verified.record(name, &md);
        }
    }

    /// Saves which entries were verified (see [`super::verified`]).
    pub fn save_verified(&self) {
        self.verified.save();
    }

    /// Drops the entry `(kind, key)` that could be read but not decoded: the local copy is
    /// removed, and a shared cache's object is replaced when the value is stored again.
    pub fn discard(&self, kind: &str, key: &Key) {
        let name = Self::name_of(kind, key);
        let _ = fs::remove_file(self.root.join(&name));
        self.verified.forget(&name);
        self.packs.discard(&name);
        if let Some(remote) = &self.remote {
            remote.replace(&name);
        }
    }

    /// Whether an entry exists, here or in the remote tier (it is verified when read; one
    /// that only the remote tier has is not fetched until it is read).
    pub fn contains(&self, kind: &str, key: &Key) -> bool {
        let name = Self::name_of(kind, key);
        if self.root.join(&name).is_file() || self.packs.has(&name) {
            return true;
        }
        let Some(remote) = &self.remote else {
            return false;
        };
        if self.present.lock().unwrap().contains(&name) {
            return true;
        }
        if self.absent.lock().unwrap().contains(&name) {
            return false;
        }
        let there = remote.contains(&name);
        if there {
            self.present.lock().unwrap().insert(name);
        }
        there
    }

    /// Ask the remote tier, many at once, which of the entries among `wanted` that are not
    /// local it holds: what a run is about to ask one by one with [`Store::contains`].
    pub fn prefetch_presence(&self, wanted: &[(String, Key)]) {
        let Some(remote) = &self.remote else { return };
        let names = {
            let present = self.present.lock().unwrap();
            self.not_local(wanted, |name| !present.contains(name))
        };
        let found: HashSet<String> = remote.present(names.clone()).into_iter().collect();
        let mut absent = self.absent.lock().unwrap();
        absent.extend(names.into_iter().filter(|n| !found.contains(n)));
        drop(absent);
        self.present.lock().unwrap().extend(found);
    }

    /// The names of the entries among `wanted` that are not local and that `keep` keeps,
    /// each once, in order.
    fn not_local(&self, wanted: &[(String, Key)], keep: impl Fn(&str) -> bool) -> Vec<String> {
        wanted
            .iter()
            .map(|(kind, key)| Self::name_of(kind, key))
            .filter(|name| keep(name) && !self.root.join(name).is_file() && !self.packs.has(name))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    /// Store `payload` under `(kind, key)` atomically, and upload it to the remote tier.
    pub fn put(&self, kind: &str, key: &Key, payload: &[u8]) -> Result<()> {
        let name = Self::name_of(kind, key);
        let path = self.root.join(&name);
        let dir = path.parent().expect("entry path has a parent");
        fs::create_dir_all(dir)
            .with_context(|| format!("cannot create cache directory {}", dir.display()))?;
        let tmp = TempFile::new_in(&self.root, tmpfiles::SUFFIX)
            .with_context(|| format!("cannot write to cache directory {}", self.root.display()))?;
        let header = entry::header(&name, payload);
        tmpfiles::write_parts(tmp.file(), &[&header, payload])
            .and_then(|()| tmp.file().set_modified(super::verified::backdated()))
            .and_then(|()| tmp.commit(&path, false))
            .with_context(|| format!("cannot write cache entry {}", path.display()))?;
        // Verified by construction: its first read need not hash it.
        if let Ok(md) = fs::metadata(&path) {
            self.verified.record(&name, &md);
        }
        if let Some(remote) = &self.remote {
            let mut entry = header;
            entry.extend_from_slice(payload);
            remote.put(&name, entry, false);
        }
        Ok(())
    }

    /// Every entry file (those of the earlier layout, a folder per leading key byte, too, so
    /// that `gc` removes them in time).
    fn entries(&self) -> Vec<(PathBuf, u64, SystemTime)> {
        walkdir::WalkDir::new(self.root.join("objects"))
            .min_depth(1)
            .into_iter()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_file())
            .filter_map(|e| {
                let md = e.metadata().ok()?;
                Some((
                    e.path().to_path_buf(),
                    md.len(),
                    md.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                ))
            })
            .collect()
    }

    /// Upload every verified local entry to the remote tier (put-if-absent); the number of
    /// local entries and what the remote tier did.
    pub fn push(&self) -> (u64, super::remote::RemoteCounts) {
        let Some(remote) = &self.remote else {
            return (0, Default::default());
        };
        let objects = self.root.join("objects");
        let mut n = 0;
        for (path, _, _) in self.entries() {
            let Ok(rel) = path.strip_prefix(&objects) else {
                continue;
            };
            let name = format!("objects/{}", rel.to_string_lossy());
            let Ok(bytes) = fs::read(&path) else { continue };
            if verify(&name, &bytes).is_none() || path.to_string_lossy().contains("/.tmp-") {
                continue;
            }
            remote.put(&name, bytes, false);
            n += 1;
        }
        (n, remote.flush())
    }

    pub fn stats(&self) -> StoreStats {
        let mut s = StoreStats::default();
        let mut count = |name: &Path, len: u64| {
            s.entries += 1;
            s.bytes += len;
            let kind = name
                .extension()
                .map(|e| e.to_string_lossy().into_owned())
                .unwrap_or_default();
            let e = s.by_kind.entry(kind).or_default();
            e.0 += 1;
            e.1 += len;
        };
        for (path, len, _) in self.entries() {
            count(&path, len);
        }
        for pack in self.packs.infos() {
            for (name, len) in pack.entries {
                count(Path::new(&name), len);
            }
        }
        s
    }

    /// Remove entries older than `max_age` (by last use), then the least recently used ones
    /// until the store holds at most `max_bytes`. The temporary files and folders of killed
    /// processes (in the store and in `$TMPDIR`) are removed too.
    pub fn gc(&self, max_bytes: Option<u64>, max_age: Option<Duration>) -> StoreStats {
        let now = SystemTime::now();
        let mut s = StoreStats {
            removed_leftovers: self.cleaned,
            ..Default::default()
        };
        for c in [
            tmpfiles::clean_files(&self.root),
            tmpfiles::clean_files(&self.root.join("labels")),
            tmpfiles::clean_scratch(&std::env::temp_dir()),
        ] {
            s.removed_leftovers += c.items;
        }
        // What `gc` removes: loose entries, and packs as a whole (a pack's last use is its
        // modification time; its entries count as removed with it).
        let mut units: Vec<(PathBuf, u64, SystemTime, u64)> = self
            .entries()
            .into_iter()
            .map(|(path, len, mtime)| (path, len, mtime, 1))
            .collect();
        units.extend(
            self.packs
                .infos()
                .into_iter()
                .map(|p| (p.path, p.len, p.modified, p.entries.len() as u64)),
        );
        let remove = |path: &Path, len: u64, n: u64, s: &mut StoreStats| {
            if fs::remove_file(path).is_ok() {
                s.removed_entries += n;
                s.removed_bytes += len;
            }
        };
        units.retain(|(path, len, mtime, n)| {
            let is_tmp = path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(".tmp-"));
            let age = now.duration_since(*mtime).unwrap_or_default();
            // Entries' folders hold no temporary files of this version (see `put`); those of
            // earlier versions carry no lock, so only stale ones go.
            let stale_tmp = is_tmp && age > tmpfiles::GRACE;
            let too_old = !is_tmp && max_age.is_some_and(|m| age > m);
            if stale_tmp {
                s.removed_leftovers += fs::remove_file(path).is_ok() as u64;
                false
            } else if too_old {
                remove(path, *len, *n, &mut s);
                false
            } else {
                !is_tmp
            }
        });
        if let Some(max) = max_bytes {
            units.sort_by_key(|(_, _, mtime, _)| *mtime);
            let mut total: u64 = units.iter().map(|e| e.1).sum();
            for (path, len, _, n) in &units {
                if total <= max {
                    break;
                }
                remove(path, *len, *n, &mut s);
                total -= len;
            }
        }
        self.verified.save();
        let after = self.stats();
        s.entries = after.entries;
        s.bytes = after.bytes;
        s.by_kind = after.by_kind;
        s
    }
}

fn sanitize(kind: &str) -> String {
    kind.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let key = Key::of_bytes(b"x");
        assert!(store.get("k", &key).is_none());
        store.put("k", &key, b"payload").unwrap();
        assert_eq!(store.get("k", &key).unwrap(), &b"payload"[..]);
        // Truncate the entry: it must be reported missing and removed.
        let path = store.path_of("k", &key);
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..bytes.len() - 2]).unwrap();
        assert!(store.get("k", &key).is_none());
        assert!(!path.exists());
        // Flip a payload byte: the hash check catches it.
        store.put("k", &key, b"payload").unwrap();
        let mut bytes = fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 1] ^= 1;
        fs::write(&path, &bytes).unwrap();
        assert!(store.get("k", &key).is_none());
    }

    /// An entry read once is read again without hashing (see [`super::super::verified`]),
    /// yet one changed in any way after that, also within the clock's tick, or replaced by
    /// another valid entry of the same size, is verified again and refused.
    #[test]
    fn entries_verified_once_are_still_checked_after_any_change() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (Key::of_bytes(b"a"), Key::of_bytes(b"b"));
        let store = Store::open(dir.path()).unwrap();
        store.put("k", &a, b"payload-a").unwrap();
        store.put("k", &b, b"payload-b").unwrap();
        assert_eq!(store.get("k", &a).unwrap(), &b"payload-a"[..]);
        store.save_verified();
        let (pa, pb) = (store.path_of("k", &a), store.path_of("k", &b));
        let trusted = |s: &Store| {
            [a, b]
                .iter()
                .filter(|k| {
                    let n = Store::name_of("k", k);
                    s.verified
                        .holds(&n, &fs::metadata(s.root.join(&n)).unwrap())
                })
                .count()
        };
        // A new process trusts both stamps.
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(trusted(&store), 2);
        // A byte flipped in place right away: same size and inode, a later time.
        let mut bytes = fs::read(&pa).unwrap();
        let n = bytes.len();
        bytes[n - 1] ^= 1;
        fs::write(&pa, &bytes).unwrap();
        assert!(store.get("k", &a).is_none());
        // Another valid entry of the same size renamed over this one's name.
        fs::rename(&pb, &pa).unwrap();
        assert!(store.get("k", &a).is_none());
        assert!(store.get("k", &b).is_none());
    }

    #[test]
    fn entries_a_batch_found_absent_are_not_asked_for_again() {
        let dir = tempfile::tempdir().unwrap();
        let bucket = dir.path().join("bucket");
        fs::create_dir_all(&bucket).unwrap();
        let remote = super::super::remote::Remote::open(&format!("file://{}", bucket.display()));
        let store = Store::open(&dir.path().join("cache"))
            .unwrap()
            .with_remote(Some(remote.unwrap()));
        let wanted: Vec<(String, Key)> = (0..5u8)
            .map(|i| ("k".to_string(), Key::of_bytes(&[i])))
            .collect();
        store.prefetch(&wanted[..3]);
        store.prefetch_presence(&wanted[3..]);
        for (kind, key) in &wanted {
            assert!(!store.contains(kind, key));
            assert!(store.get(kind, key).is_none());
        }
        let counts = store.remote().unwrap().flush();
        assert_eq!(counts.misses, 3, "one request per entry: {counts:?}");
        // Computed here after all: read locally.
        store.put("k", &wanted[0].1, b"v").unwrap();
        assert_eq!(store.get("k", &wanted[0].1).unwrap(), &b"v"[..]);
    }

    #[test]
    fn gc_bounds_size() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for i in 0..10u8 {
            store.put("k", &Key::of_bytes(&[i]), &[i; 100]).unwrap();
        }
        assert_eq!(store.stats().entries, 10);
        let s = store.gc(Some(500), None);
        assert!(s.bytes <= 500, "{s:?}");
        assert!(s.removed_entries >= 5);
        let s = store.gc(None, Some(Duration::from_secs(0)));
        assert_eq!(s.entries, 0);
    }
}
