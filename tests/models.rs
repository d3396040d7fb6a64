//! The real model corpus (`tests/data/models/`, READMEs there): GPT steps with cuDNN flash
//! attention, Llama blocks under `scan` and remat, MoE with `ragged_dot` and all-to-all, fp8
//! GEMMs, a `ppermute` pipeline and FSDP, captured on H200s. Every operation that ran inside a
//! command buffer is attributed to an HLO instruction, and on one GPU each instruction's time
//! is the one its kernels took by the kernel-to-instruction table (`kernel_table.md`, made from
//! the graph node ids and the thunk order, independently of this tool).

use crate::common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The captures of the corpus, and whether each ran on one GPU.
const CAPTURES: [(&str, bool); 13] = [
    ("gpt-cudnn", true),
    ("gpt-cudnn-nocmdbuf", true),
    ("gpt-cudnn-nocausal", true),
    ("gpt-cudnn-long", true),
    ("llama-scan", true),
    ("llama-scan-nocmdbuf", true),
    ("moe-ragged", true),
    ("moe-ragged-nocmdbuf", true),
    ("fp8-gemm", true),
    ("fp8-gemm-nocmdbuf", true),
    ("moe-a2a", false),
    ("pipeline", false),
    ("fsdp-gpt", false),
];

fn capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/models")
        .join(name)
}

/// `kernel_table.md` as instruction → total ms. A dynamic slice fusion's copy is listed
/// under the `fusion-start` that wraps it; here it goes under one name, `[slice copies]`.
fn kernel_table(dir: &Path) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in std::fs::read_to_string(dir.join("kernel_table.md"))
        .unwrap()
        .lines()
    {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 10 || cells[1].parse::<u32>().is_err() {
            continue;
        }
        let instruction = cells[5].trim_matches('`');
        let instruction = instruction.split(" (in ").next().unwrap();
        *out.entry(slice_copies(instruction)).or_default() += cells[8].parse::<f64>().unwrap();
    }
    out
}

fn slice_copies(instruction: &str) -> String {
    if instruction.starts_with("fusion-start") || instruction.starts_with("loop_dynamic_") {
        "[slice copies]".into()
    } else {
        instruction.to_string()
    }
}

/// `analysis`'s JSON for capture `name`, which must leave nothing of its command buffers
/// unattributed.
fn analyse(nsys: &Path, tmp: &Path, name: &str, analysis: &str) -> serde_json::Value {
    analyse_with(nsys, tmp, name, analysis, &[])
}

/// [`analyse`] with more arguments for `analyze`.
fn analyse_with(
    nsys: &Path,
    tmp: &Path,
    name: &str,
    analysis: &str,
    more: &[&str],
) -> serde_json::Value {
    let out = tmp.join(name).join(format!("{analysis}{}", more.len()));
    let mut a = args![
        "analyze",
        "--cache-dir",
        tmp.join("cache"),
        "-o",
        &out,
        "--analysis",
        analysis,
        capture(name).join("rep.nsys-rep")
    ];
    a.extend(more.iter().map(std::ffi::OsString::from));
    let o = run_with_nsys(nsys, &os(&a));
    assert_ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        !stdout.contains("not attributed") && !err.contains("not attributed"),
        "{name}: {stdout}"
    );
    json(&out.join(format!("{analysis}.json")))
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn every_kernel_of_the_model_corpus_goes_to_its_instruction() {
    let Some(nsys) = nsys() else { return };
    let tmp = tempfile::tempdir().unwrap();
    for (name, one_gpu) in CAPTURES {
        let ops = analyse(&nsys, tmp.path(), name, "ops");
        let buffers = &ops["command_buffers"];
        let (whole, attributed) = (
            buffers["ms"].as_f64().unwrap(),
            buffers["attributed_ms"].as_f64().unwrap(),
        );
        assert!(
            attributed >= 0.995 * whole,
            "{name}: {attributed} of {whole} ms attributed"
        );
        // On one GPU every step is in the steady state, and inside a command buffer an
        // instruction's time is the time its kernels kept the GPU busy: the table's sum.
        // (Without command buffers a thunk's time is its NVTX range's span on the GPU, gaps
        // between its kernels included, as Nsight Systems projects it.)
        if !one_gpu || name.ends_with("-nocmdbuf") {
            continue;
        }
        let mut ours: BTreeMap<String, f64> = BTreeMap::new();
        for t in ops["top_thunks"].as_array().unwrap() {
            *ours
                .entry(slice_copies(t["thunk"].as_str().unwrap()))
                .or_default() += t["total_ms"].as_f64().unwrap();
        }
        let truth = kernel_table(&capture(name));
        for (instruction, ms) in &truth {
            let got = ours.get(instruction).copied().unwrap_or(0.0);
            assert!(
                (got - ms).abs() <= 0.005 + 0.01 * ms,
                "{name}: {instruction} {got} ms, its kernels {ms} ms"
            );
        }
        for (instruction, ms) in &ours {
            assert!(
                truth.contains_key(instruction) || *ms < 0.005,
                "{name}: {instruction} ({ms} ms) runs no kernel of the table"
            );
        }
    }
}

