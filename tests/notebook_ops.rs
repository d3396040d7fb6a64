//! `ops` and `sources` against what nsys-jax's analysis notebook computes on the same data
//! (`reference/pax4-notebook`, `reference/mlp-notebook`): the three totals, GPU time per
//! opcode, every thunk of the top modules (time, opcode, op_name), the variability of every
//! compute thunk, and every source and op_name stack, within 0.5 %.

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

const TOL: f64 = 0.005;

fn reference(f: &Path, name: &str) -> Value {
    let path = f.join("reference").join(name).join("notebook.json.xz");
    let mut text = String::new();
    liblzma::read::XzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

fn close(ours: f64, theirs: f64, what: &str) {
    let ok = if theirs.abs() < 1e-9 {
        ours.abs() < 1e-9
    } else {
        rel(ours, theirs) <= TOL
    };
    assert!(ok, "{what}: ours {ours} vs notebook {theirs}");
}

/// Rows of a `[path, ns]` table as path -> ms.
fn stacks(v: &Value) -> BTreeMap<Vec<String>, f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let path = r[0]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap().to_string())
                .collect();
            (path, r[1].as_f64().unwrap() * 1e-6)
        })
        .collect()
}

/// Rows of ours by (program, thunk).
fn by_thunk(rows: &Value) -> BTreeMap<(&str, &str), &Value> {
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let key = (
                r["program_id"].as_str().unwrap(),
                r["thunk"].as_str().unwrap(),
            );
            (key, r)
        })
        .collect()
}

