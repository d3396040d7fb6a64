//! The roofline on H100 captures whose FLOPs are known (`tests/data/*/README.md`: GEMM
//! chains, a convolution net, mixed precisions, an FSDP step), on the pax archives (A100) and
//! on a dump whose shapes are damaged.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn roofline(nsys: &Path, report: &Path, extra: &[&str]) -> Value {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut args = args![
        "analyze",
        "--cache-dir",
        tmp.path().join("cache"),
        "-o",
        &out,
        "--analysis",
        "roofline",
        report
    ];
    args.extend(extra.iter().map(std::ffi::OsString::from));
    assert_ok(&run_with_nsys(nsys, &os(&args)));
    json(&out.join("roofline.json"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn op<'a>(r: &'a Value, thunk: &str) -> &'a Value {
    r["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["thunk"] == thunk)
        .unwrap_or_else(|| panic!("no op {thunk}"))
}

/// FLOPs of one step: those of the steady state over its steps, per device.
fn per_step(r: &Value, field: &str) -> f64 {
    f(&r["step"][field])
}

/// Four 8192³ bf16 GEMMs a step (2·8192³ each): exactly that many FLOPs; each GEMM
/// compute-bound at more than half the bf16 roof, with and without command buffers.
#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn a_bf16_gemm_chain_is_compute_bound_near_its_roof() {
    let Some(nsys) = nsys() else { return };
    for capture in ["gemm-bf16-nocmdbuf", "gemm-bf16-cmdbuf"] {
        let r = roofline(&nsys, &data(capture).join("rep.nsys-rep"), &[]);
        let want = 4.0 * 2.0 * 8192f64.powi(3);
        let got = per_step(&r, "matmul_flops");
        assert!(rel(got, want) < 0.01, "{capture}: {got} != {want}");
        assert_eq!(r["peaks"]["device"], "NVIDIA H100 80GB HBM3");
        for i in 0..4 {
            let g = op(&r, &format!("custom-call.{i}"));
            assert_eq!(g["math"], "bf16", "{g}");
            assert_eq!(g["bound"], "compute", "{g}");
            assert!(f(&g["roof_percent"]) >= 50.0, "{capture}: {g}");
            assert!(f(&g["roof_percent"]) <= 100.0, "{capture}: {g}");
            assert_eq!(f(&g["flops"]), 2.0 * 8192f64.powi(3));
        }
        let m = &r["modules"][0];
        assert!(f(&m["mfu_percent"]) >= 50.0, "{capture}: {m}");
        assert_eq!(m["math"], "bf16");
    }
}

/// The mixed step: the HIGHEST-precision f32 GEMM runs on the FP32 units (its roof is the
/// f32 peak, a few % of the bf16 one), the default-precision one on TF32; the elementwise
/// op over 2 GiB is memory-bound near the HBM roof; the convolution's textbook count.
#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn precisions_pick_their_roofs_and_elementwise_work_is_memory_bound() {
    let Some(nsys) = nsys() else { return };
    let r = roofline(&nsys, &data("mixed-nocmdbuf").join("rep.nsys-rep"), &[]);
    let peaks = &r["peaks"]["tflops"];
    let highest = op(&r, "custom-call.3");
    assert_eq!(highest["math"], "f32", "{highest}");
    assert_eq!(highest["bound"], "compute");
    assert_eq!(f(&highest["roof_tflops"]), f(&peaks["f32"]));
    let of_bf16 = f(&highest["tflops"]) / f(&peaks["bf16"]);
    assert!((0.02..0.1).contains(&of_bf16), "{of_bf16}");
    assert!(f(&highest["roof_percent"]) > 50.0, "{highest}");
    let tf32 = op(&r, "custom-call.2");
    assert_eq!(tf32["math"], "tf32");
    assert_eq!(f(&tf32["roof_tflops"]), f(&peaks["tf32"]));
    let ew = op(&r, "input_add_reduce_fusion");
    assert_eq!(ew["bound"], "memory", "{ew}");
    assert!(f(&ew["roof_percent"]) >= 80.0, "{ew}");
    assert!(f(&ew["gb_s"]) >= 2700.0, "{ew}");
    let conv = op(&r, "cudnn-conv.1");
    assert_eq!(
        f(&conv["flops"]),
        2.0 * 64.0 * 56.0 * 56.0 * 128.0 * 128.0 * 9.0
    );
    // 4.035927e11 FLOP a step (README).
    assert!(
        rel(per_step(&r, "flops"), 4.035927e11) < 0.01,
        "{}",
        r["step"]
    );
    // Several units: MFU weighs each by its peak, and stays a share of the time.
    let m = &r["modules"][0];
    assert!(f(&m["mfu_percent"]) < 100.0, "{m}");
}

