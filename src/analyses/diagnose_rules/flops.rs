//! The rules on FLOPs spent where fewer would do. The wasted-FLOPs rule: matmul work the GPU executes beyond the model's (docs/diagnosis.md,
//! "wasted-flops"), from `roofline`'s step: its model FLOPs, its executed ones and what the
//! difference is made of (`beyond_model`).
//!
//! A flash attention backward's recomputed scores are the price of its memory savings and not
//! counted here. Rematerialisation is counted only when the step's buffers leave room to keep
//! what it recomputes (under half of the device's memory); a ragged dot computed densely over
//! all of its groups always is.
//!
//! The attention rule: attention written out in XLA ops (the score einsums, a softmax, masks)
//! where cuDNN's fused attention applies: its time against what the fused kernel would take
//! for the same matmul FLOPs at the rate it reaches (docs/diagnosis.md, "attention").

use super::finding::{Context, Inputs, Outcome, ev, remedy};
use crate::analyses::ops::TopThunk;
use crate::formats::hlo::cost::{Beyond, Math};
use crate::units::duration_ms;

/// Below this share of the model's FLOPs executed beyond them, nothing is reported.
const WASTED_SHARE: f64 = 0.25;
/// Rematerialisation is needless while the buffers take less than this share of the device.
const ROOM: f64 = 0.5;

pub(super) fn wasted_flops(ins: &Inputs, cx: &Context) -> Outcome {
    let Some(r) = &ins.roofline else {
        return Outcome::NoData("no roofline output".into());
    };
    let Some(step) = &r.step else {
        return Outcome::NoData("no step with matmul FLOPs".into());
    };
    let u = &step.use_;
    let (model, flops, period, steps) = (u.model_flops, u.flops, step.period_ms, step.steps);
    let beyond = |k: Beyond| u.beyond_model.get(&k).copied().unwrap_or(0.0);
    let total = r.peaks.as_ref().and_then(|p| p.memory_bytes);
    let need = ins.memory.as_ref().and_then(|m| {
        m.modules
            .iter()
            .filter_map(|x| x.allocated_bytes.map(|b| b as f64))
            .reduce(f64::max)
    });
    let room = matches!((need, total), (Some(n), Some(t)) if n < ROOM * t);
    let dense = beyond(Beyond::DenseGroups);
    let remat = if room {
        beyond(Beyond::Rematerialised)
    } else {
        0.0
    };
    let wasted = dense + remat;
    if model <= 0.0 || wasted < WASTED_SHARE * model {
        return Outcome::Quiet(format!(
            "{:.3e} of {:.3e} matmul FLOPs a step beyond the model's that a change could \
             avoid",
            wasted, model
        ));
    }
    // The wasted FLOPs' time: their share of the step's FLOPs, of its period, over every
    // step and device.
    let per_step = period * wasted / flops.max(f64::MIN_POSITIVE);
    let at_stake = per_step * steps * cx.devices as f64;
    let mut evidence = vec![ev(
        "roofline",
        format!(
            "a step executes {:.3e} matmul FLOPs for {:.3e} of the model's ({:.2}x); MFU {} %, \
             HFU {} %",
            u.matmul_flops,
            model,
            u.matmul_flops / model,
            crate::units::pct(u.mfu_percent.unwrap_or(0.0)),
            crate::units::pct(u.hfu_percent.unwrap_or(0.0)),
        ),
    )];
    let mut remedies = Vec::new();
    if dense > 0.0 {
        evidence.push(ev(
            "roofline",
            format!(
                "{dense:.3e} a step: ragged_dot lowered to dense GEMMs over all groups, every \
                 row times every group's weights ({} a step at the step's rate)",
                duration_ms(period * dense / flops)
            ),
        ));
        remedies.push(remedy(
            "Run the experts as a grouped GEMM: a grouped-matmul kernel (a Pallas or Triton \
             grouped matmul, as MaxText's megablox `gmm`) in place of jax.lax.ragged_dot where \
             XLA lowers it densely",
            "a grouped GEMM multiplies each row by its own group's weights only: 1/G of the \
             dense lowering's FLOPs and none of its masking",
        ));
        remedies.push(remedy(
            "Or dispatch tokens to capacity-sized expert blocks (GShard / Switch style) and \
             run one batched einsum over the experts",
            "padding to a capacity factor of 1.25 executes 1.25x the routed FLOPs, not G x",
        ));
    }
    if remat > 0.0 {
        evidence.push(ev(
            "roofline",
            format!(
                "{remat:.3e} a step recomputed by rematerialisation, while the step's buffers \
                 take under half of the device's memory"
            ),
        ));
        remedies.push(remedy(
            "Save more in the forward pass: a jax.checkpoint policy such as \
             jax.checkpoint_policies.dots_saveable, or no checkpoint on layers that fit",
            "rematerialisation trades FLOPs for memory; with memory to spare the trade only \
             costs time",
        ));
    }
    cx.finding(
        "wasted-flops",
        format!(
            "The GPU executes {:.2}x the model's matmul FLOPs: {:.3e} a step a change could \
             avoid",
            u.matmul_flops / model,
            wasted
        ),
        at_stake,
        evidence,
        remedies,
    )
}

