//! Why a comparison came out as it did: for each module that changed (or was compiled anew),
//! the ops whose time changed significantly and those added or removed, ranked by what they
//! add to the module's change; the HLO diff when the module's fingerprint changed
//! ([`super::hlo_diff`]); what else changed between the runs (their provenance: versions,
//! flags, variables, GPUs, driver, commit); and the XLA passes whose time changed most when a
//! compile time changed.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::carriers::{self, Carrier, PassChange};
use super::causes::{self, SourceChange};
use super::causes_node::module_hlo;
use super::hlo_diff::{self, HloDiff};
use super::recompiled::{self, Recompiled};
pub use super::recompiled::{EnvChange, EnvDiff};
use super::{Family, FamilyComparison, Row, Settings, Verdict, verdict};
use crate::engine::{Keep, Key, KeyBuilder, Node};
use crate::graph::{self, Db, Run};

/// How many ops a module's explanation keeps.
pub const OPS: usize = 20;
/// How many passes are listed for a compile-time change.
const PASSES: usize = 8;

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    Slower,
    Faster,
    Added,
    Removed,
}

/// One op of a changed module.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct OpChange {
    /// The thunk (HLO instruction) name.
    pub op: String,
    pub kind: OpKind,
    /// Median time per module execution [ms] on each side.
    pub base_ms: Option<f64>,
    pub head_ms: Option<f64>,
    /// What it adds to the module's time per execution [ms].
    pub delta_ms: f64,
    pub change: Option<f64>,
    pub p_value: Option<f64>,
    /// `delta_ms` over the module's change, when the module's change is known.
    pub share: Option<f64>,
}

/// One module that changed, or was compiled anew.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ModuleWhy {
    pub module: String,
    pub program_id: Option<String>,
    pub head_program_id: Option<String>,
    pub verdict: Verdict,
    pub change: Option<f64>,
    /// Change of the median execution [ms].
    pub delta_ms: Option<f64>,
    /// Change of the median time an execution waits in collectives for other devices [ms]
    /// (part of `delta_ms` that no op of this device's own explains).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_delta_ms: Option<f64>,
    /// The change by the user's source line and op path, with what each side runs there
    /// (what survives a recompilation; [`super::causes`]), the largest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceChange>,
    /// Ops paired by instruction name, the largest contributions first (at most [`OPS`]);
    /// none where the program itself changed (`recompiled`: its names pair unrelated ops).
    pub ops: Vec<OpChange>,
    /// Ops that changed, were added or removed, before the cut.
    pub ops_total: usize,
    /// The HLO diff, when the fingerprint changed and both sides' HLO is known.
    pub hlo: Option<HloDiff>,
    /// Why there is no HLO diff although the fingerprint changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hlo_note: Option<String>,
    /// Why the module was compiled into another program, when its HLO changed and both
    /// sides' dumps hold it before optimization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recompiled: Option<Recompiled>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Why {
    pub modules: Vec<ModuleWhy>,
    pub environment: EnvDiff,
    /// When a compile time changed: the passes whose time changed most.
    pub passes: Vec<PassChange>,
    /// What carries each bandwidth, wait and compile metric that changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub carriers: Vec<Carrier>,
}

impl Why {
    pub fn is_empty(&self) -> bool {
        self.modules.is_empty()
            && self.environment.changes.is_empty()
            && self.passes.is_empty()
            && self.carriers.is_empty()
    }
}

/// An op's name without XLA's numeric suffixes (`reduce-scatter.4` → `reduce-scatter`).
fn stem(name: &str) -> &str {
    let mut s = name;
    while let Some((head, tail)) = s.rsplit_once('.') {
        if tail.is_empty() || !tail.bytes().all(|b| b.is_ascii_digit()) {
            break;
        }
        s = head;
    }
    s
}

fn delta(row: &Row) -> Option<f64> {
    Some(row.stat.head_median? - row.stat.base_median?)
}

