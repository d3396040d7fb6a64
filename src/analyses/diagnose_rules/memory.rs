//! The memory rule: the buffers a step holds against the memory JAX's allocator may use
//! (docs/diagnosis.md, "memory").
//!
//! - The limit: JAX's GPU allocator takes `XLA_PYTHON_CLIENT_MEM_FRACTION` of the device's
//!   memory (0.75 unless set; preallocated or, with `XLA_PYTHON_CLIENT_PREALLOCATE=false`,
//!   grown on demand up to the same cap); with `XLA_PYTHON_CLIENT_ALLOCATOR=platform` there is
//!   no pool and the device's whole memory is the limit. The variables come from the run's
//!   record (`run`'s provenance); without one, JAX's defaults, said so.
//! - The need: per program, what XLA's buffer assignment allocates — arguments, outputs and
//!   temporaries, an output aliasing its argument counted once (`memory`'s
//!   `allocated_bytes`, from the memory usage report); without that report, the temporaries'
//!   heap peak alone, said so.

use super::finding::{Context, Evidence, Finding, Inputs, Outcome, Severity, ev, pc, remedy};
use crate::analyses::memory::ModuleMemory;
use crate::analyses::provenance::Provenance;
use crate::units::bytes;

/// At or above this share of the limit a step has little room to grow.
const WARNING: f64 = 80.0;
const CRITICAL: f64 = 95.0;
/// JAX's default `XLA_PYTHON_CLIENT_MEM_FRACTION`.
const DEFAULT_FRACTION: f64 = 0.75;

/// The share of the device's memory JAX may use, and how that is known.
fn limit(provenance: Option<&Provenance>) -> (f64, String) {
    let env = |k: &str| {
        provenance
            .and_then(|p| p.facts.get(&format!("env {k}")))
            .map(String::as_str)
    };
    let recorded = provenance.is_some_and(|p| p.recorded > 0);
    if !recorded {
        return (
            DEFAULT_FRACTION,
            "JAX's default 75 % (the run's environment is not recorded: an archive not made \
             by `run`)"
                .into(),
        );
    }
    if env("XLA_PYTHON_CLIENT_ALLOCATOR") == Some("platform") {
        return (
            1.0,
            "the device's whole memory (XLA_PYTHON_CLIENT_ALLOCATOR=platform: no pool)".into(),
        );
    }
    match env("XLA_PYTHON_CLIENT_MEM_FRACTION") {
        None => (
            DEFAULT_FRACTION,
            "JAX's default 75 % (XLA_PYTHON_CLIENT_MEM_FRACTION not set)".into(),
        ),
        Some(v) => match v.trim().parse::<f64>() {
            Ok(f) if f > 0.0 && f <= 1.0 => (f, format!("XLA_PYTHON_CLIENT_MEM_FRACTION={v}")),
            _ => (
                DEFAULT_FRACTION,
                format!(
                    "JAX's default 75 % (XLA_PYTHON_CLIENT_MEM_FRACTION={v} is not a fraction)"
                ),
            ),
        },
    }
}

