//! Rules on how the hardware is used: matmul precision, memory, host-device copies.

use serde_json::Value;

use super::model::{
    Context, Evidence, Finding, Inputs, Outcome, Severity, ev, num, pc, remedy, rows, text,
};
use crate::units::{bytes, duration_ms, sig3};

pub(super) fn precision(ins: &Inputs, cx: &Context) -> Outcome {
    let Some(r) = &ins.roofline else {
        return Outcome::NoData("no roofline output".into());
    };
    let f32_ops: Vec<&Value> = rows(r, "ops")
        .iter()
        .filter(|o| text(o, "math") == "f32" && num(o, &["flops"]).unwrap_or(0.0) > 0.0)
        .collect();
    if rows(r, "ops").is_empty() {
        return Outcome::NoData("no costed ops".into());
    }
    if f32_ops.is_empty() {
        return Outcome::Quiet("no matmul or convolution on the FP32 units".into());
    }
    let peak = |m: &str| r.get("peaks").and_then(|p| num(p, &["tflops", m]));
    let time: f64 = f32_ops.iter().filter_map(|o| num(o, &["time_ms"])).sum();
    // At the default precision these run on TF32 tensor cores: the time back is what the
    // faster unit would save at the same efficiency.
    let (at_stake, vs) = match (peak("f32"), peak("tf32")) {
        (Some(f), Some(t)) if t > f => (
            time * (1.0 - f / t),
            format!(
                "TF32 tensor cores peak at {} TFLOP/s, FP32 units at {}",
                sig3(t),
                sig3(f)
            ),
        ),
        _ => (time, "the GPU's peaks are not known".to_string()),
    };
    let mut evidence: Vec<Evidence> = f32_ops
        .iter()
        .take(4)
        .map(|o| Evidence {
            module: Some(text(o, "module").to_string()),
            op: Some(text(o, "thunk").to_string()),
            ..ev(
                "roofline",
                format!(
                    "{} in {}: {} at {} TFLOP/s on the FP32 units ({} of their roof)",
                    text(o, "thunk"),
                    text(o, "module"),
                    duration_ms(num(o, &["time_ms"]).unwrap_or(0.0)),
                    sig3(num(o, &["tflops"]).unwrap_or(0.0)),
                    num(o, &["roof_percent"]).map_or("—".into(), pc)
                ),
            )
        })
        .collect();
    evidence.push(ev("roofline", vs));
    cx.finding(
        "precision",
        format!("Matmuls in full f32 (HIGHEST precision) take {} of the steady state", pc(cx.percent(time))),
        at_stake,
        evidence,
        vec![
            remedy(
                "Drop precision=HIGHEST (jax.lax.Precision.HIGHEST, jax.default_matmul_precision('highest'), \
                 jax_default_matmul_precision=highest) where full f32 products are not needed",
                "at the default precision XLA runs f32 matmuls on TF32 tensor cores, 8× the FP32 \
                 units' peak on Hopper",
            ),
            remedy(
                "Compute in bf16 with f32 accumulation: cast the operands to jnp.bfloat16 and pass \
                 preferred_element_type=jnp.float32",
                "bf16 tensor cores have twice TF32's peak and halve the bytes moved",
            ),
        ],
    )
}

/// At or above this share of the device's memory the heap leaves no room to grow.
const MEMORY_WARNING: f64 = 85.0;
const MEMORY_CRITICAL: f64 = 95.0;

pub(super) fn memory(ins: &Inputs, _: &Context) -> Outcome {
    let Some(m) = &ins.memory else {
        return Outcome::NoData("no memory output".into());
    };
    let Some(total) = ins
        .roofline
        .as_ref()
        .and_then(|r| num(r, &["peaks", "memory_bytes"]))
    else {
        return Outcome::NoData("the device's memory size is not known".into());
    };
    let Some(top) = rows(m, "modules").iter().max_by(|a, b| {
        num(a, &["peak_bytes"])
            .unwrap_or(0.0)
            .total_cmp(&num(b, &["peak_bytes"]).unwrap_or(0.0))
    }) else {
        return Outcome::NoData("no module heap".into());
    };
    let peak = num(top, &["peak_bytes"]).unwrap_or(0.0);
    let share = 100.0 * peak / total;
    if share < MEMORY_WARNING {
        return Outcome::Quiet(format!(
            "largest heap {} = {} of the device's {}",
            bytes(peak),
            pc(share),
            bytes(total)
        ));
    }
    let mut evidence = vec![Evidence {
        module: Some(text(top, "name").to_string()),
        ..ev(
            "memory",
            format!(
                "{}: heap peak {} = {} of the device's {}",
                text(top, "name"),
                bytes(peak),
                pc(share),
                bytes(total)
            ),
        )
    }];
    for a in rows(top, "at_peak").iter().take(3) {
        evidence.push(Evidence {
            op_name: Some(text(a, "op_name").to_string()),
            ..ev(
                "memory",
                format!(
                    "live at the peak: {} of {}",
                    bytes(num(a, &["bytes"]).unwrap_or(0.0)),
                    text(a, "op_name")
                ),
            )
        });
    }
    Outcome::Fired(Finding {
        rule: "memory".into(),
        severity: if share >= MEMORY_CRITICAL {
            Severity::Critical
        } else {
            Severity::Warning
        },
        title: format!(
            "The heap of {} peaks at {} of the device's memory",
            text(top, "name"),
            pc(share)
        ),
        at_stake_ms: 0.0,
        percent: 0.0,
        evidence,
        remedies: vec![
            remedy(
                "Rematerialise activations: jax.checkpoint (jax.remat) on the layers, with a policy \
                 such as jax.checkpoint_policies.dots_with_no_batch_dims_saveable",
                "recomputing cheap activations in the backward pass frees the memory they hold \
                 between the passes",
            ),
            remedy(
                "Offload to host memory: checkpoint policies that offload (save_and_offload_only_these_names) \
                 or optimizer state in memory_kind='pinned_host'",
                "host memory holds what the step needs rarely, at the cost of PCIe copies",
            ),
            remedy(
                "Shard more (FSDP over more devices) or lower the per-device batch",
                "a heap near the limit leaves no room for a larger batch, and a new shape may not fit",
            ),
        ],
    })
}

pub(super) fn host_device_copies(_: &Inputs, _: &Context) -> Outcome {
    Outcome::NoData(
        "copies between host and device outside XLA modules are not in the frames this build reads"
            .into(),
    )
}