/// The einsums of attention written out in XLA ops: the scores Q·Kᵀ and their product with V,
/// as JAX's `jax.nn.dot_product_attention` (its XLA path), Flax's `dot_product_attention` and
/// common hand-written forms spell them.
const ATTENTION_EINSUMS: &[&str] = &[
    "BTNH,BSNH->BNTS",
    "BNTS,BSNH->BTNH",
    "...qhd,...khd->...hqk",
    "...hqk,...khd->...qhd",
    "bqhd,bkhd->bhqk",
    "bhqk,bkhd->bqhd",
    "bhqd,bhkd->bhqk",
    "bhqk,bhkd->bhqd",
    "bqnh,bknh->bnqk",
    "bnqk,bknh->bqnh",
];

/// The share of the dense bf16 peak cuDNN's flash attention reaches, forward and backward
/// (measured on H200: `tests/data/models/gpt-cudnn`, 2048-token causal attention, 42 %).
const FUSED_ATTENTION_RATE: f64 = 0.40;

pub(super) fn attention(ins: &Inputs, cx: &Context) -> Outcome {
    let (Some(ops), Some(r)) = (&ins.ops, &ins.roofline) else {
        return Outcome::NoData("no ops or roofline output".into());
    };
    let thunks = &ops.top_thunks;
    // The score and value matmuls themselves (a transpose under the einsum's name is not).
    let einsum = |t: &TopThunk| {
        let name = t.op_name.as_str();
        name.rsplit('/').next() == Some("dot_general")
            && ATTENTION_EINSUMS.iter().any(|e| name.contains(e))
    };
    // The attention calls: the source lines of the score einsums; every op of those lines
    // (softmax, masks, transposes) is the attention's.
    let lines: Vec<&str> = thunks
        .iter()
        .filter(|t| einsum(t))
        .map(|t| t.source.as_str())
        .filter(|s| !s.is_empty())
        .collect();
    if lines.is_empty() {
        return Outcome::Quiet("no attention written out as XLA einsums".into());
    }
    let of_attention = |t: &TopThunk| einsum(t) || lines.contains(&t.source.as_str());
    let ms: f64 = thunks
        .iter()
        .filter(|t| of_attention(t))
        .map(|t| t.total_ms)
        .sum();
    // The einsums' FLOPs (the roofline's op rows, per execution).
    let einsums: Vec<(&str, &str)> = thunks
        .iter()
        .filter(|t| einsum(t))
        .map(|t| (t.module.as_str(), t.thunk.as_str()))
        .collect();
    let flops_of = |which: &[(&str, &str)]| -> f64 {
        r.ops
            .iter()
            .filter(|o| which.contains(&(o.module.as_str(), o.thunk.as_str())))
            .map(|o| o.flops * o.executions as f64)
            .sum()
    };
    let flops = flops_of(&einsums);
    // The program's attention in half precision: most of its matmul FLOPs in bf16/f16 (a
    // backward's f32 GEMM fusions aside).
    let half: f64 = r
        .ops
        .iter()
        .filter(|o| einsums.contains(&(o.module.as_str(), o.thunk.as_str())))
        .filter(|o| matches!(o.math.as_str(), "bf16" | "f16"))
        .map(|o| o.flops * o.executions as f64)
        .sum();
    let math_ok = half >= 0.5 * flops_of(&einsums);
    let Some(peak) = r
        .peaks
        .as_ref()
        .and_then(|p| p.tflops.get(&Math::Bf16).copied())
    else {
        return Outcome::NoData("the GPU's peaks are not known".into());
    };
    if !math_ok || flops <= 0.0 {
        return Outcome::Quiet(
            "attention written out in XLA ops, but not in bf16/f16 (cuDNN's fused attention \
             takes bf16, f16 and fp8)"
                .into(),
        );
    }
    let fused_ms = flops / (FUSED_ATTENTION_RATE * peak * 1e12) * 1e3;
    let at_stake = (ms - fused_ms).max(0.0);
    let evidence = vec![
        ev(
            "ops",
            format!(
                "attention at {} written out in XLA ops (score einsums, softmax, masks): {} in \
                 all",
                lines
                    .iter()
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", "),
                duration_ms(ms)
            ),
        ),
        ev(
            "roofline",
            format!(
                "its score and value matmuls do {flops:.3e} FLOPs: {} at the {} % of the bf16 \
                 peak cuDNN's flash attention reaches (no masked blocks skipped: an upper bound)",
                duration_ms(fused_ms),
                FUSED_ATTENTION_RATE * 100.0
            ),
        ),
    ];
    cx.finding(
        "attention",
        format!(
            "Attention runs as XLA ops ({} of the steady state); cuDNN's fused attention would \
             take about {}",
            crate::units::pct(cx.percent(ms)) + " %",
            duration_ms(fused_ms)
        ),
        at_stake,
        evidence,
        vec![
            remedy(
                "Call jax.nn.dot_product_attention(q, k, v, ..., implementation='cudnn') (bf16 or \
                 f16, head size a multiple of 8 up to 256, an Ampere or newer GPU), with \
                 is_causal=True or a mask in place of a masked softmax of your own",
                "one fused kernel computes the scores block by block in on-chip memory: no S×S \
                 matrix written to HBM, and causal blocks above the diagonal skipped",
            ),
            remedy(
                "In Flax, pass attention_fn=jax.nn.dot_product_attention (or use \
                 flax.nnx.dot_product_attention's cuDNN path)",
                "Flax's default attention is written out in XLA ops",
            ),
        ],
    )
}
