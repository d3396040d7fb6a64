//! Helpers for the integration tests: the shared fixtures (skipped loudly when absent) and
//! running the real binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Output;

pub mod browser;
pub mod s3;
pub mod scaled;
pub mod standin;
/// Where the test resources are (shared with the library's unit tests).
#[path = "../../src/testutil.rs"]
pub mod testutil;

/// The shared fixture folder (`$NSYS_JAX_PIPE_FIXTURES`, else `../shared/fixtures`); `None`
/// with a loud notice when absent.
pub fn fixtures() -> Option<PathBuf> {
    crate::common::testutil::fixtures_dir()
}

/// Every built-in analysis, as the registry lists them.
pub fn all_analyses() -> Vec<&'static str> {
    nsys_jax_pipe::api::analysis_names()
}

/// The node kinds computed once per process (their labels name the process's archive).
pub const PER_PROCESS_KINDS: &[&str] = &[
    "member-keys",
    "gpu-frames",
    "unplaced-devices",
    "compile-frame",
    "compiled-names",
    "compiled-programs",
    "process-facts",
    "summary-partial",
    "provenance-partial",
    "communication-partial",
    "compile-sums",
    "compilations",
    "ops-partial",
    "stacks-partial",
    "memory-partial",
    "memory-held-partial",
    "ranges-partial",
    "stragglers-partial",
    "roofline-partial",
    "whatif-partial",
];

/// Every file of an output folder but its run record, by relative path, sorted.
pub fn output_files(out: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = walkdir::WalkDir::new(out)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file() && e.file_name() != "pipeline-run.json")
        .map(|e| {
            let rel = e.path().strip_prefix(out).unwrap().display().to_string();
            (rel, std::fs::read(e.path()).unwrap())
        })
        .collect();
    v.sort();
    v
}

pub fn pax_archives(f: &Path) -> Vec<PathBuf> {
    (0..4)
        .map(|i| f.join(format!("jaxtoolbox-pax-fsdp4-4proc/proc{i}.zip")))
        .collect()
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_nsys-jax-pipe"))
}

pub fn run(args: &[&std::ffi::OsStr]) -> Output {
    std::process::Command::new(bin())
        .args(args)
        .env_remove("NSYS_JAX_PIPE_CACHE")
        .output()
        .expect("run nsys-jax-pipe")
}

/// `analyze` with a private cache and output folder; returns (output, outdir).
pub fn analyze(cache: &Path, out: &Path, extra: &[&str], inputs: &[PathBuf]) -> Output {
    let mut args: Vec<std::ffi::OsString> = vec![
        "analyze".into(),
        "--cache-dir".into(),
        cache.into(),
        "-o".into(),
        out.into(),
    ];
    args.extend(extra.iter().map(|s| s.into()));
    args.extend(inputs.iter().map(|p| p.into()));
    let refs: Vec<&std::ffi::OsStr> = args.iter().map(|s| s.as_os_str()).collect();
    run(&refs)
}

pub fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(
        &std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

pub fn assert_ok(o: &Output) {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Relative difference.
pub fn rel(a: f64, b: f64) -> f64 {
    if a == b {
        0.0
    } else {
        (a - b).abs() / b.abs().max(f64::MIN_POSITIVE)
    }
}

/// An nsys for tests; `None` (loudly) when there is none.
pub fn nsys() -> Option<PathBuf> {
    crate::common::testutil::nsys_path()
}

/// Run the binary with `NSYS` set to `nsys`.
pub fn run_with_nsys(nsys: &Path, args: &[&std::ffi::OsStr]) -> Output {
    std::process::Command::new(bin())
        .args(args)
        .env_remove("NSYS_JAX_PIPE_CACHE")
        .env("NSYS", nsys)
        .output()
        .expect("run nsys-jax-pipe")
}

/// Build an argument list from strings and paths.
#[macro_export]
macro_rules! args {
    ($($a:expr),* $(,)?) => {{
        let v: Vec<std::ffi::OsString> = vec![$(std::ffi::OsString::from($a)),*];
        v
    }};
}

pub fn os(v: &[std::ffi::OsString]) -> Vec<&std::ffi::OsStr> {
    v.iter().map(|s| s.as_os_str()).collect()
}

/// The member names of a zip archive.
pub fn zip_members(path: &Path) -> Vec<String> {
    let z = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut names: Vec<String> = z.file_names().map(|n| n.unwrap().into_owned()).collect();
    names.sort();
    names
}

/// One member of a zip archive.
pub fn zip_read(path: &Path, member: &str) -> Vec<u8> {
    use std::io::Read;
    let mut z = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut f = z
        .by_name(member)
        .unwrap_or_else(|e| panic!("{member}: {e}"));
    let mut out = Vec::new();
    f.read_to_end(&mut out).unwrap();
    out
}

/// An analysis JSON with the process labels (which name the input) removed, for comparing
/// the analyses of different containers of the same profile.
pub fn without_labels(mut v: serde_json::Value) -> serde_json::Value {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.remove("process");
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}

/// `archive REPORT -o ZIP --cache-dir CACHE` with `nsys`.
pub fn archive_with(nsys: &Path, report: &Path, zip: &Path, cache: &Path) -> Output {
    run_with_nsys(
        nsys,
        &[
            "archive".as_ref(),
            report.as_os_str(),
            "-o".as_ref(),
            zip.as_os_str(),
            "--cache-dir".as_ref(),
            cache.as_os_str(),
        ],
    )
}
