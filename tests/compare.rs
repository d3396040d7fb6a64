//! `compare` on real captures: the repository's example against itself and against copies in
//! which one module's thunks were slowed down, labels, errors, and (with the shared fixtures)
//! two captures of the same program.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::*;
use arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch, RecordBatchReader,
};
use arrow::datatypes::{DataType, Int64Type};

const EXAMPLE: &str = "examples/mlp-fsdp-2gpu.zip";
const TRACE: &str = "nvtx_gpu_proj_trace/trace.parquet";

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE)
}

fn ints(a: &ArrayRef) -> Vec<Option<i64>> {
    match a.data_type() {
        DataType::Float64 => a
            .as_primitive::<arrow::datatypes::Float64Type>()
            .iter()
            .map(|v| v.filter(|v| v.is_finite()).map(|v| v as i64))
            .collect(),
        _ => arrow::compute::cast(a, &DataType::Int64)
            .unwrap()
            .as_primitive::<Int64Type>()
            .iter()
            .collect(),
    }
}

fn like(template: &ArrayRef, v: Vec<Option<i64>>) -> ArrayRef {
    match template.data_type() {
        DataType::Float64 => Arc::new(Float64Array::from(
            v.into_iter()
                .map(|x| x.map(|x| x as f64))
                .collect::<Vec<_>>(),
        )),
        DataType::Int64 => Arc::new(Int64Array::from(v)),
        other => arrow::compute::cast(&(Arc::new(Int64Array::from(v)) as ArrayRef), other).unwrap(),
    }
}

/// A copy of the archive `src` in which every execution of the XLA module `module` takes
/// `factor` times as long on the GPU: each of its ranges, and every range on the same thread
/// inside it (its thunks), is stretched about the module's start.
fn slowed_copy(src: &Path, module: &str, factor: f64, dest: &Path) {
    let mut zip = zip::ZipArchive::new(std::fs::File::open(src).unwrap()).unwrap();
    let mut bytes = Vec::new();
    zip.by_name(TRACE).unwrap().read_to_end(&mut bytes).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        bytes::Bytes::from(bytes),
    )
    .unwrap()
    .build()
    .unwrap();
    let schema = reader.schema();
    let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
    let batch = arrow::compute::concat_batches(&schema, &batches).unwrap();
    let col = |n: &str| schema.index_of(n).ok();
    // (start column, duration column or end column, is_end)
    let (s_i, d_i, is_end, name_i) = match (col("Projected Start"), col("Projected Duration")) {
        (Some(s), Some(d)) => (s, d, false, col("Name").unwrap()),
        _ => (
            col("Start").unwrap(),
            col("End").unwrap(),
            true,
            col("Text").unwrap(),
        ),
    };
    let tid = ints(batch.column(col("TID").unwrap()));
    let start = ints(batch.column(s_i));
    let other = ints(batch.column(d_i));
    let end: Vec<Option<i64>> = start
        .iter()
        .zip(&other)
        .map(|(s, o)| if is_end { *o } else { Some((*s)? + (*o)?) })
        .collect();
    let names = arrow::compute::cast(batch.column(name_i), &DataType::Utf8).unwrap();
    let names = names.as_string::<i32>();
    // The module's executions: ranges named after it with the widest extent on their thread.
    let is_module = |i: usize| {
        names.is_valid(i)
            && names
                .value(i)
                .contains(&format!("XlaModule:#hlo_module={module},"))
            || names.is_valid(i) && names.value(i) == module
    };
    let spans: Vec<(i64, i64, i64)> = (0..batch.num_rows())
        .filter(|&i| is_module(i))
        .filter_map(|i| Some((tid[i]?, start[i]?, end[i]?)))
        .collect();
    assert!(
        !spans.is_empty(),
        "no execution of {module} in {}",
        src.display()
    );
    let (mut new_s, mut new_o) = (start.clone(), other.clone());
    let mut touched = 0;
    for i in 0..batch.num_rows() {
        let (Some(t), Some(s), Some(e)) = (tid[i], start[i], end[i]) else {
            continue;
        };
        if let Some(&(_, ms, _)) = spans
            .iter()
            .find(|(mt, ms, me)| *mt == t && s >= *ms && e <= *me)
        {
            let ns = ms + ((s - ms) as f64 * factor).round() as i64;
            let ne = ms + ((e - ms) as f64 * factor).round() as i64;
            new_s[i] = Some(ns);
            new_o[i] = Some(if is_end { ne } else { ne - ns });
            touched += 1;
        }
    }
    assert!(touched > spans.len(), "no thunk inside {module}");
    let mut columns = batch.columns().to_vec();
    columns[s_i] = like(&columns[s_i], new_s);
    columns[d_i] = like(&columns[d_i], new_o);
    let batch = RecordBatch::try_new(schema.clone(), columns).unwrap();
    let mut trace = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut trace, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();

    let mut out = zip::ZipWriter::new(std::fs::File::create(dest).unwrap());
    for i in 0..zip.len() {
        let name = zip.by_index_raw(i).unwrap().name().unwrap().to_string();
        if name == TRACE {
            let opts = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Stored);
            out.start_file(name.as_str(), opts).unwrap();
            out.write_all(&trace).unwrap();
        } else {
            out.raw_copy_file(zip.by_index_raw(i).unwrap()).unwrap();
        }
    }
    out.finish().unwrap();
}

