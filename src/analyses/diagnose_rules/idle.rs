//! Rules on where the GPU waits: the capture itself, idle time between and inside modules.

use super::finding::{
    Context, Evidence, Finding, Inputs, Outcome, Severity, category_ms, count, ev, pc, remedy,
};
use crate::analyses::summary::ModuleRow;
use crate::units::{duration_ms, sig3};

/// Too little to judge: no steady state, or too few steps.
pub(super) fn capture(ins: &Inputs, cx: &Context) -> Outcome {
    let rerun = remedy(
        "Capture at least 5 steps after the warm-up: `nsys-jax-pipe run --capture-range=cudaProfilerApi \
         --capture-range-end=stop -- python train.py` with jax.profiler.start_trace-free code that \
         calls cudaProfilerStart after the first steps and cudaProfilerStop after the last",
        "the steady state is what the step costs once compiled and warm; the rules judge only it",
    );
    let Some(ops) = &ins.ops else {
        return Outcome::Fired(Finding {
            rule: "capture".into(),
            severity: Severity::Critical,
            title: "No GPU activity of XLA modules in the capture: nothing to judge".into(),
            at_stake_ms: 0.0,
            percent: 0.0,
            evidence: vec![ev(
                "ops",
                "the ops analysis has no steady state (no module ran on the GPU in the capture)"
                    .into(),
            )],
            remedies: vec![rerun],
        });
    };
    if let Some(ms) = cx.compile_only_ms {
        return Outcome::NoData(format!(
            "a compile-only capture (no module ran on the GPU; XLA compiled for {}): the \
             compilation rules judge it",
            duration_ms(ms)
        ));
    }
    if cx.steady_ms.is_none() || ops.totals.modules_ms <= 0.0 {
        return Outcome::Fired(Finding {
            rule: "capture".into(),
            severity: Severity::Critical,
            title: "No steady state: no module ran on the GPU after the warm-up".into(),
            at_stake_ms: 0.0,
            percent: 0.0,
            evidence: vec![ev("ops", "steady-state module time 0".into())],
            remedies: vec![rerun],
        });
    }
    match super::finding::steps(ins) {
        Some(s) if s < 3.0 => Outcome::Fired(Finding {
            rule: "capture".into(),
            severity: Severity::Warning,
            title: format!(
                "Only {} steps in the steady state: too few to judge step-to-step variation",
                count(s)
            ),
            at_stake_ms: 0.0,
            percent: 0.0,
            evidence: vec![ev(
                "roofline",
                format!("{} executions of the step module per device", count(s)),
            )],
            remedies: vec![rerun],
        }),
        Some(s) => Outcome::Quiet(format!("{} steps in the steady state", count(s))),
        None => Outcome::Quiet("a steady state (its step not known)".into()),
    }
}

