//! Packs: the entries a run fetches from the shared tier in one batch, kept locally as one file
//! instead of one file each.
//!
//! A run over a thousand processes fetches several thousand small entries (the processes'
//! shares) at once; writing each as its own file (create, lock, write, rename) cost more than
//! fetching it, and how much more depended on the state of the local file system. A pack is
//! written sequentially through one temporary file and renamed into `packs/` like any entry.
//!
//! Layout of `packs/<32 hex>.pack` (the name is the blake3 of its index):
//! `MAGIC`, the entries back to back (each exactly as a loose entry file: header and payload),
//! the index (per entry: name length u16 LE, name, offset u64 LE, length u64 LE), and a footer:
//! the index's offset (u64 LE), the number of entries (u64 LE), `MAGIC`.
//!
//! A pack is trusted no more than a loose entry: its footer and index are checked against the
//! file's real size (a pack that does not add up is removed), and every entry read from a pack
//! another process wrote is verified (length and blake3); a damaged one is reported missing and
//! never read again by this process, so its node is recomputed and stored as a loose entry,
//! which takes precedence. A pack is the unit of `gc`: its modification time is its last use.

use super::entry::{HEADER, verify};
use crate::tmpfiles::{self, TempFile};
use anyhow::{Context, Result, bail};
use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

const MAGIC: &[u8; 8] = b"NJPPACK1";
const FOOTER: u64 = 8 + 8 + 8;
/// The smallest index record: a name length, an empty name, an offset and a length.
const MIN_RECORD: u64 = 2 + 8 + 8;
/// The folder of packs, relative to the store's root.
pub const DIR: &str = "packs";

/// One pack that this process can read.
struct Pack {
    path: PathBuf,
    file: Arc<File>,
    /// Written by this process after each entry was verified: read back without a second check.
    own: bool,
    /// Its modification time was set to now by this process (once is enough for `gc`).
    touched: bool,
}

#[derive(Default)]
struct Index {
    packs: Vec<Pack>,
    /// Entry name → (pack, offset, length).
    names: HashMap<String, (usize, u64, u64)>,
    /// Entries found damaged: missing for the rest of the process.
    bad: HashSet<String>,
}

/// The packs of one store, their indexes loaded when first asked.
pub struct Packs {
    dir: PathBuf,
    index: OnceLock<Mutex<Index>>,
}

/// What one pack holds, as `stats` and `gc` count it.
pub struct PackInfo {
    pub path: PathBuf,
    pub len: u64,
    pub modified: SystemTime,
    /// (entry name, entry length) of each entry.
    pub entries: Vec<(String, u64)>,
}

impl Packs {
    pub fn new(root: &Path) -> Packs {
        Packs {
            dir: root.join(DIR),
            index: OnceLock::new(),
        }
    }

    fn index(&self) -> &Mutex<Index> {
        self.index.get_or_init(|| {
            let mut index = Index::default();
            for (path, file, entries) in self.list() {
                index.add(path, file, entries, false);
            }
            Mutex::new(index)
        })
    }

