//! `diagnose` on programs with one known problem each (`tests/data/problems/README.md`: H200
//! captures made with `run`), on a well-fed one, on the example, the pax archives and the
//! h200 captures: the right finding first, with the right module, op or device in its
//! evidence; no warning for the healthy program; no rule firing on data a capture lacks.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn problem(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/problems")
        .join(name)
}

fn diagnose(inputs: &[PathBuf]) -> (Value, String) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = analyze(
        &tmp.path().join("cache"),
        &out,
        &["--analysis", "diagnose"],
        inputs,
    );
    assert_ok(&o);
    (
        json(&out.join("diagnosis.json")),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// `diagnosis.json` of an Nsight Systems report (and its dump beside it), analysed in `dir`.
fn diagnose_report(nsys: &Path, dir: &Path, report: &Path) -> Value {
    let out = dir.join("out");
    assert_ok(&run_with_nsys(
        nsys,
        &[
            "analyze".as_ref(),
            "-q".as_ref(),
            "--cache-dir".as_ref(),
            dir.join("cache").as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--analysis".as_ref(),
            "diagnose".as_ref(),
            report.as_os_str(),
        ],
    ));
    json(&out.join("diagnosis.json"))
}

fn findings(d: &Value) -> &Vec<Value> {
    d["findings"].as_array().unwrap()
}

fn rules(d: &Value) -> Vec<&str> {
    findings(d)
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect()
}

fn check<'a>(d: &'a Value, rule: &str) -> &'a Value {
    d["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["rule"] == rule)
        .unwrap_or_else(|| panic!("no check of {rule}"))
}

fn serious(d: &Value) -> Vec<&Value> {
    findings(d)
        .iter()
        .filter(|f| f["severity"] != "info")
        .collect()
}

/// The evidence of a finding as one text, and its rows' fields.
fn evidence(f: &Value) -> String {
    f["evidence"].to_string()
}

/// Four 128 MiB all-reduces whose result the next layer reads at once: exposed
/// communication first, critical, about a third of the time, with the all-reduce thunk of
/// `jit_layers` in its evidence and remedies naming the latency-hiding scheduler and PGLE.
#[test]
fn an_all_reduce_read_at_once_is_exposed_communication() {
    let (d, stdout) = diagnose(&[problem("exposed_allreduce.zip")]);
    let first = &findings(&d)[0];
    assert_eq!(first["rule"], "exposed-communication", "{:?}", rules(&d));
    assert_eq!(first["severity"], "critical");
    let p = first["percent"].as_f64().unwrap();
    assert!((30.0..36.0).contains(&p), "{p}");
    let ev = evidence(first);
    assert!(ev.contains("jit_layers") && ev.contains("psum"), "{ev}");
    assert!(ev.contains("exposed_allreduce.py:"), "{ev}");
    let remedies = first["remedies"].to_string();
    assert!(remedies.contains("latency_hiding_scheduler"), "{remedies}");
    assert!(remedies.contains("pgle"), "{remedies}");
    // Two devices of one process meet in time: no straggler named.
    assert!(!rules(&d).contains(&"stragglers"), "{:?}", rules(&d));
    // The headline, then the findings lead the terminal text.
    assert!(stdout.starts_with("──── headline"), "{stdout}");
    let after = stdout.split("──── ").nth(2).unwrap_or("");
    assert!(after.starts_with("diagnose"), "{stdout}");
}

