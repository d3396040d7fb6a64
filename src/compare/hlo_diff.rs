//! What changed in a module's HLO between two runs, when its fingerprint changed (a new
//! compilation of the same function): instructions by opcode, fusions by what they fuse,
//! collectives by kind and message size, and the shapes of the entry computation's
//! parameters (the usual cause of a new compilation).
//!
//! Instructions inside fusions (and the computations reductions, sorts and scatters call) are
//! counted once, as their caller: what runs as kernels is compared, not the fused
//! computations' bodies (their opcodes make each fusion's signature).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::formats::hlo::HloModuleInfo;
use crate::formats::hlo::library::library;

/// How many names of a changed group are listed.
const NAMES: usize = 5;

/// A count that differs between the two sides.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Count {
    pub what: String,
    pub base: usize,
    pub head: usize,
    /// Some instructions of the side that has more (for fusions and collectives).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}

/// An entry parameter whose shape changed (or that one side lacks).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Parameter {
    pub index: usize,
    pub base: Option<String>,
    pub head: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct HloDiff {
    pub base_fingerprint: Option<String>,
    pub head_fingerprint: Option<String>,
    /// Top-level instructions (those that are not parts of a fusion) on each side.
    pub instructions: (usize, usize),
    /// Opcodes whose count changed.
    pub opcodes: Vec<Count>,
    /// Fusions by signature (the opcodes they fuse) whose count changed.
    pub fusions: Vec<Count>,
    /// Collectives by kind and message size whose count changed (a resized collective is one
    /// size fewer and another more).
    pub collectives: Vec<Count>,
    /// Library calls and custom fusions by target, with the library that runs them
    /// (`cuDNN __cudnn$fmhaSoftmax`, `Triton __triton_nested_gemm_fusion`), whose count
    /// changed.
    #[serde(default)]
    pub kernels: Vec<Count>,
    pub parameters: Vec<Parameter>,
}

impl HloDiff {
    pub fn is_empty(&self) -> bool {
        self.opcodes.is_empty()
            && self.kernels.is_empty()
            && self.fusions.is_empty()
            && self.collectives.is_empty()
            && self.parameters.is_empty()
    }

    /// One line: `+3 instructions (fusion +2, all-gather +1); parameter 0 f32[8] → f32[16]`.
    pub fn line(&self) -> String {
        if self.is_empty() {
            return "same instructions, fusions, collectives and parameters (a change elsewhere: layouts, scheduling, constants)".into();
        }
        let (b, h) = self.instructions;
        let mut parts = Vec::new();
        let signed = |c: &Count| c.head as i64 - c.base as i64;
        // The four counts that changed most, as "what +n, …".
        let largest = |counts: &[Count]| -> String {
            let mut v: Vec<&Count> = counts.iter().collect();
            v.sort_by_key(|c| std::cmp::Reverse(signed(c).abs()));
            let listed: Vec<String> = v
                .iter()
                .take(4)
                .map(|c| format!("{} {:+}", c.what, signed(c)))
                .collect();
            let more = if v.len() > 4 { ", …" } else { "" };
            format!("{}{more}", listed.join(", "))
        };
        if !self.kernels.is_empty() {
            parts.push(format!("library calls: {}", largest(&self.kernels)));
        }
        if !self.opcodes.is_empty() {
            parts.push(format!(
                "{:+} instructions ({})",
                h as i64 - b as i64,
                largest(&self.opcodes)
            ));
        }
        let colls: Vec<String> = self
            .collectives
            .iter()
            .map(|c| format!("{} {:+}", c.what, signed(c)))
            .collect();
        if !colls.is_empty() {
            parts.push(format!("collectives: {}", colls.join(", ")));
        }
        for p in &self.parameters {
            parts.push(format!(
                "parameter {} {} → {}",
                p.index,
                p.base.as_deref().unwrap_or("none"),
                p.head.as_deref().unwrap_or("none")
            ));
        }
        if !self.fusions.is_empty() && self.opcodes.is_empty() {
            parts.push(format!("{} fusions fuse other ops", self.fusions.len()));
        }
        parts.join("; ")
    }
}

/// What a module runs, counted.
struct Profile {
    top: usize,
    opcodes: BTreeMap<String, usize>,
    fusions: BTreeMap<String, Vec<String>>,
    collectives: BTreeMap<String, Vec<String>>,
    kernels: BTreeMap<String, Vec<String>>,
}

