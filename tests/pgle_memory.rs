//! `pgle` and `memory` against nsys-jax: the PGLE profile its `pgle_costs.py` wrote for the
//! example archive, and the static heap peak its notebook shows for the pax programs.

use crate::common::*;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip")
}

/// `costs { name: "N" cost_us: X }` lines as name → µs.
fn costs(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .map(|l| {
            let name = l.split('"').nth(1).unwrap().to_string();
            let us = l
                .split("cost_us: ")
                .nth(1)
                .unwrap()
                .trim_end_matches(" }")
                .parse()
                .unwrap();
            (name, us)
        })
        .collect()
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn pgle_profile_of_the_example_is_nsys_jaxs() {
    let Some(f) = fixtures() else { return };
    let reference = f.join("reference/mlp-notebook/maxcomm_mincompute");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    assert_ok(&analyze(
        &tmp.path().join("cache"),
        &out,
        &["--analysis", "pgle"],
        &[example()],
    ));
    let mut expected: Vec<PathBuf> = std::fs::read_dir(&reference)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    expected.sort();
    let mut got: Vec<PathBuf> = std::fs::read_dir(out.join("pgle"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    got.sort();
    let names = |v: &[PathBuf]| -> Vec<String> {
        v.iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(names(&got), names(&expected));
    for (g, e) in got.iter().zip(&expected) {
        let (g, e) = (
            costs(&std::fs::read_to_string(g).unwrap()),
            costs(&std::fs::read_to_string(e).unwrap()),
        );
        assert_eq!(g.keys().collect::<Vec<_>>(), e.keys().collect::<Vec<_>>());
        for (name, us) in &e {
            // One decimal in the files: within 1 %, or the rounding step.
            let diff = (g[name] - us).abs();
            assert!(
                diff <= 0.01 * us || diff <= 0.051,
                "{name}: {} vs {us}",
                g[name]
            );
        }
    }
    let j = json(&out.join("pgle.json"));
    assert_eq!(j["modules"][0]["name"], "jit_train_step");
    assert_eq!(j["modules"][0]["instructions"], 20);
    assert_eq!(j["modules"][0]["communication"], 6);
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn pax_heap_peaks_are_the_notebooks_and_2024_dumps_give_no_pgle() {
    let Some(f) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = analyze(
        &tmp.path().join("cache"),
        &out,
        &["--analysis", "memory", "--analysis", "pgle"],
        &pax_archives(&f),
    );
    assert_ok(&o);
    let m = json(&out.join("memory.json"));
    let modules = m["modules"].as_array().unwrap();
    for prefix in ["25fa0b", "04555b"] {
        let x = modules
            .iter()
            .find(|x| x["program_id"].as_str().unwrap().starts_with(prefix))
            .unwrap_or_else(|| panic!("{prefix} in {m}"));
        assert_eq!(x["name"], "pjit__wrapped_step_fn");
        assert_eq!(x["peak_bytes"], 16384076800i64);
        let curve = x["curve"].as_array().unwrap();
        assert_eq!(curve.len(), 4265);
        assert_eq!(curve[0][1], 0);
        assert_eq!(curve[curve.len() - 1][1], 0);
        assert!(x["allocated_bytes"].is_null());
        let live: i64 = x["at_peak"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["bytes"].as_i64().unwrap())
            .sum();
        assert!(live > 0 && live <= 16384076800, "{live}");
    }
    // 2024 dumps have no scheduling names: no profile files, each program in the notes.
    let p = json(&out.join("pgle.json"));
    assert!(p["modules"].as_array().unwrap().is_empty(), "{p}");
    // (Notes are wrapped at 100 columns.)
    let stdout = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        stdout.contains("has a scheduling name in the dump (older XLA): no profile"),
        "{stdout}"
    );
    assert!(!out.join("pgle").exists());
}

#[test]
fn a_damaged_memory_report_is_a_note() {
    let tmp = tempfile::tempdir().unwrap();
    let damaged = tmp.path().join("damaged.zip");
    let target =
        "dump/module_4642.jit_train_step.sm_9.0a_gpu_after_optimizations-memory-usage-report.pb.xz";
    {
        let mut src = zip::ZipArchive::new(std::fs::File::open(example()).unwrap()).unwrap();
        let mut dst = zip::ZipWriter::new(std::fs::File::create(&damaged).unwrap());
        let mut found = false;
        for i in 0..src.len() {
            let mut m = src.by_index(i).unwrap();
            let name = m.name().unwrap().into_owned();
            let mut bytes = Vec::new();
            m.read_to_end(&mut bytes).unwrap();
            if name == target {
                found = true;
                bytes = b"not xz at all".to_vec();
            }
            dst.start_file(name, zip::write::SimpleFileOptions::default())
                .unwrap();
            dst.write_all(&bytes).unwrap();
        }
        assert!(found, "{target}");
        dst.finish().unwrap();
    }
    let out = tmp.path().join("out");
    let o = analyze(
        &tmp.path().join("cache"),
        &out,
        &["--analysis", "memory"],
        &[damaged],
    );
    assert_ok(&o);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("memory-usage-report.pb.xz"), "{stdout}");
    let m = json(&out.join("memory.json"));
    let step = &m["modules"][0];
    assert_eq!(step["name"], "jit_train_step");
    assert!(step["allocated_bytes"].is_null());
    assert!(step["peak_bytes"].as_i64().unwrap() > 0);
}
