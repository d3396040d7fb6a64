//! `whatif` on pairs of programs (tests/data/pairs/README.md): from the profile of the
//! program with a problem alone, the top scenario predicts the step of the same program
//! without it, as this tool measures that step on its own profile. docs/whatif.md lists every
//! pair's prediction and error; the bounds below are those the model reaches now.

use std::path::{Path, PathBuf};

use crate::common::*;

fn pair(rel: &str) -> Vec<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel);
    if p.extension().is_some() {
        vec![p]
    } else {
        vec![p.join("rank0.zip"), p.join("rank1.zip")]
    }
}

fn whatif(inputs: &[PathBuf]) -> serde_json::Value {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = analyze(
        &tmp.path().join("cache"),
        &out,
        &["-q", "--analysis", "whatif"],
        inputs,
    );
    assert_ok(&o);
    json(&out.join("whatif.json"))
}

/// Whether a scenario is the host not waiting for the GPU at each step.
fn no_wait(s: &serde_json::Value) -> bool {
    s["change"].as_str().unwrap().starts_with("no host sync")
}

/// (top scenario's rule, its prediction, B's measured step). Every program of the pairs but
/// `bf16_async` waits for the GPU at each step's end (it times its steps so), B as well as A:
/// the scenario of that wait predicts a step neither side runs, and is passed over here
/// (`bf16_sync` → `bf16_async` is its pair).
fn predicted(a: &str, b: &str) -> (String, f64, f64) {
    let w = whatif(&pair(a));
    let top = w["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| !no_wait(s))
        .expect("a scenario");
    let measured = whatif(&pair(b))["step_ms"].as_f64().unwrap();
    let p = top["predicted_step_ms"].as_f64().unwrap();
    assert_eq!(w["unit"], "step");
    // The saving is the step less the prediction.
    let saved = top["saved_ms"].as_f64().unwrap();
    assert!(
        (w["step_ms"].as_f64().unwrap() - p - saved).abs() < 1e-6,
        "{w}"
    );
    (top["rule"].as_str().unwrap().to_string(), p, measured)
}

/// The top scenario of A is `rule` and predicts B's step within `bound` (a fraction).
fn holds(a: &str, b: &str, rule: &str, bound: f64) {
    let (r, p, m) = predicted(a, b);
    assert_eq!(r, rule, "{a}");
    assert!(rel(p, m) < bound, "{a}: predicted {p} ms, measured {m} ms");
}

#[test]
fn xla_attention_predicts_the_cudnn_step() {
    holds(
        "pairs/gpt_xla_attn.zip",
        "pairs/gpt_cudnn.zip",
        "attention",
        0.2,
    );
}

#[test]
fn exposed_all_reduces_predict_the_overlapped_step() {
    holds(
        "pairs/exposed_allreduce.zip",
        "pairs/overlapped_allreduce.zip",
        "exposed-communication",
        0.2,
    );
}

#[test]
fn a_late_rank_on_time_predicts_the_run_without_it() {
    holds("pairs/late_many", "pairs/late_none", "stragglers", 0.2);
}

#[test]
fn the_critical_path_crosses_to_the_rank_the_others_wait_for() {
    let w = whatif(&pair("pairs/late_many"));
    let rows = w["critical_path"].as_array().unwrap();
    let waiting = |process: u64| {
        rows.iter().find(|r| r["process"] == process).unwrap()["parts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| {
                p["what"]
                    .as_str()
                    .unwrap()
                    .contains("waiting for device 1 (process 1)")
            })
            .map(|p| p["ms"].as_f64().unwrap())
    };
    // Rank 0 waits about 15 ms per step for rank 1 (its 15 ms sleep); rank 1 waits for no one.
    let ms = waiting(0).expect("rank 0 waits for rank 1");
    assert!((12.0..16.0).contains(&ms), "{ms}");
    assert_eq!(waiting(1), None);
}

#[test]
fn tiny_calls_predict_the_scanned_step() {
    holds(
        "pairs/host_bound.zip",
        "pairs/host_scanned.zip",
        "host-bound",
        0.2,
    );
}

/// The GPT step with its dense matmuls in f32 at HIGHEST: the matmuls at the bf16 rate and
/// the casts to and from f32 around them gone predict the step with bf16 matmuls.
#[test]
fn f32_matmuls_of_a_gpt_step_predict_its_bf16_step() {
    holds("pairs/gpt_f32.zip", "pairs/gpt_bf16.zip", "precision", 0.1);
    let w = whatif(&pair("pairs/gpt_f32.zip"));
    let change = w["scenarios"][0]["change"].as_str().unwrap();
    assert!(
        change.contains("casts to or from f32 around them gone"),
        "{change}"
    );
    // The rate is not the cuDNN attention's (bf16 FLOPs, not a GEMM's).
    assert!(change.contains("no large bf16 GEMM"), "{change}");
}