fn profile(m: &HloModuleInfo) -> Profile {
    // The computations a fusion, a reduction, a sort or a scatter calls are parts of its kernel.
    let inlined = crate::formats::hlo::cost::INLINED_CALLERS;
    let fused: BTreeSet<u32> = m
        .instructions
        .iter()
        .filter(|i| inlined.contains(&i.opcode()))
        .flat_map(|i| i.called.iter().copied())
        .collect();
    let mut p = Profile {
        top: 0,
        opcodes: BTreeMap::new(),
        fusions: BTreeMap::new(),
        collectives: BTreeMap::new(),
        kernels: BTreeMap::new(),
    };
    for (idx, i) in m.instructions.iter().enumerate() {
        if fused.contains(&(idx as u32)) {
            continue;
        }
        p.top += 1;
        *p.opcodes.entry(i.opcode().to_string()).or_default() += 1;
        if !i.target().is_empty() {
            p.kernels
                .entry(format!(
                    "{} {}",
                    library(i.opcode(), i.target()),
                    i.target()
                ))
                .or_default()
                .push(i.name().to_string());
        }
        if i.opcode() == "fusion" {
            let mut inner: BTreeMap<&str, usize> = BTreeMap::new();
            for &c in &i.called {
                if let Some(ci) = m.instructions.get(c as usize) {
                    let op = ci.opcode();
                    if !matches!(op, "parameter" | "constant" | "get-tuple-element" | "tuple") {
                        *inner.entry(op).or_default() += 1;
                    }
                }
            }
            let sig: Vec<String> = inner
                .iter()
                .map(|(op, n)| {
                    if *n > 1 {
                        format!("{op}×{n}")
                    } else {
                        op.to_string()
                    }
                })
                .collect();
            p.fusions
                .entry(format!("fusion({})", sig.join(" ")))
                .or_default()
                .push(i.name().to_string());
        }
        if let Some(c) = &i.communication {
            p.collectives
                .entry(format!(
                    "{} {}",
                    c.collective,
                    super::samples::human_bytes(c.message_size_bytes as i64)
                ))
                .or_default()
                .push(i.name().to_string());
        }
    }
    p
}

fn counts(base: &BTreeMap<String, usize>, head: &BTreeMap<String, usize>) -> Vec<Count> {
    let keys: BTreeSet<&String> = base.keys().chain(head.keys()).collect();
    keys.into_iter()
        .filter_map(|k| {
            let (b, h) = (
                base.get(k).copied().unwrap_or(0),
                head.get(k).copied().unwrap_or(0),
            );
            (b != h).then(|| Count {
                what: k.clone(),
                base: b,
                head: h,
                examples: Vec::new(),
            })
        })
        .collect()
}

fn named(base: &BTreeMap<String, Vec<String>>, head: &BTreeMap<String, Vec<String>>) -> Vec<Count> {
    let len = |m: &BTreeMap<String, Vec<String>>| -> BTreeMap<String, usize> {
        m.iter().map(|(k, v)| (k.clone(), v.len())).collect()
    };
    let mut out = counts(&len(base), &len(head));
    for c in &mut out {
        let more = if c.head > c.base { head } else { base };
        c.examples = more
            .get(&c.what)
            .map(|v| v.iter().take(NAMES).cloned().collect())
            .unwrap_or_default();
    }
    out
}

