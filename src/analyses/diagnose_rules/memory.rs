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

use serde_json::Value;

use super::finding::{Context, Evidence, Finding, Inputs, Outcome, Severity, ev, num, rows, text};
use super::finding::{pc, remedy};
use crate::units::bytes;

/// At or above this share of the limit a step has little room to grow.
const WARNING: f64 = 80.0;
const CRITICAL: f64 = 95.0;
/// JAX's default `XLA_PYTHON_CLIENT_MEM_FRACTION`.
const DEFAULT_FRACTION: f64 = 0.75;

/// The share of the device's memory JAX may use, and how that is known.
fn limit(provenance: Option<&Value>) -> (f64, String) {
    let env = |k: &str| {
        provenance
            .and_then(|p| p.get("facts"))
            .and_then(|f| f.get(format!("env {k}")))
            .and_then(Value::as_str)
    };
    let recorded = provenance
        .and_then(|p| num(p, &["recorded"]))
        .unwrap_or(0.0)
        > 0.0;
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
        .and_then(|r| num(r, &["peaks", "memory_bytes"]))
    else {
        return Outcome::NoData("the device's memory size is not known".into());
    };
    // The program needing the most: its whole allocation where known, else its heap peak.
    let need = |r: &Value| {
        num(r, &["allocated_bytes"])
            .map(|b| (b, true))
            .unwrap_or((num(r, &["peak_bytes"]).unwrap_or(0.0), false))
    };
    let Some(top) = rows(m, "modules")
        .iter()
        .max_by(|a, b| need(a).0.total_cmp(&need(b).0))
    else {
        return Outcome::NoData("no module heap".into());
    };
    let (fraction, why) = limit(ins.provenance.as_ref());
    let cap = fraction * total;
    let (held, whole) = need(top);
    let share = 100.0 * held / cap;
    let name = text(top, "name");
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
    if whole && let Some(heap) = num(top, &["peak_bytes"]) {
        evidence.push(ev(
            "memory",
            format!("of which temporaries at their peak: {}", bytes(heap)),
        ));
    }
    for a in rows(top, "largest_allocations").iter().take(3) {
        let defines: Vec<&str> = rows(a, "defines")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        evidence.push(ev(
            "memory",
            format!(
                "an allocation of {} holding {}",
                bytes(num(a, &["bytes"]).unwrap_or(0.0)),
                defines.join(", ")
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
    use serde_json::json;

    fn inputs(provenance: Option<Value>, allocated: Option<f64>) -> Inputs {
        Inputs {
            memory: Some(
                json!({"modules": [{"name": "jit_step", "peak_bytes": 2.45e9,
                "allocated_bytes": allocated, "largest_allocations": []}]}),
            ),
            roofline: Some(json!({"peaks": {"memory_bytes": 150109880320.0}})),
            provenance,
            ..Inputs::default()
        }
    }

    fn recorded(env: &[(&str, &str)]) -> Value {
        let mut facts = serde_json::Map::new();
        for (k, v) in env {
            facts.insert(format!("env {k}"), json!(v));
        }
        json!({"recorded": 1, "facts": facts})
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
        let need = 120_231_822_944.0;
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