/// Convolution forward and backward passes (cuDNN calls) in a CNN step, and a data-parallel
/// step on two GPUs (its collectives left out of the roofline), against their README counts.
#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn convolution_nets_and_fsdp_steps_have_their_textbook_counts() {
    let Some(nsys) = nsys() else { return };
    for capture in ["convnet-nocmdbuf", "convnet-cmdbuf"] {
        let r = roofline(&nsys, &data(capture).join("rep.nsys-rep"), &[]);
        // The convolutions 4.735201e11 and the dense head 4.9e5.
        let got = per_step(&r, "matmul_flops");
        assert!(rel(got, 4.735201e11) < 0.01, "{capture}: {got}");
    }
    let r = roofline(&nsys, &data("fsdp2-nocmdbuf").join("rep.nsys-rep"), &[]);
    let got = per_step(&r, "matmul_flops");
    assert!(rel(got, 6.047314e12) < 0.01, "per device: {got}");
    assert!(f(&r["uncosted"]["communication_ms"]) > 0.0);
    let r = roofline(&nsys, &data("gemm-lowp-nocmdbuf").join("rep.nsys-rep"), &[]);
    assert!(rel(per_step(&r, "matmul_flops"), 8.796093e12) < 0.01);
    let maths: Vec<&str> = r["ops"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["math"].as_str())
        .collect();
    for m in ["fp8", "bf16", "f16"] {
        assert!(maths.contains(&m), "{maths:?}");
    }
}

/// `--peak` wins over the table and is said; a bad one is one line naming it.
#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn peaks_given_on_the_command_line_win() {
    let Some(nsys) = nsys() else { return };
    let report = data("gemm-bf16-nocmdbuf").join("rep.nsys-rep");
    let table = roofline(&nsys, &report, &[]);
    let given = roofline(
        &nsys,
        &report,
        &["--peak", "bf16=494.7", "--peak", "hbm=1000"],
    );
    assert_eq!(given["peaks"]["overridden"][0], "bf16=494.7");
    assert_eq!(f(&given["peaks"]["memory_gb_s"]), 1000.0);
    let (a, b) = (op(&table, "custom-call.0"), op(&given, "custom-call.0"));
    assert!(rel(f(&b["roof_percent"]), 2.0 * f(&a["roof_percent"])) < 0.001);
    let tmp = tempfile::tempdir().unwrap();
    let o = run_with_nsys(
        &nsys,
        &os(&args![
            "analyze",
            "--cache-dir",
            tmp.path().join("c"),
            "-o",
            tmp.path().join("o"),
            "--peak",
            "bf16=fast",
            &report
        ]),
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--peak bf16=fast: the value must be a positive number"),
        "{err}"
    );
}

