//! The four JAX-Toolbox pax archives against the Python nsys-jax reference outputs.

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// pandas "split" orient: index -> row (column name -> value).
fn split_frame(v: &Value) -> BTreeMap<String, BTreeMap<String, Value>> {
    let cols: Vec<String> = v["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| match c {
            Value::Array(parts) => parts
                .iter()
                .map(|p| p.as_str().unwrap())
                .collect::<Vec<_>>()
                .join("."),
            Value::String(s) => s.clone(),
            _ => panic!("bad column {c}"),
        })
        .collect();
    let mut out = BTreeMap::new();
    for (idx, row) in v["index"]
        .as_array()
        .unwrap()
        .iter()
        .zip(v["data"].as_array().unwrap())
    {
        let row: BTreeMap<String, Value> = cols
            .iter()
            .cloned()
            .zip(row.as_array().unwrap().iter().cloned())
            .collect();
        out.insert(idx.as_str().unwrap().to_string(), row);
    }
    out
}

fn check_modules(ours: &Value, reference: &Path) {
    let refm = split_frame(&json(&reference.join("module-stats.json")));
    let ours: BTreeMap<String, &Value> = ours["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["program_id"].as_str().unwrap().to_string(), m))
        .collect();
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        refm.keys().collect::<Vec<_>>(),
        "same modules, by fingerprint"
    );
    for (id, r) in &refm {
        let o = ours[id];
        assert_eq!(o["name"], r["Name.first"], "{id}");
        assert_eq!(
            o["executions"].as_u64(),
            r["Name.count"].as_u64(),
            "{id} executions"
        );
        assert_eq!(
            o["thunks_mean"].as_f64(),
            r["NumThunks.mean"].as_f64(),
            "{id} thunks"
        );
        for (ours_k, ref_k, tol) in [
            ("duration_ms_sum", "ProjDurMs.sum", 0.005),
            ("duration_ms_mean", "ProjDurMs.mean", 0.005),
            ("duration_percent", "ProjDurMs.percent", 0.005),
            ("wait_ms_mean", "WaitMs.mean", 0.02),
        ] {
            match (o[ours_k].as_f64(), r[ref_k].as_f64()) {
                (Some(a), Some(b)) if b.abs() > 1e-9 => {
                    assert!(rel(a, b) <= tol, "{id} {ours_k}: ours {a} vs reference {b}")
                }
                (Some(a), Some(b)) => assert!((a - b).abs() < 1e-9, "{id} {ours_k}: {a} vs {b}"),
                (None, None) => {}
                (a, b) => panic!("{id} {ours_k}: ours {a:?} vs reference {b:?}"),
            }
        }
    }
}

fn check_compilation_total(ours: &Value, reference: &Path) {
    let r = split_frame(&json(&reference.join("compilation-ranges.json")));
    let total: f64 = r
        .values()
        .map(|row| row["DurNonChildMs"].as_f64().unwrap())
        .sum();
    let ours_total = ours["compilation"]["total_ms"].as_f64().unwrap();
    assert!(
        rel(ours_total, total) < 0.01,
        "compilation total: ours {ours_total} vs reference {total}"
    );
}

