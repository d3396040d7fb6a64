//! Rules on compilation: recompiled modules, compile time.

use std::collections::BTreeMap;

use super::finding::{Context, Evidence, Finding, Inputs, Outcome, Severity, ev, pc, remedy};
use crate::analyses::compilation::{CompilationEntry, CompilationResult};
use crate::units::duration_ms;

/// The module a compilation is of ("" when the range does not say).
fn module(r: &CompilationEntry) -> &str {
    r.module.as_deref().unwrap_or("")
}

/// Compilations per (process, module name).
fn compilations(c: &CompilationResult) -> BTreeMap<(String, String), Vec<&CompilationEntry>> {
    let mut by: BTreeMap<(String, String), Vec<&CompilationEntry>> = BTreeMap::new();
    for r in &c.compilations {
        by.entry((r.process.clone(), module(r).to_string()))
            .or_default()
            .push(r);
    }
    by
}

/// How much of a compilation ran inside its process's steady state [ms] (0 when the row does
/// not say when it ran).
fn in_steady(windows: &[(String, f64, f64)], r: &CompilationEntry) -> f64 {
    let (start, wall) = (r.start_ms, r.wall_s);
    let end = start + wall * 1e3;
    windows
        .iter()
        .filter(|(p, ..)| *p == r.process)
        .map(|&(_, a, b)| (end.min(b) - start.max(a)).max(0.0))
        .sum()
}

/// The steady-state windows the summary gives (process, start, end) [ms].
fn windows(ins: &Inputs) -> Option<Vec<(String, f64, f64)>> {
    let w: Vec<_> = ins
        .summary
        .as_ref()?
        .steady
        .iter()
        .map(|w| (w.process.clone(), w.start_ms, w.end_ms))
        .collect();
    (!w.is_empty()).then_some(w)
}

/// The time compilations ran inside the steady state [ms] (the host compiled instead of
/// giving the GPU work); None when the inputs do not say.
pub(super) fn compiling_in_steady(ins: &Inputs) -> Option<f64> {
    let windows = windows(ins)?;
    let c = ins.compilation.as_ref()?;
    Some(c.compilations.iter().map(|r| in_steady(&windows, r)).sum())
}

pub(super) fn recompilation(ins: &Inputs, cx: &Context) -> Outcome {
    let Some(c) = &ins.compilation else {
        return Outcome::NoData("no compilation output".into());
    };
    if c.compilations.is_empty() {
        return Outcome::NoData("no compilation in the capture".into());
    }
    let mut again: Vec<((String, String), Vec<&CompilationEntry>)> = compilations(c)
        .into_iter()
        .filter(|(_, v)| v.len() > 1)
        .collect();
    if again.is_empty() {
        return Outcome::Quiet("every module compiled once per process".into());
    }
    let extra = |v: &[&CompilationEntry]| v.iter().skip(1).map(|r| r.wall_s).sum::<f64>() * 1e3;
    again.sort_by(|a, b| extra(&b.1).total_cmp(&extra(&a.1)));
    let later: f64 = again.iter().map(|(_, v)| extra(v)).sum();
    // What the steady state paid: the later compilations' time inside it, when known (a
    // recompilation during start-up costs the steady state nothing).
    let windows = windows(ins);
    let at_stake = match &windows {
        Some(w) => again
            .iter()
            .flat_map(|(_, v)| v.iter().skip(1))
            .map(|r| in_steady(w, r))
            .sum(),
        None => later,
    };
    let basis = cx.compile_only_ms.map(|_| basis_of(cx));
    let mut evidence: Vec<Evidence> = again
        .iter()
        .take(5)
        .map(|((p, m), v)| Evidence {
            module: Some(m.clone()),
            ..ev(
                "compilation",
                format!(
                    "{m} compiled {} times in {p}, the later ones {}",
                    v.len(),
                    duration_ms(extra(v))
                ),
            )
        })
        .collect();
    if windows.is_some() {
        evidence.push(ev(
            "compilation",
            format!(
                "{} of those compilations ran inside the steady state (the host compiled, the \
                 GPU waited)",
                duration_ms(at_stake)
            ),
        ));
    }
    let mut title = format!(
        "{} recompiled: {} of compilation after the first",
        match again.len() {
            1 => again[0].0.1.clone(),
            n => format!("{n} modules"),
        },
        duration_ms(later)
    );
    if let Some(basis) = basis {
        title.push_str(&format!(" ({} {basis})", pc(cx.percent(later))));
    }
    let remedies = vec![
        remedy(
            "Call the jitted function with the same shapes and dtypes every time (pad to a few \
             bucket sizes)",
            "jit compiles once per distinct input shape, dtype and static argument; a new shape \
             each call compiles each call",
        ),
        remedy(
            "Find what changes: jax.config.update('jax_explain_cache_misses', True) logs why each \
             call missed the cache; pass changing Python numbers as arrays, not static_argnums",
            "a static argument that takes a new value is a new program",
        ),
        remedy(
            "Keep compiled programs across runs: jax.config.update('jax_compilation_cache_dir', PATH)",
            "the persistent cache turns the next run's compilations into loads",
        ),
    ];
    let mut out = cx.finding(
        "recompilation",
        title.clone(),
        at_stake,
        evidence.clone(),
        remedies.clone(),
    );
    if let Outcome::Quiet(_) = out {
        // A recompilation is worth saying even when it is cheap: it is a bug in the loop.
        out = Outcome::Fired(Finding {
            rule: "recompilation".into(),
            severity: Severity::Info,
            title,
            at_stake_ms: at_stake,
            percent: cx.percent(at_stake),
            evidence,
            remedies,
        });
    }
    out
}