fn check(out: &Path, nb: &Value) {
    let ops = json(&out.join("ops.json"));
    let sources = json(&out.join("sources.json"));

    let t = &nb["totals"];
    close(
        ops["totals"]["thunks_ms"].as_f64().unwrap(),
        t["1_all_thunks_active_ms"].as_f64().unwrap(),
        "thunk total",
    );
    close(
        ops["totals"]["modules_ms"].as_f64().unwrap(),
        t["2_all_modules_active_ms"].as_f64().unwrap(),
        "module total",
    );
    close(
        ops["totals"]["wall_ms"].as_f64().unwrap(),
        t["3_all_modules_wall_ms"].as_f64().unwrap(),
        "wall total",
    );

    let by_opcode: BTreeMap<&str, f64> = ops["by_opcode"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["opcode"].as_str().unwrap(), r["ms"].as_f64().unwrap()))
        .collect();
    let mut opcodes = 0;
    for (path, ms) in stacks(&nb["op_runtime"]) {
        if path[0] == "_total" {
            continue;
        }
        opcodes += 1;
        let ours = by_opcode.get(path[0].as_str()).copied();
        close(ours.unwrap_or(f64::NAN), ms, &format!("opcode {}", path[0]));
    }
    assert_eq!(opcodes, by_opcode.len(), "same opcodes");

    // Every thunk of the top modules: time, opcode and op_name of its instruction.
    let cols: Vec<&str> = nb["top_thunks_columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let ours = by_thunk(&ops["top_thunks"]);
    let rows = nb["top_thunks"].as_array().unwrap();
    assert_eq!(rows.len(), ours.len(), "same thunks");
    for (i, row) in rows.iter().enumerate() {
        let d: BTreeMap<&str, &Value> = cols.iter().copied().zip(row.as_array().unwrap()).collect();
        let key = (
            d["ProgramId"].as_str().unwrap(),
            d["Name"].as_str().unwrap(),
        );
        let o = ours
            .get(&key)
            .unwrap_or_else(|| panic!("thunk {key:?} missing"));
        close(
            o["total_ms"].as_f64().unwrap(),
            d["ProjDurMs"].as_f64().unwrap(),
            &format!("thunk {key:?}"),
        );
        assert_eq!(o["opcode"], *d["opcode"], "{key:?}");
        assert_eq!(o["op_name"], *d["op_name"], "{key:?}");
        if i < 10 {
            // The top 10 in the same order (as the notebook prints them).
            let ours_i = &ops["top_thunks"][i];
            assert_eq!(
                (ours_i["program_id"].as_str(), ours_i["thunk"].as_str()),
                (Some(key.0), Some(key.1)),
                "rank {i}"
            );
        }
    }

    // Variability of every compute thunk with two or more executions.
    let var = &nb["variability"];
    let cols: Vec<&str> = var["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let ours = by_thunk(&ops["variability"]);
    let mut n = 0;
    for row in var["rows"].as_array().unwrap() {
        let d: BTreeMap<&str, &Value> = cols.iter().copied().zip(row.as_array().unwrap()).collect();
        if d["count"].as_u64().unwrap() < 2 {
            continue;
        }
        n += 1;
        let key = (
            d["ProgramId"].as_str().unwrap(),
            d["Name"].as_str().unwrap(),
        );
        let o = ours[&key];
        close(
            o["mean_ms"].as_f64().unwrap(),
            d["mean_ms"].as_f64().unwrap(),
            &format!("mean {key:?}"),
        );
        close(
            o["std_ms"].as_f64().unwrap(),
            d["std_ms"].as_f64().unwrap(),
            &format!("std {key:?}"),
        );
        assert_eq!(o["executions"].as_u64(), d["count"].as_u64(), "{key:?}");
    }
    assert_eq!(n, ours.len(), "same compute thunks");

    // Source and op_name stacks: the same strings, the same time.
    for (ours_key, nb_key) in [("source", "src_runtime"), ("op_name", "op_name_runtime")] {
        let theirs = stacks(&nb[nb_key]);
        let ours: BTreeMap<Vec<String>, f64> = sources[ours_key]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let stack = r["stack"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s.as_str().unwrap().to_string())
                    .collect();
                (stack, r["ms"].as_f64().unwrap())
            })
            .collect();
        assert_eq!(ours.len(), theirs.len(), "{ours_key}: as many stacks");
        for (path, ms) in &theirs {
            let o = ours
                .get(path)
                .unwrap_or_else(|| panic!("{ours_key}: stack {path:?} missing"));
            close(*o, *ms, &format!("{ours_key} {path:?}"));
        }
    }

    // The flame graphs are well-formed SVG with the search and zoom script, and the folded
    // stacks add up to the stacks' time.
    for name in ["flamegraph-source.svg", "flamegraph-op_name.svg"] {
        let svg = std::fs::read_to_string(out.join(name)).unwrap();
        let mut reader = quick_xml::Reader::from_str(&svg);
        let mut elements = 0;
        loop {
            match reader.read_event() {
                Ok(quick_xml::events::Event::Eof) => break,
                Ok(quick_xml::events::Event::Start(_)) => elements += 1,
                Ok(_) => {}
                Err(e) => panic!("{name}: not well-formed XML: {e}"),
            }
        }
        assert!(
            elements > 10 && svg.contains("<svg") && svg.contains("function search"),
            "{name}"
        );
    }
    for (folded, key) in [("source.folded", "source"), ("op_name.folded", "op_name")] {
        let text = std::fs::read_to_string(out.join(folded)).unwrap();
        let ns: f64 = text
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
            .sum();
        let ms: f64 = sources[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["ms"].as_f64().unwrap())
            .sum();
        close(ns * 1e-6, ms, folded);
    }
}

fn ops_and_sources(inputs: &[PathBuf]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = analyze(
        &tmp.path().join("cache"),
        &out,
        &["--analysis", "ops", "--analysis", "sources"],
        inputs,
    );
    assert_ok(&o);
    (tmp, out)
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn four_pax_archives_match_the_notebook() {
    let Some(f) = fixtures() else { return };
    let (_tmp, out) = ops_and_sources(&pax_archives(&f));
    check(&out, &reference(&f, "pax4-notebook"));
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn the_example_matches_the_notebook() {
    let Some(f) = fixtures() else { return };
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip");
    let (_tmp, out) = ops_and_sources(&[example]);
    check(&out, &reference(&f, "mlp-notebook"));
}