/// The ops of one module: significant changes (the thunk family's threshold and α), and the
/// ops only one side has.
///
/// `same`: where the program itself changed, which instruction names name the same op on
/// both sides (see [`same_ops`]); only those are paired, and no op counts as added, removed
/// or renamed by its name.
fn module_ops(
    row: &Row,
    thunks: &FamilyComparison,
    s: &Settings,
    same: Option<&BTreeSet<String>>,
) -> (Vec<OpChange>, usize) {
    let module_delta = delta(row).filter(|d| *d != 0.0);
    let share = |d: f64| module_delta.map(|m| d / m);
    let mut ops = Vec::new();
    for t in thunks
        .rows
        .iter()
        .filter(|t| t.module == Some(row.module.clone().unwrap_or_default()))
        .filter(|t| t.program_id == row.program_id)
        .filter(|t| same.is_none_or(|names| names.contains(&t.key)))
    {
        let kind = match verdict(t, s, s.threshold(Family::Thunk)) {
            Verdict::Regression => OpKind::Slower,
            Verdict::Improvement => OpKind::Faster,
            _ => continue,
        };
        let d = delta(t).unwrap_or(0.0);
        ops.push(OpChange {
            op: t.key.clone(),
            kind,
            base_ms: t.stat.base_median,
            head_ms: t.stat.head_median,
            delta_ms: d,
            change: t.stat.change,
            p_value: t.stat.p_value,
            share: share(d),
        });
    }
    let ids: BTreeSet<Option<&String>> = [row.program_id.as_ref(), row.head_program_id.as_ref()]
        .into_iter()
        .collect();
    let one_sided: Vec<&super::OneSided> = thunks
        .one_sided
        .iter()
        .filter(|o| o.module == row.module && ids.contains(&o.program_id.as_ref()))
        .filter(|_| same.is_none())
        .collect();
    // An op renamed by the new compilation (`reduce-scatter.4` → `reduce-scatter.5`): the only
    // removed and the only added op of a stem are one op.
    let mut by_stem: BTreeMap<&str, (Vec<&super::OneSided>, Vec<&super::OneSided>)> =
        BTreeMap::new();
    for o in &one_sided {
        let e = by_stem.entry(stem(&o.key)).or_default();
        if o.head { e.1.push(o) } else { e.0.push(o) }
    }
    for (removed, added) in by_stem.values() {
        if let ([b], [h]) = (&removed[..], &added[..]) {
            let (bm, hm) = (b.median.unwrap_or(0.0), h.median.unwrap_or(0.0));
            let d = hm - bm;
            ops.push(OpChange {
                op: format!("{} → {}", b.key, h.key),
                kind: if d >= 0.0 {
                    OpKind::Slower
                } else {
                    OpKind::Faster
                },
                base_ms: b.median,
                head_ms: h.median,
                delta_ms: d,
                change: (bm != 0.0).then(|| hm / bm - 1.0),
                p_value: None,
                share: share(d),
            });
            continue;
        }
        for o in removed.iter().chain(added) {
            let m = o.median.unwrap_or(0.0);
            let d = if o.head { m } else { -m };
            ops.push(OpChange {
                op: o.key.clone(),
                kind: if o.head {
                    OpKind::Added
                } else {
                    OpKind::Removed
                },
                base_ms: (!o.head).then_some(m),
                head_ms: o.head.then_some(m),
                delta_ms: d,
                change: None,
                p_value: None,
                share: share(d),
            });
        }
    }
    ops.sort_by(|a, b| {
        b.delta_ms
            .abs()
            .total_cmp(&a.delta_ms.abs())
            .then_with(|| a.op.cmp(&b.op))
    });
    let total = ops.len();
    ops.truncate(OPS);
    (ops, total)
}

