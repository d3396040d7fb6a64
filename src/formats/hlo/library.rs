//! What kind of work an instruction runs, in the terms an ML engineer uses (docs/compare.md,
//! "By source line, op class and library"): its op class (matmul, attention, collective, copy,
//! elementwise, other) and the library that runs it (cuDNN, cuBLAS, cuBLASLt, Triton, NCCL,
//! CUB, CUTLASS, else XLA's own kernels). Both survive a recompilation where instruction
//! names do not.
//!
//! The HLO says it in three places: a `custom-call`'s target (`__cudnn$fmhaSoftmax`,
//! `__cublas$lt$matmul`), a custom fusion's kind in its backend config
//! (`{"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion",…}}`), and the opcode.

use serde::{Deserialize, Serialize};

/// An op class.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum OpClass {
    Attention,
    Matmul,
    Collective,
    Copy,
    Elementwise,
    Other,
}

impl OpClass {
    pub fn name(self) -> &'static str {
        match self {
            OpClass::Attention => "attention",
            OpClass::Matmul => "matmul",
            OpClass::Collective => "collective",
            OpClass::Copy => "copy",
            OpClass::Elementwise => "elementwise",
            OpClass::Other => "other",
        }
    }
}

/// The kind a custom fusion's backend config names (`__triton_gemm`), borrowed from it; ""
/// when it names none. Reads the one key without parsing the JSON: a fusion's config is
/// written by XLA, compact, and the key `"kind"` appears once, in `fusion_backend_config`.
pub fn fusion_kind(backend_config: &[u8]) -> &str {
    const KEY: &[u8] = b"\"kind\"";
    let Some(at) = backend_config.windows(KEY.len()).position(|w| w == KEY) else {
        return "";
    };
    let rest = &backend_config[at + KEY.len()..];
    let rest = rest.trim_ascii_start();
    let Some(rest) = rest.strip_prefix(b":") else {
        return "";
    };
    let Some(rest) = rest.trim_ascii_start().strip_prefix(b"\"") else {
        return "";
    };
    let end = rest.iter().position(|&b| b == b'"').unwrap_or(0);
    std::str::from_utf8(&rest[..end]).unwrap_or_default()
}

fn is_collective(opcode: &str) -> bool {
    let o = opcode
        .strip_suffix("-start")
        .or_else(|| opcode.strip_suffix("-done"))
        .unwrap_or(opcode);
    matches!(
        o,
        "all-reduce"
            | "all-gather"
            | "reduce-scatter"
            | "all-to-all"
            | "ragged-all-to-all"
            | "collective-permute"
            | "collective-broadcast"
            | "send"
            | "recv"
    )
}

/// The op class of an instruction: its opcode and its target (a custom-call's target or a
/// custom fusion's kind, [`super::InstructionText::target`]).
pub fn op_class(opcode: &str, target: &str) -> OpClass {
    if target.starts_with("__cudnn$fmha") {
        return OpClass::Attention;
    }
    if is_collective(opcode) {
        return OpClass::Collective;
    }
    let matmul_target = target.starts_with("__cublas$")
        || target.starts_with("__cudnn$conv")
        || matches!(
            target,
            "__triton_gemm"
                | "__triton_nested_gemm_fusion"
                | "__triton_scaled_dot_fusion"
                | "__cudnn$fusion"
                | "__custom_fusion"
        );
    if matmul_target || matches!(opcode, "dot" | "convolution" | "ragged-dot" | "scaled-dot") {
        return OpClass::Matmul;
    }
    if matches!(
        opcode,
        "copy" | "copy-start" | "copy-done" | "dynamic-update-slice" | "dynamic-slice"
    ) || target == "__dynamic_memcpy"
    {
        return OpClass::Copy;
    }
    if opcode == "fusion" || target == "__triton" {
        return OpClass::Elementwise;
    }
    OpClass::Other
}

