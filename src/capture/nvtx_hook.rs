//! The `nvtx` package's ranges under Nsight Systems releases that would drop them
//! (docs/design.md, "User NVTX ranges"): `run` writes `nvtx_hook.py` as `sitecustomize.py`
//! into a folder of its scratch space and puts that folder first on the program's
//! `PYTHONPATH`. The hook runs any `sitecustomize` it shadows, and, under Nsight Systems only,
//! makes the package's domains real when it loads.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The hook's source.
pub const SOURCE: &str = include_str!("nvtx_hook.py");

/// Writes the hook into `work/python/sitecustomize.py`; returns the folder.
pub fn write(work: &Path) -> Result<PathBuf> {
    let dir = work.join("python");
    std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let file = dir.join("sitecustomize.py");
    std::fs::write(&file, SOURCE).with_context(|| format!("{}: cannot write", file.display()))?;
    Ok(dir)
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
                c.env("NVTX_INJECTION64_PATH", "/nsys/libToolsInjection64.so");
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
}
