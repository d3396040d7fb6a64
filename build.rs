//! Derives the version of every source file from the crate's module graph
//! (the `modgraph` crate of `crates/modgraph/`): the hash of all the code a file can reach, of the locked versions
//! of the crates that code names and of the toolchain. A node kind's version is that of the
//! files that implement it, so editing one analysis re-executes only the nodes that reach the
//! edit, and no list of files is kept by hand.
//!
//! And tells the tests what this machine has: `cfg(test_fixtures)` when the shared fixtures
//! are there, `cfg(test_nsys)` when an Nsight Systems CLI is, `cfg(test_chromium)` when a
//! Chromium browser is, `cfg(test_jax)` when a Python with JAX is, `cfg(test_wheel)` when a
//! virtual environment with the project's wheel is, `cfg(test_s3)` when an S3-protocol server
//! is; the tests that need one are marked ignored without it, so that `cargo test` counts
//! them as ignored.
//!
//! It watches exactly what its outputs depend on (the source files and the files they
//! include, `Cargo.lock`, the variables and paths it looks at) and nothing that a build or a
//! test writes, so that a build with nothing changed does nothing.

use std::fmt::Write;
use std::path::{Path, PathBuf};

fn main() {
    test_resources();
    versions();
}

fn versions() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let files = modgraph::read_crate(&manifest.join("src")).unwrap_or_else(|e| panic!("{e}"));
    println!("cargo:rerun-if-changed=Cargo.lock");
    let lock_path = manifest.join("Cargo.lock");
    let lock = modgraph::Lock::parse(&std::fs::read_to_string(&lock_path).unwrap_or_default());
    let externals = modgraph::externals(&lock, &std::env::var("CARGO_PKG_NAME").unwrap());
    let lib_name = std::env::var("CARGO_PKG_NAME").unwrap().replace('-', "_");
    let graph = modgraph::ModGraph::build(&files, &externals, &lib_name);
    for f in &graph.files {
        println!("cargo:rerun-if-changed=src/{f}");
    }
    let toolchain = toolchain();
    let mut out = String::from(
        "/// Every file of the crate (relative to `src/`), the version of all the code it reaches, and\n\
         /// the files it reaches (indices into this table, itself included).\n\
         pub const FILES: &[(&str, &str, &[u16])] = &[\n",
    );
    for (i, f) in graph.files.iter().enumerate() {
        let reach: Vec<String> = graph.closure(&[i]).iter().map(|j| j.to_string()).collect();
        let version = graph.version(&[i], &lock, &toolchain);
        writeln!(out, "    ({f:?}, {version:?}, &[{}]),", reach.join(", ")).unwrap();
    }
    out.push_str("];\n");
    writeln!(
        out,
        "/// The toolchain the versions include (tests recompute the versions with it).\n#[cfg(test)]\npub const TOOLCHAIN: &str = {toolchain:?};"
    )
    .unwrap();
    // The direct edges, for reading why a file reaches another (not compiled in).
    let mut edges = String::new();
    for (i, f) in graph.files.iter().enumerate() {
        for &j in &graph.edges[i] {
            writeln!(edges, "{f} -> {}", graph.files[j]).unwrap();
        }
    }
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    write_if_changed(&out_dir.join("modgraph-edges.txt"), &edges);
    let dest = out_dir.join("versions.rs");
    write_if_changed(&dest, &out);
    write_if_changed(&out_dir.join("kinds.rs"), &declared_kinds(&files));
}

/// Every `kind!(NAME = "name")` and `family!(NAME = "prefix")` of the crate's sources, as a
/// table for the tests: (name or prefix, file relative to `src/`, whether a family).
fn declared_kinds(files: &[modgraph::SourceFile]) -> String {
    use modgraph::lex::{Tok, tokens};
    let mut out = String::from("pub const DECLARED: &[(&str, &str, bool)] = &[\n");
    for f in files.iter().filter(|f| f.path.ends_with(".rs")) {
        let t = tokens(&String::from_utf8_lossy(&f.bytes));
        for w in t.windows(6) {
            if let [
                Tok::Ident(mac),
                Tok::Punct('!'),
                Tok::Punct('('),
                Tok::Ident(_),
                Tok::Punct('='),
                Tok::Str(name),
            ] = w
                && (mac == "kind" || mac == "family")
            {
                let family = mac == "family";
                writeln!(out, "    ({name:?}, {:?}, {family}),", f.path).unwrap();
            }
        }
    }
    out.push_str("];\n");
    out
}

