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

/// (top scenario's rule, its prediction, B's measured step).
fn predicted(a: &str, b: &str) -> (String, f64, f64) {
    let w = whatif(&pair(a));
    let top = &w["scenarios"][0];
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

#[test]
fn xla_attention_predicts_the_cudnn_step() {
    let (rule, p, b) = predicted("pairs/gpt_xla_attn.zip", "pairs/gpt_cudnn.zip");
    assert_eq!(rule, "attention");
    assert!(rel(p, b) < 0.2, "predicted {p} ms, measured {b} ms");
}

#[test]
fn exposed_all_reduces_predict_the_overlapped_step() {
    let (rule, p, b) = predicted(
        "pairs/exposed_allreduce.zip",
        "pairs/overlapped_allreduce.zip",
    );
    assert_eq!(rule, "exposed-communication");
    assert!(rel(p, b) < 0.2, "predicted {p} ms, measured {b} ms");
}

#[test]
fn the_other_pairs_are_predicted_to_the_model_s_present_accuracy() {
    for (a, b, rule, bound) in [
        (
            "pairs/input_bound.zip",
            "pairs/input_ready.zip",
            "host-bound",
            0.35,
        ),
        (
            "pairs/f32_highest.zip",
            "pairs/bf16_gemm.zip",
            "precision",
            0.35,
        ),
        ("pairs/late_many", "pairs/late_none", "stragglers", 0.4),
    ] {
        let (r, p, m) = predicted(a, b);
        assert_eq!(r, rule, "{a}");
        assert!(rel(p, m) < bound, "{a}: predicted {p} ms, measured {m} ms");
    }
}

#[test]
fn a_healthy_step_has_no_scenario_worth_five_percent() {
    let w = whatif(&pair("problems/healthy.zip"));
    let step = w["step_ms"].as_f64().unwrap();
    for s in w["scenarios"].as_array().unwrap() {
        assert!(s["saved_ms"].as_f64().unwrap() < 0.05 * step, "{s}");
    }
}