/// The GPT step compiled again at every call (a new sequence length each time): its steps
/// are the executions of its programs of one name, and without the compilations it predicts
/// the step padded to one length.
#[test]
fn a_gpt_step_compiled_at_every_call_predicts_its_padded_step() {
    holds(
        "pairs/gpt_varlen.zip",
        "pairs/gpt_padded.zip",
        "recompilation",
        0.2,
    );
}

/// The input-bound loop with a 6 ms train step: its batch made ahead predicts the loop
/// with every batch ready.
#[test]
fn an_input_bound_loop_predicts_its_step_with_the_batches_ready() {
    holds(
        "pairs/input_bound_wide.zip",
        "pairs/input_ready_wide.zip",
        "host-bound",
        0.1,
    );
}

/// The same problems on steps of a millisecond or less, most of it the host's: there the
/// host after a fix runs the same code faster than A's profile shows it, and the programs
/// themselves vary by a third from run to run (docs/whatif.md, "Where it errs").
#[test]
fn the_other_pairs_are_predicted_to_the_model_s_present_accuracy() {
    for (a, b, rule, bound) in [
        (
            "pairs/input_bound.zip",
            "pairs/input_ready.zip",
            "host-bound",
            0.25,
        ),
        (
            "pairs/f32_highest.zip",
            "pairs/bf16_gemm.zip",
            "precision",
            0.4,
        ),
        (
            "pairs/rejit.zip",
            "pairs/fixed_shapes.zip",
            "recompilation",
            0.5,
        ),
    ] {
        holds(a, b, rule, bound);
    }
}

#[test]
fn a_healthy_step_has_no_scenario_worth_five_percent() {
    // bf16 GEMMs queued back to back, the loop waiting once at its end.
    let w = whatif(&pair("pairs/bf16_async.zip"));
    let step = w["step_ms"].as_f64().unwrap();
    for s in w["scenarios"].as_array().unwrap() {
        assert!(s["saved_ms"].as_f64().unwrap() < 0.05 * step, "{s}");
    }
}

#[test]
fn a_wait_at_every_step_predicts_the_steps_queued_back_to_back() {
    // Three bf16 GEMMs (0.8 ms a step waited for), and the GPT step (33 ms).
    for (a, b) in [
        ("pairs/bf16_sync.zip", "pairs/bf16_async.zip"),
        ("pairs/gpt_sync.zip", "pairs/gpt_async.zip"),
    ] {
        let w = whatif(&pair(a));
        let top = &w["scenarios"][0];
        assert_eq!(top["rule"], "host-bound", "{a}");
        assert!(no_wait(top), "{a}: {top}");
        let p = top["predicted_step_ms"].as_f64().unwrap();
        let m = whatif(&pair(b))["step_ms"].as_f64().unwrap();
        assert!(rel(p, m) < 0.1, "{a}: predicted {p} ms, measured {m} ms");
    }
}

#[test]
fn a_healthy_step_that_waits_for_each_step_saves_that_wait_alone() {
    // `healthy`: GEMMs well fed but for a block_until_ready after each step, which leaves
    // the GPU idle 7.4 % of the steady state (its README): only the scenario of that wait
    // saves 5 %, and no more than the idle time between the steps.
    let w = whatif(&pair("problems/healthy.zip"));
    let step = w["step_ms"].as_f64().unwrap();
    for s in w["scenarios"].as_array().unwrap() {
        let saved = s["saved_ms"].as_f64().unwrap();
        if no_wait(s) {
            assert!(saved < 0.1 * step, "{s}");
        } else {
            assert!(saved < 0.05 * step, "{s}");
        }
    }
}