/// Model FLOPs per step (all devices) worked out from each program's shapes
/// (`tests/data/models/README.md`): matmuls, attention by its (query, key) pairs, no
/// recomputation, `ragged_dot`'s dense lowering counted by its routed rows. The captures
/// whose model FLOPs need what the HLO does not say (moe-a2a's capacity padding, a
/// pipeline's bubbles) are checked apart.
const MODEL_FLOPS: [(&str, f64, f64); 11] = [
    ("gpt-cudnn", 1.731771e13, 1.0),
    ("gpt-cudnn-nocmdbuf", 1.731771e13, 1.0),
    ("gpt-cudnn-nocausal", 1.814194e13, 1.0),
    ("gpt-cudnn-long", 9.895806e12, 1.0),
    ("llama-scan", 1.298838e13, 1.0),
    ("llama-scan-nocmdbuf", 1.298838e13, 1.0),
    ("fp8-gemm", 1.209463e13, 1.0),
    ("fp8-gemm-nocmdbuf", 1.209463e13, 1.0),
    ("fsdp-gpt", 1.731771e13, 2.0),
    ("moe-ragged", 1.650073e12, 1.0),
    ("moe-ragged-nocmdbuf", 1.650073e12, 1.0),
];

/// The step's printed MFU equals model FLOPs ÷ (period × the peak of its `mfu_math`).
fn assert_mfu_by_definition(name: &str, r: &serde_json::Value) {
    let step = &r["step"];
    let f = |k: &str| step[k].as_f64().unwrap_or_else(|| panic!("{name}: {k}"));
    let peak = r["peaks"]["tflops"][step["mfu_math"].as_str().unwrap()]
        .as_f64()
        .unwrap();
    let mfu = 100.0 * f("model_flops") / (f("period_ms") * 1e-3 * peak * 1e12);
    assert!(
        (f("mfu_percent") - mfu).abs() < 1e-6 * mfu,
        "{name}: MFU {} printed, {mfu} by its definition",
        f("mfu_percent")
    );
}