/// The instruction names of a module that name the same op in its two programs
/// ([`causes::same_ops`]); empty where a side's HLO is unknown.
fn same_ops(db: &Db, base: Run, head: Run, row: &Row) -> Result<BTreeSet<String>> {
    let (Some(b), Some(h)) = (row.program_id.as_deref(), row.head_program_id.as_deref()) else {
        return Ok(BTreeSet::new());
    };
    let (Some(bm), Some(hm)) = (
        super::causes_node::module_hlo(db, base, b)?,
        super::causes_node::module_hlo(db, head, h)?,
    ) else {
        return Ok(BTreeSet::new());
    };
    Ok(causes::same_ops(&bm, &hm))
}

/// The HLO diff of a module, or why there is none.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
struct HloOutcome {
    diff: Option<HloDiff>,
    note: Option<String>,
}

impl crate::engine::value::JsonValue for HloOutcome {}

/// The HLO diff of two programs: keyed by their ids and by the keys of both runs' decoded
/// programs, so a warm comparison decodes no HLO.
struct HloDiffNode<'a> {
    ids: (&'a str, &'a str),
    base: &'a [Key],
    head: &'a [Key],
}

impl Node for HloDiffNode<'_> {
    type Value = HloOutcome;
    const KEEP: Keep = Keep::Stored;
    fn kind(&self) -> &str {
        "compare:hlo-diff"
    }
    fn roots(&self) -> Vec<&'static str> {
        // A member of the comparison family computed here: its code is this file's.
        vec![file!()]
    }
    fn recipe(&self, kb: KeyBuilder) -> KeyBuilder {
        let mut kb = kb
            .param("base_id", self.ids.0)
            .param("head_id", self.ids.1)
            .param("base", (self.base.len() as u64).to_le_bytes());
        for k in self.base.iter().chain(self.head) {
            kb = kb.input(k);
        }
        kb
    }
}

fn hlo_of(db: &Db, base: Run, head: Run, row: &Row) -> Result<(Option<HloDiff>, Option<String>)> {
    let (Some(b), Some(h)) = (&row.program_id, &row.head_program_id) else {
        return Ok((None, None));
    };
    let keys = |run: Run| -> Result<Vec<Key>> {
        run.processes(db)
            .iter()
            .map(|&p| graph::hlo::programs_key(db, p).map_err(anyhow::Error::from))
            .collect()
    };
    let (bk, hk) = (keys(base)?, keys(head)?);
    let node = HloDiffNode {
        ids: (b, h),
        base: &bk,
        head: &hk,
    };
    let (_, v) = db.engine().compute(&node, "", || {
        Ok(match (module_hlo(db, base, b), module_hlo(db, head, h)) {
            (Ok(Some(b)), Ok(Some(h))) => HloOutcome {
                diff: Some(hlo_diff::diff(&b, &h)),
                note: None,
            },
            (Err(e), _) | (_, Err(e)) => HloOutcome {
                diff: None,
                note: Some(format!("HLO unreadable: {}", crate::error::one_line(&e))),
            },
            _ => HloOutcome {
                diff: None,
                note: Some(
                    "no HLO for one side (its archive has no XLA dump of the module)".into(),
                ),
            },
        })
    })?;
    Ok((v.diff.clone(), v.note.clone()))
}