    /// Every readable pack in the folder with its entries; those that do not add up are
    /// removed.
    fn list(&self) -> Vec<(PathBuf, File, Vec<(String, u64, u64)>)> {
        let Ok(dir) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut paths: Vec<PathBuf> = dir
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "pack"))
            .collect();
        paths.sort();
        paths
            .into_iter()
            .filter_map(|path| match read_index(&path) {
                Ok((file, entries)) => Some((path, file, entries)),
                Err(e) => {
                    tracing::warn!(
                        "cache pack {} is damaged ({e:#}); removing it",
                        path.display()
                    );
                    let _ = fs::remove_file(&path);
                    None
                }
            })
            .collect()
    }

    /// Whether a pack holds the entry `name` (not known to be damaged).
    pub fn has(&self, name: &str) -> bool {
        self.index().lock().unwrap().names.contains_key(name)
    }

    /// The payload of entry `name` from a pack, verified unless this process wrote it; None
    /// when no pack holds it or it is damaged.
    pub fn get(&self, name: &str) -> Option<bytes::Bytes> {
        let (p, file, offset, len, own) = {
            let mut index = self.index().lock().unwrap();
            let &(p, offset, len) = index.names.get(name)?;
            let pack = &mut index.packs[p];
            if !pack.touched {
                pack.touched = true;
                let _ = pack.file.set_modified(SystemTime::now());
            }
            (p, pack.file.clone(), offset, len, pack.own)
        };
        let mut bytes = vec![0; len as usize];
        let good = file.read_exact_at(&mut bytes, offset).is_ok()
            && bytes.len() >= HEADER
            && (own || verify(name, &bytes).is_some());
        if !good {
            let mut index = self.index().lock().unwrap();
            index.names.remove(name);
            index.bad.insert(name.to_string());
            let path = index.packs[p].path.clone();
            drop(index);
            tracing::warn!(
                "cache entry {name} in {} is damaged; recomputing it",
                path.display()
            );
            return None;
        }
        Some(super::entry::payload(bytes))
    }

    /// Stops serving entry `name` from packs (it is damaged).
    pub fn discard(&self, name: &str) {
        let mut index = self.index().lock().unwrap();
        index.names.remove(name);
        index.bad.insert(name.to_string());
    }

    /// A new pack to write entries into.
    pub fn writer(&self, root: &Path) -> Result<PackWriter> {
        fs::create_dir_all(&self.dir)
            .with_context(|| format!("cannot create cache directory {}", self.dir.display()))?;
        let tmp = TempFile::new_in(root, tmpfiles::SUFFIX)
            .with_context(|| format!("cannot write to cache directory {}", root.display()))?;
        let mut out = BufWriter::with_capacity(1 << 20, tmp.file().try_clone()?);
        out.write_all(MAGIC)?;
        Ok(PackWriter {
            tmp,
            out,
            offset: MAGIC.len() as u64,
            entries: Vec::new(),
        })
    }

    /// Rename a finished pack into place and make its entries readable (without a second
    /// check). An empty pack is dropped.
    pub fn commit(&self, writer: PackWriter) -> Result<usize> {
        let PackWriter {
            tmp,
            mut out,
            offset,
            entries,
        } = writer;
        if entries.is_empty() {
            return Ok(0);
        }
        let mut index = Vec::new();
        for (name, off, len) in &entries {
            index.extend_from_slice(&(name.len() as u16).to_le_bytes());
            index.extend_from_slice(name.as_bytes());
            index.extend_from_slice(&off.to_le_bytes());
            index.extend_from_slice(&len.to_le_bytes());
        }
        out.write_all(&index)?;
        out.write_all(&offset.to_le_bytes())?;
        out.write_all(&(entries.len() as u64).to_le_bytes())?;
        out.write_all(MAGIC)?;
        out.flush()?;
        drop(out);
        let hex = blake3::hash(&index).to_hex();
        let path = self.dir.join(format!("{}.pack", &hex[..32]));
        tmp.commit(&path, false)
            .with_context(|| format!("cannot write cache pack {}", path.display()))?;
        let file = File::open(&path)?;
        let n = entries.len();
        self.index().lock().unwrap().add(path, file, entries, true);
        Ok(n)
    }

    /// Every readable pack and what it holds (for `stats` and `gc`).
    pub fn infos(&self) -> Vec<PackInfo> {
        self.list()
            .into_iter()
            .filter_map(|(path, file, entries)| {
                let md = file.metadata().ok()?;
                Some(PackInfo {
                    path,
                    len: md.len(),
                    modified: md.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                    entries: entries.into_iter().map(|(n, _, len)| (n, len)).collect(),
                })
            })
            .collect()
    }
}

impl Index {
    fn add(&mut self, path: PathBuf, file: File, entries: Vec<(String, u64, u64)>, own: bool) {
        let p = self.packs.len();
        self.packs.push(Pack {
            path,
            file: Arc::new(file),
            own,
            touched: own,
        });
        for (name, offset, len) in entries {
            if !self.bad.contains(&name) {
                // A pack this process wrote is preferred: its entries need no second check.
                if own || !self.names.contains_key(&name) {
                    self.names.insert(name, (p, offset, len));
                }
            }
        }
    }
}

