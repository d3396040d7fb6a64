//! History benchmark: `history` over N labelled runs (default 100).
//!
//! The runs are copies of the one-GPU captures of the example workload
//! (`tests/data/why/one*.zip`, four real runs taken in turn, so the real run-to-run noise is in
//! the series) with their GPU time scaled by known factors: +5 % from run N/4, −8 % from run
//! N/2, +3 % from run 3N/4, and each names its own commit. Each is labelled with
//! `analyze --label` into one cache. Then `history --label-prefix r` is timed cold (after the
//! labels: the history's own nodes not yet computed) and warm (again, nothing changed), with
//! its peak RSS, and the change points of `module:jit_train_step` are listed against the
//! injected ones.
//!
//! `cargo bench --bench history` runs N = 100; `cargo bench --bench history -- 50` chooses N.
//! Under `cargo test` it runs N = 12 as a check that it works.

#[path = "../tests/common/scaled.rs"]
mod scaled;
#[path = "common/timed.rs"]
mod timed;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_nsys-jax-pipe")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bench = args.iter().any(|a| a == "--bench");
    let n: usize = args
        .iter()
        .find_map(|a| a.parse().ok())
        .unwrap_or(if bench { 100 } else { 12 });
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/why");
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("history-{n}"));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let cache = work.join("cache");
    let steps = [(n / 4, 0.05), (n / 2, -0.08), (3 * n / 4, 0.03)];
    let t0 = Instant::now();
    let mut archives: Vec<PathBuf> = Vec::new();
    for i in 0..n {
        let factor: f64 = steps
            .iter()
            .filter(|(at, _)| *at <= i)
            .map(|(_, c)| 1.0 + c)
            .product();
        let src = data.join(format!("one{}.zip", 1 + i % 4));
        let dst = work.join(format!("r{i:03}.zip"));
        scaled::scaled_archive(&src, &dst, factor, &format!("{i:040x}"));
        archives.push(dst);
    }
    for (i, a) in archives.iter().enumerate() {
        let status = Command::new(bin())
            .args(["analyze", "-q", "--analysis", "summary", "--cache-dir"])
            .arg(&cache)
            .arg("-o")
            .arg(work.join("out"))
            .args(["--label", &format!("r{i:03}")])
            .arg(a)
            .status()
            .unwrap();
        assert!(status.success());
    }
    eprintln!(
        "{n} labelled runs ready in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let history = |tag: &str| {
        let mut c = Command::new(bin());
        c.args(["history", "-q", "--label-prefix", "r", "--cache-dir"])
            .arg(&cache)
            .arg("-o")
            .arg(work.join(format!("h-{tag}")));
        let (wall, mib, _) = timed::timed(c).expect("history runs");
        (wall, mib)
    };
    let (cold_s, cold_mib) = history("cold");
    let (warm_s, warm_mib) = history("warm");
    let h: serde_json::Value =
        serde_json::from_slice(&std::fs::read(work.join("h-warm/history.json")).unwrap()).unwrap();
    let module = h["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "module:jit_train_step")
        .expect("the module's series");
    let found: Vec<(u64, f64)> = module["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["index"].as_u64().unwrap(), c["change"].as_f64().unwrap()))
        .collect();
    println!(
        "history of {n} runs: cold {cold_s:.2} s ({cold_mib:.0} MiB peak), warm {warm_s:.2} s ({warm_mib:.0} MiB); injected steps {steps:?}; change points found (index, change) {found:?}"
    );
}
