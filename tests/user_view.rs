//! The user's own view of a capture: their NVTX ranges (`ranges`) against Nsight Systems'
//! own projection, and device memory over time (`memory`) against the report's
//! memory-usage table. Captures made on an H100/H200 with JAX 0.11.2 and Nsight Systems
//! 2023.4.4: tests/data/nvtx-user (README) and tests/data/memory (README).

use crate::common::*;
use std::path::{Path, PathBuf};

fn data(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(p)
}

/// Rows of a CSV file with a header (no quoted commas in the fields read).
fn csv(path: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut rd = csv_rows(&text);
    let header = rd.remove(0);
    rd.into_iter()
        .map(|r| header.iter().cloned().zip(r).collect())
        .collect()
}

/// Splits CSV text into fields, honouring double quotes.
fn csv_rows(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let (mut fields, mut cur, mut quoted) = (Vec::new(), String::new(), false);
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '"' if quoted && chars.peek() == Some(&'"') => {
                    cur.push('"');
                    chars.next();
                }
                '"' => quoted = !quoted,
                ',' if !quoted => fields.push(std::mem::take(&mut cur)),
                c => cur.push(c),
            }
        }
        fields.push(cur);
        rows.push(fields);
    }
    rows
}

fn analyze_report(nsys: &Path, report: &Path, analyses: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut a = args![
        "analyze",
        "-q",
        "--cache-dir",
        tmp.path().join("cache"),
        "-o",
        &out
    ];
    for x in analyses {
        a.extend(args!["--analysis", x]);
    }
    a.push(report.into());
    let o = run_with_nsys(nsys, &os(&a));
    assert_ok(&o);
    (tmp, out)
}

/// Every user range of the capture, as `nsys stats --report nvtx_gpu_proj_sum` gives it:
/// instances that launched GPU work, total, mean, median, min, max and sd of the projected
/// time, GPU operations. XLA's ranges are in that report too and not in ours.
#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn user_ranges_match_nsight_systems_projection() {
    let Some(nsys) = nsys() else { return };
    let (_tmp, out) = analyze_report(&nsys, &data("nvtx-user/rep-forced.nsys-rep"), &["ranges"]);
    let r = json(&out.join("ranges.json"));
    let ranges = r["ranges"].as_array().unwrap();
    let truth = csv(&data("nvtx-user/forced_nvtx_gpu_proj_sum.csv"));
    let user: Vec<_> = truth
        .iter()
        .filter(|t| !t["Range"].starts_with("TSL:") && !t["Range"].starts_with("NCCL:"))
        .collect();
    assert_eq!(
        user.len(),
        3,
        "train_step, myapp:eval, myapp:se_inside: {user:?}"
    );
    for t in user {
        let ours = ranges
            .iter()
            .find(|x| x["label"] == t["Range"].as_str())
            .unwrap_or_else(|| panic!("{}: not in ranges.json", t["Range"]));
        let num = |k: &str| t[k].parse::<f64>().unwrap();
        assert_eq!(
            ours["gpu_count"].as_f64().unwrap(),
            num("Range Instances"),
            "{t:?}"
        );
        assert_eq!(
            ours["gpu_ops"].as_f64().unwrap(),
            num("Total GPU Ops"),
            "{t:?}"
        );
        assert_eq!(
            ours["style"].as_str().unwrap(),
            t["Style"].as_str(),
            "{t:?}"
        );
        for (k, theirs) in [
            ("proj_ms_total", "Total Proj Time (ns)"),
            ("proj_ms_mean", "Proj Avg (ns)"),
            ("proj_ms_median", "Proj Med (ns)"),
            ("proj_ms_min", "Proj Min (ns)"),
            ("proj_ms_max", "Proj Max (ns)"),
        ] {
            let (a, b) = (ours[k].as_f64().unwrap() * 1e6, num(theirs));
            assert!(rel(a, b) < 1e-3, "{}: {k} {a} vs {theirs} {b}", t["Range"]);
        }
        let sd = num("Proj StdDev (ns)");
        if sd > 0.0 {
            let a = ours["proj_ms_sd"].as_f64().unwrap() * 1e6;
            assert!(rel(a, sd) < 1e-3, "{}: sd {a} vs {sd}", t["Range"]);
        }
    }
    // Every range the program opened inside the capture range, with or without GPU work,
    // and its marks (README: 10 steps, each range and mark once per step).
    let count = |label: &str| {
        ranges
            .iter()
            .find(|x| x["label"] == label)
            .map(|x| x["count"].as_u64().unwrap())
    };
    for (label, n) in [
        ("train_step", 10),
        ("myapp:eval", 10),
        ("inside_first", 10),
        ("late:late_range", 10),
        ("myapp:se_inside", 1),
        ("open_inside_closed_after", 1),
    ] {
        assert_eq!(count(label), Some(n), "{label}");
    }
    let marks: Vec<(String, u64)> = r["marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["label"].as_str().unwrap().to_string(),
                m["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        marks,
        [
            ("checkpoint".to_string(), 10),
            ("mark_inside_first".to_string(), 10),
            ("myapp:mark_myapp".to_string(), 10)
        ]
    );
    // The XLA modules each range ran, and its nesting inside the start/end range.
    let step = ranges.iter().find(|x| x["label"] == "train_step").unwrap();
    assert_eq!(step["modules"][0]["name"], "jit_step");
    assert_eq!(step["modules"][0]["executions"], 10);
    let nested = r["tree"].as_array().unwrap().iter().any(|n| {
        n["path"] == serde_json::json!(["myapp:se_inside", "train_step"]) && n["count"] == 10
    });
    assert!(nested, "{}", r["tree"]);
    // The GPU was busy for part of each step's projected span, never more.
    let busy = step["busy_of_span"].as_f64().unwrap();
    assert!(busy > 0.1 && busy <= 1.0, "{busy}");
}

