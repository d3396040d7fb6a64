//! Test helpers shared by the unit and integration tests.
#![allow(dead_code)] // each of the two test builds that include this file uses a part of it
use std::path::{Path, PathBuf};

/// The shared fixture folder: `$NSYS_JAX_PIPE_FIXTURES`, else `../shared/fixtures` beside the
/// checkout. Returns `None` (and prints a loud notice) when it is absent, so tests that need it
/// can skip.
pub fn fixtures_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("NSYS_JAX_PIPE_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures"));
    if dir.is_dir() {
        Some(dir)
    } else {
        skip(&format!(
            "shared fixtures not found at {} (set NSYS_JAX_PIPE_FIXTURES)",
            dir.display()
        ))
    }
}

/// A test that cannot run here: marked ignored at build time (`build.rs`), this only runs
/// with `--include-ignored`; then it skips loudly, or, where every test must run
/// (`NSYS_JAX_PIPE_REQUIRE_ALL=1`, as `.ci/run` sets), fails.
fn skip<T>(why: &str) -> Option<T> {
    if std::env::var_os("NSYS_JAX_PIPE_REQUIRE_ALL").is_some_and(|v| v == "1") {
        panic!("NSYS_JAX_PIPE_REQUIRE_ALL=1 and {why}");
    }
    eprintln!("\n!!! SKIPPING: {why} !!!\n");
    None
}

/// An Nsight Systems CLI for tests: `$NSYS`, else the checkout's `.nsys/` (where
/// `scripts/install-nsys.sh .nsys` puts it), else `/tmp/nsys/`, else `nsys` on `PATH`; `None`
/// (with a loud notice) when there is none.
pub fn nsys_path() -> Option<PathBuf> {
    let checkout = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let candidates = std::env::var_os("NSYS")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .chain([
            checkout.join(".nsys/target-linux-x64/nsys"),
            PathBuf::from("/tmp/nsys/target-linux-x64/nsys"),
        ])
        .chain(
            std::env::var_os("PATH")
                .map(|p| {
                    std::env::split_paths(&p)
                        .map(|d| d.join("nsys"))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default(),
        );
    for c in candidates {
        if c.is_file() {
            return Some(c);
        }
    }
    skip("no Nsight Systems CLI (set NSYS, or run scripts/install-nsys.sh .nsys)")
}

/// Names a Chromium-family browser goes by on `PATH`.
pub const CHROMIUM_NAMES: &[&str] = &["chromium", "chromium-browser", "google-chrome"];

/// A headless-capable browser for the HTML report's tests: `$CHROMIUM`, else the first of
/// [`CHROMIUM_NAMES`] on `PATH` (`scripts/install-chromium.sh` installs Debian's); `None`
/// (with a loud notice) when there is none.
pub fn chromium_path() -> Option<PathBuf> {
    let from_env = std::env::var_os("CHROMIUM")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .flat_map(|d| CHROMIUM_NAMES.iter().map(move |n| d.join(n)));
    for c in from_env.into_iter().chain(on_path) {
        if c.is_file() {
            return Some(c);
        }
    }
    skip("no Chromium (set CHROMIUM, or run scripts/install-chromium.sh)")
}

/// The program `$var` names, else `rel` in the checkout, if either is a file.
fn env_or_checkout(var: &str, rel: &str) -> Option<PathBuf> {
    let checkout = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    std::env::var_os(var)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .chain([checkout.join(rel)])
        .find(|c| c.is_file())
}

/// A Python with JAX for the test that runs `run` for real: `$NSYS_JAX_PIPE_PYTHON`, else the
/// checkout's `.jax/bin/python` (where `scripts/install-jax.sh .jax` puts it); `None` (with a
/// loud notice) when there is none.
pub fn jax_python() -> Option<PathBuf> {
    env_or_checkout("NSYS_JAX_PIPE_PYTHON", ".jax/bin/python").or_else(|| {
        skip("no Python with JAX (set NSYS_JAX_PIPE_PYTHON, or run scripts/install-jax.sh .jax)")
    })
}

/// An S3-protocol server program (moto's `moto_server`): `$NSYS_JAX_PIPE_S3_SERVER`, else the
/// checkout's `.s3/bin/moto_server` (where `scripts/install-s3-server.sh .s3` puts it); `None`
/// (with a loud notice) when there is none.
pub fn s3_server() -> Option<PathBuf> {
    env_or_checkout("NSYS_JAX_PIPE_S3_SERVER", ".s3/bin/moto_server")
        .or_else(|| skip("no S3-protocol server (run scripts/install-s3-server.sh .s3)"))
}

/// The Python of a virtual environment where the project's wheel is installed:
/// `$NSYS_JAX_PIPE_WHEEL_PYTHON`, else the checkout's `.wheel/bin/python` (where
/// `scripts/install-wheel.sh .wheel` puts it); `None` (with a loud notice) when there is none.
pub fn wheel_python() -> Option<PathBuf> {
    env_or_checkout("NSYS_JAX_PIPE_WHEEL_PYTHON", ".wheel/bin/python").or_else(|| {
        skip("no virtual environment with the wheel (run scripts/install-wheel.sh .wheel)")
    })
}

/// Writes `script` to `path` as an executable program (a stand-in for nsys or another tool)
/// and returns the path.
pub fn write_program(path: &std::path::Path, script: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, script).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_path_buf()
}

/// Whether this process may make a private mount namespace (`unshare -m`, as root), where a
/// test mounts a small or read-only tmpfs; `None` (skipped loudly) otherwise.
pub fn private_mounts() -> Option<()> {
    let ok = std::process::Command::new("unshare")
        .args(["-m", "sh", "-c", "mount -t tmpfs -o size=64k none /mnt"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Some(())
    } else {
        skip("cannot mount a tmpfs in a private mount namespace (unshare -m needs root)")
    }
}

/// The crate's source files as the build script reads them.
pub fn crate_files() -> Vec<modgraph::SourceFile> {
    modgraph::read_crate(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src")).unwrap()
}

/// The crate's module graph as the build script makes it.
pub fn crate_graph(files: &[modgraph::SourceFile]) -> modgraph::ModGraph {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lock = modgraph::Lock::parse(&std::fs::read_to_string(root.join("Cargo.lock")).unwrap());
    modgraph::ModGraph::build(
        files,
        &modgraph::externals(&lock, "nsys-jax-pipe"),
        "nsys_jax_pipe",
    )
}

/// The files of the crate form layers: no file reaches itself through others (a glob import
/// reaches all of a module, so a cycle is often one `use super::*` away).
#[test]
fn files_form_no_import_cycle() {
    let g = crate_graph(&crate_files());
    let found: Vec<Vec<&str>> = g
        .cycles()
        .iter()
        .map(|c| c.iter().map(|&i| g.files[i].as_str()).collect())
        .collect();
    assert!(found.is_empty(), "cycles between files: {found:?}");
}