/// The differences between two compilations of a module.
pub fn diff(base: &HloModuleInfo, head: &HloModuleInfo) -> HloDiff {
    let (b, h) = (profile(base), profile(head));
    let n = base.entry_parameters.len().max(head.entry_parameters.len());
    let parameters = (0..n)
        .filter_map(|i| {
            let (pb, ph) = (
                base.entry_parameters.get(i).cloned(),
                head.entry_parameters.get(i).cloned(),
            );
            (pb != ph).then_some(Parameter {
                index: i,
                base: pb,
                head: ph,
            })
        })
        .collect();
    HloDiff {
        base_fingerprint: base.fingerprint.clone(),
        head_fingerprint: head.fingerprint.clone(),
        instructions: (b.top, h.top),
        opcodes: counts(&b.opcodes, &h.opcodes),
        fusions: named(&b.fusions, &h.fusions),
        collectives: named(&b.collectives, &h.collectives),
        kernels: named(&b.kernels, &h.kernels),
        parameters,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::hlo::{CommunicationInfo, HloInstructionInfo, InstructionText};

    fn instr(name: &str, opcode: &str, called: Vec<u32>, coll: Option<u64>) -> HloInstructionInfo {
        call(name, opcode, "", called, coll)
    }

    fn call(
        name: &str,
        opcode: &str,
        target: &str,
        called: Vec<u32>,
        coll: Option<u64>,
    ) -> HloInstructionInfo {
        HloInstructionInfo::new(
            InstructionText {
                name,
                opcode,
                target,
                ..InstructionText::default()
            },
            0,
            0,
            coll.map(|bytes| CommunicationInfo {
                collective: "all-gather".into(),
                message_size_bytes: bytes,
                collective_size: 2,
                bandwidth_correction: 1.0,
                bus_correction: 1.0,
            }),
            called,
        )
    }

    fn module(instructions: Vec<HloInstructionInfo>, params: &[&str]) -> HloModuleInfo {
        HloModuleInfo {
            fingerprint: Some("fp".into()),
            entry_parameters: params.iter().map(|s| s.to_string()).collect(),
            ..HloModuleInfo::of_instructions(instructions)
        }
    }

    #[test]
    fn a_widened_layer_and_a_new_collective_are_named() {
        // Indices: fused bodies first (as the decoder's sorted order would place them
        // anywhere; only `called` matters).
        let base = module(
            vec![
                instr("add.1", "add", vec![], None),
                instr("ag.1", "all-gather", vec![], Some(1 << 20)),
                instr("fusion.1", "fusion", vec![0, 3], None),
                instr("p.1", "parameter", vec![], None),
                instr("param_0", "parameter", vec![], None),
            ],
            &["f32[8,64]"],
        );
        let head = module(
            vec![
                instr("add.1", "add", vec![], None),
                instr("ag.1", "all-gather", vec![], Some(2 << 20)),
                instr("fusion.1", "fusion", vec![0, 3], None),
                instr("p.1", "parameter", vec![], None),
                instr("param_0", "parameter", vec![], None),
                instr("fusion.2", "fusion", vec![6, 7], None),
                instr("mul.1", "multiply", vec![], None),
                instr("exp.1", "exponential", vec![], None),
            ],
            &["f32[8,128]"],
        );
        let d = diff(&base, &head);
        // add.1 and p.1 are parts of fusion.1; mul.1 and exp.1 of fusion.2.
        assert_eq!(d.instructions, (3, 4));
        assert_eq!(
            d.opcodes,
            vec![Count {
                what: "fusion".into(),
                base: 1,
                head: 2,
                examples: vec![]
            }]
        );
        assert_eq!(d.fusions.len(), 1);
        assert_eq!(d.fusions[0].what, "fusion(exponential multiply)");
        assert_eq!(d.fusions[0].examples, vec!["fusion.2".to_string()]);
        let colls: Vec<(&str, usize, usize)> = d
            .collectives
            .iter()
            .map(|c| (c.what.as_str(), c.base, c.head))
            .collect();
        assert_eq!(
            colls,
            vec![("all-gather 1 MiB", 1, 0), ("all-gather 2 MiB", 0, 1)]
        );
        assert_eq!(
            d.parameters,
            vec![Parameter {
                index: 0,
                base: Some("f32[8,64]".into()),
                head: Some("f32[8,128]".into())
            }]
        );
        let line = d.line();
        assert!(line.starts_with("+1 instructions (fusion +1)"), "{line}");
        assert!(
            line.contains("parameter 0 f32[8,64] → f32[8,128]"),
            "{line}"
        );
        assert!(diff(&base, &base).is_empty());
    }

    #[test]
    fn library_calls_are_counted_by_target_with_their_library() {
        let base = module(
            vec![
                call(
                    "custom-call.1",
                    "custom-call",
                    "__cudnn$fmhaSoftmax",
                    vec![],
                    None,
                ),
                call(
                    "custom-call.2",
                    "custom-call",
                    "__cublas$lt$matmul",
                    vec![],
                    None,
                ),
            ],
            &[],
        );
        let head = module(
            vec![
                call(
                    "custom-call.1",
                    "custom-call",
                    "__cublas$lt$matmul",
                    vec![],
                    None,
                ),
                call("fusion.3", "fusion", "__triton", vec![], None),
                call("fusion.4", "fusion", "__triton", vec![], None),
            ],
            &[],
        );
        let d = diff(&base, &head);
        let k: Vec<(&str, usize, usize)> = d
            .kernels
            .iter()
            .map(|c| (c.what.as_str(), c.base, c.head))
            .collect();
        assert_eq!(
            k,
            vec![
                ("Triton __triton", 0, 2),
                ("cuDNN __cudnn$fmhaSoftmax", 1, 0)
            ]
        );
        assert_eq!(d.kernels[1].examples, vec!["custom-call.1".to_string()]);
        let line = d.line();
        assert!(
            line.starts_with("library calls: Triton __triton +2, cuDNN __cudnn$fmhaSoftmax -1"),
            "{line}"
        );
    }
}
