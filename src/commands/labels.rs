//! Labels of analysed runs (`--label` on `analyze` and `run`, e.g. a commit hash): a name for
//! the inputs of a run, kept in the cache folder (`labels/<name>.json`), so that `compare`
//! can name a side by its label and find every node of it in the cache.
//!
//! With a remote cache, a label is also kept there, with the inputs themselves: each file is
//! uploaded once under its blake3 (`inputs/<hash>`), and the label (`labels/<name>.json`)
//! lists them by name. `compare LABEL ...` on another machine downloads them into the local
//! cache (`inputs/<hash of the label>/`, under their own names, which are part of the
//! analyses' keys), and finds every node of that side in the shared cache.

use crate::store::remote::Remote;
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Label {
    /// The run's inputs (absolute paths).
    pub inputs: Vec<PathBuf>,
    /// Their `--dump` folders, if any were given.
    #[serde(default)]
    pub dumps: Vec<PathBuf>,
    /// When the label was recorded [ms since the Unix epoch] (0: before this was kept).
    #[serde(default)]
    pub recorded_unix_ms: i64,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The labels whose names start with `prefix`, local and remote, each once, oldest first
/// (by when it was recorded, then by name).
pub fn list(cache: &Path, remote: Option<&Remote>, prefix: &str) -> Result<Vec<String>> {
    let mut found: std::collections::BTreeMap<String, i64> = Default::default();
    if let Ok(entries) = std::fs::read_dir(cache.join("labels")) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(label) = name.strip_suffix(".json") else {
                continue;
            };
            if !label.starts_with(prefix) || check(label).is_err() {
                continue;
            }
            let at = std::fs::read(e.path())
                .ok()
                .and_then(|b| serde_json::from_slice::<Label>(&b).ok())
                .map(|l| l.recorded_unix_ms)
                .unwrap_or(0);
            found.insert(label.to_string(), at);
        }
    }
    if let Some(remote) = remote {
        for (name, at) in remote.list_names("labels")? {
            if let Some(label) = name.strip_suffix(".json")
                && label.starts_with(prefix)
                && check(label).is_ok()
            {
                found.entry(label.to_string()).or_insert(at);
            }
        }
    }
    let mut v: Vec<(i64, String)> = found.into_iter().map(|(n, t)| (t, n)).collect();
    v.sort();
    Ok(v.into_iter().map(|(_, n)| n).collect())
}

/// A label is a file name: letters, digits, `.`, `_`, `-`, `+`, `@` (commit hashes, branch
/// names with `/` replaced, version tags).
pub fn check(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-+@".contains(c));
    if !ok {
        bail!("{name:?}: not a usable label (letters, digits and . _ - + @; not starting with .)");
    }
    Ok(())
}

fn path(cache: &Path, name: &str) -> PathBuf {
    cache.join("labels").join(format!("{name}.json"))
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Record `name` for these inputs (replacing an earlier run of the same label), in the local
/// cache and, when there is one, in the remote cache with the inputs.
pub fn record(
    cache: &Path,
    remote: Option<&Remote>,
    name: &str,
    inputs: &[PathBuf],
    dumps: &[PathBuf],
) -> Result<()> {
    check(name)?;
    let label = Label {
        inputs: inputs.iter().map(|p| absolute(p)).collect(),
        dumps: dumps.iter().map(|p| absolute(p)).collect(),
        recorded_unix_ms: now_ms(),
    };
    let file = path(cache, name);
    crate::tmpfiles::write_atomic(&file, &serde_json::to_vec_pretty(&label)?)
        .with_context(|| format!("cannot record label {name}"))?;
    if let Some(remote) = remote
        && let Err(e) = record_remote(remote, name, &label)
    {
        crate::error::warn(&format!(
            "remote cache {}: label {name} recorded locally only ({})",
            remote.url(),
            crate::error::one_line(&e)
        ));
    }
    Ok(())
}

/// The inputs recorded for `name`, or None when there is no such label: the local record
/// when its inputs still exist, else the remote one (its inputs downloaded into `cache`).
pub fn find(cache: &Path, remote: Option<&Remote>, name: &str) -> Result<Option<Label>> {
    if check(name).is_err() {
        return Ok(None);
    }
    let file = path(cache, name);
    let local = match std::fs::read(&file) {
        Ok(bytes) => Some(
            serde_json::from_slice::<Label>(&bytes)
                .with_context(|| format!("{}: unreadable label record", file.display()))?,
        ),
        Err(_) => None,
    };
    let missing = local.as_ref().and_then(|l| {
        l.inputs
            .iter()
            .chain(&l.dumps)
            .find(|p| !p.exists())
            .cloned()
    });
    if missing.is_none() && local.is_some() {
        return Ok(local);
    }
    if let Some(remote) = remote
        && let Some(label) = find_remote(cache, remote, name)?
    {
        return Ok(Some(label));
    }
    match missing {
        Some(p) => bail!(
            "label {name}: its input {} no longer exists (label it again with `analyze --label {name}`)",
            p.display()
        ),
        None => Ok(None),
    }
}

/// A label as the remote cache keeps it: each input (a file, or a folder of files) by name,
/// with the blake3 of every file.
#[derive(Serialize, Deserialize)]
struct RemoteLabel {
    inputs: Vec<Tree>,
    dumps: Vec<Tree>,
}

#[derive(Serialize, Deserialize)]
struct Tree {
    /// The file or folder name.
    name: String,
    /// Each file: its path under the folder ("" for a file input) and its blake3.
    files: Vec<(String, String)>,
}

fn tree_of(p: &Path) -> Result<Tree> {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "input".into());
    let mut files = Vec::new();
    for e in walkdir::WalkDir::new(p).sort_by_file_name() {
        let e = e.with_context(|| format!("{}: cannot list", p.display()))?;
        if !e.file_type().is_file() {
            continue;
        }
        let rel = e.path().strip_prefix(p).unwrap_or(e.path());
        let rel = rel.to_string_lossy().into_owned();
        let f = std::fs::File::open(e.path())
            .with_context(|| format!("{}: cannot read", e.path().display()))?;
        let hash = hash_of(f).with_context(|| format!("{}: cannot read", e.path().display()))?;
        files.push((rel, hash));
    }
    Ok(Tree { name, files })
}

