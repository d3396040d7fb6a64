//! The engine seen from the command line: damaged cache entries, several processes sharing a
//! cache, `cache stats` / `cache gc`; and the archive layouts (zip, extracted folder, combined
//! folder) giving the same answers.

use crate::common::*;
use std::path::{Path, PathBuf};

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn extract(zip: &Path, dest: &Path) {
    let mut z = zip::ZipArchive::new(std::fs::File::open(zip).unwrap()).unwrap();
    z.extract(dest).unwrap();
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn damaged_cache_entries_are_recomputed_not_trusted() {
    let Some(f) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let inputs = &pax_archives(&f)[..1];
    let o1 = tmp.path().join("o1");
    assert_ok(&analyze(&cache, &o1, &["-q"], inputs));
    // Damage every stored analysis result: truncate one, flip a byte in the others.
    let mut damaged = 0;
    for e in walkdir::WalkDir::new(cache.join("objects")) {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.contains(".analysis_") {
            let mut b = std::fs::read(e.path()).unwrap();
            if damaged == 0 {
                b.truncate(b.len() / 2);
            } else {
                let n = b.len();
                b[n - 1] ^= 0x55;
            }
            std::fs::write(e.path(), b).unwrap();
            damaged += 1;
        }
    }
    assert_eq!(
        damaged, 12,
        "the default pipeline's eleven analyses and the stragglers diagnose reads, stored"
    );
    let o2 = tmp.path().join("o2");
    assert_ok(&analyze(&cache, &o2, &["-q"], inputs));
    let run = json(&o2.join("pipeline-run.json"));
    let executed: Vec<&str> = run["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["status"] == "executed")
        .map(|n| n["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        executed.len(),
        12,
        "the damaged analyses re-executed: {executed:?}"
    );
    for f in [
        "summary.json",
        "communication.json",
        "compilation.json",
        "ops.json",
        "sources.json",
        "flamegraph-source.svg",
    ] {
        assert_eq!(read(&o1.join(f)), read(&o2.join(f)), "{f}");
    }
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn processes_sharing_one_cache_agree() {
    let Some(f) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let inputs = pax_archives(&f);
    let outs: Vec<PathBuf> = (0..3).map(|i| tmp.path().join(format!("o{i}"))).collect();
    let handles: Vec<_> = outs
        .iter()
        .map(|o| {
            let mut cmd = std::process::Command::new(bin());
            cmd.arg("analyze")
                .arg("-q")
                .arg("--cache-dir")
                .arg(&cache)
                .arg("-o")
                .arg(o)
                .args(&inputs);
            cmd.spawn().unwrap()
        })
        .collect();
    for mut h in handles {
        assert!(h.wait().unwrap().success());
    }
    for o in &outs[1..] {
        assert_eq!(
            read(&outs[0].join("summary.json")),
            read(&o.join("summary.json"))
        );
    }
    // No temporary files left behind, and the next run reuses everything.
    for e in walkdir::WalkDir::new(&cache) {
        assert!(
            !e.unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(".tmp-")
        );
    }
    let o = tmp.path().join("again");
    assert_ok(&analyze(&cache, &o, &["-q"], &inputs));
    assert_eq!(json(&o.join("pipeline-run.json"))["executed"], 0);
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn cache_stats_and_gc() {
    let Some(f) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    assert_ok(&analyze(
        &cache,
        &tmp.path().join("o"),
        &["-q"],
        &pax_archives(&f)[..1],
    ));
    let c = cache.as_os_str();
    let o = run(&[
        "cache".as_ref(),
        "stats".as_ref(),
        "--cache-dir".as_ref(),
        c,
    ]);
    assert_ok(&o);
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains("entries") && s.contains("analysis_summary") && s.contains("gpu-frames"),
        "{s}"
    );
    let o = run(&[
        "cache".as_ref(),
        "gc".as_ref(),
        "--max-size".as_ref(),
        "0".as_ref(),
        "--cache-dir".as_ref(),
        c,
    ]);
    assert_ok(&o);
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("0 entries (0 B) remain"), "{s}");
    let o = run(&["cache".as_ref(), "gc".as_ref(), "--cache-dir".as_ref(), c]);
    assert_eq!(o.status.code(), Some(2), "gc needs a bound");
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn zip_extracted_folder_and_combined_folder_agree() {
    let Some(f) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let zips = pax_archives(&f);

    // One process: zip vs extracted folder.
    let folder = tmp.path().join("proc0");
    extract(&zips[0], &folder);
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    assert_ok(&analyze(&cache, &a, &["-q"], &zips[..1]));
    assert_ok(&analyze(&cache, &b, &["-q"], &[folder]));
    for f in ["summary.json", "communication.json"] {
        assert_eq!(unlabelled(&a.join(f)), unlabelled(&b.join(f)), "{f}");
    }

    // Four processes: four inputs vs their combined layout (identical files once, differing
    // ones as path/<stem>).
    let archives: Vec<nsys_jax_pipe::api::Archive> = zips
        .iter()
        .map(|z| nsys_jax_pipe::api::Archive::open(z).unwrap())
        .collect();
    let refs: Vec<&_> = archives.iter().collect();
    let combined = tmp.path().join("combined");
    nsys_jax_pipe::api::materialize(&refs, &combined).unwrap();
    assert!(
        combined
            .join("nvtx_gpu_proj_trace/trace.parquet/proc3")
            .is_file()
    );
    let (c, d) = (tmp.path().join("c"), tmp.path().join("d"));
    assert_ok(&analyze(&cache, &c, &["-q"], &zips));
    assert_ok(&analyze(&cache, &d, &["-q"], &[combined]));
    for f in ["summary.json", "communication.json"] {
        assert_eq!(unlabelled(&c.join(f)), unlabelled(&d.join(f)), "{f}");
    }
}

/// An output with the processes' labels (which name the input: `proc0.zip`, `proc0`) left
/// out of the summary's steady-state windows; everything else as written.
fn unlabelled(path: &std::path::Path) -> String {
    let mut v = json(path);
    for w in v["steady"].as_array_mut().into_iter().flatten() {
        assert!(
            w["process"].as_str().is_some_and(|p| p.contains("proc")),
            "{w}"
        );
        w["process"] = serde_json::Value::Null;
    }
    serde_json::to_string_pretty(&v).unwrap()
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn one_more_rank_executes_only_its_own_nodes_and_the_reduces() {
    let Some(f) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let inputs = pax_archives(&f);
    assert_ok(&analyze(
        &cache,
        &tmp.path().join("o3"),
        &["-q"],
        &inputs[..3],
    ));
    let o4 = tmp.path().join("o4");
    assert_ok(&analyze(&cache, &o4, &["-q"], &inputs));
    let run = json(&o4.join("pipeline-run.json"));
    let executed: Vec<(String, String)> = run["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["status"] == "executed")
        .map(|n| {
            (
                n["kind"].as_str().unwrap().to_string(),
                n["label"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    for (kind, label) in &executed {
        if PER_PROCESS_KINDS.contains(&kind.as_str()) {
            assert!(label.ends_with("proc3.zip"), "{kind} of {label} executed");
        } else {
            // The reduces, the run's warm-up context, and decoding the new rank's HLO.
            assert!(
                kind.starts_with("analysis:")
                    || [
                        "warmup-context",
                        "compile-sums-group",
                        "hlo-schema",
                        "hlo-module",
                        "html-report",
                        "headline",
                    ]
                    .contains(&kind.as_str()),
                "{kind} ({label}) executed"
            );
        }
    }
    // The other ranks' frames are not even loaded: their stored shares suffice.
    for n in run["nodes"].as_array().unwrap() {
        let kind = n["kind"].as_str().unwrap();
        if kind == "gpu-frames" || kind == "compile-frame" {
            let label = n["label"].as_str().unwrap();
            assert!(label.ends_with("proc3.zip"), "{kind} of {label} loaded");
        }
    }
    for kind in [
        "summary-partial",
        "communication-partial",
        "ops-partial",
        "stacks-partial",
        "memory-partial",
        "roofline-partial",
        "gpu-frames",
    ] {
        assert_eq!(
            executed.iter().filter(|(k, _)| k == kind).count(),
            1,
            "{kind}"
        );
    }
    let reduces = executed
        .iter()
        .filter(|(k, _)| k.starts_with("analysis:"))
        .count();
    assert_eq!(reduces, 12, "{executed:?}");
    // And the result is that of a cold run over the four.
    let cold = tmp.path().join("cold");
    assert_ok(&analyze(
        &tmp.path().join("cache2"),
        &cold,
        &["-q"],
        &inputs,
    ));
    for f in [
        "summary.json",
        "communication.json",
        "compilation.json",
        "ops.json",
        "sources.json",
        "source.folded",
    ] {
        assert_eq!(read(&o4.join(f)), read(&cold.join(f)), "{f}");
    }
}