/// Rank 1 sleeps 20 ms before each step: the straggler finding first, naming device 1, and
/// the time the other waits inside the all-reduce not counted again as exposed
/// communication.
#[test]
fn a_rank_that_sleeps_is_the_straggler() {
    let (d, _) = diagnose(&[
        problem("late_rank/rank0.zip"),
        problem("late_rank/rank1.zip"),
    ]);
    let first = &findings(&d)[0];
    assert_eq!(first["rule"], "stragglers", "{:?}", rules(&d));
    assert_eq!(first["severity"], "critical");
    let named = first["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["device"].is_i64())
        .expect("a device named");
    assert_eq!(named["device"], 1);
    assert!(evidence(first).contains("jit_train_step"), "{first}");
    let at_stake = first["at_stake_ms"].as_f64().unwrap();
    assert!((170.0..190.0).contains(&at_stake), "{at_stake}");
    assert_ne!(check(&d, "exposed-communication")["status"], "fired");
}

/// Three f32 GEMMs at HIGHEST: the precision finding first, naming the cuBLAS calls of
/// `jit_chain` on the FP32 units.
#[test]
fn highest_precision_matmuls_are_a_precision_finding() {
    let (d, _) = diagnose(&[problem("f32_highest.zip")]);
    let first = &findings(&d)[0];
    assert_eq!(first["rule"], "precision", "{:?}", rules(&d));
    assert_eq!(first["severity"], "critical");
    let ev = first["evidence"].as_array().unwrap();
    let ops: Vec<&str> = ev.iter().filter_map(|e| e["op"].as_str()).collect();
    assert_eq!(ops.len(), 3, "{ev:?}");
    assert!(ops.iter().all(|o| o.starts_with("custom-call.")), "{ops:?}");
    // Each with its Python line.
    for e in ev.iter().filter(|e| e["op"].is_string()) {
        let s = e["source"]
            .as_str()
            .unwrap_or_else(|| panic!("no source: {e}"));
        assert!(s.contains("f32_highest.py:"), "{s}");
    }
    assert!(
        ev.iter()
            .all(|e| e["module"].is_null() || e["module"] == "jit_chain")
    );
    // TF32 would give most of the GEMMs' time back: 1 - 61.8/494.7 of it.
    let p = first["percent"].as_f64().unwrap();
    assert!((70.0..85.0).contains(&p), "{p}");
}

/// 30 tiny jitted calls per step, each followed by a device-to-host read: host-bound first,
/// named as such (the many-tiny-modules pattern), with `jit_tiny` in its evidence; the
/// scalar copies of the reads are no copy finding.
#[test]
fn a_loop_of_tiny_calls_with_host_reads_is_host_bound() {
    let (d, _) = diagnose(&[problem("host_bound.zip")]);
    let first = &findings(&d)[0];
    assert_eq!(first["rule"], "host-bound", "{:?}", rules(&d));
    assert_eq!(first["severity"], "critical");
    assert!(
        first["title"].as_str().unwrap().starts_with("Host-bound"),
        "{first}"
    );
    let tiny = first["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["module"] == "jit_tiny")
        .expect("jit_tiny named");
    assert!(
        tiny["text"].as_str().unwrap().contains("300 executions"),
        "{tiny}"
    );
    assert!(first["percent"].as_f64().unwrap() > 90.0, "{first}");
    let remedies = first["remedies"].to_string();
    assert!(remedies.contains("float(x)"), "{remedies}");
    assert_ne!(check(&d, "host-device-copies")["status"], "fired");
}

/// A function jitted with a new shape every step, compiled inside the profiled range: the
/// recompilation first and critical, with `jit_grow` and its ten compilations in the evidence;
/// the GPU's idle time while the host compiled is not left to host-bound (at most info).
#[test]
fn a_function_rejitted_each_step_is_a_recompilation_finding() {
    let (d, _) = diagnose(&[problem("rejit.zip")]);
    let first = &findings(&d)[0];
    assert_eq!(first["rule"], "recompilation", "{:?}", rules(&d));
    assert_eq!(first["severity"], "critical");
    let grow = first["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["module"] == "jit_grow")
        .expect("jit_grow named");
    assert!(
        grow["text"].as_str().unwrap().contains("compiled 10 times"),
        "{grow}"
    );
    // Ten compilations of 263–343 ms (rejit.log: steps of 380–465 ms) inside a 3.74 s steady
    // state.
    let pct = first["percent"].as_f64().unwrap();
    assert!((70.0..95.0).contains(&pct), "{first}");
    let host = findings(&d).iter().find(|f| f["rule"] == "host-bound");
    if let Some(h) = host {
        assert_eq!(h["severity"], "info", "{h}");
        assert!(evidence(h).contains("while the host compiled"), "{h}");
    }
}

/// A 256 MiB pageable `device_put` each step: the copies (and the GPU's wait while the host
/// prepares them) first, and no host-bound finding for the same time; `ops` counts the copies
/// as GPU work, not idle time.
#[test]
fn a_device_put_each_step_is_a_copy_finding_not_idle_time() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    assert_ok(&analyze(
        &tmp.path().join("cache"),
        &out,
        &["--analysis", "diagnose", "--analysis", "ops"],
        &[problem("device_put.zip")],
    ));
    let d = json(&out.join("diagnosis.json"));
    let first = &findings(&d)[0];
    assert_eq!(first["rule"], "host-device-copies", "{:?}", rules(&d));
    assert_eq!(first["severity"], "critical");
    let ev = evidence(first);
    assert!(ev.contains("HtoD: 9 copies, 2.25 GiB"), "{ev}");
    assert_ne!(check(&d, "host-bound")["status"], "fired");
    let ops = json(&out.join("ops.json"));
    let t = &ops["transfers"];
    assert_eq!(t["measured"], true);
    assert_eq!(t["count"], 9);
    assert_eq!(t["bytes"], 9u64 * 256 * 1024 * 1024);
    let copies = ops["by_category"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["category"] == "memcpy/memset")
        .unwrap();
    assert!(rel(copies["ms"].as_f64().unwrap(), t["ms"].as_f64().unwrap()) < 1e-9);
    assert!(t["ms"].as_f64().unwrap() > 40.0, "{t}");
}

/// A well-fed bf16 GEMM chain: nothing above info (its 7 % idle between steps is the
/// `block_until_ready` of each step).
#[test]
fn a_healthy_program_gets_no_warning() {
    let (d, _) = diagnose(&[problem("healthy.zip")]);
    assert!(serious(&d).is_empty(), "{:?}", serious(&d));
    for rule in [
        "exposed-communication",
        "slow-collectives",
        "stragglers",
        "recompilation",
        "precision",
    ] {
        assert_ne!(check(&d, rule)["status"], "fired", "{rule}");
    }
    // One GPU, no collective: those rules say they had nothing to judge.
    assert_eq!(check(&d, "exposed-communication")["status"], "no data");
    assert_eq!(check(&d, "stragglers")["status"], "no data");
    assert_eq!(check(&d, "precision")["status"], "quiet");
}

/// Shares of the steady state and severities follow the thresholds; findings by severity,
/// then time at stake.
#[test]
fn findings_are_ordered_and_their_severity_follows_their_share() {
    for inputs in [
        vec![problem("exposed_allreduce.zip")],
        vec![problem("device_put.zip")],
        vec![
            problem("late_rank/rank0.zip"),
            problem("late_rank/rank1.zip"),
        ],
    ] {
        let (d, _) = diagnose(&inputs);
        let steady = d["steady_ms"].as_f64().unwrap();
        let rank = |s: &Value| match s.as_str().unwrap() {
            "critical" => 2,
            "warning" => 1,
            _ => 0,
        };
        let mut last = (3, f64::INFINITY);
        for f in findings(&d) {
            let (r, ms) = (rank(&f["severity"]), f["at_stake_ms"].as_f64().unwrap());
            assert!(
                r < last.0 || (r == last.0 && ms <= last.1),
                "{inputs:?}: order"
            );
            last = (r, ms);
            let p = f["percent"].as_f64().unwrap();
            if ms > 0.0 && f["rule"] != "compile-time" && f["rule"] != "recompilation" {
                assert!(rel(p, 100.0 * ms / steady) < 1e-9, "{f}");
                let want = if p >= 25.0 {
                    2
                } else if p >= 10.0 {
                    1
                } else {
                    0
                };
                assert_eq!(r, want, "{f}");
            }
            assert!(!f["remedies"].as_array().unwrap().is_empty(), "{f}");
            for r in f["remedies"].as_array().unwrap() {
                assert!(!r["why"].as_str().unwrap().is_empty(), "{r}");
            }
        }
    }
}

/// The example (two GPUs, FSDP): findings the other analyses' numbers support, and no rule
/// judging data the archive lacks.
#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems: the archive's copies are read from the report inside it"
)]
fn the_example_is_diagnosed_from_its_own_numbers() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    assert_ok(&analyze(&tmp.path().join("cache"), &out, &[], &[example]));
    let d = json(&out.join("diagnosis.json"));
    let ops = json(&out.join("ops.json"));
    let idle = ops["by_category"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["category"] == "idle between modules")
        .unwrap();
    let f = findings(&d)
        .iter()
        .find(|f| f["rule"] == "host-bound")
        .expect("the example idles between its modules");
    assert_eq!(f["at_stake_ms"], idle["ms"]);
    // The shipped archive predates the copies member; its report inside gives them.
    assert_eq!(check(&d, "host-device-copies")["status"], "quiet");
}

