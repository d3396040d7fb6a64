//! Content keys of input files, with a `(path, size, mtime, inode) -> key` memo so that an
//! unchanged large file is not read again by a later process.

use super::key::Key;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
struct Stamp {
    size: u64,
    mtime_ns: i128,
    inode: u64,
    dev: u64,
    key: Key,
}

/// Separates a path from the tag of a derived key in the memo's entry names.
const TAG_SEPARATOR: char = '\0';

fn entry_name(path: &Path, tag: Option<&str>) -> String {
    let canon = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut name = canon.to_string_lossy().into_owned();
    if let Some(tag) = tag {
        name.push(TAG_SEPARATOR);
        name.push_str(tag);
    }
    name
}

/// The memo, loaded from and saved to a file in the cache directory (if any).
pub struct FileMemo {
    file: Option<PathBuf>,
    entries: Mutex<BTreeMap<String, Stamp>>,
    dirty: Mutex<bool>,
}

impl FileMemo {
    pub fn load(file: Option<PathBuf>) -> FileMemo {
        let entries = file
            .as_ref()
            .and_then(|f| fs::read(f).ok())
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        FileMemo {
            file,
            entries: Mutex::new(entries),
            dirty: Mutex::new(false),
        }
    }

    #[cfg(test)]
    /// The content key of the file at `path`.
    pub fn key_of(&self, path: &Path) -> Result<Key> {
        Ok(self.key_of_hashed(path)?.0)
    }

    #[cfg(test)]
    /// The content key of the file at `path`, with the metadata it had when it was hashed
    /// (None when the key came from the memo).
    pub fn key_of_hashed(&self, path: &Path) -> Result<(Key, Option<fs::Metadata>)> {
        self.key_of_read(path, || Ok(None))
    }

    /// [`FileMemo::key_of_hashed`], with `read` computing the content key when the memo does
    /// not have it (None: the file is hashed as it is read).
    pub fn key_of_read(
        &self,
        path: &Path,
        read: impl FnOnce() -> Result<Option<Key>>,
    ) -> Result<(Key, Option<fs::Metadata>)> {
        self.memoised(path, None, || match read()? {
            Some(key) => Ok(key),
            None => hash_file(path),
        })
    }

    /// Whether the content key of the file at `path`, as it is now (`md`), is in the memo.
    pub fn knows(&self, path: &Path, md: &fs::Metadata) -> bool {
        self.lookup(&entry_name(path, None), md).is_some()
    }

    /// Take `key` as the content key of the file at `path` whose metadata was `md` (a key
    /// obtained without reading the file, see [`super::claims`]).
    pub fn adopt(&self, path: &Path, md: &fs::Metadata, key: Key) {
        self.insert(entry_name(path, None), md, key);
    }

    /// A key derived from the file at `path` by `compute` (e.g. the version of a program),
    /// memoised under `tag` like content keys: recomputed only when the file changes.
    pub fn derived(
        &self,
        path: &Path,
        tag: &str,
        compute: impl FnOnce() -> Result<Key>,
    ) -> Result<Key> {
        Ok(self.memoised(path, Some(tag), compute)?.0)
    }

    fn memoised(
        &self,
        path: &Path,
        tag: Option<&str>,
        compute: impl FnOnce() -> Result<Key>,
    ) -> Result<(Key, Option<fs::Metadata>)> {
        let md = fs::metadata(path).with_context(|| format!("{}: cannot read", path.display()))?;
        let name = entry_name(path, tag);
        if let Some(key) = self.lookup(&name, &md) {
            return Ok((key, None));
        }
        let key = compute()?;
        self.insert(name, &md, key);
        Ok((key, Some(md)))
    }

    fn lookup(&self, name: &str, md: &fs::Metadata) -> Option<Key> {
        let mtime_ns = mtime_ns(md);
        let entries = self.entries.lock().unwrap();
        let s = entries.get(name)?;
        (s.size == md.len() && s.mtime_ns == mtime_ns && s.inode == md.ino() && s.dev == md.dev())
            .then_some(s.key)
    }

    fn insert(&self, name: String, md: &fs::Metadata, key: Key) {
        let mtime_ns = mtime_ns(md);
        self.entries.lock().unwrap().insert(
            name,
            Stamp {
                size: md.len(),
                mtime_ns,
                inode: md.ino(),
                dev: md.dev(),
                key,
            },
        );
        *self.dirty.lock().unwrap() = true;
    }

    /// The key recorded under `tag` for the file at `path` as it is now (None when none was
    /// recorded, or the file changed since).
    pub fn recorded(&self, path: &Path, tag: &str) -> Option<Key> {
        let md = fs::metadata(path).ok()?;
        self.lookup(&entry_name(path, Some(tag)), &md)
    }

    /// Record `key` under `tag` for the file at `path` as it is now.
    pub fn record(&self, path: &Path, tag: &str, key: Key) -> Result<()> {
        let md = fs::metadata(path).with_context(|| format!("{}: cannot read", path.display()))?;
        self.insert(entry_name(path, Some(tag)), &md, key);
        Ok(())
    }

    /// Write the memo back (atomically) if it changed. Failures only cost a re-hash later.
    pub fn save(&self) {
        let Some(file) = &self.file else { return };
        if !*self.dirty.lock().unwrap() {
            return;
        }
        // Merge with what other processes may have written meanwhile.
        let mut merged: BTreeMap<String, Stamp> = fs::read(file)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        merged.extend(
            self.entries
                .lock()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        // Forget files that no longer exist.
        merged.retain(|name, _| {
            let path = name.split(TAG_SEPARATOR).next().unwrap_or(name);
            Path::new(path).exists()
        });
        let Some(dir) = file.parent() else { return };
        if let Ok(bytes) = serde_json::to_vec(&merged)
            && let Ok(mut tmp) = crate::tmpfiles::TempFile::new_in(dir, crate::tmpfiles::SUFFIX)
            && std::io::Write::write_all(&mut tmp, &bytes).is_ok()
        {
            let _ = tmp.commit(file, false);
        }
    }
}

/// A file's modification time in nanoseconds.
pub fn mtime_ns(md: &fs::Metadata) -> i128 {
    md.mtime() as i128 * 1_000_000_000 + md.mtime_nsec() as i128
}

/// blake3 of a file's content, streamed.
pub fn hash_file(path: &Path) -> Result<Key> {
    let mut f = fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("{}: read error", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(Key(*h.finalize().as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memo_reuses_and_notices_changes() {
        let dir = tempfile::tempdir().unwrap();
        let memo_file = dir.path().join("memo.json");
        let data = dir.path().join("data.bin");
        fs::write(&data, b"one").unwrap();
        let memo = FileMemo::load(Some(memo_file.clone()));
        let k1 = memo.key_of(&data).unwrap();
        assert_eq!(k1, Key::of_bytes(b"one"));
        memo.save();
        let memo = FileMemo::load(Some(memo_file.clone()));
        assert_eq!(memo.key_of(&data).unwrap(), k1);
        assert!(
            !*memo.dirty.lock().unwrap(),
            "unchanged file must come from the memo"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
        fs::write(&data, b"two!").unwrap();
        assert_eq!(memo.key_of(&data).unwrap(), Key::of_bytes(b"two!"));
    }
}