/// A pack being written: entries are appended as they arrive (verified by the caller).
pub struct PackWriter {
    tmp: TempFile,
    out: BufWriter<File>,
    offset: u64,
    entries: Vec<(String, u64, u64)>,
}

impl PackWriter {
    /// Append the entry `name` (its whole bytes: header and payload).
    pub fn add(&mut self, name: &str, entry: &[u8]) -> std::io::Result<()> {
        if name.len() > u16::MAX as usize {
            return Err(std::io::Error::other("entry name too long for a pack"));
        }
        self.out.write_all(entry)?;
        self.entries
            .push((name.to_string(), self.offset, entry.len() as u64));
        self.offset += entry.len() as u64;
        Ok(())
    }
}

/// The open file and the entries of the pack at `path`, checked against its size.
fn read_index(path: &Path) -> Result<(File, Vec<(String, u64, u64)>)> {
    let mut file = File::open(path)?;
    let size = file.metadata()?.len();
    if size < MAGIC.len() as u64 + FOOTER {
        bail!("shorter than a pack's header and footer");
    }
    let mut footer = [0u8; FOOTER as usize];
    file.seek(SeekFrom::Start(size - FOOTER))?;
    file.read_exact(&mut footer)?;
    let index_at = u64::from_le_bytes(footer[..8].try_into().unwrap());
    let count = u64::from_le_bytes(footer[8..16].try_into().unwrap());
    if &footer[16..] != MAGIC {
        bail!("no pack footer");
    }
    let index_end = size - FOOTER;
    if index_at < MAGIC.len() as u64 || index_at > index_end {
        bail!("index offset {index_at} outside the file ({size} bytes)");
    }
    let index_len = index_end - index_at;
    if count.checked_mul(MIN_RECORD).is_none_or(|m| m > index_len) {
        bail!("{count} entries cannot fit in an index of {index_len} bytes");
    }
    let mut index = vec![0u8; index_len as usize];
    file.seek(SeekFrom::Start(index_at))?;
    file.read_exact(&mut index)?;
    let mut entries = Vec::with_capacity(count as usize);
    let mut at = 0usize;
    for _ in 0..count {
        let n = u16::from_le_bytes(take(&index, &mut at, 2)?.try_into().unwrap()) as usize;
        let name = std::str::from_utf8(take(&index, &mut at, n)?)
            .context("entry name is not UTF-8")?
            .to_string();
        let offset = u64::from_le_bytes(take(&index, &mut at, 8)?.try_into().unwrap());
        let len = u64::from_le_bytes(take(&index, &mut at, 8)?.try_into().unwrap());
        if offset < MAGIC.len() as u64 || offset.checked_add(len).is_none_or(|e| e > index_at) {
            bail!("entry {name} lies outside the pack's entries");
        }
        entries.push((name, offset, len));
    }
    if at != index.len() {
        bail!(
            "index has {} bytes after its {count} records",
            index.len() - at
        );
    }
    Ok((file, entries))
}

