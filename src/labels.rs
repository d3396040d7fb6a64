//! Labels of analysed runs (`--label` on `analyze` and `run`, e.g. a commit hash): a name for
//! the inputs of a run, kept in the cache folder (`labels/<name>.json`), so that `compare`
//! can name a side by its label and find every node of it in the cache.

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

/// Record `name` for these inputs (replacing an earlier run of the same label).
pub fn record(cache: &Path, name: &str, inputs: &[PathBuf], dumps: &[PathBuf]) -> Result<()> {
    check(name)?;
    let label = Label {
        inputs: inputs.iter().map(|p| absolute(p)).collect(),
        dumps: dumps.iter().map(|p| absolute(p)).collect(),
    };
    let file = path(cache, name);
    crate::tmpfiles::write_atomic(&file, &serde_json::to_vec_pretty(&label)?)
        .with_context(|| format!("cannot record label {name}"))
}

/// The inputs recorded for `name`, or None when there is no such label.
pub fn find(cache: &Path, name: &str) -> Result<Option<Label>> {
    if check(name).is_err() {
        return Ok(None);
    }
    let file = path(cache, name);
    let Ok(bytes) = std::fs::read(&file) else {
        return Ok(None);
    };
    let label: Label = serde_json::from_slice(&bytes)
        .with_context(|| format!("{}: unreadable label record", file.display()))?;
    for p in &label.inputs {
        if !p.exists() {
            bail!(
                "label {name}: its input {} no longer exists (label it again with `analyze --label {name}`)",
                p.display()
            );
        }
    }
    Ok(Some(label))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_and_find() {
        let tmp = tempfile::tempdir().unwrap();
        let input = tmp.path().join("a.zip");
        std::fs::write(&input, b"x").unwrap();
        record(tmp.path(), "abc123", std::slice::from_ref(&input), &[]).unwrap();
        let l = find(tmp.path(), "abc123").unwrap().unwrap();
        assert_eq!(l.inputs, vec![input.clone()]);
        assert_eq!(find(tmp.path(), "other").unwrap(), None);
        assert!(record(tmp.path(), "a/b", &[input.clone()], &[]).is_err());
        assert!(record(tmp.path(), "..", &[input.clone()], &[]).is_err());
        std::fs::remove_file(&input).unwrap();
        let e = find(tmp.path(), "abc123").unwrap_err().to_string();
        assert!(e.contains("no longer exists"), "{e}");
    }
}