fn compare(cache: &Path, out: &Path, extra: &[&str], sides: &[&Path]) -> std::process::Output {
    let mut args: Vec<std::ffi::OsString> = vec![
        "compare".into(),
        "--cache-dir".into(),
        cache.into(),
        "-o".into(),
        out.into(),
    ];
    args.extend(extra.iter().map(|s| s.into()));
    args.extend(sides.iter().map(|p| p.into()));
    run(&os(&args))
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn metrics<'a>(
    report: &'a serde_json::Value,
    family: &str,
    verdict: &str,
) -> Vec<&'a serde_json::Value> {
    report["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["family"] == family && m["verdict"] == verdict)
        .collect()
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems: the archive's copies are read from the report inside it"
)]
fn a_ten_percent_slower_module_is_a_regression_naming_its_thunks() {
    let tmp = tempfile::tempdir().unwrap();
    let slow = tmp.path().join("slow10.zip");
    slowed_copy(&example(), "jit_train_step", 1.10, &slow);
    let out = tmp.path().join("out");
    let o = compare(&tmp.path().join("cache"), &out, &[], &[&example(), &slow]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}\n{}",
        stdout(&o),
        String::from_utf8_lossy(&o.stderr)
    );
    let report = json(&out.join("compare.json"));
    assert_eq!(report["verdict"], "regression");
    assert_eq!(report["exit_code"], 1);
    let modules = metrics(&report, "module", "regression");
    assert_eq!(modules.len(), 1, "{modules:?}");
    let m = modules[0];
    assert_eq!(m["key"], "jit_train_step");
    assert_eq!(m["gates"], true);
    let change = m["stat"]["change"].as_f64().unwrap();
    assert!((change - 0.10).abs() < 0.01, "change {change}");
    let (lo, hi) = (
        m["stat"]["ci"][0].as_f64().unwrap(),
        m["stat"]["ci"][1].as_f64().unwrap(),
    );
    assert!(lo > 0.05 && lo <= change && change <= hi, "CI {lo} … {hi}");
    assert!(m["stat"]["p_value"].as_f64().unwrap() < 0.01);
    // Where: the module's thunks, each about 10 % slower.
    let thunks = metrics(&report, "thunk", "regression");
    assert!(thunks.len() >= 3, "{thunks:?}");
    for t in &thunks {
        assert_eq!(t["module"], "jit_train_step");
        let c = t["stat"]["change"].as_f64().unwrap();
        assert!((c - 0.10).abs() < 0.03, "{}: {c}", t["key"]);
    }
    assert!(!metrics(&report, "op", "regression").is_empty());
    // The same work in more time: the thunks that do FLOPs run about 9 % slower (1/1.1).
    let rates = metrics(&report, "rate", "regression");
    assert!(!rates.is_empty(), "{:?}", report["metrics"]);
    for r in &rates {
        assert_eq!(r["module"], "jit_train_step");
        let c = r["stat"]["change"].as_f64().unwrap();
        assert!((c - (1.0 / 1.1 - 1.0)).abs() < 0.03, "{}: {c}", r["key"]);
        assert!(thunks.iter().any(|t| t["key"] == r["key"]), "{}", r["key"]);
    }
    assert!(metrics(&report, "rate", "improvement").is_empty());
    // Terminal, and the pull-request comment: the verdict first, naming module and thunks.
    let text = stdout(&o);
    assert!(
        text.starts_with("1 regression: module jit_train_step +10."),
        "{text}"
    );
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    let first = md.lines().next().unwrap();
    assert!(
        first.starts_with("❌ **1 regression: module jit_train_step +10."),
        "{first}"
    );
    assert!(md.contains("### Where the time went"));
    let thunk = thunks[0]["key"].as_str().unwrap();
    assert!(md.contains(&format!("`jit_train_step › {thunk}`")), "{md}");
    // In the terminal, under the module: "thunk* in jit_train_step", then the thunk's row.
    assert!(text.contains("thunk in jit_train_step"), "{text}");
    // Within 100 columns a long name is cut in its middle; its start stays.
    let start: String = thunk.chars().take(10).collect();
    assert!(
        text.lines().any(|l| l.starts_with(&format!("  {start}"))),
        "{text}"
    );

    // The comment as a whole (deterministic: seeded intervals), the inputs' paths aside.
    let md: String = md
        .lines()
        .map(|l| {
            if l.starts_with("BASE: ") {
                "BASE: … · HEAD: …"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!("compare_md_ten_percent", md);

    // Gating nothing: the same findings, exit 0.
    let o = compare(
        &tmp.path().join("cache"),
        &out,
        &["--gate", "none"],
        &[&example(), &slow],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn one_percent_is_below_the_default_threshold_and_identical_runs_are_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let slow = tmp.path().join("slow1.zip");
    slowed_copy(&example(), "jit_train_step", 1.01, &slow);
    let out = tmp.path().join("out1");
    let o = compare(&cache, &out, &[], &[&example(), &slow]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let report = json(&out.join("compare.json"));
    assert_eq!(report["verdict"], "ok");
    let m: Vec<_> = report["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["family"] == "module" && m["key"] == "jit_train_step")
        .collect();
    assert_eq!(m[0]["verdict"], "unchanged");
    let change = m[0]["stat"]["change"].as_f64().unwrap();
    assert!((change - 0.01).abs() < 0.005, "{change}");
    // Below a 0.5 % threshold, yet still no alarm: 1 % is well inside the run-to-run spread
    // of eight executions, so the test is not significant.
    let o = compare(&cache, &out, &["--threshold", "0.5"], &[&example(), &slow]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("threshold 0.5 %"), "{}", stdout(&o));
    let report = json(&out.join("compare.json"));
    let m = report["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["family"] == "module" && m["key"] == "jit_train_step")
        .unwrap();
    assert!(m["stat"]["p_value"].as_f64().unwrap() > 0.01, "{m}");

    let same = tmp.path().join("same");
    let o = compare(&cache, &same, &[], &[&example(), &example()]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let report = json(&same.join("compare.json"));
    for m in report["metrics"].as_array().unwrap() {
        assert!(
            m["verdict"] == "unchanged" || m["verdict"] == "inconclusive",
            "{m}"
        );
        assert_eq!(m["stat"]["change"].as_f64(), Some(0.0));
    }
    assert!(stdout(&o).starts_with("No significant regression"));
}

#[test]
fn labels_name_cached_runs_and_a_warm_compare_executes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let slow = tmp.path().join("slow.zip");
    slowed_copy(&example(), "jit_train_step", 1.10, &slow);
    assert_ok(&analyze(
        &cache,
        &tmp.path().join("a"),
        &["-q", "--label", "base-abc123"],
        &[example()],
    ));
    assert_ok(&analyze(
        &cache,
        &tmp.path().join("b"),
        &["-q", "--label", "head-def456"],
        &[slow.clone()],
    ));
    let out = tmp.path().join("out");
    let by_label = |out: &Path| {
        let args = args![
            "compare",
            "--cache-dir",
            &cache,
            "-o",
            out,
            "base-abc123",
            "head-def456"
        ];
        run(&os(&args))
    };
    let o = by_label(&out);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let o = by_label(&tmp.path().join("out2"));
    assert_eq!(o.status.code(), Some(1));
    let record = json(&tmp.path().join("out2/pipeline-run.json"));
    assert_eq!(record["executed"], 0, "{record}");
    assert_eq!(
        json(&out.join("compare.json"))["metrics"],
        json(&tmp.path().join("out2/compare.json"))["metrics"]
    );
}

#[test]
fn input_errors_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let out = tmp.path().join("out");
    let missing = tmp.path().join("missing.zip");
    let o = compare(&cache, &out, &[], &[&example(), &missing]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("missing.zip: no such file, and no run labelled"),
        "{err}"
    );
    let o = compare(&cache, &out, &[], &[&example()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("give BASE and HEAD"));
    let o = compare(
        &cache,
        &out,
        &["--gate", "modules"],
        &[&example(), &example()],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown metric \"modules\""));
    let o = compare(
        &cache,
        &out,
        &["--threshold-for", "wait"],
        &[&example(), &example()],
    );
    assert_eq!(o.status.code(), Some(2));
    let bad = tmp.path().join("bad.zip");
    std::fs::write(&bad, b"not a zip").unwrap();
    let o = compare(&cache, &out, &[], &[&example(), &bad]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("bad.zip"));
    assert!(!out.exists(), "nothing written on an input error");
}

#[test]
fn two_captures_of_the_same_program_show_no_regression() {
    let (Some(f), Some(nsys)) = (fixtures(), nsys()) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let base = f.join("h200/fsdp2_1proc/rep.nsys-rep");
    let head = f.join("h200/long_1proc/rep.nsys-rep");
    let go = |out: &Path| {
        let args = args!["compare", "--cache-dir", &cache, "-o", out, &base, &head];
        run_with_nsys(&nsys, &os(&args))
    };
    let out = tmp.path().join("out");
    let o = go(&out);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&o),
        String::from_utf8_lossy(&o.stderr)
    );
    let report = json(&out.join("compare.json"));
    let step = report["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["family"] == "module" && m["key"] == "jit_train_step")
        .expect("jit_train_step compared");
    // 16 steady executions (8 steps x 2 GPUs) against 588; the same speed within 1 %.
    assert_eq!(step["stat"]["n_base"], 16);
    assert_eq!(step["stat"]["n_head"], 588);
    assert!(step["stat"]["change"].as_f64().unwrap().abs() < 0.01);
    assert_eq!(step["verdict"], "unchanged");
    assert!(!metrics(&report, "bandwidth", "unchanged").is_empty());
    // Warm: every node reused.
    let o = go(&tmp.path().join("warm"));
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        json(&tmp.path().join("warm/pipeline-run.json"))["executed"],
        0
    );
}

/// The keys of compare.json's metrics that `keep` keeps, in its order.
fn metric_keys<'a>(
    report: &'a serde_json::Value,
    keep: impl Fn(&serde_json::Value) -> bool,
) -> Vec<&'a str> {
    report["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| keep(m))
        .map(|m| m["key"].as_str().unwrap())
        .collect()
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn runs_of_several_processes_compare_process_by_process_pooled() {
    let Some(f) = fixtures() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let p = pax_archives(&f);
    let out = tmp.path().join("out");
    let args = args![
        "compare",
        "--cache-dir",
        tmp.path().join("cache"),
        "-o",
        &out,
        "--base",
        &p[0],
        "--base",
        &p[1],
        "--head",
        &p[2],
        "--head",
        &p[3],
    ];
    let o = run(&os(&args));
    let report = json(&out.join("compare.json"));
    // Ranks 2-3 run their 296-byte all-reduces 23 % slower than ranks 0-1, all 12 samples
    // below the 6 of the other side but one: exactly p = 0.0097, the one regression (exit 1).
    let regressions = metric_keys(&report, |m| m["verdict"] == "regression");
    assert_eq!(regressions, ["all-reduce 296 B"], "{}", stdout(&o));
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert_eq!(report["base"]["processes"], 2);
    assert_eq!(report["head"]["processes"], 2);
    // The step function: 6 steady executions in ranks 0-1, 3 in ranks 2-3 (of the program
    // both sides execute; the other one is only in ranks 2-3): inconclusive, not an alarm.
    let step = report["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["family"] == "module" && m["key"] == "pjit__wrapped_step_fn")
        .unwrap();
    assert_eq!(
        (
            step["stat"]["n_base"].as_u64(),
            step["stat"]["n_head"].as_u64()
        ),
        (Some(6), Some(3))
    );
    assert_eq!(step["verdict"], "inconclusive");
    let added: Vec<&str> = report["added"]["module"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(added, ["pjit__wrapped_step_fn [04555b1419fd]"]);
    // Each (collective, size) is one metric: none is both compared and listed as removed.
    let compared = metric_keys(&report, |m| m["family"] == "bandwidth");
    for gone in report["removed"]["bandwidth"]
        .as_array()
        .into_iter()
        .flatten()
    {
        assert!(!compared.contains(&gone.as_str().unwrap()), "{gone}");
    }
    // Compile times per module are compared too (one or two compilations a side).
    assert!(
        report["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["family"] == "compile")
    );
    assert!(
        report["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["family"] == "pass")
    );

    // Profiles of different programs: nothing in common to compare, an input error.
    let other = tmp.path().join("other");
    let args = args![
        "compare",
        "--cache-dir",
        tmp.path().join("cache"),
        "-o",
        &other,
        &p[0],
        example()
    ];
    let o = run(&os(&args));
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no XLA module in common"), "{err}");
    assert!(!other.exists());
}

#[test]
fn a_rerun_of_the_base_adds_run_to_run_noise_to_the_threshold() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    // The base profiled again came out 8 % slower (as two real H200 runs of the example
    // workload did, by 12.7 %): a head 10 % slower is within that noise, 20 % is not.
    let rerun = tmp.path().join("rerun.zip");
    slowed_copy(&example(), "jit_train_step", 1.08, &rerun);
    let head10 = tmp.path().join("head10.zip");
    slowed_copy(&example(), "jit_train_step", 1.10, &head10);
    let head20 = tmp.path().join("head20.zip");
    slowed_copy(&example(), "jit_train_step", 1.20, &head20);
    let go = |head: &Path, out: &Path| {
        let args = args![
            "compare",
            "--cache-dir",
            &cache,
            "-o",
            out,
            "--base",
            example(),
            "--base-rerun",
            &rerun,
            "--head",
            head,
        ];
        run(&os(&args))
    };
    let out = tmp.path().join("o10");
    let o = go(&head10, &out);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let report = json(&out.join("compare.json"));
    let step = report["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["family"] == "module" && m["key"] == "jit_train_step")
        .unwrap();
    let noise = step["noise"].as_f64().unwrap();
    assert!((noise - 0.08).abs() < 0.01, "{noise}");
    assert!((step["threshold"].as_f64().unwrap() - (0.05 + noise)).abs() < 1e-12);
    assert_eq!(step["verdict"], "unchanged");
    assert!(
        report["rerun"]["inputs"][0]
            .as_str()
            .unwrap()
            .ends_with("rerun.zip")
    );
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    assert!(md.contains("BASE rerun: "), "{md}");
    assert!(md.contains("unchanged (run-to-run ±8.0 %)"), "{md}");

    let o = go(&head20, &tmp.path().join("o20"));
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    // Without the rerun, 10 % is a regression.
    let args = args![
        "compare",
        "--cache-dir",
        &cache,
        "-o",
        tmp.path().join("o"),
        example(),
        &head10
    ];
    assert_eq!(run(&os(&args)).status.code(), Some(1));
}
