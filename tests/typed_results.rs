//! Every analysis's output reads back whole as its typed result: the files it writes from
//! the result read back from its output folder are, byte for byte, those it wrote. This is
//! how `diagnose` reads the others, so a field that does not read back fails here.

use std::path::{Path, PathBuf};

use crate::common::*;

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn analyse_all(inputs: &[PathBuf], out: &Path) {
    let mut c = std::process::Command::new(bin());
    c.args(["analyze", "--no-cache", "-q", "-o"]).arg(out);
    for a in all_analyses() {
        c.args(["--analysis", a]);
    }
    assert_ok(&c.args(inputs).output().unwrap());
}

/// Rewrites every analysis's files from what it reads back; returns how many files each
/// wrote again.
fn check_rewrites(inputs: &[PathBuf]) -> Vec<(&'static str, usize)> {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    analyse_all(inputs, &out);
    let files: Vec<(String, String)> = output_files(&out)
        .into_iter()
        .filter_map(|(n, b)| Some((n, String::from_utf8(b).ok()?)))
        .collect();
    let mut counts = Vec::new();
    for a in all_analyses() {
        let again = nsys_jax_pipe::api::rewritten(a, &files)
            .unwrap_or_else(|e| panic!("{a} on {inputs:?}: {e:#}"));
        for (name, text) in &again {
            let (_, was) = files
                .iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("{a} rewrote {name}, which it had not written"));
            assert!(
                was == text,
                "{a}: {name} differs once read back and written again ({} vs {} bytes)",
                was.len(),
                text.len()
            );
        }
        counts.push((a, again.len()));
    }
    counts
}

fn wrote(counts: &[(&str, usize)], a: &str) -> usize {
    counts.iter().find(|(n, _)| *n == a).map_or(0, |(_, c)| *c)
}

#[test]
fn every_output_reads_back_as_its_result() {
    // The shipped two-GPU example, an input-bound loop with ranges of its own, a GPT step
    // with cuDNN attention, and a two-process run with a late rank.
    let runs: Vec<Vec<PathBuf>> = vec![
        vec![data("examples/mlp-fsdp-2gpu.zip")],
        vec![data("tests/data/pairs/input_bound.zip")],
        vec![data("tests/data/pairs/gpt_cudnn.zip")],
        vec![
            data("tests/data/pairs/late_many/rank0.zip"),
            data("tests/data/pairs/late_many/rank1.zip"),
        ],
    ];
    for inputs in &runs {
        let counts = check_rewrites(inputs);
        for a in [
            "summary",
            "ops",
            "communication",
            "compilation",
            "stragglers",
            "memory",
            "roofline",
            "provenance",
            "diagnose",
            "sources",
            "pgle",
        ] {
            assert!(
                wrote(&counts, a) >= 1,
                "{a} wrote nothing on {inputs:?}: {counts:?}"
            );
        }
    }
    let ranged = check_rewrites(&[data("tests/data/pairs/input_bound.zip")]);
    assert_eq!(wrote(&ranged, "ranges"), 1, "{ranged:?}");
}

#[test]
fn the_pax_outputs_read_back_as_their_results() {
    let Some(f) = fixtures() else { return };
    let counts = check_rewrites(&pax_archives(&f));
    assert!(
        wrote(&counts, "ops") == 1 && wrote(&counts, "stragglers") == 1,
        "{counts:?}"
    );
}
