//! The profiled program's Python hook (docs/design.md, "User NVTX ranges" and "Provenance"):
//! `run` writes `python_hook.py` as `sitecustomize.py` into a folder of its scratch space and
//! puts that folder first on the program's `PYTHONPATH`. The hook runs any `sitecustomize` it
//! shadows; under Nsight Systems, when asked ([`NVTX_WORKAROUND`]), makes the `nvtx`
//! package's domains real when it loads; and, when asked ([`RUN_METADATA`]), records what each
//! Python process ran with (`formats::run_metadata::PythonProcess`) into a folder.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::formats::run_metadata::{ENV_PREFIXES, PACKAGES, PythonProcess};

/// The hook's source (its package and variable lists filled in by [`source`]).
const SOURCE: &str = include_str!("python_hook.py");

/// `1`: make the `nvtx` package's domains real under Nsight Systems.
pub const NVTX_WORKAROUND: &str = "NSYS_JAX_PIPE_NVTX_WORKAROUND";
/// A folder: each Python process writes `python-<pid>.json` into it.
pub const RUN_METADATA: &str = "NSYS_JAX_PIPE_RUN_METADATA";

fn python_tuple(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("({},)", quoted.join(", "))
}

/// The hook, with the recorded packages and variable prefixes of `formats::run_metadata`.
pub fn source() -> String {
    SOURCE
        .replace("%PACKAGES%", &python_tuple(PACKAGES))
        .replace("%PREFIXES%", &python_tuple(ENV_PREFIXES))
}

/// Writes the hook into `work/python/sitecustomize.py`; returns the folder.
pub fn write(work: &Path) -> Result<PathBuf> {
    let dir = work.join("python");
    std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let file = dir.join("sitecustomize.py");
    std::fs::write(&file, source()).with_context(|| format!("{}: cannot write", file.display()))?;
    Ok(dir)
}