/// Without any user range the analysis writes and prints nothing (the example and every
/// XLA-only capture).
#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn a_capture_without_user_ranges_shows_no_ranges() {
    let Some(nsys) = nsys() else { return };
    let (_tmp, out) = analyze_report(&nsys, &data("nvtx-user/rep.nsys-rep"), &["ranges"]);
    assert!(!out.join("ranges.json").exists());
}

/// Held memory against the report's own table: the SQL of tests/data/memory/README.md over
/// `CUDA_GPU_MEMORY_USAGE_EVENTS` (device memory, a running sum in time order) gave
/// `truth.csv`.
#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn memory_over_time_matches_the_reports_table() {
    let Some(nsys) = nsys() else { return };
    for t in csv(&data("memory/truth.csv")) {
        let report = data(&format!("memory/{}.nsys-rep", t["capture"]));
        let (_tmp, out) = analyze_report(&nsys, &report, &["memory"]);
        let m = json(&out.join("memory.json"));
        let d = &m["held"]["devices"][0];
        let n = |k: &str| t[k].parse::<i64>().unwrap();
        let i = |k: &str| d[k].as_i64().unwrap();
        assert_eq!(i("peak_bytes"), n("peak"), "{t:?}");
        assert_eq!(i("peak_ns"), n("peak_at"), "{t:?}");
        assert_eq!(
            i("allocations_at_start") + i("allocations"),
            n("allocs"),
            "{t:?}"
        );
        assert_eq!(
            i("allocated_bytes") + i("allocated_at_start_bytes"),
            n("alloc_bytes"),
            "{t:?}"
        );
        assert_eq!(i("frees") + i("frees_at_start"), n("frees"), "{t:?}");
        assert_eq!(
            i("freed_bytes") + i("freed_at_start_bytes"),
            n("free_bytes"),
            "{t:?}"
        );
        assert!(d["capacity"].as_i64().unwrap() > 100 << 30, "an H200: {d}");
    }
    // PREALLOCATE=false: the allocator grew once inside the range, by 2 GiB (it doubles).
    let (_tmp, out) = analyze_report(&nsys, &data("memory/growth.nsys-rep"), &["memory"]);
    let d = json(&out.join("memory.json"))["held"]["devices"][0].clone();
    assert_eq!(d["growth_steps"], 1);
    assert_eq!(d["growth"][0]["bytes"], 2i64 << 30);
    assert_eq!(d["preallocated"], serde_json::Value::Null);
}

/// XLA's default preallocation, made before the capture range began (75 % of an 80 GB H100),
/// is shown as held from the start and named; the terminal says so.
#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn the_preallocated_pool_is_held_from_the_start() {
    let Some(nsys) = nsys() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = run_with_nsys(
        &nsys,
        &os(&args![
            "analyze",
            "--analysis",
            "memory",
            "--cache-dir",
            tmp.path().join("cache"),
            "-o",
            &out,
            data("nvtx-user/rep-mem.nsys-rep")
        ]),
    );
    assert_ok(&o);
    let d = json(&out.join("memory.json"))["held"]["devices"][0].clone();
    assert_eq!(d["held_at_start"], 63_831_172_872i64);
    assert_eq!(d["allocations_at_start"], 7);
    assert_eq!(d["preallocated"], 63_763_906_560i64);
    let cap = d["capacity"].as_f64().unwrap();
    assert!(
        (d["preallocated"].as_f64().unwrap() / cap - 0.75).abs() < 0.01,
        "{cap}"
    );
    assert_eq!(d["live_at_peak"][0]["pool"], true);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("pool 63.8 GB") || text.contains("pool 59.4 GiB"),
        "{text}"
    );
    // Without the option, the analysis says how to record it.
    let (_t, out) = analyze_report(&nsys, &data("nvtx-user/rep-forced.nsys-rep"), &["memory"]);
    let m = json(&out.join("memory.json"));
    assert!(m["held"].is_null());
    assert!(m["notes"].to_string().contains("run --memory"), "{m}");
}