pub(super) fn compile_time(ins: &Inputs, cx: &Context) -> Outcome {
    let Some(c) = &ins.compilation else {
        return Outcome::NoData("no compilation output".into());
    };
    let all = &c.compilations;
    if all.is_empty() {
        return Outcome::NoData("no compilation in the capture".into());
    }
    let total: f64 = all.iter().map(|r| r.wall_s).sum::<f64>() * 1e3;
    let mut autotune = 0.0;
    for r in all {
        for p in &r.parts {
            if p.kind.contains("Autotun") {
                autotune += p.seconds * 1e3;
            }
        }
    }
    let mut longest: Vec<&CompilationEntry> = all.iter().collect();
    longest.sort_by(|a, b| b.wall_s.total_cmp(&a.wall_s));
    let mut evidence = vec![ev(
        "compilation",
        format!(
            "{} compilations, {} in all ({} {})",
            all.len(),
            duration_ms(total),
            pc(cx.percent(total)),
            basis_of(cx)
        ),
    )];
    for r in longest.iter().take(3) {
        evidence.push(Evidence {
            module: Some(module(r).to_string()),
            ..ev(
                "compilation",
                format!(
                    "{} in {}: {}",
                    module(r),
                    r.process,
                    duration_ms(r.wall_s * 1e3)
                ),
            )
        });
    }
    if autotune > 0.0 {
        evidence.push(ev(
            "compilation",
            format!("autotuning: {}", duration_ms(autotune)),
        ));
    }
    // In a compile-only capture, what recompilation claims is its finding, not this one's:
    // here the first compilation of each module.
    let at_stake = if cx.compile_only_ms.is_some() {
        compilations(c)
            .values()
            .filter_map(|v| v.first().map(|r| r.wall_s))
            .sum::<f64>()
            * 1e3
    } else {
        total
    };
    // Compilation is paid once per process, not per step: it can be worth a warning (slow
    // iteration, slow restarts), never the critical finding of a steady state.
    match cx.finding(
        "compile-time",
        format!(
            "Compilation takes {} ({} {})",
            duration_ms(total),
            pc(cx.percent(total)),
            basis_of(cx)
        ),
        at_stake,
        evidence,
        vec![
            remedy(
                "Keep compiled programs across runs: jax.config.update('jax_compilation_cache_dir', PATH)",
                "the persistent cache turns the next run's compilations into loads",
            ),
            remedy(
                "Compile fewer programs: jit the whole step rather than many small functions, and \
                 keep shapes fixed",
                "each distinct jitted program is compiled (and autotuned) once per process",
            ),
            remedy(
                "While iterating on code, lower autotuning: XLA_FLAGS=--xla_gpu_autotune_level=0 \
                 (not for the measured run)",
                "autotuning times candidate kernels at compile time; it pays off only in long runs",
            ),
        ],
    ) {
        Outcome::Fired(mut f) if cx.compile_only_ms.is_none() => {
            f.severity = f.severity.min(Severity::Warning);
            Outcome::Fired(f)
        }
        other => other,
    }
}

/// What a compilation finding's share is of: the steady state, or in a compile-only capture
/// the time it spent compiling.
fn basis_of(cx: &Context) -> &'static str {
    if cx.compile_only_ms.is_some() {
        "of the capture's compiling time"
    } else {
        "of the steady state's time"
    }
}