/// The pax archives: compile time (a warning at most), waits at collectives and the idle
/// time of the notebook's own numbers.
#[test]
fn the_pax_archives_are_diagnosed_from_the_notebooks_numbers() {
    let Some(f) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    assert_ok(&analyze(
        &tmp.path().join("cache"),
        &out,
        &[],
        &pax_archives(&f),
    ));
    let d = json(&out.join("diagnosis.json"));
    let ops = json(&out.join("ops.json"));
    let comp = json(&out.join("compilation.json"));
    let compile_s: f64 = comp["compilations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["wall_s"].as_f64().unwrap())
        .sum();
    let ct = findings(&d)
        .iter()
        .find(|f| f["rule"] == "compile-time")
        .expect("compile time");
    assert!(rel(ct["at_stake_ms"].as_f64().unwrap(), compile_s * 1e3) < 1e-9);
    assert_eq!(ct["severity"], "warning");
    assert!(evidence(ct).contains("pjit__wrapped_step_fn"), "{ct}");
    // The steady state (the first execution of each module left out) spans the training
    // step's compilation: most of the GPU's idle time is the host compiling, the compile-time
    // finding's; host-bound keeps the rest.
    assert_eq!(
        rules(&d)[..2],
        ["compile-time", "host-bound"],
        "{:?}",
        rules(&d)
    );
    let hb = &findings(&d)[1];
    let idle = ops["by_category"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["category"] == "idle between modules")
        .unwrap()["ms"]
        .as_f64()
        .unwrap();
    let summary = json(&out.join("summary.json"));
    let windows = summary["steady"].as_array().unwrap();
    assert_eq!(windows.len(), 4);
    let compiling: f64 = comp["compilations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let start = c["start_ms"].as_f64().unwrap();
            let end = start + c["wall_s"].as_f64().unwrap() * 1e3;
            let w = windows
                .iter()
                .find(|w| w["process"] == c["process"])
                .unwrap();
            let (a, b) = (
                w["start_ms"].as_f64().unwrap(),
                w["end_ms"].as_f64().unwrap(),
            );
            (end.min(b) - start.max(a)).max(0.0)
        })
        .sum();
    assert!(compiling > 0.5 * idle, "{compiling} of {idle}");
    assert!(
        rel(hb["at_stake_ms"].as_f64().unwrap(), idle - compiling) < 1e-9,
        "{hb}"
    );
    assert!(evidence(hb).contains("while the host compiled"), "{hb}");
    assert!(rules(&d).contains(&"stragglers"), "{:?}", rules(&d));
    // Each process compiled jit__threefry_split_original twice (module_0011 and _0028).
    let rc = findings(&d)
        .iter()
        .find(|f| f["rule"] == "recompilation")
        .expect("recompilation");
    assert!(
        evidence(rc).contains("jit__threefry_split_original compiled 2 times"),
        "{rc}"
    );
}