/// The explanation of the comparison `out` of `base` and `head`.
pub fn explain(
    db: &Db,
    base: Run,
    head: Run,
    out: &BTreeMap<Family, FamilyComparison>,
    s: &Settings,
) -> Result<Why> {
    let none = FamilyComparison::default();
    let thunks = out.get(&Family::Thunk).unwrap_or(&none);
    let env = super::recompiled::environment(db, base, head)?;
    let mut modules = Vec::new();
    for row in out.get(&Family::Module).map(|c| &c.rows[..]).unwrap_or(&[]) {
        let v = verdict(row, s, s.threshold(Family::Module));
        let changed = matches!(v, Verdict::Regression | Verdict::Improvement);
        let by_name = row.matched == super::Matched::ByName;
        if !changed && !by_name {
            continue;
        }
        let (mut hlo, hlo_note) = hlo_of(db, base, head, row)?;
        let floor = delta(row).map_or(0.0, |d| 0.01 * d.abs()).max(1e-3);
        let found = super::causes_node::of(db, base, head, row, thunks, floor, changed)?;
        let recompiled = match row.head_program_id {
            Some(_) => recompiled::classify(found.same_before_optimization, &env),
            None => None,
        };
        // Instructions paired by name; where the program itself changed, only names that
        // name the same op on both sides (XLA numbers instructions anew): the source lines
        // and the HLO diff tell the rest.
        let (ops, ops_total) = if !changed {
            (Vec::new(), 0)
        } else if recompiled == Some(Recompiled::Program) {
            let same = same_ops(db, base, head, row)?;
            module_ops(row, thunks, s, Some(&same))
        } else {
            module_ops(row, thunks, s, None)
        };
        if recompiled.is_some_and(|r| r != Recompiled::Program)
            && let Some(h) = hlo.as_mut()
        {
            // The same parameters before optimization: a change in the optimized module's
            // parameter list is XLA's doing, not a cause.
            h.parameters.clear();
        }
        let sources = found.sources;
        let wait_delta_ms = out
            .get(&Family::Wait)
            .and_then(|w| w.rows.iter().find(|w| w.program_id == row.program_id))
            .and_then(delta);
        modules.push(ModuleWhy {
            module: row.module.clone().unwrap_or_else(|| row.key.clone()),
            program_id: row.program_id.clone(),
            head_program_id: row.head_program_id.clone(),
            verdict: v,
            change: row.stat.change,
            delta_ms: delta(row),
            wait_delta_ms,
            sources,
            ops,
            ops_total,
            hlo,
            hlo_note,
            recompiled,
        });
    }
    let compile_changed = out.get(&Family::Compile).is_some_and(|c| {
        c.rows.iter().any(|r| {
            matches!(
                verdict(r, s, s.threshold(Family::Compile)),
                Verdict::Regression | Verdict::Improvement
            )
        })
    });
    let mut passes: Vec<PassChange> = Vec::new();
    if compile_changed && let Some(p) = out.get(&Family::Pass) {
        passes = p
            .rows
            .iter()
            .filter_map(|r| {
                Some(PassChange {
                    pass: r.key.clone(),
                    base_ms: r.stat.base_median,
                    head_ms: r.stat.head_median,
                    delta_ms: delta(r)?,
                    change: r.stat.change,
                })
            })
            .collect();
        passes.sort_by(|a, b| b.delta_ms.abs().total_cmp(&a.delta_ms.abs()));
        passes.truncate(PASSES);
    }
    let carriers = carriers::carriers(db, base, head, out, s, &passes)?;
    Ok(Why {
        modules,
        environment: env,
        passes,
        carriers,
    })
}

// ---------------------------------------------------------------- text

fn ms(x: f64) -> String {
    crate::units::signed_ms(x)
}

/// One op as a phrase: `all-gather.3 +1.200 ms (+45.0 %)`, `fusion.77 added (+0.500 ms)`.
pub fn op_phrase(o: &OpChange) -> String {
    match o.kind {
        OpKind::Added => format!("{} added ({})", o.op, ms(o.delta_ms)),
        OpKind::Removed => format!("{} removed ({})", o.op, ms(o.delta_ms)),
        _ => match o.change {
            Some(c) => format!(
                "{} {} ({})",
                o.op,
                ms(o.delta_ms),
                crate::units::signed_percent(c)
            ),
            None => format!("{} {}", o.op, ms(o.delta_ms)),
        },
    }
}