/// What the program's Python processes recorded into `folder` (by process id); unreadable
/// files are skipped with a note.
pub fn read_records(folder: &Path) -> (Vec<PythonProcess>, Vec<String>) {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    let Ok(entries) = std::fs::read_dir(folder) else {
        return (out, notes);
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for f in files {
        let parsed = std::fs::read(&f)
            .map_err(anyhow::Error::from)
            .and_then(|b| {
                if b.len() > crate::formats::run_metadata::MAX_BYTES {
                    anyhow::bail!("too large");
                }
                Ok(serde_json::from_slice::<PythonProcess>(&b)?)
            });
        match parsed {
            Ok(p) => out.push(p),
            Err(e) => notes.push(format!(
                "{}: a Python process's record is unreadable ({})",
                f.display(),
                crate::error::one_line(&e)
            )),
        }
    }
    out.sort_by_key(|p| p.pid);
    (out, notes)
}

/// `PYTHONPATH` with `dir` first (the program's own entries kept after it).
pub fn python_path(dir: &Path, existing: Option<&str>) -> String {
    match existing.filter(|e| !e.is_empty()) {
        Some(e) => format!("{}:{e}", dir.display()),
        None => dir.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_goes_first_and_keeps_the_programs_path() {
        let d = Path::new("/s/python");
        assert_eq!(python_path(d, None), "/s/python");
        assert_eq!(python_path(d, Some("")), "/s/python");
        assert_eq!(python_path(d, Some("/a:/b")), "/s/python:/a:/b");
    }

    /// The hook against a stand-in of the package's layout (the real package is exercised
    /// by `run` under Nsight Systems in tests/run_cpu.rs): domains are real under a tool,
    /// untouched without one, and a shadowed sitecustomize still runs.
    #[test]
    fn the_hook_makes_domains_real_only_under_a_tool() {
        let python = "python3";
        let tmp = tempfile::tempdir().unwrap();
        let hook = write(tmp.path()).unwrap();
        let pkg = tmp.path().join("pkgs/nvtx/_lib");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(
            tmp.path().join("pkgs/nvtx/__init__.py"),
            "from nvtx._lib.lib import Domain\n",
        )
        .unwrap();
        std::fs::write(pkg.join("__init__.py"), "").unwrap();
        std::fs::write(
            pkg.join("lib.py"),
            "class DummyDomain: pass\n\
             dummy = DummyDomain()\n\
             class DomainHandle:\n    def __init__(self, name): self.name = name\n\
             class Domain:\n    def __new__(cls, name=None):\n        return dummy\n    \
             def __init__(self, name=None): self.name = name\n",
        )
        .unwrap();
        let own = tmp.path().join("own");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(
            own.join("sitecustomize.py"),
            "import builtins; builtins.OWN_SITE = 1\n",
        )
        .unwrap();
        let script = "import builtins, nvtx\n\
                      print(type(nvtx.Domain('x')).__name__, getattr(builtins, 'OWN_SITE', 0))\n";
        let run = |tool: bool| {
            let mut c = std::process::Command::new(python);
            c.arg("-c").arg(script).env(
                "PYTHONPATH",
                python_path(
                    &hook,
                    Some(&format!(
                        "{}:{}",
                        own.display(),
                        tmp.path().join("pkgs").display()
                    )),
                ),
            );
            if tool {
                c.env("NVTX_INJECTION64_PATH", "/nsys/libToolsInjection64.so")
                    .env(NVTX_WORKAROUND, "1");
            } else {
                c.env_remove("NVTX_INJECTION64_PATH");
            }
            let o = c.output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        };
        assert_eq!(run(true), "Domain 1");
        assert_eq!(run(false), "DummyDomain 1");
    }

    /// The record of a process that imports a package called `jax` after setting a flag
    /// itself, and of one that never imports it.
    #[test]
    fn each_python_process_records_what_it_ran_with() {
        let tmp = tempfile::tempdir().unwrap();
        let hook = write(tmp.path()).unwrap();
        let pkgs = tmp.path().join("pkgs/jax");
        std::fs::create_dir_all(&pkgs).unwrap();
        std::fs::write(pkgs.join("__init__.py"), "__version__ = '9.9.1'\n").unwrap();
        let records = tmp.path().join("records");
        std::fs::create_dir_all(&records).unwrap();
        let run = |script: &str| {
            let o = std::process::Command::new("python3")
                .arg("-c")
                .arg(script)
                .env(
                    "PYTHONPATH",
                    python_path(&hook, Some(&tmp.path().join("pkgs").display().to_string())),
                )
                .env(RUN_METADATA, &records)
                .env("XLA_FLAGS", "--xla_given=1")
                .env_remove("NVTX_INJECTION64_PATH")
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        };
        run("import os; os.environ['XLA_FLAGS'] += ' --xla_own=2'; import jax");
        run("pass");
        let (procs, notes) = read_records(&records);
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(procs.len(), 2);
        let with_jax: Vec<&PythonProcess> = procs
            .iter()
            .filter(|p| p.imported.contains_key("jax"))
            .collect();
        assert_eq!(with_jax.len(), 1, "{procs:?}");
        assert_eq!(with_jax[0].imported["jax"], "9.9.1");
        assert_eq!(
            with_jax[0].environment["XLA_FLAGS"],
            "--xla_given=1 --xla_own=2"
        );
        assert!(with_jax[0].python.starts_with('3'));
        std::fs::write(records.join("python-0.json"), "{").unwrap();
        let (_, notes) = read_records(&records);
        assert!(notes[0].contains("unreadable"), "{notes:?}");
    }

    /// Two copies of the hook on the path (a `run` inside another): the program imports JAX
    /// as usual, the real loader's other methods still answer, one copy records.
    #[test]
    fn two_copies_of_the_hook_install_once() {
        let tmp = tempfile::tempdir().unwrap();
        let a = write(&tmp.path().join("a")).unwrap();
        let b = write(&tmp.path().join("b")).unwrap();
        let pkg = tmp.path().join("pkgs/jax");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("__init__.py"), "__version__ = '1.2.3'\n").unwrap();
        std::fs::write(pkg.join("data.txt"), "hello").unwrap();
        let records = tmp.path().join("records");
        std::fs::create_dir_all(&records).unwrap();
        let path = format!(
            "{}:{}:{}",
            a.display(),
            b.display(),
            tmp.path().join("pkgs").display()
        );
        let script = "import sys, pkgutil, jax\n\
                      n = sum(type(f).__name__ == '_Finder' for f in sys.meta_path)\n\
                      print(jax.__version__, pkgutil.get_data('jax', 'data.txt').decode(), n)\n";
        let o = std::process::Command::new("python3")
            .args(["-c", script])
            .env("PYTHONPATH", path)
            .env(RUN_METADATA, &records)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "1.2.3 hello 1");
        let (procs, _) = read_records(&records);
        assert_eq!(procs.len(), 1);
        assert_eq!(procs[0].imported["jax"], "1.2.3");
    }
}
