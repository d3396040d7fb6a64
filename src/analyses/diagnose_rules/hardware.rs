//! Rules on how the hardware is used: matmul precision, host-device copies.

use serde_json::Value;

use super::finding::{
    Context, Evidence, Inputs, Outcome, count, ev, num, pc, remedy, rows, source_of, text,
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
            source: source_of(ins, text(o, "module"), text(o, "thunk")),
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

/// The time devices idle just before host-to-device copies between modules [ms] (`ops`'
/// transfers).
pub(super) fn waiting_for_copies(ops: &Value) -> f64 {
    ops.get("transfers")
        .filter(|t| t["measured"] == true)
        .map_or(0.0, |t| {
            rows(t, "by_kind")
                .iter()
                .filter(|k| text(k, "kind") == "HtoD")
                .filter_map(|k| num(k, &["idle_before_ms"]))
                .sum()
        })
}

pub(super) fn host_device_copies(ins: &Inputs, cx: &Context) -> Outcome {
    let Some(ops) = &ins.ops else {
        return Outcome::NoData("no ops output".into());
    };
    let Some(t) = ops.get("transfers").filter(|t| t["measured"] == true) else {
        return Outcome::NoData(
            "the archive does not say which copies ran between modules (an nsys-jax archive, \
             or one made before this was recorded: analyze its .nsys-rep again)"
                .into(),
        );
    };
    let host: Vec<&Value> = rows(t, "by_kind")
        .iter()
        .filter(|k| matches!(text(k, "kind"), "HtoD" | "DtoH"))
        .collect();
    if host.is_empty() {
        return Outcome::Quiet("no copy between host and device between modules".into());
    }
    let copying: f64 = host.iter().filter_map(|k| num(k, &["ms"])).sum();
    // The device idles while the host prepares a copy it then waits for (a pageable
    // array's staging, making the array): prefetching hides that too.
    // Less what the program's own host ranges explain (the host-bound rule's).
    let in_ranges: f64 = super::finding::host_ranges(ins)
        .iter()
        .map(|r| r.total_ms)
        .sum();
    let waiting = (waiting_for_copies(ops) - in_ranges).max(0.0);
    let ms = copying + waiting;
    let steps = ins
        .roofline
        .as_ref()
        .and_then(|r| num(r, &["step", "steps"]))
        .filter(|&s| s > 0.0);
    let mut evidence = Vec::new();
    for k in &host {
        let (n, b) = (
            num(k, &["count"]).unwrap_or(0.0),
            num(k, &["bytes"]).unwrap_or(0.0),
        );
        let per_step = steps.map_or(String::new(), |s| {
            format!(", {} per step and device", bytes(b / s / cx.devices as f64))
        });
        evidence.push(ev(
            "ops",
            format!(
                "{}: {} copies, {}{per_step}, {} between modules at {}",
                text(k, "kind"),
                count(n),
                bytes(b),
                duration_ms(num(k, &["ms"]).unwrap_or(0.0)),
                num(k, &["gb_s"]).map_or("—".into(), |g| format!("{} GB/s", sig3(g)))
            ),
        ));
    }
    if waiting > 0.0 {
        evidence.push(ev(
            "ops",
            format!(
                "the GPU idles {} just before the host-to-device copies: the host preparing \
                 them (a pageable array's staging copy, making the array)",
                duration_ms(waiting)
            ),
        ));
    }
    let dtoh = host.iter().any(|k| text(k, "kind") == "DtoH");
    let mut remedies = vec![
        remedy(
            "Copy the next batch while this step runs: jax.device_put the next input before \
             calling the step (double buffering), or a prefetching input pipeline",
            "a copy the step waits for runs alone on the GPU; issued a step ahead it overlaps \
             the previous step's computation",
        ),
        remedy(
            "Keep the loop's data on the device: jax.Arrays rather than numpy arrays as state \
             and inputs, and donated buffers (jax.jit(..., donate_argnums=...))",
            "every numpy argument is copied to the device at every call",
        ),
        remedy(
            "Copy from pinned host memory (memory_kind='pinned_host', or a pinned staging \
             buffer) when data must move every step",
            "pageable memory is copied through a staging buffer at a fraction of the link's \
             bandwidth; the measured GB/s says which",
        ),
    ];
    if dtoh {
        remedies.push(remedy(
            "Read results back less often: keep metrics on the device and fetch them every N steps",
            "each device-to-host read is a copy the host then waits for",
        ));
    }
    cx.finding(
        "host-device-copies",
        format!(
            "Copies between host and device, and the waits for them, take {} of the steady state",
            pc(cx.percent(ms))
        ),
        ms,
        evidence,
        remedies,
    )
}
