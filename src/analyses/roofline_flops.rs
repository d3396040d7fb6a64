//! The FLOPs of the roofline's rows and what they make of them (docs/design.md, "Roofline"):
//! FLOPs by math unit with the recomputed ones and why, MFU and HFU against one peak, the
//! notes on FLOPs a step executes beyond the model's or cannot count, and the model FLOPs a
//! user gives.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::formats::gpus::{PeaksUsed, math_name};
use crate::formats::hlo::cost::{Beyond, Math};
use crate::units::duration_ms;

const MS: f64 = 1e-6;

/// A positive, finite number of FLOPs (anything else is refused when the parameters are read).
#[derive(Serialize, Debug, Clone, Copy, PartialEq)]
pub struct PositiveFlops(pub f64);

impl<'de> Deserialize<'de> for PositiveFlops {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        if v.is_finite() && v > 0.0 {
            Ok(PositiveFlops(v))
        } else {
            Err(serde::de::Error::custom(format!(
                "{v} is not a positive number of FLOPs"
            )))
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Utilisation {
    pub time_ms: f64,
    pub flops: f64,
    pub matmul_flops: f64,
    /// Matmul FLOPs less the recomputed ones.
    pub model_flops: f64,
    /// The math units the matmul FLOPs ran on (`bf16`, `bf16+f32`, ...).
    pub math: Option<String>,
    /// The peak MFU and HFU divide by: the dense tensor math the model's matmuls map to,
    /// `bf16` (for f32, tf32, bf16 and f16 work) or `fp8` (when most matmul FLOPs are fp8).
    pub mfu_math: Option<String>,
    pub tflops: f64,
    pub mfu_percent: Option<f64>,
    pub hfu_percent: Option<f64>,
    /// The matmul FLOPs executed beyond the model's, by why (`rematerialised`,
    /// `attention_scores`, `dense_groups`), and those of ragged dots whose groups are
    /// unknown (`unknown_groups`: counted as model FLOPs).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub beyond_model: BTreeMap<Beyond, f64>,
}

/// FLOPs of a module or of the steady state, by the unit they run on.
#[derive(Default)]
pub(super) struct Flops {
    /// Matmul FLOPs by math unit: all of them, and the recomputed ones.
    pub(super) by_math: BTreeMap<Math, (f64, f64)>,
    /// FLOPs outside matmuls (the vector units').
    pub(super) vector: f64,
    /// See [`Utilisation::beyond_model`].
    pub(super) beyond: BTreeMap<Beyond, f64>,
}

impl Flops {
    pub(super) fn scaled(&self, k: f64) -> Flops {
        Flops {
            by_math: self
                .by_math
                .iter()
                .map(|(m, (a, r))| (*m, (a * k, r * k)))
                .collect(),
            vector: self.vector * k,
            beyond: self.beyond.iter().map(|(b, f)| (*b, f * k)).collect(),
        }
    }

    pub(super) fn matmul(&self) -> f64 {
        self.by_math.values().map(|v| v.0).sum()
    }

    pub(super) fn add(&mut self, o: &Flops) {
        for (m, (a, r)) in &o.by_math {
            let e = self.by_math.entry(*m).or_default();
            e.0 += a;
            e.1 += r;
        }
        self.vector += o.vector;
        for (b, f) in &o.beyond {
            *self.beyond.entry(*b).or_default() += f;
        }
    }
}

/// The dense tensor math whose peak MFU and HFU divide by: fp8 when most matmul FLOPs are
/// fp8 (int8, f64 likewise), bf16 otherwise — f32 and tf32 work included, which could have run
/// on bf16 tensor cores (PaLM's MFU, as MaxText reports it).
pub(super) fn mfu_math(dominant: Option<Math>) -> Option<Math> {
    Some(match dominant? {
        m @ (Math::Fp8 | Math::Int8 | Math::F64) => m,
        _ => Math::Bf16,
    })
}

/// Utilisation over `time_ns`: MFU = model FLOPs ÷ (time × the peak of [`mfu_math`]), so an
/// f32 program at its own units' peak reads low, as it runs far below what the GPU's tensor
/// cores do; HFU adds the recomputed FLOPs, and the vector FLOPs at the vector peak.
pub(super) fn utilisation(f: &Flops, time_ns: f64, peaks: Option<&PeaksUsed>) -> Utilisation {
    let dominant = f
        .by_math
        .iter()
        .max_by(|a, b| a.1.0.total_cmp(&b.1.0))
        .map(|(m, _)| *m);
    let reference = mfu_math(dominant);
    let matmul: f64 = f.by_math.values().map(|v| v.0).sum();
    let model: f64 = f.by_math.values().map(|v| v.0 - v.1).sum();
    let secs = time_ns * 1e-9;
    let ideal = |model_only: bool| -> Option<f64> {
        let p = peaks?;
        let peak = p.tflops.get(&reference?)? * 1e12;
        let mut t = if model_only { model } else { matmul } / peak;
        if !model_only && f.vector > 0.0 {
            t += f.vector / (p.compute(None)? * 1e12);
        }
        Some(t)
    };
    let of_time = |t: Option<f64>| {
        t.filter(|_| secs > 0.0 && dominant.is_some())
            .map(|t| 100.0 * t / secs)
    };
    let flops = matmul + f.vector;
    Utilisation {
        time_ms: time_ns * MS,
        flops,
        matmul_flops: matmul,
        model_flops: model,
        math: match f.by_math.len() {
            0 => None,
            1 => dominant.map(|m| math_name(Some(m)).to_string()),
            _ => Some(
                f.by_math
                    .keys()
                    .map(|m| math_name(Some(*m)))
                    .collect::<Vec<_>>()
                    .join("+"),
            ),
        },
        mfu_math: reference.map(|m| math_name(Some(m)).to_string()),
        tflops: if secs > 0.0 { flops / secs / 1e12 } else { 0.0 },
        mfu_percent: of_time(ideal(true)),
        hfu_percent: of_time(ideal(false)),
        beyond_model: f.beyond.clone(),
    }
}

/// The notes on FLOPs the step's utilisation does not count as they ran: executed beyond the
/// model's (HFU above MFU, and why), of ragged dots whose groups are unknown, and of custom
/// kernels whose FLOPs are unknown (`unknown`: their ops' names and ms, longest first).
pub(super) fn flops_notes(
    step: &Utilisation,
    unknown: &[(&str, f64)],
    costed_ms: f64,
) -> Vec<String> {
    let mut notes = Vec::new();
    let extra: f64 = step
        .beyond_model
        .iter()
        .filter(|(b, _)| **b != Beyond::UnknownGroups)
        .map(|(_, f)| f)
        .sum();
    if let (Some(h), Some(m)) = (step.hfu_percent, step.mfu_percent)
        && extra > 0.1 * step.model_flops
    {
        let causes: Vec<String> = step
            .beyond_model
            .iter()
            .filter(|(b, _)| **b != Beyond::UnknownGroups)
            .map(|(b, f)| format!("{:.3e} {}", f, b.describe()))
            .collect();
        notes.push(format!(
            "HFU {h:.1} % against MFU {m:.1} %: the GPU executes {:.2}x the model's matmul \
             FLOPs, {:.3e} a step beyond them: {}",
            step.matmul_flops / step.model_flops.max(f64::MIN_POSITIVE),
            extra,
            causes.join("; ")
        ));
    }
    if let Some(f) = step.beyond_model.get(&Beyond::UnknownGroups) {
        notes.push(format!(
            "{f:.3e} FLOPs a step of ragged_dot GEMMs whose groups the HLO shapes do not show \
             are counted as model FLOPs: MFU may be too high"
        ));
    }
    if let Some((first, _)) = unknown.first() {
        let ms: f64 = unknown.iter().map(|r| r.1).sum();
        notes.push(format!(
            "{} op(s) are custom kernels whose FLOPs the HLO does not say (Pallas, Triton, \
             Mosaic, foreign functions), {} ({} of the costed time), e.g. {}: their bytes are \
             counted, their FLOPs are not (MFU and HFU leave them out)",
            unknown.len(),
            duration_ms(ms),
            crate::units::percent(ms / costed_ms.max(f64::MIN_POSITIVE)),
            first
        ));
    }
    notes
}