/// An NVTX-only capture (compilation only, no GPU work of modules) is a compile profile: the
/// compilation rules judge it, and no "no steady state" finding is made of a capture without
/// a GPU trace by design.
#[test]
#[cfg_attr(
    not(all(test_fixtures, test_nsys)),
    ignore = "needs the shared fixtures and Nsight Systems"
)]
fn an_nvtx_only_capture_gets_only_compile_findings() {
    let Some(f) = fixtures() else { return };
    let Some(nsys) = nsys() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let d = diagnose_report(
        &nsys,
        tmp.path(),
        &f.join("h200/compile_1proc/rep.nsys-rep"),
    );
    for r in rules(&d) {
        assert!(
            ["recompilation", "compile-time"].contains(&r),
            "{r} fired on an NVTX-only capture"
        );
    }
    assert!(!rules(&d).is_empty(), "{d}");
    assert_eq!(check(&d, "capture")["status"], "no data");
}

fn pair(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/pairs")
        .join(name)
}

/// `input_bound.zip`: 96.9 ms of numpy per step in the NVTX range `load_batch` (the program's
/// median), 4.6 ms in `train_step`: an input-bound finding first, naming the range and its
/// time per call (within 20 %), not the copies that follow it.
#[test]
fn a_loop_waiting_for_its_batches_is_input_bound() {
    let (d, _) = diagnose(&[pair("input_bound.zip")]);
    let first = &findings(&d)[0];
    assert_eq!(first["rule"], "host-bound", "{:?}", rules(&d));
    assert_eq!(first["severity"], "critical");
    let title = first["title"].as_str().unwrap();
    assert!(
        title.starts_with("Input-bound") && title.contains("`load_batch`"),
        "{title}"
    );
    let ms: f64 = title
        .split("spends ")
        .nth(1)
        .and_then(|t| t.split(" ms").next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{title}"));
    assert!((ms - 96.865).abs() <= 0.2 * 96.865, "{title}");
    assert!(evidence(first).contains("load_batch"), "{first}");
    assert_ne!(check(&d, "host-device-copies")["status"], "fired", "{d}");
}

/// `near_oom.zip`: 111.97 GiB of buffers (arguments, outputs, temporaries) under
/// XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 of an H200's 139.80 GiB: 84.3 % of the limit, and
/// more than JAX's default 75 % allows (the program fails there: `near_oom_default.log`).
#[test]
fn a_step_near_its_memory_limit_is_a_memory_finding() {
    let (d, _) = diagnose(&[problem("near_oom.zip")]);
    let first = &findings(&d)[0];
    assert_eq!(first["rule"], "memory", "{:?}", rules(&d));
    assert_eq!(first["severity"], "warning");
    let title = first["title"].as_str().unwrap();
    assert!(
        title.contains("84.3 %") && title.contains("112 GiB of 133 GiB"),
        "{title}"
    );
    assert!(title.contains("would not fit"), "{title}");
    assert!(
        evidence(first).contains("XLA_PYTHON_CLIENT_MEM_FRACTION=0.95"),
        "{first}"
    );
    assert!(
        std::fs::read_to_string(problem("near_oom_default.log"))
            .unwrap()
            .contains("RESOURCE_EXHAUSTED")
    );
}

/// `compile_only_small.zip` (`run --trace=nvtx`, no capture range): a function compiled for 10
/// shapes, 7.82 s of compilation by JAX's count: recompilation first, as a share of the
/// capture's compiling time; no capture finding.
#[test]
fn a_compile_profile_is_judged_by_its_compilations() {
    let (d, _) = diagnose(&[problem("compile_only_small.zip")]);
    assert_eq!(rules(&d)[0], "recompilation", "{:?}", rules(&d));
    let first = &findings(&d)[0];
    assert_eq!(first["severity"], "critical");
    assert!(
        evidence(first).contains("jit_train_grad compiled 10 times"),
        "{first}"
    );
    assert!(first["percent"].as_f64().unwrap() > 50.0, "{first}");
    assert_eq!(check(&d, "capture")["status"], "no data");
    for r in rules(&d) {
        assert!(["recompilation", "compile-time"].contains(&r), "{r}");
    }
}

/// `late_many`: rank 1 sleeps 15 ms before each step of 6 all-reduces: the straggler finding
/// first, its title the lateness per step (within 20 %), not the median over all collectives;
/// the late rank's idle time is not a second, host-bound finding. Without the sleep
/// (`late_none`) no straggler finding above info.
#[test]
fn a_rank_late_to_each_step_is_late_by_its_step_lateness() {
    let (d, _) = diagnose(&[pair("late_many/rank0.zip"), pair("late_many/rank1.zip")]);
    let first = &findings(&d)[0];
    assert_eq!(first["rule"], "stragglers", "{:?}", rules(&d));
    let title = first["title"].as_str().unwrap();
    assert!(title.starts_with("Device 1 is late by"), "{title}");
    let ms: f64 = title
        .split("late by ")
        .nth(1)
        .and_then(|t| t.split(" ms").next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{title}"));
    assert!((ms - 15.0).abs() <= 0.2 * 15.0, "{title}");
    assert!(
        findings(&d)
            .iter()
            .all(|f| f["rule"] != "host-bound" || f["severity"] == "info"),
        "{:?}",
        rules(&d)
    );
    let (d, _) = diagnose(&[pair("late_none/rank0.zip"), pair("late_none/rank1.zip")]);
    assert!(
        findings(&d)
            .iter()
            .all(|f| f["rule"] != "stragglers" || f["severity"] == "info"),
        "{d}"
    );
}

/// The model corpus's MoE (`tests/data/models/moe-ragged`: `ragged_dot` over 8 experts,
/// lowered to dense GEMMs): the wasted-FLOPs finding first, naming the dense lowering; the
/// Llama step under `scan` + `checkpoint` (remat 19 % of its model FLOPs, its buffers small)
/// and the GPT step (flash attention's recomputed scores only) get none.
#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn a_dense_moe_lowering_is_wasted_flops() {
    let Some(nsys) = nsys() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let diagnose_model = |name: &str| {
        let report = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/models")
            .join(name)
            .join("rep.nsys-rep");
        diagnose_report(&nsys, &tmp.path().join(name), &report)
    };
    let d = diagnose_model("moe-ragged");
    let first = &findings(&d)[0];
    assert_eq!(first["rule"], "wasted-flops", "{:?}", rules(&d));
    assert_eq!(first["severity"], "critical");
    assert!(
        first["title"].as_str().unwrap().contains("6.25x"),
        "{first}"
    );
    assert!(
        evidence(first).contains("ragged_dot lowered to dense GEMMs"),
        "{first}"
    );
    for name in ["llama-scan", "gpt-cudnn"] {
        let d = diagnose_model(name);
        assert_eq!(check(&d, "wasted-flops")["status"], "quiet", "{name}: {d}");
        assert!(serious(&d).is_empty(), "{name}: {:?}", rules(&d));
    }
}

/// `gpt_xla_attn` (the GPT step with XLA's attention: 46.77 ms a step by the program's median)
/// against `gpt_cudnn` (cuDNN's fused attention: 33.50 ms): the attention finding first, its
/// time at stake per step within 20 % of the difference; none on the cuDNN step.
#[test]
fn attention_written_out_in_xla_ops_is_an_attention_finding() {
    let (d, _) = diagnose(&[pair("gpt_xla_attn.zip")]);
    let first = &findings(&d)[0];
    assert_eq!(first["rule"], "attention", "{:?}", rules(&d));
    assert_eq!(first["severity"], "critical");
    assert!(evidence(first).contains("gpt.py:133"), "{first}");
    let steps = 5.0;
    let per_step = first["at_stake_ms"].as_f64().unwrap() / steps;
    let truth = 46.770 - 33.501;
    assert!(
        (per_step - truth).abs() <= 0.2 * truth,
        "{per_step} ms a step, {truth} measured"
    );
    let (d, _) = diagnose(&[pair("gpt_cudnn.zip")]);
    assert_eq!(check(&d, "attention")["status"], "quiet", "{d}");
    assert!(serious(&d).is_empty(), "{:?}", rules(&d));
}