pub(super) fn host_bound(ins: &Inputs, cx: &Context) -> Outcome {
    let Some(ops) = &ins.ops else {
        return Outcome::NoData("no ops output".into());
    };
    let (Some(idle), Some(t)) = (category_ms(ops, "idle between modules"), cx.steady_ms) else {
        return Outcome::NoData("no steady state".into());
    };
    let mut evidence = vec![ev(
        "ops",
        format!(
            "the GPU idles {} between module executions: {} of the steady state ({}, summed over devices)",
            duration_ms(idle),
            pc(100.0 * idle / t),
            duration_ms(t)
        ),
    )];
    // The program's own ranges in which the host works without the GPU (an input pipeline):
    // the idle they cover is this rule's, copies after them or not.
    let host = super::finding::host_ranges(ins);
    let in_ranges: f64 = host.iter().map(|r| r.total_ms).sum();
    for r in host.iter().take(3) {
        evidence.push(ev(
            "ranges",
            format!(
                "the host spends {} in `{}` per call ({} calls, {} in all) with {} of GPU work",
                duration_ms(r.mean_ms),
                r.name,
                count(r.calls),
                duration_ms(r.total_ms),
                pc(100.0 * r.busy_of_wall)
            ),
        ));
    }
    // Idle time right before host-to-device copies is the copies' finding, less what the
    // host's own ranges explain.
    let waiting = (super::hardware::waiting_for_copies(ops) - in_ranges).max(0.0);
    if waiting > 0.0 {
        evidence.push(ev(
            "ops",
            format!(
                "of which {} just before host-to-device copies (left to host-device-copies)",
                duration_ms(waiting)
            ),
        ));
    }
    // Idle time while the host compiled is the compilation rules' finding.
    let compiling = super::compile::compiling_in_steady(ins)
        .unwrap_or(0.0)
        .min((idle - waiting).max(0.0));
    if compiling > 0.0 {
        evidence.push(ev(
            "compilation",
            format!(
                "of which {} while the host compiled (left to recompilation and compile-time)",
                duration_ms(compiling)
            ),
        ));
    }
    // Idle time on a rank late to its steps (its host busy before the step) is the
    // stragglers rule's: the others wait for it.
    let late = ins
        .stragglers
        .as_ref()
        .and_then(super::collectives::late_rank)
        .map_or(0.0, |l| l.late_ms)
        .min((idle - waiting - compiling).max(0.0));
    if late > 0.0 {
        evidence.push(ev(
            "stragglers",
            format!(
                "of which {} on a rank late to its steps (left to stragglers)",
                duration_ms(late)
            ),
        ));
    }
    let at_stake = (idle - waiting - compiling - late).max(0.0);
    // The short-module pattern: most executions are of modules that run for microseconds.
    let modules = ins.summary.as_ref().map_or(&[][..], |s| &s.modules[..]);
    let executions: f64 = modules.iter().map(|m| m.executions as f64).sum();
    let mut tiny: Vec<&ModuleRow> = modules
        .iter()
        .filter(|m| m.duration_ms_mean < TINY_MODULE_MS)
        .collect();
    tiny.sort_by(|a, b| b.executions.cmp(&a.executions));
    let tiny_runs: f64 = tiny.iter().map(|m| m.executions as f64).sum();
    let dispatch = tiny_runs >= 100.0 && tiny_runs >= 0.5 * executions;
    for m in tiny.iter().take(if dispatch { 3 } else { 0 }) {
        evidence.push(Evidence {
            module: Some(m.name.clone()),
            ..ev(
                "summary",
                format!(
                    "{}: {} executions, {} each",
                    m.name,
                    count(m.executions as f64),
                    duration_ms(m.duration_ms_mean)
                ),
            )
        });
    }
    if let Some(s) = super::finding::steps(ins).filter(|&s| s > 0.0) {
        evidence.push(ev(
            "summary",
            format!(
                "module executions per step and device: {} ({} steps)",
                count((executions / s / cx.devices as f64 * 100.0).round() / 100.0),
                count(s)
            ),
        ));
    }
    let input_bound = host
        .first()
        .filter(|_| in_ranges >= 0.5 * at_stake && at_stake > 0.0);
    let title = if let Some(r) = input_bound {
        format!(
            "Input-bound: the host spends {} per call in `{}` with no GPU work; the GPU idles {} \
             of the steady state",
            duration_ms(r.mean_ms),
            r.name,
            pc(100.0 * idle / t)
        )
    } else if dispatch {
        format!(
            "Host-bound: the GPU idles {} of the time between {} executions of tiny modules",
            pc(100.0 * idle / t),
            count(tiny_runs)
        )
    } else {
        format!(
            "The GPU idles {} of the steady state between module executions",
            pc(100.0 * idle / t)
        )
    };
    let mut remedies = vec![
        remedy(
            "Do not read device values inside the loop (float(x), x.item(), np.asarray(x), print): \
             keep metrics on the device and fetch them every N steps",
            "a device-to-host read blocks Python until the GPU is done, so the next dispatch \
             starts only then and the GPU waits for Python",
        ),
        remedy(
            "Move the loop into one jitted function (jax.lax.scan or lax.fori_loop over the \
             small steps) or jit a larger step",
            "each jitted call costs host time to dispatch; a module that runs for microseconds \
             cannot cover it, one large module can",
        ),
        remedy(
            "Keep block_until_ready and host syncs out of the step; prefetch the next batch \
             (jax.device_put ahead of use, a prefetching input pipeline)",
            "JAX dispatches asynchronously: without a sync the host runs ahead and the GPU \
             always has the next module queued",
        ),
        remedy(
            "Look at the host threads in the report (`nsys-jax-pipe` keeps the .nsys-rep in the \
             archive) for data loading, checkpointing or logging between steps",
            "idle between modules is time the host did not give the GPU work; the CPU timeline \
             says what it did instead",
        ),
    ];
    if input_bound.is_some() {
        remedies.insert(
            0,
            remedy(
                "Prepare batches ahead of the step: a background thread (or grain / tf.data with \
                 prefetch) filling a queue of ready batches, and jax.device_put of the next batch \
                 before the current step is waited for",
                "the GPU then runs the step while the host makes the next batch; the step takes \
                 the longer of the two instead of their sum",
            ),
        );
        remedies.truncate(3);
    } else if !dispatch {
        remedies.swap(0, 2);
    }
    cx.finding("host-bound", title, at_stake, evidence, remedies)
}

/// A module shorter than this [ms] cannot cover the cost of dispatching it.
const TINY_MODULE_MS: f64 = 0.05;

pub(super) fn idle_in_modules(ins: &Inputs, cx: &Context) -> Outcome {
    let Some(ops) = &ins.ops else {
        return Outcome::NoData("no ops output".into());
    };
    let Some(idle) = category_ms(ops, "idle in modules") else {
        return Outcome::NoData("no steady state".into());
    };
    let mut evidence = vec![ev(
        "ops",
        format!(
            "gaps between the thunks of modules: {} ({})",
            duration_ms(idle),
            pc(cx.percent(idle))
        ),
    )];
    let mut modules: Vec<&ModuleRow> = ins
        .summary
        .as_ref()
        .map_or(&[][..], |s| &s.modules[..])
        .iter()
        .collect();
    modules.sort_by(|a, b| b.duration_ms_sum.total_cmp(&a.duration_ms_sum));
    for m in modules.iter().take(2) {
        let (d, k) = (m.duration_ms_mean, m.thunks_mean);
        if k > 0.0 {
            evidence.push(Evidence {
                module: Some(m.name.clone()),
                ..ev(
                    "summary",
                    format!(
                        "{}: {} thunks in {}, {} per thunk",
                        m.name,
                        sig3(k),
                        duration_ms(d),
                        duration_ms(d / k)
                    ),
                )
            });
        }
    }
    let remedies = vec![
        remedy(
            "Let XLA run the module's kernels as CUDA graphs (command buffers): \
             XLA_FLAGS=--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN \
             --xla_gpu_graph_min_graph_size=1",
            "a graph launches all its kernels at once; kernel-by-kernel launches leave the GPU \
             waiting for the host between small kernels",
        ),
        remedy(
            "Give the GPU larger kernels: a larger batch per device, fewer tiny ops (fuse \
             elementwise work, avoid many small slices and concatenations)",
            "a kernel that runs for microseconds is dominated by its launch latency",
        ),
    ];
    cx.finding(
        "idle-in-modules",
        format!(
            "The GPU idles {} of the steady state between the kernels of a module",
            pc(cx.percent(idle))
        ),
        idle,
        evidence,
        remedies,
    )
}