/// Remove the shape of instruction `name` from an `HloProto` (fields: docs/design.md, "HLO
/// fields": HloProto.hlo_module 1, HloModuleProto.computations 3, HloComputationProto
/// .instructions 2, HloInstructionProto.name 1, .shape 3).
fn without_shape(pb: &[u8], name: &str) -> Vec<u8> {
    use prost::encoding::{WireType, decode_key, decode_varint, encode_key, encode_varint};
    fn fields(mut b: &[u8]) -> Vec<(u32, WireType, Vec<u8>)> {
        let mut out = Vec::new();
        while !b.is_empty() {
            let (tag, wire) = decode_key(&mut b).unwrap();
            let start = b;
            let body = match wire {
                WireType::Varint => {
                    decode_varint(&mut b).unwrap();
                    start[..start.len() - b.len()].to_vec()
                }
                WireType::LengthDelimited => {
                    let n = decode_varint(&mut b).unwrap() as usize;
                    let v = b[..n].to_vec();
                    b = &b[n..];
                    v
                }
                WireType::SixtyFourBit => {
                    let v = b[..8].to_vec();
                    b = &b[8..];
                    v
                }
                WireType::ThirtyTwoBit => {
                    let v = b[..4].to_vec();
                    b = &b[4..];
                    v
                }
                w => panic!("wire type {w:?}"),
            };
            out.push((tag, wire, body));
        }
        out
    }
    fn write(fs: &[(u32, WireType, Vec<u8>)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (tag, wire, body) in fs {
            encode_key(*tag, *wire, &mut out);
            if *wire == WireType::LengthDelimited {
                encode_varint(body.len() as u64, &mut out);
            }
            out.extend_from_slice(body);
        }
        out
    }
    let edit = |path: &[u32], f: &dyn Fn(Vec<u8>) -> Vec<u8>, b: &[u8]| -> Vec<u8> {
        let mut fs = fields(b);
        for x in fs.iter_mut().filter(|x| x.0 == path[0]) {
            x.2 = f(std::mem::take(&mut x.2));
        }
        write(&fs)
    };
    let instruction = |b: Vec<u8>| {
        let fs = fields(&b);
        if fs.iter().any(|x| x.0 == 1 && x.2 == name.as_bytes()) {
            write(&fs.into_iter().filter(|x| x.0 != 3).collect::<Vec<_>>())
        } else {
            b
        }
    };
    let computation = |b: Vec<u8>| edit(&[2], &instruction, &b);
    let module = |b: Vec<u8>| edit(&[3], &computation, &b);
    edit(&[1], &module, pb)
}

/// A dump whose GEMM has lost its shape: a note naming the module and the instruction, the
/// GEMM's time counted as not costed, no FLOPs guessed; the other ops as before.
#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn a_damaged_shape_is_a_note_not_a_guess() {
    let Some(nsys) = nsys() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let src = data("mixed-nocmdbuf");
    let dir = tmp.path().join("capture");
    std::fs::create_dir_all(dir.join("dump_rep")).unwrap();
    std::fs::copy(src.join("rep.nsys-rep"), dir.join("rep.nsys-rep")).unwrap();
    let mut edited = false;
    for e in std::fs::read_dir(src.join("dump_rep")).unwrap() {
        let p = e.unwrap().path();
        let mut bytes = std::fs::read(&p).unwrap();
        if p.to_string_lossy().ends_with("after_optimizations.hlo.pb") {
            let cut = without_shape(&bytes, "custom-call.3");
            assert!(cut.len() < bytes.len());
            bytes = cut;
            edited = true;
        }
        std::fs::write(dir.join("dump_rep").join(p.file_name().unwrap()), bytes).unwrap();
    }
    assert!(edited);
    let r = roofline(&nsys, &dir.join("rep.nsys-rep"), &[]);
    let notes: Vec<&str> = r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes.iter().any(
            |n| n.starts_with("module jit_step: 1 instruction(s) not costed")
                && n.contains("custom-call.3")
        ),
        "{notes:?}"
    );
    assert!(
        r["ops"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["thunk"] != "custom-call.3")
    );
    assert!(
        f(&r["uncosted"]["not_costed_ms"]) > 20.0,
        "{}",
        r["uncosted"]
    );
    assert_eq!(f(&op(&r, "custom-call.2")["flops"]), 2.0 * 4096f64.powi(3));
}

/// The pax archives (A100-SXM4-40GB, 2024 XLA): the A100's peaks from the report, the step
/// (`pjit__wrapped_step_fn` on four ranks) at a plausible MFU, its GEMMs compute-bound, and
/// ops above the HBM roof said (their bytes fit the 40 MiB L2).
#[test]
fn the_pax_archives_get_a_sensible_roofline() {
    let Some(f_) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    assert_ok(&analyze(
        &tmp.path().join("cache"),
        &out,
        &["--analysis", "roofline"],
        &pax_archives(&f_),
    ));
    let r = json(&out.join("roofline.json"));
    assert_eq!(r["peaks"]["device"], "NVIDIA A100-SXM4-40GB");
    assert!(rel(f(&r["peaks"]["tflops"]["bf16"]), 312.0) < 0.005);
    assert_eq!(f(&r["peaks"]["memory_gb_s"]), 1555.2);
    let step = &r["step"];
    assert_eq!(step["module"], "pjit__wrapped_step_fn");
    assert_eq!(f(&step["steps"]), 3.0);
    let mfu = f(&step["mfu_percent"]);
    assert!((10.0..60.0).contains(&mfu), "{step}");
    let gemms: Vec<&Value> = r["ops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["math"] == "bf16")
        .take(20)
        .collect();
    assert!(!gemms.is_empty());
    for g in gemms {
        assert!(f(&g["roof_percent"]) <= 100.0, "{g}");
    }
    assert!(f(&r["uncosted"]["communication_ms"]) > 0.0);
}
