//! Hashes every source file under src/ so that each graph node's version follows the code
//! that implements it: editing one analysis re-executes only the nodes built from that file.
//! And tells the tests what this machine has: `cfg(test_fixtures)` when the shared fixtures
//! are there, `cfg(test_nsys)` when an Nsight Systems CLI is, `cfg(test_chromium)` when a
//! Chromium browser is, `cfg(test_jax)` when a Python with JAX is, `cfg(test_wheel)` when a
//! virtual environment with the project's wheel is; the tests that need one are
//! marked ignored without it, so that `cargo test` counts them as ignored.

use std::fmt::Write;
use std::path::Path;

fn main() {
    test_resources();
    let src = Path::new("src");
    println!("cargo:rerun-if-changed=src");
    let mut entries = Vec::new();
    collect(src, src, &mut entries);
    entries.sort();
    let mut out = String::from(
        "/// (path relative to src/, blake3 of its content)\npub const SOURCES: &[(&str, &str)] = &[\n",
    );
    for (rel, hash) in entries {
        writeln!(out, "    ({rel:?}, {hash:?}),").unwrap();
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("source_hashes.rs");
    std::fs::write(dest, out).unwrap();
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(root, &path, out);
        } else if path
            .extension()
            .is_some_and(|e| e == "rs" || e == "css" || e == "js")
        {
            // Sources, and the styles and scripts the HTML report includes.
            let bytes = std::fs::read(&path).unwrap();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            out.push((rel, blake3::hash(&bytes).to_hex().to_string()));
        }
    }
}

/// Sets `cfg(test_fixtures)` and `cfg(test_nsys)` (the places `src/testutil.rs` looks in).
fn test_resources() {
    println!("cargo::rustc-check-cfg=cfg(test_fixtures)");
    println!("cargo::rustc-check-cfg=cfg(test_nsys)");
    println!("cargo::rustc-check-cfg=cfg(test_chromium)");
    println!("cargo::rustc-check-cfg=cfg(test_jax)");
    println!("cargo::rustc-check-cfg=cfg(test_wheel)");
    println!("cargo::rustc-check-cfg=cfg(test_s3)");
    for var in [
        "NSYS_JAX_PIPE_FIXTURES",
        "NSYS",
        "PATH",
        "CHROMIUM",
        "NSYS_JAX_PIPE_PYTHON",
        "NSYS_JAX_PIPE_WHEEL_PYTHON",
        "NSYS_JAX_PIPE_S3_SERVER",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let manifest = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    // The folders whose entries tell: the checkout's parent (../shared) and the checkout
    // (.nsys/).
    println!("cargo:rerun-if-changed=..");
    println!("cargo:rerun-if-changed=.");
    let fixtures = std::env::var_os("NSYS_JAX_PIPE_FIXTURES")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| manifest.join("../shared/fixtures"));
    if fixtures.is_dir() {
        println!("cargo:rustc-cfg=test_fixtures");
    }
    let mut candidates: Vec<std::path::PathBuf> = std::env::var_os("NSYS")
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
        .into_iter()
        .collect();
    candidates.push(manifest.join(".nsys/target-linux-x64/nsys"));
    candidates.push("/tmp/nsys/target-linux-x64/nsys".into());
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("nsys")));
    }
    if candidates.iter().any(|c| c.is_file()) {
        println!("cargo:rustc-cfg=test_nsys");
    }
    // A browser for the HTML report (the names `src/testutil.rs` looks for).
    let mut browsers: Vec<std::path::PathBuf> = std::env::var_os("CHROMIUM")
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
        .into_iter()
        .collect();
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            for n in ["chromium", "chromium-browser", "google-chrome"] {
                browsers.push(d.join(n));
            }
        }
    }
    if browsers.iter().any(|c| c.is_file()) {
        println!("cargo:rustc-cfg=test_chromium");
    }
    // A Python with JAX for the real `run` test (where `src/testutil.rs` looks).
    let python = std::env::var_os("NSYS_JAX_PIPE_PYTHON")
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| manifest.join(".jax/bin/python"));
    if python.is_file() {
        println!("cargo:rustc-cfg=test_jax");
    }
    // A virtual environment with the project's wheel installed (`scripts/install-wheel.sh`).
    let wheel = std::env::var_os("NSYS_JAX_PIPE_WHEEL_PYTHON")
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| manifest.join(".wheel/bin/python"));
    if wheel.is_file() {
        println!("cargo:rustc-cfg=test_wheel");
    }
    // An S3-protocol server for the remote cache's tests (`scripts/install-s3-server.sh`).
    let s3 = std::env::var_os("NSYS_JAX_PIPE_S3_SERVER")
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| manifest.join(".s3/bin/moto_server"));
    if s3.is_file() {
        println!("cargo:rustc-cfg=test_s3");
    }
}
