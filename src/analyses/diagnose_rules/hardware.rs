//! Rules on how the hardware is used: matmul precision, host-device copies.

use super::finding::{Context, Evidence, Inputs, Outcome, count, ev, pc, remedy, source_of};
use crate::analyses::ops::Ops;
use crate::analyses::roofline_model::OpRow;
use crate::analyses::steady_copies::{KindRow, Transfers};
use crate::formats::hlo::cost::Math;
use crate::units::{bytes, duration_ms, sig3};

pub(super) fn precision(ins: &Inputs, cx: &Context) -> Outcome {
    let Some(r) = &ins.roofline else {
        return Outcome::NoData("no roofline output".into());
    };
    let f32_ops: Vec<&OpRow> = r
        .ops
        .iter()
        .filter(|o| o.math == "f32" && o.flops > 0.0)
        .collect();
    if r.ops.is_empty() {
        return Outcome::NoData("no costed ops".into());
    }
    if f32_ops.is_empty() {
        return Outcome::Quiet("no matmul or convolution on the FP32 units".into());
    }
    let peak = |m: Math| r.peaks.as_ref().and_then(|p| p.tflops.get(&m).copied());
    let time: f64 = f32_ops.iter().map(|o| o.time_ms).sum();
    // At the default precision these run on TF32 tensor cores: the time back is what the
    // faster unit would save at the same efficiency.
    let (at_stake, vs) = match (peak(Math::F32), peak(Math::Tf32)) {
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
            module: Some(o.module.clone()),
            op: Some(o.thunk.clone()),
            source: source_of(ins, &o.module, &o.thunk),
            ..ev(
                "roofline",
                format!(
                    "{} in {}: {} at {} TFLOP/s on the FP32 units ({} of their roof)",
                    o.thunk,
                    o.module,
                    duration_ms(o.time_ms),
                    sig3(o.tflops),
                    o.roof_percent.map_or("—".into(), pc)
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
pub(super) fn waiting_for_copies(ops: &Ops) -> f64 {
    measured(ops).map_or(0.0, |t| {
        t.by_kind
            .iter()
            .filter(|k| k.kind == "HtoD")
            .map(|k| k.idle_before_ms)
            .sum()
    })
}

/// The copies between modules, when the archive says which ran.
fn measured(ops: &Ops) -> Option<&Transfers> {
    Some(&ops.transfers).filter(|t| t.measured)
}

pub(super) fn host_device_copies(ins: &Inputs, cx: &Context) -> Outcome {
    let Some(ops) = &ins.ops else {
        return Outcome::NoData("no ops output".into());
    };
    let Some(t) = measured(ops) else {
        return Outcome::NoData(
            "the archive does not say which copies ran between modules (an nsys-jax archive, \
             or one made before this was recorded: analyze its .nsys-rep again)"
                .into(),
        );
    };
    let host: Vec<&KindRow> = t
        .by_kind
        .iter()
        .filter(|k| matches!(k.kind.as_str(), "HtoD" | "DtoH"))
        .collect();
    if host.is_empty() {
        return Outcome::Quiet("no copy between host and device between modules".into());
    }
    let copying: f64 = host.iter().map(|k| k.ms).sum();
    // The device idles while the host prepares a copy it then waits for (a pageable
    // array's staging, making the array): prefetching hides that too.
    // Less what the program's own host ranges explain (the host-bound rule's).
    let in_ranges: f64 = super::finding::host_ranges(ins)
        .iter()
        .map(|r| r.total_ms)
        .sum();
    let waiting = (waiting_for_copies(ops) - in_ranges).max(0.0);
    let ms = copying + waiting;
    let steps = super::finding::steps(ins).filter(|&s| s > 0.0);
    let mut evidence = Vec::new();
    for k in &host {
        let (n, b) = (k.count as f64, k.bytes as f64);
        let per_step = steps.map_or(String::new(), |s| {
            format!(", {} per step and device", bytes(b / s / cx.devices as f64))
        });
        evidence.push(ev(
            "ops",
            format!(
                "{}: {} copies, {}{per_step}, {} between modules at {}",
                k.kind,
                count(n),
                bytes(b),
                duration_ms(k.ms),
                k.gb_s.map_or("—".into(), |g| format!("{} GB/s", sig3(g)))
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
    let dtoh = host.iter().any(|k| k.kind == "DtoH");
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
