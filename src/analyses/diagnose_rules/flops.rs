//! The wasted-FLOPs rule: matmul work the GPU executes beyond the model's (docs/diagnosis.md,
//! "wasted-flops"), from `roofline`'s step: its model FLOPs, its executed ones and what the
//! difference is made of (`beyond_model`).
//!
//! A flash attention backward's recomputed scores are the price of its memory savings and not
//! counted here. Rematerialisation is counted only when the step's buffers leave room to keep
//! what it recomputes (under half of the device's memory); a ragged dot computed densely over
//! all of its groups always is.

use super::model::{Context, Inputs, Outcome, ev, num, remedy, rows};
use crate::units::duration_ms;

/// Below this share of the model's FLOPs executed beyond them, nothing is reported.
const WASTED_SHARE: f64 = 0.25;
/// Rematerialisation is needless while the buffers take less than this share of the device.
const ROOM: f64 = 0.5;

pub(super) fn wasted_flops(ins: &Inputs, cx: &Context) -> Outcome {
    let Some(r) = &ins.roofline else {
        return Outcome::NoData("no roofline output".into());
    };
    let step = &r["step"];
    let (Some(model), Some(flops), Some(period), Some(steps)) = (
        num(step, &["model_flops"]),
        num(step, &["flops"]),
        num(step, &["period_ms"]),
        num(step, &["steps"]),
    ) else {
        return Outcome::NoData("no step with matmul FLOPs".into());
    };
    let beyond = |k: &str| num(step, &["beyond_model", k]).unwrap_or(0.0);
    let total = num(r, &["peaks", "memory_bytes"]);
    let need = ins.memory.as_ref().and_then(|m| {
        rows(m, "modules")
            .iter()
            .filter_map(|x| num(x, &["allocated_bytes"]))
            .reduce(f64::max)
    });
    let room = matches!((need, total), (Some(n), Some(t)) if n < ROOM * t);
    let dense = beyond("dense_groups");
    let remat = if room { beyond("rematerialised") } else { 0.0 };
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
            num(step, &["matmul_flops"]).unwrap_or(flops),
            model,
            num(step, &["matmul_flops"]).unwrap_or(flops) / model,
            crate::units::pct(num(step, &["mfu_percent"]).unwrap_or(0.0)),
            crate::units::pct(num(step, &["hfu_percent"]).unwrap_or(0.0)),
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
            num(step, &["matmul_flops"]).unwrap_or(flops) / model,
            wasted
        ),
        at_stake,
        evidence,
        remedies,
    )
}