fn write_if_changed(path: &Path, text: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::write(path, text).unwrap();
    }
}

/// `rustc -V` of the compiler building the crate (its standard library shapes outputs too).
fn toolchain() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    std::process::Command::new(rustc)
        .arg("-V")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Sets the `cfg(test_*)` flags (the places `src/testutil.rs` looks in). `PATH` is searched
/// but not watched: activating a Python environment changes it, and must not rebuild the
/// crate. What is found on it is watched; the install scripts touch this file when they
/// install something.
fn test_resources() {
    for var in [
        "NSYS_JAX_PIPE_FIXTURES",
        "NSYS",
        "CHROMIUM",
        "NSYS_JAX_PIPE_PYTHON",
        "NSYS_JAX_PIPE_WHEEL_PYTHON",
        "NSYS_JAX_PIPE_S3_SERVER",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    };
    let on_path = |names: &[&str]| -> Vec<PathBuf> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .flat_map(|d| names.iter().map(move |n| d.join(n)))
            .collect()
    };
    let fixtures =
        var("NSYS_JAX_PIPE_FIXTURES").unwrap_or_else(|| manifest.join("../shared/fixtures"));
    let nsys: Vec<PathBuf> = var("NSYS")
        .into_iter()
        .chain([
            manifest.join(".nsys/target-linux-x64/nsys"),
            "/tmp/nsys/target-linux-x64/nsys".into(),
        ])
        .chain(on_path(&["nsys"]))
        .collect();
    let chromium: Vec<PathBuf> = var("CHROMIUM")
        .into_iter()
        .chain(on_path(&["chromium", "chromium-browser", "google-chrome"]))
        .collect();
    let or_default =
        |name: &str, default: &str| vec![var(name).unwrap_or_else(|| manifest.join(default))];
    for (cfg, found) in [
        ("test_fixtures", present(&[fixtures], true)),
        ("test_nsys", present(&nsys, false)),
        ("test_chromium", present(&chromium, false)),
        // A Python with JAX for the real `run` test.
        (
            "test_jax",
            present(
                &or_default("NSYS_JAX_PIPE_PYTHON", ".jax/bin/python"),
                false,
            ),
        ),
        // A virtual environment with the project's wheel (`scripts/install-wheel.sh`).
        (
            "test_wheel",
            present(
                &or_default("NSYS_JAX_PIPE_WHEEL_PYTHON", ".wheel/bin/python"),
                false,
            ),
        ),
        // An S3-protocol server for the remote cache's tests (`scripts/install-s3-server.sh`).
        (
            "test_s3",
            present(
                &or_default("NSYS_JAX_PIPE_S3_SERVER", ".s3/bin/moto_server"),
                false,
            ),
        ),
    ] {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        if found {
            println!("cargo:rustc-cfg={cfg}");
        }
    }
}

/// Whether one of `candidates` exists (a folder if `dir`, else a file). The first one found
/// is watched, so that its going away re-runs this script. Paths that do not exist are not
/// watched: Cargo re-runs a script for a missing path on every build, and watching a folder
/// above instead would watch what builds and tests write (the checkout, `/tmp`). What makes
/// one appear is a change of the variables above, or an install script of `scripts/`, which
/// touches `build.rs` when it is done.
fn present(candidates: &[PathBuf], dir: bool) -> bool {
    let found = candidates
        .iter()
        .find(|c| if dir { c.is_dir() } else { c.is_file() });
    if let Some(c) = found {
        println!("cargo:rerun-if-changed={}", c.display());
    }
    found.is_some()
}