/// The module's line: `jit_step +8.1 % (+1.210 ms per execution), HLO changed`.
pub fn module_phrase(m: &ModuleWhy) -> String {
    let mut s = m.module.clone();
    if let Some(c) = m.change {
        s.push_str(&format!(" {}", crate::units::signed_percent(c)));
    }
    if let Some(d) = m.delta_ms {
        s.push_str(&format!(" ({} per execution", ms(d)));
        if let Some(w) = m.wait_delta_ms {
            s.push_str(&format!("; waiting in collectives {}", ms(w)));
        }
        s.push(')');
    }
    if m.head_program_id.is_some() {
        s.push_str(", HLO changed");
    }
    s
}

pub fn env_phrase(c: &EnvChange) -> String {
    match (&c.base, &c.head) {
        (Some(b), Some(h)) => format!("{}: {b} → {h}", c.what),
        (None, Some(h)) => format!("{}: {h} (only in HEAD)", c.what),
        (Some(b), None) => format!("{}: {b} (only in BASE)", c.what),
        (None, None) => c.what.clone(),
    }
}

/// The terminal's lines.
pub fn terminal(w: &Why) -> String {
    let mut s = String::new();
    for m in &w.modules {
        s.push_str(&format!("why {}\n", module_phrase(m)));
        for g in m.sources.iter().take(4) {
            s.push_str(&format!("    {}\n", causes::phrase(g)));
        }
        let n = if m.sources.is_empty() { 6 } else { 3 };
        if !m.sources.is_empty() && !m.ops.is_empty() {
            s.push_str("    by HLO instruction:\n");
        }
        for o in m.ops.iter().take(n) {
            s.push_str(&format!("    {}\n", op_phrase(o)));
        }
        if m.ops_total > n {
            s.push_str(&format!("    … {} more in compare.md\n", m.ops_total - n));
        }
        if let Some(h) = &m.hlo {
            s.push_str(&format!("    HLO: {}\n", h.line()));
        }
        if let Some(n) = &m.hlo_note {
            s.push_str(&format!("    HLO: {n}\n"));
        }
        if let Some(r) = m.recompiled {
            s.push_str(&format!("    recompiled: {}\n", r.phrase()));
        }
    }
    for c in &w.carriers {
        s.push_str(&format!("{}\n", c.phrase()));
    }
    let e = &w.environment;
    if !e.changes.is_empty() {
        s.push_str("what else changed:\n");
        for c in e.changes.iter().take(10) {
            s.push_str(&format!("    {}\n", env_phrase(c)));
        }
        if e.changes.len() > 10 {
            s.push_str(&format!(
                "    … {} more in compare.md\n",
                e.changes.len() - 10
            ));
        }
    }
    if !(e.base_recorded && e.head_recorded) {
        s.push_str(
            "(versions, flags and commits are compared only between archives made by `nsys-jax-pipe run`)\n",
        );
    }
    s
}