/// Per step: the model FLOPs within 2 % of the analytic count, attention's cuDNN calls costed
/// (forward and backward, the backward's recomputed scores as hardware FLOPs only), and the
/// MFU printed equal to model FLOPs ÷ (period × peak).
#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn the_model_corpus_counts_its_model_flops() {
    let Some(nsys) = nsys() else { return };
    let tmp = tempfile::tempdir().unwrap();
    for (name, truth, devices) in MODEL_FLOPS {
        let r = analyse(&nsys, tmp.path(), name, "roofline");
        let step = &r["step"];
        let f = |k: &str| step[k].as_f64().unwrap_or_else(|| panic!("{name}: {k}"));
        // The step row is per device.
        let model = f("model_flops") * devices;
        assert!(
            (model - truth).abs() <= 0.02 * truth,
            "{name}: {model:e} model FLOPs a step, {truth:e} worked out"
        );
        assert!(f("flops") >= f("model_flops"), "{name}");
        assert_mfu_by_definition(name, &r);
        if name.starts_with("moe-ragged") {
            // HFU above MFU, and why: the experts' dense lowering over 8 groups.
            let dense = step["beyond_model"]["dense_groups"].as_f64().unwrap() * devices;
            assert!(
                (dense - 8.658654e12).abs() <= 0.02 * 8.658654e12,
                "{name}: {dense:e}"
            );
            let notes = r["notes"].to_string();
            assert!(
                notes.contains("HFU") && notes.contains("ragged_dot lowered to dense GEMMs"),
                "{name}: {notes}"
            );
        }
        if name.starts_with("gpt") || name.starts_with("llama") {
            let attention: Vec<&serde_json::Value> = r["ops"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|o| {
                    o["thunk"]
                        .as_str()
                        .unwrap()
                        .contains("dot_product_attention")
                })
                .collect();
            assert!(!attention.is_empty(), "{name}: attention not costed");
            for o in attention {
                assert!(o["flops"].as_f64().unwrap() > 0.0, "{name}: {o}");
                assert_eq!(o["bound"], "compute", "{name}: {o}");
            }
        }
    }
}

/// A pipeline's bubbles and capacity-padded expert slots are work the HLO does not tell from
/// the model's: the step counts what executes (the captures' hardware FLOPs), and a user's
/// `model_flops` replaces it in MFU, said in a note.
#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn model_flops_the_hlo_cannot_tell_are_counted_as_executed_or_given() {
    let Some(nsys) = nsys() else { return };
    let tmp = tempfile::tempdir().unwrap();
    // (capture, hardware FLOPs a step, model FLOPs a step), both devices.
    for (name, hardware, model) in [
        ("pipeline", 3.985730e12, 3.023657e12),
        ("moe-a2a", 1.959310e12, 1.650073e12),
    ] {
        let r = analyse(&nsys, tmp.path(), name, "roofline");
        let counted = r["step"]["model_flops"].as_f64().unwrap() * 2.0;
        assert!(
            (counted - hardware).abs() <= 0.02 * hardware,
            "{name}: {counted:e} counted, {hardware:e} executed"
        );
        let given = format!("model_flops={model:e}");
        let r = analyse_with(
            &nsys,
            tmp.path(),
            name,
            "roofline",
            &["--analysis-arg", &given],
        );
        let step = &r["step"];
        let f = |k: &str| step[k].as_f64().unwrap();
        assert!(
            (f("model_flops") * 2.0 - model).abs() <= 1e-9 * model,
            "{step}"
        );
        assert_mfu_by_definition(name, &r);
        assert!(f("hfu_percent") > f("mfu_percent"), "{name}: {step}");
        let notes = r["notes"].to_string();
        assert!(notes.contains("model FLOPs are the"), "{name}: {notes}");
    }
}

/// MFU is against the bf16 peak for f32 work: a chain of f32 HIGHEST GEMMs running near its
/// own units' roof reads under 10 %, its ops' roof share beside it.
#[test]
fn an_f32_gemm_chain_reads_a_low_mfu_and_a_high_roof_share() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let archive = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/problems/f32_highest.zip");
    assert_ok(&analyze(
        &tmp.path().join("cache"),
        &out,
        &["--analysis", "roofline"],
        &[archive],
    ));
    let r = json(&out.join("roofline.json"));
    let step = &r["step"];
    assert_eq!(
        (step["math"].as_str(), step["mfu_math"].as_str()),
        (Some("f32"), Some("bf16"))
    );
    let mfu = step["mfu_percent"].as_f64().unwrap();
    assert!(mfu > 0.0 && mfu <= 10.0, "{step}");
    let top = &r["ops"][0];
    assert_eq!(top["math"], "f32", "{top}");
    assert!(top["roof_percent"].as_f64().unwrap() >= 50.0, "{top}");
}