/// The next `n` bytes of `index` from `at`.
fn take<'a>(index: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8]> {
    let s = index
        .get(*at..*at + n)
        .context("index ends inside a record")?;
    *at += n;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Key, Store};
    use proptest::prelude::*;

    /// A bucket holding `n` entries of kind `kind`, and what a run would ask for.
    fn bucket_of(dir: &Path, kind: &str, n: u8) -> (String, Vec<(String, Key)>) {
        let url = format!("file://{}", dir.join("bucket").display());
        fs::create_dir_all(dir.join("bucket")).unwrap();
        let remote = super::super::remote::Remote::open(&url).unwrap();
        let node = Store::open(&dir.join("node-cache"))
            .unwrap()
            .with_remote(Some(remote));
        let mut wanted = Vec::new();
        for i in 0..n {
            let key = Key::of_bytes(&[i]);
            node.put(kind, &key, &[i; 300]).unwrap();
            wanted.push((kind.to_string(), key));
        }
        node.remote().unwrap().flush();
        (url, wanted)
    }

    fn bucket(dir: &Path, n: u8) -> (String, Vec<(String, Key)>) {
        bucket_of(dir, "k", n)
    }

    fn login(dir: &Path, url: Option<&str>) -> Store {
        let remote = url.map(|u| super::super::remote::Remote::open(u).unwrap());
        Store::open(&dir.join("login-cache"))
            .unwrap()
            .with_remote(remote)
    }

    fn packs_in(dir: &Path) -> Vec<PathBuf> {
        let mut v: Vec<_> = fs::read_dir(dir.join("login-cache").join(DIR))
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    }

    #[test]
    fn a_prefetched_batch_is_one_pack_that_later_processes_read() {
        let dir = tempfile::tempdir().unwrap();
        let (url, wanted) = bucket(dir.path(), 100);
        let store = login(dir.path(), Some(&url));
        store.prefetch(&wanted);
        assert_eq!(packs_in(dir.path()).len(), 1);
        let loose = walkdir::WalkDir::new(dir.path().join("login-cache/objects"))
            .into_iter()
            .filter(|e| e.as_ref().unwrap().file_type().is_file())
            .count();
        assert_eq!(loose, 0, "a batch is not written entry by entry");
        for (i, (kind, key)) in wanted.iter().enumerate() {
            assert_eq!(store.get(kind, key).unwrap(), vec![i as u8; 300]);
        }
        // Fetched once: asking again finds every entry local.
        store.prefetch(&wanted);
        assert_eq!(packs_in(dir.path()).len(), 1);
        // Another process on the same cache, without the shared tier: read and verified.
        let later = login(dir.path(), None);
        for (i, (kind, key)) in wanted.iter().enumerate() {
            assert!(later.contains(kind, key));
            assert_eq!(later.get(kind, key).unwrap(), vec![i as u8; 300]);
        }
        let stats = later.stats();
        assert_eq!((stats.entries, stats.by_kind["k"].0), (100, 100));
        assert_eq!(stats.bytes, 100 * (HEADER as u64 + 300));
        // A small batch stays loose.
        let (_, few) = bucket_of(&dir.path().join("few"), "j", 3);
        let few_url = format!("file://{}", dir.path().join("few/bucket").display());
        let store = login(dir.path(), Some(&few_url));
        store.prefetch(&few);
        assert_eq!(packs_in(dir.path()).len(), 1);
        assert_eq!(store.stats().entries, 103);
        // `gc` removes a pack as a whole, counting its entries.
        let s = store.gc(Some(10_000), None);
        assert_eq!((s.removed_entries, s.entries), (100, 3), "{s:?}");
        assert!(packs_in(dir.path()).is_empty());
    }

    #[test]
    fn a_damaged_packed_entry_is_recomputed_and_stored_loose() {
        let dir = tempfile::tempdir().unwrap();
        let (url, wanted) = bucket(dir.path(), 70);
        login(dir.path(), Some(&url)).prefetch(&wanted);
        let pack = packs_in(dir.path()).remove(0);
        let (_, entries) = read_index(&pack).unwrap();
        let mut bytes = fs::read(&pack).unwrap();
        let (name, offset, len) = entries[5].clone();
        bytes[(offset + len - 1) as usize] ^= 1;
        fs::write(&pack, &bytes).unwrap();
        let (kind, key) = wanted
            .iter()
            .find(|(k, key)| Store::name_of(k, key) == name)
            .unwrap()
            .clone();
        let store = login(dir.path(), None);
        assert!(store.contains(&kind, &key), "damage is found when read");
        assert_eq!(store.get(&kind, &key), None);
        assert!(!store.contains(&kind, &key), "and then it is missing");
        // Recomputed: the loose entry is read from now on, in this process and the next.
        store.put(&kind, &key, b"again").unwrap();
        assert_eq!(store.get(&kind, &key).unwrap(), &b"again"[..]);
        assert_eq!(
            login(dir.path(), None).get(&kind, &key).unwrap(),
            &b"again"[..]
        );
        // The pack's other entries are still read.
        let (kind, key) = &wanted[0];
        assert!(store.get(kind, key).is_some());
    }

    /// A pack's index edited so that two names point at each other's (valid) entries: both
    /// are refused when read, as damaged ones are (entries are bound to their names).
    #[test]
    fn an_index_pointing_at_another_entry_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (url, wanted) = bucket(dir.path(), 70);
        login(dir.path(), Some(&url)).prefetch(&wanted);
        let pack = packs_in(dir.path()).remove(0);
        let (_, entries) = read_index(&pack).unwrap();
        let mut bytes = fs::read(&pack).unwrap();
        // Each index record: name length, name, then offset and length (16 bytes).
        let record = |bytes: &[u8], name: &str| {
            let at = bytes
                .windows(name.len())
                .rposition(|w| w == name.as_bytes())
                .unwrap();
            at + name.len()
        };
        let (x, y) = (entries[3].0.clone(), entries[9].0.clone());
        let (rx, ry) = (record(&bytes, &x), record(&bytes, &y));
        let (vx, vy) = (bytes[rx..rx + 16].to_vec(), bytes[ry..ry + 16].to_vec());
        bytes[rx..rx + 16].copy_from_slice(&vy);
        bytes[ry..ry + 16].copy_from_slice(&vx);
        fs::write(&pack, &bytes).unwrap();
        let store = login(dir.path(), None);
        for name in [&x, &y] {
            let (kind, key) = wanted
                .iter()
                .find(|(k, key)| &Store::name_of(k, key) == name)
                .unwrap();
            assert!(store.contains(kind, key));
            assert_eq!(
                store.get(kind, key),
                None,
                "{name} taken from another entry"
            );
        }
        // Any entry but the two (the pack's order need not be the order asked in).
        let (kind, key) = wanted
            .iter()
            .find(|(k, key)| ![&x, &y].contains(&&Store::name_of(k, key)))
            .unwrap();
        assert!(
            store.get(kind, key).is_some(),
            "the other entries are still read"
        );
    }

    #[test]
    fn a_pack_that_does_not_add_up_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let (url, wanted) = bucket(dir.path(), 64);
        login(dir.path(), Some(&url)).prefetch(&wanted);
        let pack = packs_in(dir.path()).remove(0);
        let bytes = fs::read(&pack).unwrap();
        fs::write(&pack, &bytes[..bytes.len() - 1]).unwrap();
        let store = login(dir.path(), None);
        let (kind, key) = &wanted[0];
        assert!(!store.contains(kind, key));
        assert!(packs_in(dir.path()).is_empty());
    }

    /// A pack of three entries, and its bytes.
    fn small_pack(dir: &Path) -> Vec<u8> {
        let packs = Packs::new(dir);
        let mut w = packs.writer(dir).unwrap();
        for (name, len) in [("objects/aa/x.k", 60), ("objects/bb/y.k", 0), ("z", 100)] {
            w.add(name, &vec![1u8; len]).unwrap();
        }
        packs.commit(w).unwrap();
        let path = fs::read_dir(dir.join(DIR))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        fs::read(path).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Whatever a pack's bytes become, reading its index ends in entries inside the file
        /// or an error, never a panic or an allocation the file's size does not allow.
        #[test]
        fn damaged_indexes_are_refused_or_bounded(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
            cut in proptest::option::of(any::<prop::sample::Index>()),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut bytes = small_pack(dir.path());
            for (at, v) in edits {
                let i = at.index(bytes.len());
                bytes[i] = v;
            }
            if let Some(cut) = cut {
                bytes.truncate(cut.index(bytes.len()));
            }
            let path = dir.path().join("p.pack");
            fs::write(&path, &bytes).unwrap();
            if let Ok((_, entries)) = read_index(&path) {
                for (_, offset, len) in entries {
                    prop_assert!(offset + len <= bytes.len() as u64);
                }
            }
        }
    }
}