fn record_remote(remote: &Remote, name: &str, label: &Label) -> Result<()> {
    let trees = |paths: &[PathBuf]| -> Result<Vec<Tree>> {
        let mut out = Vec::new();
        for p in paths {
            let tree = tree_of(p)?;
            for (rel, hash) in &tree.files {
                let file = if rel.is_empty() {
                    p.clone()
                } else {
                    p.join(rel)
                };
                remote.put_file(&format!("inputs/{hash}"), &file)?;
            }
            out.push(tree);
        }
        Ok(out)
    };
    let record = RemoteLabel {
        inputs: trees(&label.inputs)?,
        dumps: trees(&label.dumps)?,
    };
    remote.put_now(
        &format!("labels/{name}.json"),
        serde_json::to_vec_pretty(&record)?,
    )
}

fn find_remote(cache: &Path, remote: &Remote, name: &str) -> Result<Option<Label>> {
    let Some(bytes) = remote.get(&format!("labels/{name}.json")) else {
        return Ok(None);
    };
    let record: RemoteLabel = serde_json::from_slice(&bytes)
        .with_context(|| format!("remote cache {}: label {name}: unreadable", remote.url()))?;
    let dir = cache
        .join("inputs")
        .join(&blake3::hash(&bytes).to_hex()[..16]);
    let fetch = |trees: &[Tree], side: &str| -> Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for (i, t) in trees.iter().enumerate() {
            check_relative(&t.name)?;
            let root = dir.join(format!("{side}{i}")).join(&t.name);
            for (rel, hash) in &t.files {
                let dest = if rel.is_empty() {
                    root.clone()
                } else {
                    check_relative(rel)?;
                    root.join(rel)
                };
                // A copy kept from an earlier download is used only while it is what the
                // label names; else (or when absent) it is fetched again, and checked.
                if file_is(&dest, hash) {
                    continue;
                }
                let _ = std::fs::remove_file(&dest);
                if !remote.get_file(&format!("inputs/{hash}"), &dest)? {
                    bail!(
                        "remote cache {}: label {name}: input {} is missing",
                        remote.url(),
                        t.name
                    );
                }
                if !file_is(&dest, hash) {
                    let _ = std::fs::remove_file(&dest);
                    bail!(
                        "remote cache {}: label {name}: input {} ({}) is not the file the label \
                         names (its content hash differs): label the run again",
                        remote.url(),
                        t.name,
                        if rel.is_empty() {
                            t.name.as_str()
                        } else {
                            rel.as_str()
                        }
                    );
                }
            }
            out.push(root);
        }
        Ok(out)
    };
    Ok(Some(Label {
        inputs: fetch(&record.inputs, "input")?,
        dumps: fetch(&record.dumps, "dump")?,
        recorded_unix_ms: 0,
    }))
}

/// The blake3 of what `r` reads, in hex.
fn hash_of(r: impl std::io::Read) -> std::io::Result<String> {
    let mut h = blake3::Hasher::new();
    h.update_reader(r)?;
    Ok(h.finalize().to_hex().to_string())
}