/// `compare` gates on one user range: the same program captured twice, the second time with
/// memory events recorded (which slows every step: train_step +84 %), nothing else gated.
#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn compare_gates_on_a_user_range() {
    let Some(nsys) = nsys() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let compare = |extra: &[&str], out: &str| {
        let out = tmp.path().join(out);
        let mut a = args![
            "compare",
            "-q",
            "--cache-dir",
            tmp.path().join("cache"),
            "-o",
            &out,
            "--gate",
            "none"
        ];
        a.extend(extra.iter().map(std::ffi::OsString::from));
        a.extend(args![
            data("nvtx-user/rep-forced.nsys-rep"),
            data("nvtx-user/rep-mem.nsys-rep")
        ]);
        let o = run_with_nsys(&nsys, &os(&a));
        (o.status.code(), json(&out.join("compare.json")))
    };
    let step = |r: &serde_json::Value| {
        r["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["family"] == "range" && m["key"] == "train_step")
            .cloned()
            .unwrap()
    };
    let (code, r) = compare(&["--threshold-for", "range:train_step=5"], "gated");
    assert_eq!(code, Some(1), "{r}");
    let s = step(&r);
    assert_eq!(
        (s["verdict"].as_str(), s["gates"].as_bool()),
        (Some("regression"), Some(true)),
        "{s}"
    );
    assert!(s["stat"]["change"].as_f64().unwrap() > 0.5, "{s}");
    assert_eq!(s["threshold"].as_f64(), Some(0.05));
    // Not named: measured, not gated.
    let (code, r) = compare(&[], "ungated");
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(step(&r)["gates"], false);
    // An unknown family is refused in one line.
    let o = run_with_nsys(
        &nsys,
        &os(&args![
            "compare",
            "--threshold-for",
            "ranges:x=5",
            data("nvtx-user/rep-forced.nsys-rep"),
            data("nvtx-user/rep-mem.nsys-rep")
        ]),
    );
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown metric \"ranges\""));
}

/// `run` on an H200 of the program of tests/data/nvtx-user as a user runs it (no workaround
/// of its own; `nvtx` 0.2.17, Nsight Systems 2023.4.4, a capture range): every range and mark
/// it opened inside the range is in the archive (`run-ranges.log`: what it emitted), counted
/// as opened; and `run --memory` of tests/data/memory's program with PREALLOCATE=false holds
/// the memory events, with the allocator's growth step.
#[test]
fn run_on_a_gpu_records_the_users_ranges_and_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    assert_ok(&analyze(
        &tmp.path().join("cache"),
        &out,
        &["-q", "--analysis", "ranges", "--analysis", "memory"],
        &[data("nvtx-user/run-ranges.zip")],
    ));
    let r = json(&out.join("ranges.json"));
    let count = |label: &str| {
        r["ranges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["label"] == label)
            .map(|x| x["count"].as_u64().unwrap())
    };
    for (label, n) in [
        ("train_step", 10),
        ("myapp:eval", 10),
        ("inside_first", 10),
        ("late:late_range", 10),
        ("myapp:se_inside", 1),
        ("open_inside_closed_after", 1),
    ] {
        assert_eq!(count(label), Some(n), "{label}: {r}");
    }
    // Opened before the capture range began: not recorded (README).
    assert_eq!(count("before:outer_before"), None);
    let marks: u64 = r["marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["count"].as_u64().unwrap())
        .sum();
    assert_eq!(marks, 30);
    let log = std::fs::read_to_string(data("nvtx-user/run-ranges.log")).unwrap();
    assert!(log.contains("new domain Domain (enabled)"), "{log}");

    let out = tmp.path().join("memory");
    assert_ok(&analyze(
        &tmp.path().join("cache"),
        &out,
        &["-q", "--analysis", "memory"],
        &[data("memory/run-memory.zip")],
    ));
    let d = json(&out.join("memory.json"))["held"]["devices"][0].clone();
    assert_eq!(d["growth_steps"], 1, "{d}");
    assert_eq!(d["growth"][0]["bytes"], 2i64 << 30);
    assert!(d["peak_bytes"].as_i64().unwrap() > 4 << 30, "{d}");
    assert!(d["steady"].is_array(), "{d}");
}

/// The HTML report's sections: the ranges' bars and tree, and held memory against the
/// device's size with the steady state shaded.
#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn the_html_report_shows_ranges_and_memory_over_time() {
    let Some(nsys) = nsys() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let html = tmp.path().join("r.html");
    let o = run_with_nsys(
        &nsys,
        &os(&args![
            "analyze",
            "-q",
            "--analysis",
            "ranges",
            "--analysis",
            "memory",
            "--cache-dir",
            tmp.path().join("cache"),
            "-o",
            tmp.path().join("out"),
            "--html",
            &html,
            data("nvtx-user/rep-mem.nsys-rep")
        ]),
    );
    assert_ok(&o);
    let page = std::fs::read_to_string(&html).unwrap();
    let ranges = &page[page.find("id=\"ranges\"").expect("a ranges section")..];
    assert!(
        ranges.contains("<svg") && ranges.contains("train_step"),
        "no bars"
    );
    assert!(ranges.contains("Nesting"), "no tree");
    let memory = &page[page
        .find("Device memory over time")
        .expect("memory over time")..];
    assert!(
        memory.contains("steady state") && memory.contains("device memory"),
        "no chart legend"
    );
    assert!(
        memory.contains("63.8 GB") || memory.contains("59.4 GiB"),
        "the pool's size"
    );
}