/// The library that runs an instruction, by its target and opcode: "XLA" for XLA's own
/// kernels (its fusions), "" for what launches nothing (parameters, tuples).
pub fn library(opcode: &str, target: &str) -> &'static str {
    if is_collective(opcode) {
        return "NCCL";
    }
    let t = target;
    if t.starts_with("__cudnn$") {
        "cuDNN"
    } else if t.starts_with("__cublas$lt$") {
        "cuBLASLt"
    } else if t.starts_with("__cublas$") {
        "cuBLAS"
    } else if t.starts_with("__triton") {
        "Triton"
    } else if t.starts_with("__cub$") {
        "CUB"
    } else if t == "__custom_fusion" {
        "CUTLASS"
    } else if t.starts_with("__") || opcode == "custom-call" {
        "a custom call"
    } else if matches!(
        opcode,
        "parameter" | "constant" | "tuple" | "get-tuple-element" | "bitcast" | "after-all"
    ) {
        ""
    } else {
        "XLA"
    }
}

/// An instruction in a few words: `cuDNN fused attention`, `cuBLASLt matmul`, `Triton
/// matmul`, `XLA elementwise fusion`, `NCCL all-reduce`.
pub fn describe(opcode: &str, target: &str) -> String {
    let lib = library(opcode, target);
    let what = match op_class(opcode, target) {
        OpClass::Attention => "fused attention".to_string(),
        OpClass::Collective => opcode
            .strip_suffix("-start")
            .or_else(|| opcode.strip_suffix("-done"))
            .unwrap_or(opcode)
            .to_string(),
        OpClass::Elementwise if opcode == "fusion" && target.is_empty() => {
            "elementwise fusion".into()
        }
        c => c.name().to_string(),
    };
    match lib {
        "" => what,
        l => format!("{l} {what}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fusion_kind_is_read_from_the_backend_config() {
        let c = br#"{"operation_queue_id":"0","fusion_backend_config":{"kind":"__triton_nested_gemm_fusion","block_level_fusion_config":{}}}"#;
        assert_eq!(fusion_kind(c), "__triton_nested_gemm_fusion");
        assert_eq!(fusion_kind(br#"{"kind" : "__triton"}"#), "__triton");
        assert_eq!(fusion_kind(br#"{"operation_queue_id":"0"}"#), "");
        assert_eq!(fusion_kind(br#"{"kind":"#), "");
        assert_eq!(fusion_kind(b""), "");
    }

    #[test]
    fn classes_and_libraries_of_what_xla_runs_on_gpus() {
        let cases = [
            (
                "custom-call",
                "__cudnn$fmhaSoftmax",
                OpClass::Attention,
                "cuDNN",
            ),
            (
                "custom-call",
                "__cudnn$fmhaSoftmaxBackward",
                OpClass::Attention,
                "cuDNN",
            ),
            (
                "custom-call",
                "__cublas$lt$matmul",
                OpClass::Matmul,
                "cuBLASLt",
            ),
            ("custom-call", "__cublas$gemm", OpClass::Matmul, "cuBLAS"),
            (
                "fusion",
                "__triton_nested_gemm_fusion",
                OpClass::Matmul,
                "Triton",
            ),
            ("fusion", "__triton_gemm", OpClass::Matmul, "Triton"),
            ("fusion", "__cudnn$fusion", OpClass::Matmul, "cuDNN"),
            ("fusion", "__triton", OpClass::Elementwise, "Triton"),
            ("fusion", "", OpClass::Elementwise, "XLA"),
            ("all-reduce-start", "", OpClass::Collective, "NCCL"),
            ("reduce-scatter", "", OpClass::Collective, "NCCL"),
            ("copy-start", "", OpClass::Copy, "XLA"),
            (
                "custom-call",
                "__cub$DeviceRadixSort",
                OpClass::Other,
                "CUB",
            ),
            ("sort", "", OpClass::Other, "XLA"),
            ("parameter", "", OpClass::Other, ""),
        ];
        for (opcode, target, class, lib) in cases {
            assert_eq!(op_class(opcode, target), class, "{opcode} {target}");
            assert_eq!(library(opcode, target), lib, "{opcode} {target}");
        }
        assert_eq!(
            describe("custom-call", "__cudnn$fmhaSoftmax"),
            "cuDNN fused attention"
        );
        assert_eq!(describe("all-gather-start", ""), "NCCL all-gather");
        assert_eq!(describe("fusion", ""), "XLA elementwise fusion");
        assert_eq!(describe("fusion", "__triton"), "Triton elementwise");
    }
}