/// The reference CSV prints bandwidths as `mean(stderr)`; compare within 1 % or half a unit of
/// the last printed digit, whichever is larger.
fn reference_bandwidth(csv: &str) -> BTreeMap<(String, i64), (f64, f64)> {
    let mut lines = csv.lines().skip(1);
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let mut out = BTreeMap::new();
    for line in lines {
        if line.trim().is_empty() {
            break;
        }
        let cells: Vec<&str> = line.split(',').collect();
        let size: i64 = cells[0].parse().unwrap();
        for (c, v) in header[1..].iter().zip(&cells[1..]) {
            if *v == "-" {
                continue;
            }
            let mean = &v[..v.find('(').unwrap()];
            let decimals = mean.split_once('.').map(|(_, d)| d.len()).unwrap_or(0);
            out.insert(
                (c.to_string(), size),
                (mean.parse().unwrap(), 0.5 * 10f64.powi(-(decimals as i32))),
            );
        }
    }
    out
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn four_pax_archives_match_the_combined_reference() {
    let Some(f) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (cache, out) = (tmp.path().join("cache"), tmp.path().join("out"));
    let o = analyze(&cache, &out, &["-q"], &pax_archives(&f));
    assert_ok(&o);
    let reference = f.join("reference/pax4-combined");
    let summary = json(&out.join("summary.json"));
    check_modules(&summary, &reference);
    check_compilation_total(&summary, &reference);

    let comm = json(&out.join("communication.json"));
    let want = reference_bandwidth(
        &std::fs::read_to_string(reference.join("communication_summary.csv")).unwrap(),
    );
    let got: BTreeMap<(String, i64), f64> = comm["bandwidth"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                (
                    r["collective"].as_str().unwrap().to_string(),
                    r["message_size_bytes"].as_i64().unwrap(),
                ),
                r["bus_bandwidth_gbps"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    for (k, (mean, half_digit)) in &want {
        let g = got[k];
        assert!(
            (g - mean).abs() <= (0.01 * mean).max(*half_digit),
            "{k:?}: ours {g} vs reference {mean}"
        );
    }
    // The reference's hidden/total fractions: per collective (time-weighted) and overall.
    for (collective, want) in [
        ("all-gather", 0.6657086762840008),
        ("all-reduce", 0.0002924265712576557),
        ("reduce-scatter", 0.4560027154475053),
    ] {
        let got = comm["hidden_fraction"][collective].as_f64().unwrap();
        assert!(
            (got - want).abs() < 1e-9,
            "{collective} hidden fraction: ours {got} vs reference {want}"
        );
    }
    let overall = comm["overall_hidden_fraction"].as_f64().unwrap();
    assert!(
        rel(overall, 0.006498033414832545) < 1e-6,
        "overall hidden fraction {overall}"
    );

    let compilation = json(&out.join("compilation.json"));
    let entries = compilation["compilations"].as_array().unwrap();
    assert_eq!(entries.len(), 4 * 17, "one entry per XlaCompile range");
    for e in entries {
        let sum: f64 = e["parts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["seconds"].as_f64().unwrap())
            .sum();
        assert!(
            rel(sum, e["wall_s"].as_f64().unwrap()) < 1e-6,
            "parts add up: {e}"
        );
    }

    let run = json(&out.join("pipeline-run.json"));
    assert!(run["executed"].as_u64().unwrap() > 0);
    assert_eq!(
        run["reused"].as_u64().unwrap() + run["executed"].as_u64().unwrap(),
        run["nodes"].as_array().unwrap().len() as u64
    );
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn one_rank_alone_matches_its_reference_and_its_communication_works() {
    let Some(f) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (cache, out) = (tmp.path().join("cache"), tmp.path().join("out"));
    let o = analyze(&cache, &out, &["-q"], &pax_archives(&f)[..1]);
    assert_ok(&o);
    let reference = f.join("reference/pax4-proc0");
    let summary = json(&out.join("summary.json"));
    check_modules(&summary, &reference);
    check_compilation_total(&summary, &reference);
    let comm = json(&out.join("communication.json"));
    let rows = comm["bandwidth"].as_array().unwrap();
    let collectives: std::collections::BTreeSet<&str> = rows
        .iter()
        .map(|r| r["collective"].as_str().unwrap())
        .collect();
    assert_eq!(
        collectives.into_iter().collect::<Vec<_>>(),
        ["all-gather", "all-reduce", "reduce-scatter"]
    );
    assert!(
        rows.iter()
            .all(|r| r["bus_bandwidth_gbps"].as_f64().unwrap() > 0.0)
    );
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn second_run_reuses_everything_and_a_parameter_change_reruns_one_analysis() {
    let Some(f) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let inputs = pax_archives(&f);
    let pipeline = tmp.path().join("p.toml");
    let write_pipeline = |detail: bool| {
        std::fs::write(
            &pipeline,
            format!("[[analysis]]\nname='summary'\n[[analysis]]\nname='communication'\n[[analysis]]\nname='compilation'\ndetail={detail}\n"),
        )
        .unwrap()
    };
    write_pipeline(false);
    let p = pipeline.to_str().unwrap();
    let first = tmp.path().join("o1");
    assert_ok(&analyze(&cache, &first, &["-q", "--pipeline", p], &inputs));
    let second = tmp.path().join("o2");
    assert_ok(&analyze(&cache, &second, &["-q", "--pipeline", p], &inputs));
    let run = json(&second.join("pipeline-run.json"));
    assert_eq!(run["executed"], 0, "{run}");
    for f in ["summary.json", "communication.json", "compilation.json"] {
        assert_eq!(
            std::fs::read(first.join(f)).unwrap(),
            std::fs::read(second.join(f)).unwrap(),
            "{f}"
        );
    }

    write_pipeline(true);
    let third = tmp.path().join("o3");
    assert_ok(&analyze(&cache, &third, &["-q", "--pipeline", p], &inputs));
    let run = json(&third.join("pipeline-run.json"));
    let executed: Vec<&str> = run["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["status"] == "executed")
        .map(|n| n["kind"].as_str().unwrap())
        .collect();
    // Only that analysis: its per-process shares (their breakdown depends on `detail`) and
    // its reduce; the compile frames they read are stored.
    assert_eq!(
        executed,
        [
            "compilations",
            "compilations",
            "compilations",
            "compilations",
            "analysis:compilation",
            // The page shows that analysis.
            "html-report"
        ],
        "{run}"
    );
    let detail = json(&third.join("compilation.json"));
    assert!(
        detail["compilations"][0]["parts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["kind"].as_str().unwrap().contains(":#")),
        "detail keeps full range names"
    );
}