/// Whether the file at `path` exists and hashes to `hash`.
fn file_is(path: &Path, hash: &str) -> bool {
    std::fs::File::open(path)
        .and_then(hash_of)
        .is_ok_and(|h| h == hash)
}

/// A path from a remote record stays inside the folder it is written to.
fn check_relative(p: &str) -> Result<()> {
    let path = Path::new(p);
    let ok = !p.is_empty()
        && path
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !ok {
        bail!("remote label names the path {p:?}, which leaves its folder");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_and_find() {
        let tmp = tempfile::tempdir().unwrap();
        let input = tmp.path().join("a.zip");
        std::fs::write(&input, b"x").unwrap();
        record(
            tmp.path(),
            None,
            "abc123",
            std::slice::from_ref(&input),
            &[],
        )
        .unwrap();
        let l = find(tmp.path(), None, "abc123").unwrap().unwrap();
        assert_eq!(l.inputs, vec![input.clone()]);
        assert_eq!(find(tmp.path(), None, "other").unwrap(), None);
        assert!(record(tmp.path(), None, "a/b", &[input.clone()], &[]).is_err());
        assert!(record(tmp.path(), None, "..", &[input.clone()], &[]).is_err());
        std::fs::remove_file(&input).unwrap();
        let e = find(tmp.path(), None, "abc123").unwrap_err().to_string();
        assert!(e.contains("no longer exists"), "{e}");
    }

    #[test]
    fn remote_labels_carry_their_inputs() {
        let tmp = tempfile::tempdir().unwrap();
        let url = format!("file://{}", tmp.path().join("bucket").display());
        let remote = Remote::open(&url).unwrap();
        let input = tmp.path().join("run.zip");
        std::fs::write(&input, b"archive bytes").unwrap();
        let dump = tmp.path().join("dump");
        std::fs::create_dir_all(dump.join("sub")).unwrap();
        std::fs::write(dump.join("sub/m.pb"), b"hlo").unwrap();
        let (a, b) = (tmp.path().join("cache-a"), tmp.path().join("cache-b"));
        record(&a, Some(&remote), "sha1", &[input.clone()], &[dump]).unwrap();
        // Another machine: an empty local cache, the same remote one.
        let l = find(&b, Some(&remote), "sha1").unwrap().unwrap();
        assert_eq!(l.inputs[0].file_name().unwrap(), "run.zip");
        assert_eq!(std::fs::read(&l.inputs[0]).unwrap(), b"archive bytes");
        assert_eq!(std::fs::read(l.dumps[0].join("sub/m.pb")).unwrap(), b"hlo");
        assert!(l.inputs[0].starts_with(&b));
        assert_eq!(find(&b, Some(&remote), "nope").unwrap(), None);
        assert!(check_relative("../x").is_err() && check_relative("/x").is_err());
    }

    /// An input replaced in the shared cache by another file is refused (and not kept); a
    /// local copy damaged after download is dropped and fetched again.
    #[test]
    fn label_inputs_are_checked_against_their_hashes() {
        let tmp = tempfile::tempdir().unwrap();
        let bucket = tmp.path().join("bucket");
        let remote = Remote::open(&format!("file://{}", bucket.display())).unwrap();
        let input = tmp.path().join("run.zip");
        std::fs::write(&input, b"archive bytes").unwrap();
        record(&tmp.path().join("a"), Some(&remote), "v1", &[input], &[]).unwrap();
        let b = tmp.path().join("b");
        let l = find(&b, Some(&remote), "v1").unwrap().unwrap();
        // Damaged locally: fetched again.
        std::fs::write(&l.inputs[0], b"archive bytez").unwrap();
        let again = find(&b, Some(&remote), "v1").unwrap().unwrap();
        assert_eq!(std::fs::read(&again.inputs[0]).unwrap(), b"archive bytes");
        // Replaced in the bucket by another archive: refused, on a fresh machine and on this
        // one once its copy is gone.
        let hash = blake3::hash(b"archive bytes").to_hex().to_string();
        std::fs::write(bucket.join("inputs").join(&hash), b"another run").unwrap();
        let e = find(&tmp.path().join("c"), Some(&remote), "v1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not the file the label names"), "{e}");
        assert!(
            !tmp.path().join("c/inputs").exists() || {
                walkdir::WalkDir::new(tmp.path().join("c/inputs"))
                    .into_iter()
                    .filter_map(|e| e.ok())
                    .all(|e| !e.file_type().is_file())
            }
        );
        std::fs::remove_file(&again.inputs[0]).unwrap();
        assert!(find(&b, Some(&remote), "v1").is_err());
    }
}