/// The markdown section (details folded).
pub fn markdown(w: &Why) -> String {
    if w.is_empty() {
        return String::new();
    }
    let mut s = String::from("### Why\n\n");
    for m in &w.modules {
        s.push_str(&format!("**{}**", module_phrase(m)));
        if let Some(r) = m.recompiled {
            s.push_str(&format!(" — {}", r.phrase()));
        }
        if m.sources.is_empty() {
            let top: Vec<String> = m
                .ops
                .iter()
                .take(3)
                .map(|o| format!("`{}`", op_phrase(o)))
                .collect();
            if !top.is_empty() {
                s.push_str(&format!(": {}", top.join(", ")));
            }
            s.push_str("\n\n");
        } else {
            s.push_str("\n\n");
            for g in m.sources.iter().take(3) {
                s.push_str(&format!("- {}\n", causes::phrase(g)));
            }
            s.push('\n');
        }
        if m.ops.len() > 3 || m.sources.len() > 3 || m.hlo.is_some() || m.hlo_note.is_some() {
            s.push_str("<details><summary>ops and HLO</summary>\n\n");
            for g in m.sources.iter().skip(3) {
                s.push_str(&format!("- {}\n", causes::phrase(g)));
            }
            if m.sources.len() > 3 {
                s.push('\n');
            }
            if !m.ops.is_empty() {
                s.push_str("| op | base | head | Δ per execution | change | p | share of the module's change |\n|---|--:|--:|--:|--:|--:|--:|\n");
                for o in &m.ops {
                    let f = |x: Option<f64>| x.map(crate::units::duration_ms).unwrap_or("–".into());
                    s.push_str(&format!(
                        "| `{}` {} | {} | {} | {} | {} | {} | {} |\n",
                        o.op,
                        match o.kind {
                            OpKind::Added => "(added)",
                            OpKind::Removed => "(removed)",
                            _ => "",
                        },
                        f(o.base_ms),
                        f(o.head_ms),
                        ms(o.delta_ms),
                        o.change
                            .map(|c| format!("{:+.1} %", 100.0 * c))
                            .unwrap_or("–".into()),
                        o.p_value.map(|p| format!("{p:.2e}")).unwrap_or("–".into()),
                        o.share
                            .map(|c| format!("{:.0} %", 100.0 * c))
                            .unwrap_or("–".into()),
                    ));
                }
                if m.ops_total > m.ops.len() {
                    s.push_str(&format!(
                        "\n{} more in compare.json\n",
                        m.ops_total - m.ops.len()
                    ));
                }
                s.push('\n');
            }
            if let Some(h) = &m.hlo {
                s.push_str(&format!("HLO: {}\n\n", h.line()));
                let list = |s: &mut String, title: &str, cs: &[hlo_diff::Count]| {
                    for c in cs {
                        s.push_str(&format!(
                            "- {title} `{}`: {} → {}{}\n",
                            c.what,
                            c.base,
                            c.head,
                            if c.examples.is_empty() {
                                String::new()
                            } else {
                                format!(" (e.g. {})", c.examples.join(", "))
                            }
                        ));
                    }
                };
                list(&mut s, "opcode", &h.opcodes);
                list(&mut s, "fusion", &h.fusions);
                list(&mut s, "collective", &h.collectives);
                list(&mut s, "library call", &h.kernels);
                s.push('\n');
            }
            if let Some(n) = &m.hlo_note {
                s.push_str(&format!("HLO: {n}\n\n"));
            }
            s.push_str("</details>\n\n");
        }
    }
    if !w.carriers.is_empty() {
        s.push_str("**What carries the other changes**:\n\n");
        for c in &w.carriers {
            s.push_str(&format!("- {}\n", c.phrase()));
        }
        s.push('\n');
    }
    let e = &w.environment;
    if !e.changes.is_empty() {
        s.push_str(&format!(
            "**What else changed** ({}):\n\n",
            crate::table::count(e.changes.len(), "difference", "differences")
        ));
        for c in e.changes.iter().take(5) {
            s.push_str(&format!("- `{}`\n", env_phrase(c)));
        }
        if e.changes.len() > 5 {
            s.push_str("\n<details><summary>all of them</summary>\n\n");
            for c in &e.changes[5..] {
                s.push_str(&format!("- `{}`\n", env_phrase(c)));
            }
            s.push_str("\n</details>\n");
        }
        s.push('\n');
    }
    if !(e.base_recorded && e.head_recorded) {
        s.push_str("<sub>Versions, XLA flags and commits are known only for archives made by `nsys-jax-pipe run`.</sub>\n\n");
    }
    if !w.passes.is_empty() {
        s.push_str("<details><summary>XLA passes whose time changed most</summary>\n\n| pass | base | head | Δ |\n|---|--:|--:|--:|\n");
        for p in &w.passes {
            let f = |x: Option<f64>| x.map(|v| format!("{v:.2} ms")).unwrap_or("–".into());
            s.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                p.pass,
                f(p.base_ms),
                f(p.head_ms),
                ms(p.delta_ms)
            ));
        }
        s.push_str("\n</details>\n\n");
    }
    s
}