#[test]
fn all_reduces_that_the_next_gemm_needs_are_hidden_only_by_a_split() {
    // Every all-reduce of `exposed_allreduce` reduces a GEMM's result that the next GEMM
    // reads: the HLO leaves no independent computation to hide them behind.
    let w = whatif(&pair("pairs/exposed_allreduce.zip"));
    let step = w["step_ms"].as_f64().unwrap();
    let by = |what: &str| {
        w["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["change"].as_str().unwrap().contains(what))
            .unwrap_or_else(|| panic!("no scenario with {what}: {w}"))["saved_ms"]
            .as_f64()
            .unwrap()
    };
    assert!(by("does not depend on them") < 0.01 * step);
    assert!(by("two micro-batches") > 0.05 * step);
}

#[test]
fn without_the_hlo_the_edges_are_unknown_and_said_so() {
    // The exposed all-reduces' archive without its HLO dumps.
    let tmp = tempfile::tempdir().unwrap();
    let src = pair("pairs/exposed_allreduce.zip").remove(0);
    let stripped = tmp.path().join("nohlo.zip");
    let mut zin = zip::ZipArchive::new(std::fs::File::open(&src).unwrap()).unwrap();
    let mut zout = zip::ZipWriter::new(std::fs::File::create(&stripped).unwrap());
    let mut kept = 0;
    for i in 0..zin.len() {
        let f = zin.by_index_raw(i).unwrap();
        if f.name().unwrap().starts_with("dump/") {
            continue;
        }
        zout.raw_copy_file(f).unwrap();
        kept += 1;
    }
    zout.finish().unwrap();
    assert!(kept > 0 && kept < zin.len());
    let w = whatif(&[stripped]);
    let notes = w["notes"].to_string();
    assert!(
        notes.contains("no HLO for jit_layers") && notes.contains("edges are unknown"),
        "{notes}"
    );
    // The critical path stands on stream order alone: both devices, their steps whole.
    let rows = w["critical_path"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        assert!(r["wall_ms"].as_f64().unwrap() > 0.0, "{r}");
    }
}

/// `what-if` with the given scenarios on `inputs`: its output and `whatif.json`.
fn what_if(inputs: &[PathBuf], scenarios: &[&str]) -> (std::process::Output, serde_json::Value) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut args: Vec<std::ffi::OsString> = vec!["what-if".into(), "-q".into()];
    for i in inputs {
        args.push(i.into());
    }
    for s in scenarios {
        args.push("--scenario".into());
        args.push(s.into());
    }
    args.extend(["-o".into(), out.clone().into_os_string()]);
    args.extend([
        "--cache-dir".into(),
        tmp.path().join("cache").into_os_string(),
    ]);
    let o = run(&os(&args));
    let w = if o.status.success() {
        json(&out.join("whatif.json"))
    } else {
        serde_json::Value::Null
    };
    (o, w)
}

fn user_scenarios(w: &serde_json::Value) -> Vec<&serde_json::Value> {
    w["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["rule"] == "user")
        .collect()
}

#[test]
fn a_user_s_range_done_ahead_is_the_host_bound_scenario() {
    let (o, w) = what_if(&pair("pairs/input_bound.zip"), &["range:load_batch"]);
    assert_ok(&o);
    let user = user_scenarios(&w);
    assert_eq!(user.len(), 1, "{w}");
    let own = w["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["rule"] == "host-bound")
        .unwrap();
    assert!(
        (user[0]["predicted_step_ms"].as_f64().unwrap()
            - own["predicted_step_ms"].as_f64().unwrap())
        .abs()
            < 1e-9
    );
}

#[test]
fn a_user_s_op_at_a_share_of_its_roof_saves_what_the_roofline_implies() {
    // cuDNN's attention backward in the GPT step runs at about 39 % of its roof: at 70 % it
    // takes 39/70 of its time; per step, over the roofline's 5 steps.
    let inputs = pair("pairs/gpt_cudnn.zip");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("roofline");
    assert_ok(&analyze(
        &tmp.path().join("cache"),
        &out,
        &["-q", "--analysis", "roofline"],
        &inputs,
    ));
    let r = json(&out.join("roofline.json"));
    let op = r["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["thunk"] == "dot_product_attention_bwd.24")
        .expect("the attention backward op");
    let (time, now) = (
        op["time_ms"].as_f64().unwrap(),
        op["roof_percent"].as_f64().unwrap(),
    );
    assert!((30.0..50.0).contains(&now), "{op}");
    let steps = r["step"]["steps"].as_f64().unwrap();
    let want = time * (1.0 - now / 70.0) / steps;
    let (o, w) = what_if(&inputs, &["op:dot_product_attention_bwd.24=70%"]);
    assert_ok(&o);
    let user = user_scenarios(&w);
    assert_eq!(user.len(), 1, "{w}");
    let saved = user[0]["saved_ms"].as_f64().unwrap();
    // Within 1 %: the saving is taken off each step's path and the median step's ratio
    // applied to the roofline's step period.
    assert!(rel(saved, want) < 0.01, "saved {saved} ms, want {want} ms");
}

#[test]
fn a_user_s_device_on_time_is_the_straggler_scenario() {
    let (o, w) = what_if(&pair("pairs/late_many"), &["on-time:1"]);
    assert_ok(&o);
    let user = user_scenarios(&w);
    let own = w["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["rule"] == "stragglers")
        .unwrap();
    assert_eq!(user[0]["saved_ms"], own["saved_ms"], "{w}");
}

#[test]
fn what_the_profile_lacks_is_a_note_and_a_malformed_scenario_an_error() {
    let (o, w) = what_if(
        &pair("pairs/input_bound.zip"),
        &["op:nosuch.7=50%", "on-time:9"],
    );
    assert_ok(&o);
    assert!(user_scenarios(&w).is_empty(), "{w}");
    let notes = w["notes"].to_string();
    assert!(
        notes.contains("no op `nosuch.7`") && notes.contains("no device 9"),
        "{notes}"
    );
    for bad in ["op:fusion.1=150%", "faster:all", "range:"] {
        let (o, _) = what_if(&pair("pairs/input_bound.zip"), &[bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(bad) && err.lines().count() == 1,
            "{bad}: {err}"
        );
    }
}