pub(super) fn memory(ins: &Inputs, _: &Context) -> Outcome {
    let Some(m) = &ins.memory else {
        return Outcome::NoData("no memory output".into());
    };
    let Some(total) = ins
        .roofline
        .as_ref()
        .and_then(|r| r.peaks.as_ref()?.memory_bytes)
    else {
        return Outcome::NoData("the device's memory size is not known".into());
    };
    // The program needing the most: its whole allocation where known, else its heap peak.
    let need = |r: &ModuleMemory| {
        r.allocated_bytes
            .map(|b| (b as f64, true))
            .unwrap_or((r.peak_bytes as f64, false))
    };
    let Some(top) = m
        .modules
        .iter()
        .max_by(|a, b| need(a).0.total_cmp(&need(b).0))
    else {
        return Outcome::NoData("no module heap".into());
    };
    let (fraction, why) = limit(ins.provenance.as_ref());
    let cap = fraction * total;
    let (held, whole) = need(top);
    let share = 100.0 * held / cap;
    let name = top.name.as_str();
    let what = if whole {
        "its buffers (arguments, outputs and temporaries)"
    } else {
        "its temporaries (XLA's memory usage report is absent: arguments and outputs not counted)"
    };
    let over_default = fraction > DEFAULT_FRACTION && held > DEFAULT_FRACTION * total;
    if share < WARNING && !over_default {
        return Outcome::Quiet(format!(
            "{name}: {what} take {} = {} of the {} JAX may use ({why})",
            bytes(held),
            pc(share),
            bytes(cap)
        ));
    }
    let mut evidence = vec![Evidence {
        module: Some(name.to_string()),
        ..ev(
            "memory",
            format!(
                "{name}: {what} take {} = {} of the {} JAX may use: {why}, of the device's {}",
                bytes(held),
                pc(share),
                bytes(cap),
                bytes(total)
            ),
        )
    }];
    if whole {
        evidence.push(ev(
            "memory",
            format!(
                "of which temporaries at their peak: {}",
                bytes(top.peak_bytes as f64)
            ),
        ));
    }
    for a in top.largest_allocations.iter().take(3) {
        evidence.push(ev(
            "memory",
            format!(
                "an allocation of {} holding {}",
                bytes(a.bytes as f64),
                a.defines.join(", ")
            ),
        ));
    }
    let mut title = format!(
        "{name}'s buffers take {} of the memory JAX may use ({} of {})",
        pc(share),
        bytes(held),
        bytes(cap)
    );
    if over_default {
        title.push_str(&format!(
            ": under JAX's default 75 % ({}) it would not fit",
            bytes(DEFAULT_FRACTION * total)
        ));
    }
    Outcome::Fired(Finding {
        rule: "memory".into(),
        severity: if share >= CRITICAL || held > cap {
            Severity::Critical
        } else {
            Severity::Warning
        },
        title,
        at_stake_ms: 0.0,
        percent: 0.0,
        evidence,
        remedies: vec![
            remedy(
                "Donate the arguments the step replaces: jax.jit(step, donate_argnums=...) for \
                 parameters and optimizer state",
                "a donated argument's buffer holds the output, instead of both being live",
            ),
            remedy(
                "Rematerialise activations: jax.checkpoint (jax.remat) on the layers, with a \
                 policy such as jax.checkpoint_policies.dots_with_no_batch_dims_saveable",
                "recomputing cheap activations in the backward pass frees the memory they hold \
                 between the passes",
            ),
            remedy(
                "Offload to host memory: checkpoint policies that offload \
                 (save_and_offload_only_these_names) or optimizer state in \
                 memory_kind='pinned_host'",
                "host memory holds what the step needs rarely, at the cost of PCIe copies",
            ),
            remedy(
                "Shard more (FSDP over more devices) or lower the per-device micro-batch",
                "a step near the limit leaves no room for a larger batch, and a new shape may \
                 not fit",
            ),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyses::memory::Memory;
    use crate::analyses::roofline_model::Roofline;
    use crate::formats::gpus::PeaksUsed;

    fn inputs(provenance: Option<Provenance>, allocated: Option<i64>) -> Inputs {
        let module = ModuleMemory {
            program_id: "1".into(),
            name: "jit_step".into(),
            peak_bytes: 2_450_000_000,
            traces: 1,
            allocated_bytes: allocated,
            curve: Vec::new(),
            at_peak: Vec::new(),
            largest_allocations: Vec::new(),
            steady_ns: 0,
        };
        let peaks = PeaksUsed {
            device: "NVIDIA H200".into(),
            tflops: Default::default(),
            memory_gb_s: None,
            source: String::new(),
            overridden: Vec::new(),
            memory_bytes: Some(150109880320.0),
        };
        Inputs {
            memory: Some(Memory {
                modules: vec![module],
                held: None,
                notes: Vec::new(),
            }),
            roofline: Some(Roofline {
                peaks: Some(peaks),
                ..Roofline::default()
            }),
            provenance,
            ..Inputs::default()
        }
    }

    fn recorded(env: &[(&str, &str)]) -> Provenance {
        Provenance {
            recorded: 1,
            facts: env
                .iter()
                .map(|(k, v)| (format!("env {k}"), v.to_string()))
                .collect(),
            ..Provenance::default()
        }
    }

    fn fired(o: Outcome) -> Finding {
        match o {
            Outcome::Fired(f) => f,
            Outcome::Quiet(w) | Outcome::NoData(w) => panic!("not fired: {w}"),
        }
    }

    /// The near-OOM step: 111.97 GiB of buffers under a 0.95 fraction of an H200's 139.80 GiB.
    #[test]
    fn a_step_near_the_limit_it_runs_under() {
        let cx = Context {
            steady_ms: None,
            devices: 1,
            compile_only_ms: None,
        };
        let need = 120_231_822_944;
        let f = fired(memory(
            &inputs(
                Some(recorded(&[("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.95")])),
                Some(need),
            ),
            &cx,
        ));
        assert_eq!(f.severity, Severity::Warning);
        assert!(f.title.contains("84.3 %"), "{}", f.title);
        assert!(f.title.contains("it would not fit"), "{}", f.title);
        // The same buffers under the default fraction do not fit: critical.
        let f = fired(memory(&inputs(Some(recorded(&[])), Some(need)), &cx));
        assert_eq!(f.severity, Severity::Critical);
        assert!(
            f.evidence[0]
                .text
                .contains("XLA_PYTHON_CLIENT_MEM_FRACTION not set")
        );
        // No record: the default, said so; the platform allocator: the whole device.
        let f = fired(memory(&inputs(None, Some(need)), &cx));
        assert!(
            f.evidence[0].text.contains("not recorded"),
            "{:?}",
            f.evidence
        );
        let platform = recorded(&[("XLA_PYTHON_CLIENT_ALLOCATOR", "platform")]);
        let f = fired(memory(&inputs(Some(platform), Some(need)), &cx));
        assert!(f.title.contains("80.1 %"), "{}", f.title);
        assert!(f.evidence[0].text.contains("no pool"), "{:?}", f.evidence);
        // A damaged fraction falls back to the default and says which it assumed.
        let bad = recorded(&[("XLA_PYTHON_CLIENT_MEM_FRACTION", "lots")]);
        let f = fired(memory(&inputs(Some(bad), Some(need)), &cx));
        assert!(f.evidence[0].text.contains("=lots is not a fraction"));
        // A small step is quiet; without the usage report the heap alone, said so.
        match memory(&inputs(Some(recorded(&[])), None), &cx) {
            Outcome::Quiet(w) => assert!(w.contains("temporaries"), "{w}"),
            _ => panic!("fired"),
        }
    }
}
