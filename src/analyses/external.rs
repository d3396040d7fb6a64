//! External analysis scripts, run the way nsys-jax runs its analyses: the working directory
//! is `OUTDIR/analysis/<name>/`, extra arguments come first and the extracted archive folder
//! last. The run is a graph node keyed on the script's content, its arguments and the input
//! keys; its output files are stored, so an unchanged script on unchanged inputs is not run
//! again.

use crate::engine::Value;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The files a script wrote (relative path, bytes) and what it printed.
#[derive(Clone, Debug, Default)]
pub struct ScriptOutput {
    pub files: Vec<(String, Vec<u8>)>,
    pub stdout: String,
}

impl Value for ScriptOutput {
    fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut put = |b: &[u8]| {
            out.extend_from_slice(&(b.len() as u64).to_le_bytes());
            out.extend_from_slice(b);
        };
        put(self.stdout.as_bytes());
        for (p, b) in &self.files {
            put(p.as_bytes());
            put(b);
        }
        Ok(out)
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        let mut pos = 0;
        let mut take = || -> Result<Option<&[u8]>> {
            if pos == bytes.len() {
                return Ok(None);
            }
            let n = u64::from_le_bytes(bytes.get(pos..pos + 8).context("truncated")?.try_into()?)
                as usize;
            let s = bytes.get(pos + 8..pos + 8 + n).context("truncated")?;
            pos += 8 + n;
            Ok(Some(s))
        };
        let stdout = String::from_utf8_lossy(take()?.context("empty")?).into_owned();
        let mut files = Vec::new();
        while let Some(p) = take()? {
            let p = String::from_utf8(p.to_vec())?;
            files.push((p, take()?.context("truncated")?.to_vec()));
        }
        Ok(ScriptOutput { files, stdout })
    }
}

/// The analysis's name: the script's file stem.
pub fn script_name(script: &Path) -> String {
    script
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "script".into())
}

/// Run `script` on the extracted archive `folder`.
pub fn run_script(script: &Path, args: &[String], folder: &Path) -> Result<ScriptOutput> {
    let work = crate::tmpfiles::ScratchDir::new("script")?;
    let script = std::fs::canonicalize(script)
        .with_context(|| format!("{}: analysis script not found", script.display()))?;
    let mut cmd = if script.extension().is_some_and(|e| e == "py") {
        let python = std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into());
        let mut c = Command::new(python);
        c.arg(&script);
        c
    } else {
        Command::new(&script)
    };
    cmd.args(args).arg(folder).current_dir(work.path());
    let out = cmd
        .output()
        .with_context(|| format!("{}: cannot run analysis script", script.display()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("(no output)");
        bail!(
            "{}: analysis script failed ({}): {}",
            script.display(),
            out.status,
            last.trim()
        );
    }
    let mut files = Vec::new();
    for e in walkdir::WalkDir::new(work.path()).min_depth(1) {
        let e = e?;
        if e.file_type().is_file() {
            let rel = e
                .path()
                .strip_prefix(work.path())?
                .to_string_lossy()
                .into_owned();
            files.push((rel, std::fs::read(e.path())?));
        }
    }
    files.sort();
    Ok(ScriptOutput {
        files,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
    })
}

/// Lay out the inputs as one extracted nsys-jax folder: a single extracted folder is used as
/// it is; zips are extracted; several inputs are combined (a member identical in every input
/// is stored once, one that differs becomes `path/<input stem>`).
pub fn materialize(inputs: &[&crate::formats::archive::Archive], dest: &Path) -> Result<PathBuf> {
    if inputs.len() == 1 && !inputs[0].is_zip() {
        return Ok(inputs[0].path.clone());
    }
    let stem = |a: &crate::formats::archive::Archive| {
        a.path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let mut all: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    for a in inputs {
        all.extend(a.members());
    }
    for m in all {
        let contents: Vec<Option<Vec<u8>>> = inputs
            .iter()
            .map(|a| {
                if a.has(m) {
                    a.read(m).map(Some)
                } else {
                    Ok(None)
                }
            })
            .collect::<Result<_>>()?;
        let first = &contents[0];
        if inputs.len() == 1 || contents.iter().all(|c| c == first) {
            if let Some(b) = first {
                write(dest, m, b)?;
            }
        } else {
            for (a, c) in inputs.iter().zip(&contents) {
                if let Some(b) = c {
                    write(dest, &format!("{m}/{}", stem(a)), b)?;
                }
            }
        }
    }
    Ok(dest.to_path_buf())
}

/// Write the member `rel` under `dest`. Archives refuse names that could leave their folder
/// when opened; this checks again, so that nothing is ever written outside `dest`.
fn write(dest: &Path, rel: &str, bytes: &[u8]) -> Result<()> {
    if let Err(why) = crate::formats::archive::check_member_name(rel) {
        bail!("refused to lay out member {rel:?}: {why}");
    }
    let path = dest.join(rel);
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(&path, bytes).with_context(|| format!("{}: cannot write", path.display()))
}
