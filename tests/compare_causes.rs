//! `compare` names the cause of a change in the user's terms, on GPT captures made on an H200
//! (tests/data/pairs/README.md, "GPT variants"): the source line and what each side runs
//! there, the library calls by target, and why a module was compiled into another program.
//! The expectations were written from the programs before the tool's answers were read.

use std::path::{Path, PathBuf};

use crate::common::*;

fn pair(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/pairs/{name}.zip"))
}

/// `compare gpt_cudnn HEAD` at α = 0.05 (5 steps a side: the exact Mann–Whitney test cannot
/// go below p = 0.008): its compare.json and compare.md.
fn compare(head: &str) -> (serde_json::Value, String) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = run(&os(&[
        "compare".into(),
        pair("gpt_cudnn").into(),
        pair(head).into(),
        "-o".into(),
        out.clone().into(),
        "--cache-dir".into(),
        tmp.path().join("cache").into(),
        "--alpha".into(),
        "0.05".into(),
        "-q".into(),
    ]));
    // A regression exits 1; anything else is a failure of the command.
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    (json(&out.join("compare.json")), md)
}

fn step(w: &serde_json::Value) -> &serde_json::Value {
    let m = w["why"]["modules"].as_array().unwrap();
    m.iter()
        .find(|m| m["module"] == "jit_step")
        .expect("jit_step")
}

/// (target, base count, head count) of the HLO diff's library calls.
fn kernels(m: &serde_json::Value) -> Vec<(String, u64, u64)> {
    m["hlo"]["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["what"].as_str().unwrap().to_string(),
                k["base"].as_u64().unwrap(),
                k["head"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// XLA's attention in place of cuDNN's: the program's step is 13.3 ms longer (its log); the
/// attention call at gpt.py:133 carries it, its 4 cuDNN calls (forward and backward, 2 layers)
/// replaced by XLA's fusions and GEMMs.
#[test]
fn an_attention_switch_is_named_by_its_line_and_libraries() {
    let (w, md) = compare("gpt_xla_attn");
    let m = step(&w);
    let top = &m["sources"][0];
    assert_eq!(top["source"], "gpt.py:133", "{top}");
    assert!(
        top["code"]
            .as_str()
            .unwrap()
            .contains("dot_product_attention"),
        "{top}"
    );
    let d = top["delta_ms"].as_f64().unwrap();
    assert!((10.0..16.0).contains(&d), "{top}");
    let base = top["base"].as_array().unwrap();
    assert!(
        base.iter().any(|k| k["class"] == "attention"
            && k["ops"] == 4
            && k["targets"].to_string().contains("__cudnn$fmha")),
        "{top}"
    );
    assert!(
        top["head"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k["class"] != "attention"),
        "{top}"
    );
    let k = kernels(m);
    assert!(
        k.contains(&("cuDNN __cudnn$fmhaSoftmax".into(), 2, 0)),
        "{k:?}"
    );
    assert!(
        k.contains(&("cuDNN __cudnn$fmhaSoftmaxBackward".into(), 2, 0)),
        "{k:?}"
    );
    assert_eq!(m["recompiled"], "program");
    // Another program: its instructions are not paired by name in the tables (custom-call.9
    // is another op on each side), the names only on one side are counted, and no rerun is
    // suggested (a rerun measures noise between runs of one program).
    assert!(!md.contains("`jit_step › custom-call."), "{md}");
    assert!(md.contains("thunks of jit_step not paired by name"), "{md}");
    assert!(
        md.contains("(thunk): jit_step: ") && md.contains("thunks (its program changed)"),
        "{md}"
    );
    assert!(w["hint"].is_null(), "{}", w["hint"]);
    // The PR comment leads with the line and what replaced what.
    let why = &md[md.find("### Why").unwrap()..];
    let first = why.lines().find(|l| l.starts_with("- ")).unwrap();
    assert!(
        first.starts_with("- gpt.py:133 `a = jax.nn.dot_product_attention(")
            && first.contains("cuDNN fused attention ×4")
            && first.contains("replaced by"),
        "{first}"
    );
    assert!(md.len() <= 65_536, "{} characters", md.len());
}

/// The MLP 1.5 × wider (MLP=6): its line, gpt.py:137, carries most of the change (its GEMMs
/// do 50 % more work: +3.3e12 FLOP a step, about +6 ms at the rate the step runs).
#[test]
fn a_wider_layer_is_named_by_its_line() {
    let (w, md) = compare("gpt_wide");
    let m = step(&w);
    let top = &m["sources"][0];
    assert_eq!(top["source"], "gpt.py:137", "{top}");
    let d = top["delta_ms"].as_f64().unwrap();
    let module = m["delta_ms"].as_f64().unwrap();
    assert!(d > 0.6 * module && d < 8.0, "{top} of {module}");
    assert_eq!(m["recompiled"], "program");
    assert!(md.len() <= 65_536);
}

/// A flag flipped (`--xla_gpu_enable_triton_gemm=false`): the same program before
/// optimization, compiled with another flag; Triton GEMM fusions replaced by cuBLASLt calls.
#[test]
fn a_flag_flipped_is_the_compiler_s_doing() {
    let (w, md) = compare("gpt_no_triton");
    let m = step(&w);
    assert_eq!(m["recompiled"], "compiler_settings", "{m}");
    let k = kernels(m);
    let of = |t: &str| k.iter().find(|x| x.0 == t).cloned();
    let lt = of("cuBLASLt __cublas$lt$matmul").expect("cuBLASLt");
    let tr = of("Triton __triton_nested_gemm_fusion").expect("Triton GEMMs");
    assert!(lt.2 > lt.1 && tr.2 < tr.1, "{k:?}");
    assert!(
        w["why"]["environment"]["changes"]
            .to_string()
            .contains("--xla_gpu_enable_triton_gemm"),
        "{}",
        w["why"]["environment"]
    );
    assert!(md.contains("flags, versions or the GPU changed"), "{md}");
}

/// The same program run again: only what the autotuner chose differs (a GEMM on cuBLASLt in
/// one, a Triton fusion in the other); the comparison says so and how to pin its choices.
#[test]
fn autotuning_is_told_apart_from_the_code() {
    let (w, md) = compare("gpt_rerun1");
    let m = step(&w);
    assert_eq!(m["recompiled"], "autotuning", "{m}");
    assert!(!kernels(m).is_empty(), "{m}");
    assert!(
        md.contains("autotuner chose other kernels")
            && md.contains("--xla_gpu_per_fusion_autotune_cache_dir"),
        "{md}"
    );
    // The same parameters before optimization: no parameter is reported changed.
    assert_eq!(m["hlo"]["parameters"], serde_json::json!([]));
    // One program: its thunks are compared by name as usual.
    assert!(!md.contains("not paired by name"), "{md}");
}
