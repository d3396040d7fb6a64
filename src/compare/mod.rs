//! `compare`: did HEAD get slower than BASE, with statistics, or is the difference noise?
//!
//! Each side is a run (archives, captures, several processes). For every metric family
//! ([`samples::Family`]) the per-execution samples of both sides are matched (modules by
//! fingerprint, falling back to the name when the fingerprint changed; the rest by name) and
//! compared: medians, the relative change of the median with a bootstrap confidence interval,
//! and the two-sided Mann–Whitney U test. Each family's comparison is a stored graph node
//! keyed by the per-process shares it reads, so a warm `compare` loads results only.
//!
//! A metric is a *regression* when its change in the bad direction exceeds the family's
//! threshold and the test is significant at `alpha`; with fewer than `min_samples` samples on
//! a side it is *inconclusive* (never an alarm). Thunks and op types are compared within the
//! modules that changed, to say where a module's time went. Only the gated families decide
//! the exit code.

pub mod carriers;
pub mod causes;
mod causes_node;
pub mod comparison;
pub mod explain;
pub mod findings;
pub mod history;
pub mod hlo_diff;
pub mod html;
pub mod recompiled;
pub mod report;
pub mod samples;
pub mod settings;

use crate::engine::kinds::family;
use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use crate::analyses::ShareUse;
use crate::analyses::communication::CommunicationShare;
use crate::analyses::compilation::{CompilationsShare, RangeSumsShare};
use crate::analyses::ranges::RangesShare;
use crate::analyses::summary::SummaryShare;
use crate::analyses::thunks::ThunkShare;
use crate::engine::{Keep, Key, KeyBuilder, Node};
use crate::graph::{self, Db, Run};
use crate::stats::{bootstrap_median_change, mann_whitney_p, median};
pub use comparison::{
    FamilyComparison, Matched, OneSided, Row, Settings, Stat, StatSettings, Verdict, verdict,
    worse_by,
};
pub use samples::{Family, Series};
pub use settings::SettingsFile;

family!(
    /// The comparison of one family of metrics: `compare:<family>`.
    COMPARISON = "compare:"
);

fn seed_of(family: Family, module: Option<&str>, key: &str) -> u64 {
    let h = blake3::hash(format!("{}\0{}\0{key}", family.name(), module.unwrap_or("")).as_bytes());
    u64::from_le_bytes(h.as_bytes()[..8].try_into().expect("8 bytes"))
}

/// The statistics of one metric.
pub fn stat(
    family: Family,
    module: Option<&str>,
    key: &str,
    b: &[f64],
    h: &[f64],
    s: &StatSettings,
) -> Stat {
    let (bm, hm) = (median(b), median(h));
    let change = match (bm, hm) {
        (Some(bm), Some(hm)) if bm != 0.0 => Some(hm / bm - 1.0),
        _ => None,
    };
    let both = b.len() >= 2 && h.len() >= 2;
    Stat {
        n_base: b.len(),
        n_head: h.len(),
        base_median: bm,
        head_median: hm,
        change,
        ci: both
            .then(|| {
                bootstrap_median_change(
                    b,
                    h,
                    s.resamples,
                    s.confidence,
                    seed_of(family, module, key),
                )
            })
            .flatten(),
        p_value: both.then(|| mann_whitney_p(b, h)).flatten(),
    }
}

/// How a metric is named in the lists of added and removed ones; a module's short
/// fingerprint tells apart programs of the same name.
fn label(s: &Series) -> String {
    let name = match &s.module {
        Some(m) if *m != s.key => format!("{m}/{}", s.key),
        _ => s.key.clone(),
    };
    match &s.program_id {
        Some(id) => format!("{name} [{}]", crate::frames::program_ids::short_id(id)),
        None => name,
    }
}

/// Pair the series of both sides and compare each pair. Series within modules pair by
/// (fingerprint, key); what is left pairs by (module name, key) when that is unique on both
/// sides (the module's HLO changed); the rest is added or removed.
pub fn compare_series(
    family: Family,
    base: &[Series],
    head: &[Series],
    s: &StatSettings,
) -> FamilyComparison {
    let exact = |x: &Series| (x.program_id.clone(), x.key.clone());
    let by_name = |x: &Series| (x.module.clone(), x.key.clone());
    let mut head_left: BTreeMap<(Option<String>, String), &Series> =
        head.iter().map(|x| (exact(x), x)).collect();
    let mut pairs: Vec<(&Series, &Series, Matched)> = Vec::new();
    let mut base_left = Vec::new();
    for b in base {
        match head_left.remove(&exact(b)) {
            Some(h) => pairs.push((b, h, Matched::Same)),
            None => base_left.push(b),
        }
    }
    let count = |xs: &mut dyn Iterator<Item = &Series>| {
        let mut c: BTreeMap<(Option<String>, String), usize> = BTreeMap::new();
        for x in xs {
            *c.entry(by_name(x)).or_default() += 1;
        }
        c
    };
    let base_names = count(&mut base_left.iter().copied());
    let head_names = count(&mut head_left.values().copied());
    let mut head_by_name: BTreeMap<(Option<String>, String), &Series> = head_left
        .values()
        .filter(|x| head_names[&by_name(x)] == 1)
        .map(|x| (by_name(x), *x))
        .collect();
    let mut removed = Vec::new();
    let mut one_sided = Vec::new();
    for b in base_left {
        let k = by_name(b);
        match (base_names[&k] == 1 && b.module.is_some())
            .then(|| head_by_name.remove(&k))
            .flatten()
        {
            Some(h) => {
                head_left.remove(&exact(h));
                pairs.push((b, h, Matched::ByName));
            }
            None => {
                removed.push(label(b));
                one_sided.push(OneSided::of(b, false));
            }
        }
    }
    let added = head_left.values().map(|x| label(x)).collect();
    one_sided.extend(head_left.values().map(|x| OneSided::of(x, true)));
    let rows = pairs
        .into_iter()
        .map(|(b, h, matched)| Row {
            family,
            program_id: b.program_id.clone(),
            head_program_id: (h.program_id != b.program_id)
                .then(|| h.program_id.clone())
                .flatten(),
            module: b.module.clone(),
            key: b.key.clone(),
            matched,
            stat: stat(family, b.module.as_deref(), &b.key, &b.values, &h.values, s),
        })
        .collect();
    FamilyComparison {
        rows,
        added,
        removed,
        one_sided,
    }
}

/// One compared metric with its verdict.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Judged {
    #[serde(flatten)]
    pub row: Row,
    pub verdict: Verdict,
    /// Whether this metric's family decides the exit code.
    pub gates: bool,
    /// The threshold applied: the family's, plus the run-to-run noise when known.
    pub threshold: f64,
    /// The metric's run-to-run change between the base and its rerun (`--base-rerun`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise: Option<f64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SideInfo {
    pub inputs: Vec<String>,
    pub processes: usize,
}

/// Everything `compare` found.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Report {
    /// "regression" or "ok".
    pub verdict: String,
    pub exit_code: i32,
    pub base: SideInfo,
    pub head: SideInfo,
    /// The base's rerun, when given (its changes are the run-to-run noise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerun: Option<SideInfo>,
    pub settings: Settings,
    /// Gated regressions, then other regressions, improvements, inconclusive and unchanged
    /// metrics; within each, the largest changes first.
    pub metrics: Vec<Judged>,
    /// Per family, metrics only HEAD has.
    pub added: BTreeMap<Family, Vec<String>>,
    /// Per family, metrics only BASE has.
    pub removed: BTreeMap<Family, Vec<String>>,
    /// The findings of `diagnose` that appeared, went away or changed severity.
    #[serde(default)]
    pub findings: findings::FindingChanges,
    /// Why: the ops and HLO of the changed modules, and what else changed between the runs.
    #[serde(default)]
    pub why: explain::Why,
    /// What to do for a surer verdict: without `--base-rerun`, when both sides run the same
    /// modules and some change is significant, measuring the run-to-run noise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// The hint to measure the run-to-run noise: no rerun of the base was given, BASE and HEAD
/// run the same modules (they look like one program), and some change is significant, which
/// between two runs of one program may be noise (another kernel the autotuner chose, clocks).
/// Not when a module's program is known to differ (`program_changed`): then they are not the
/// same program.
fn rerun_hint(
    rerun: bool,
    verdicts: impl Iterator<Item = Verdict>,
    added: &BTreeMap<Family, Vec<String>>,
    removed: &BTreeMap<Family, Vec<String>>,
    program_changed: bool,
) -> Option<String> {
    let same_modules = !program_changed
        && !added.contains_key(&Family::Module)
        && !removed.contains_key(&Family::Module);
    let significant = verdicts
        .filter(|v| matches!(v, Verdict::Regression | Verdict::Improvement))
        .count();
    (!rerun && same_modules && significant > 0).then(|| {
        format!(
            "BASE and HEAD run the same modules: if they are the same program, these {significant} \
             significant changes may be run-to-run noise. Profile BASE a second time and pass \
             it as --base-rerun: each metric's threshold then includes its own noise."
        )
    })
}

impl Report {
    /// Whether `module`'s program itself differs between the sides (the code, its shapes,
    /// dtypes or shardings, by the programs before optimization): its instructions' names
    /// then pair unrelated ops, and its changes are told by source line instead.
    pub fn program_changed(&self, module: &str) -> bool {
        self.why
            .modules
            .iter()
            .any(|m| m.module == module && m.recompiled == Some(recompiled::Recompiled::Program))
    }

    pub fn count(&self, v: Verdict, gated_only: bool) -> usize {
        self.metrics
            .iter()
            .filter(|m| m.verdict == v && (m.gates || !gated_only))
            .count()
    }
}

type Noise = BTreeMap<(Family, Option<String>, String), f64>;

fn judge(
    comparisons: &BTreeMap<Family, FamilyComparison>,
    s: &Settings,
    noise: Option<&Noise>,
) -> Vec<Judged> {
    let mut out: Vec<Judged> = comparisons
        .values()
        .flat_map(|c| &c.rows)
        .map(|row| {
            let n = noise.map(|n| {
                n.get(&(row.family, row.module.clone(), row.key.clone()))
                    .copied()
                    .unwrap_or(0.0)
            });
            let (own, gates) = s.threshold_of(row.family, &row.key);
            let threshold = own + n.unwrap_or(0.0);
            Judged {
                verdict: verdict(row, s, threshold),
                gates,
                threshold,
                noise: n,
                row: row.clone(),
            }
        })
        .collect();
    let severity = |j: &Judged| {
        j.row
            .stat
            .change
            .map(|c| worse_by(j.row.family, c).abs())
            .unwrap_or(0.0)
    };
    out.sort_by(|a, b| {
        (a.verdict, !a.gates, a.row.family)
            .cmp(&(b.verdict, !b.gates, b.row.family))
            .then_with(|| severity(b).total_cmp(&severity(a)))
            .then_with(|| a.row.key.cmp(&b.row.key))
    });
    out
}

// ---------------------------------------------------------------- the comparison nodes

/// The comparison of one family of metrics: keyed by the statistics' settings, what else
/// selects its rows, and the keys of the shares it reads on each side.
struct FamilyNode<'a> {
    /// `compare:<family>`.
    kind: String,
    stats: String,
    extra: &'a str,
    base: &'a [Key],
    head: &'a [Key],
}

impl Node for FamilyNode<'_> {
    type Value = FamilyComparison;
    const KEEP: Keep = Keep::Stored;
    fn kind(&self) -> &str {
        &self.kind
    }
    fn roots(&self) -> Vec<&'static str> {
        COMPARISON.roots.to_vec()
    }
    fn recipe(&self, kb: KeyBuilder) -> KeyBuilder {
        let mut kb = kb
            .param("stats", &self.stats)
            .param("extra", self.extra)
            .param("base", (self.base.len() as u64).to_le_bytes());
        for k in self.base.iter().chain(self.head) {
            kb = kb.input(k);
        }
        kb
    }
}

/// A family's comparison as a stored node keyed by the shares it reads on each side.
fn family_node(
    db: &Db,
    family: Family,
    base_keys: &[Key],
    head_keys: &[Key],
    extra: &str,
    s: &StatSettings,
    compute: impl FnOnce() -> Result<(Vec<Series>, Vec<Series>)>,
) -> Result<FamilyComparison> {
    let node = FamilyNode {
        kind: COMPARISON.kind(family.name()),
        stats: serde_json::to_string(s)?,
        extra,
        base: base_keys,
        head: head_keys,
    };
    let (_, v) = db.engine().compute(&node, "", || {
        let (b, h) = compute()?;
        Ok(compare_series(family, &b, &h, s))
    })?;
    Ok(v.as_ref().clone())
}

type Outs<T> = Vec<graph::Out<T>>;

/// The shares `compare` reads, each with the parameters it reads them with.
pub fn needs(more: Vec<ShareUse>) -> graph::Needs {
    graph::Needs::new(
        [
            ShareUse::of(&SummaryShare, &()),
            ShareUse::of(&ThunkShare, &()),
            ShareUse::of(&CommunicationShare, &()),
            ShareUse::of(&CompilationsShare, &Default::default()),
            ShareUse::of(&RangeSumsShare, &()),
            ShareUse::of(&crate::analyses::provenance::ProvenanceShare, &()),
        ]
        .into_iter()
        .chain(more),
    )
}

fn keys<T>(outs: &Outs<T>) -> Vec<Key> {
    outs.iter().map(|o| o.key).collect()
}

fn values<T>(outs: &Outs<T>) -> Vec<&T> {
    outs.iter().map(|o| o.value.as_ref()).collect()
}

/// Every family's comparison of two runs held by one database. Thunks and op types are
/// compared within `changed` when given, else within the modules whose comparison changed.
fn families(
    db: &Db,
    base: Run,
    head: Run,
    s: &Settings,
    changed: Option<&BTreeSet<String>>,
) -> Result<(BTreeMap<Family, FamilyComparison>, BTreeSet<String>)> {
    let st = &s.stats;
    let mut out: BTreeMap<Family, FamilyComparison> = BTreeMap::new();

    let (bs, hs) = (
        graph::run_shares(db, base, &SummaryShare, &())?,
        graph::run_shares(db, head, &SummaryShare, &())?,
    );
    out.insert(
        Family::Module,
        family_node(db, Family::Module, &keys(&bs), &keys(&hs), "", st, || {
            Ok((
                samples::modules(&values(&bs)),
                samples::modules(&values(&hs)),
            ))
        })?,
    );
    out.insert(
        Family::Wait,
        family_node(db, Family::Wait, &keys(&bs), &keys(&hs), "", st, || {
            Ok((samples::waits(&values(&bs)), samples::waits(&values(&hs))))
        })?,
    );

    // Where the time went: thunks and op types of the modules that changed.
    let changed: BTreeSet<String> = match changed {
        Some(c) => c.clone(),
        None => out[&Family::Module]
            .rows
            .iter()
            .filter(|r| {
                matches!(
                    verdict(r, s, s.threshold(r.family)),
                    Verdict::Regression | Verdict::Improvement
                )
            })
            .filter_map(|r| r.module.clone())
            .collect(),
    };
    for family in [Family::Thunk, Family::Op, Family::Rate] {
        let cmp = if changed.is_empty() {
            FamilyComparison::default()
        } else {
            let (bt, ht) = (
                graph::run_shares(db, base, &ThunkShare, &())?,
                graph::run_shares(db, head, &ThunkShare, &())?,
            );
            let within = |xs: Vec<Series>| -> Vec<Series> {
                xs.into_iter()
                    .filter(|x| x.module.as_ref().is_some_and(|m| changed.contains(m)))
                    .collect()
            };
            let of = |parts: &[&samples::ThunkPartial]| match family {
                Family::Rate => samples::rates(parts),
                f => samples::thunks(parts, f == Family::Op),
            };
            family_node(
                db,
                family,
                &keys(&bt),
                &keys(&ht),
                &serde_json::to_string(&changed)?,
                st,
                || Ok((within(of(&values(&bt))), within(of(&values(&ht))))),
            )?
        };
        out.insert(family, cmp);
    }

    let (bc, hc) = (
        graph::run_shares(db, base, &CommunicationShare, &())?,
        graph::run_shares(db, head, &CommunicationShare, &())?,
    );
    out.insert(
        Family::Bandwidth,
        family_node(
            db,
            Family::Bandwidth,
            &keys(&bc),
            &keys(&hc),
            "",
            st,
            || {
                Ok((
                    samples::bandwidths(&values(&bc)),
                    samples::bandwidths(&values(&hc)),
                ))
            },
        )?,
    );

    let (bx, hx) = (
        graph::run_shares(db, base, &CompilationsShare, &Default::default())?,
        graph::run_shares(db, head, &CompilationsShare, &Default::default())?,
    );
    out.insert(
        Family::Compile,
        family_node(db, Family::Compile, &keys(&bx), &keys(&hx), "", st, || {
            Ok((
                samples::compiles(&values(&bx)),
                samples::compiles(&values(&hx)),
            ))
        })?,
    );
    let (bp, hp) = (
        graph::run_shares(db, base, &RangeSumsShare, &())?,
        graph::run_shares(db, head, &RangeSumsShare, &())?,
    );
    out.insert(
        Family::Pass,
        family_node(db, Family::Pass, &keys(&bp), &keys(&hp), "", st, || {
            Ok((samples::passes(&values(&bp)), samples::passes(&values(&hp))))
        })?,
    );

    // The program's own NVTX ranges (none in most profiles).
    let (br, hr) = (
        graph::run_shares(db, base, &RangesShare, &())?,
        graph::run_shares(db, head, &RangesShare, &())?,
    );
    out.insert(
        Family::Range,
        family_node(db, Family::Range, &keys(&br), &keys(&hr), "", st, || {
            Ok((samples::ranges(&values(&br)), samples::ranges(&values(&hr))))
        })?,
    );

    Ok((out, changed))
}

/// Every family's comparison of two runs with the default settings (for `history`), and the
/// modules whose comparison changed.
pub fn families_of(
    db: &Db,
    base: Run,
    head: Run,
) -> Result<(BTreeMap<Family, FamilyComparison>, BTreeSet<String>)> {
    families(db, base, head, &Settings::default(), None)
}

/// Compare two runs held by one database; with `rerun` (another profile of the base, made
/// the same way), each metric's base-vs-rerun change is its run-to-run noise, added to its
/// threshold.
pub fn compare(
    db: &Db,
    base: Run,
    head: Run,
    rerun: Option<Run>,
    s: &Settings,
    sides: (SideInfo, SideInfo, Option<SideInfo>),
) -> Result<Report> {
    let (out, changed) = families(db, base, head, s, None)?;
    let mut noise: BTreeMap<(Family, Option<String>, String), f64> = BTreeMap::new();
    if let Some(rerun) = rerun {
        let (aa, _) = families(db, base, rerun, s, Some(&changed))?;
        for row in aa.values().flat_map(|c| &c.rows) {
            if let Some(c) = row.stat.change {
                noise.insert((row.family, row.module.clone(), row.key.clone()), c.abs());
            }
        }
    }
    if out[&Family::Module].rows.is_empty()
        && out[&Family::Compile].rows.is_empty()
        && out[&Family::Pass].rows.is_empty()
    {
        bail!(
            "BASE and HEAD have no XLA module in common: nothing to compare (are they profiles of the same program?)"
        );
    }
    let metrics = judge(&out, s, rerun.map(|_| &noise));
    let why = explain::explain(db, base, head, &out, s)?;
    let regression = metrics
        .iter()
        .any(|m| m.gates && m.verdict == Verdict::Regression);
    let (base_info, head_info, rerun_info) = sides;
    let mut report = Report {
        verdict: if regression { "regression" } else { "ok" }.into(),
        exit_code: regression as i32,
        base: base_info,
        head: head_info,
        rerun: rerun_info,
        settings: s.clone(),
        metrics,
        added: out
            .iter()
            .filter(|(_, c)| !c.added.is_empty())
            .map(|(f, c)| (*f, c.added.clone()))
            .collect(),
        removed: out
            .iter()
            .filter(|(_, c)| !c.removed.is_empty())
            .map(|(f, c)| (*f, c.removed.clone()))
            .collect(),
        hint: None,
        findings: findings::changes(db, base, head),
        why,
    };
    report.hint = rerun_hint(
        report.rerun.is_some(),
        report.metrics.iter().map(|m| m.verdict),
        &report.added,
        &report.removed,
        report
            .why
            .modules
            .iter()
            .any(|m| m.recompiled == Some(recompiled::Recompiled::Program)),
    );
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rerun_is_suggested_only_for_significant_changes_between_the_same_modules() {
        use Verdict::*;
        let none = BTreeMap::new();
        let new_module: BTreeMap<Family, Vec<String>> =
            [(Family::Module, vec!["jit_new".to_string()])].into();
        let hint = rerun_hint(
            false,
            [Improvement, Unchanged, Regression].into_iter(),
            &none,
            &none,
            false,
        );
        assert!(
            hint.as_deref()
                .unwrap()
                .contains("these 2 significant changes"),
            "{hint:?}"
        );
        assert!(hint.unwrap().contains("--base-rerun"));
        // Measured already, nothing significant, or another program: no hint.
        assert_eq!(
            rerun_hint(true, [Regression].into_iter(), &none, &none, false),
            None
        );
        assert_eq!(
            rerun_hint(
                false,
                [Unchanged, Inconclusive].into_iter(),
                &none,
                &none,
                false
            ),
            None
        );
        assert_eq!(
            rerun_hint(false, [Regression].into_iter(), &new_module, &none, false),
            None
        );
        assert_eq!(
            rerun_hint(false, [Regression].into_iter(), &none, &new_module, false),
            None
        );
        // The same modules, but one's program is known to differ.
        assert_eq!(
            rerun_hint(false, [Regression].into_iter(), &none, &none, true),
            None
        );
    }

    fn series(pid: &str, module: &str, key: &str, values: Vec<f64>) -> Series {
        Series {
            program_id: Some(pid.into()),
            module: Some(module.into()),
            key: key.into(),
            values,
        }
    }

    fn noisy(n: usize, centre: f64, seed: u64) -> Vec<f64> {
        // Deterministic spread of about ±2 %.
        (0..n)
            .map(|i| centre * (1.0 + 0.02 * (((i as u64 * 7919 + seed) % 101) as f64 / 50.0 - 1.0)))
            .collect()
    }

    #[test]
    fn pairs_by_fingerprint_then_by_name() {
        let s = StatSettings::default();
        let base = vec![
            series("fp1", "step", "step", noisy(30, 1.0, 1)),
            series("fp2", "eval", "eval", noisy(30, 2.0, 2)),
            series("fp3", "gone", "gone", noisy(30, 2.0, 2)),
        ];
        let head = vec![
            series("fp1", "step", "step", noisy(30, 1.0, 3)),
            series("fp9", "eval", "eval", noisy(30, 2.0, 4)),
            series("fp4", "new", "new", noisy(30, 2.0, 2)),
        ];
        let c = compare_series(Family::Module, &base, &head, &s);
        let matched: Vec<(&str, Matched)> =
            c.rows.iter().map(|r| (r.key.as_str(), r.matched)).collect();
        assert_eq!(
            matched,
            vec![("step", Matched::Same), ("eval", Matched::ByName)]
        );
        assert_eq!(c.added, vec!["new [fp4]".to_string()]);
        assert_eq!(c.removed, vec!["gone [fp3]".to_string()]);
    }

    #[test]
    fn verdicts_need_size_and_significance() {
        let s = Settings::default();
        let st = StatSettings::default();
        let judge = |b: Vec<f64>, h: Vec<f64>, f: Family| {
            let b = series("p", "m", "m", b);
            let h = series("p", "m", "m", h);
            let c = compare_series(f, &[b], &[h], &st);
            verdict(&c.rows[0], &s, s.threshold(f))
        };
        let base = noisy(40, 1.0, 5);
        let slow10: Vec<f64> = noisy(40, 1.10, 6);
        let slow1: Vec<f64> = noisy(40, 1.01, 6);
        assert_eq!(
            judge(base.clone(), slow10.clone(), Family::Module),
            Verdict::Regression
        );
        assert_eq!(
            judge(slow10.clone(), base.clone(), Family::Module),
            Verdict::Improvement
        );
        // Significant perhaps, but below the 5 % threshold.
        assert_eq!(
            judge(base.clone(), slow1, Family::Module),
            Verdict::Unchanged
        );
        // The same 10 % with three samples a side: inconclusive, not an alarm.
        assert_eq!(
            judge(base[..3].to_vec(), slow10[..3].to_vec(), Family::Module),
            Verdict::Inconclusive
        );
        // Five steps a side, 43 % slower, completely apart: a regression (exactly p = 2/252
        // < α = 0.01; the normal approximation's 0.0122 would have called it unchanged).
        let steps = |ms: f64| (0..5).map(|i| ms + 0.01 * i as f64).collect::<Vec<_>>();
        assert_eq!(
            judge(steps(30.0), steps(43.0), Family::Module),
            Verdict::Regression
        );
        // Not significant but beyond the threshold: open, not "unchanged".
        let spread = |ms: f64| vec![ms, ms * 1.4, ms * 0.7, ms * 1.2, ms * 0.9];
        assert_eq!(
            judge(spread(30.0), spread(33.0), Family::Module),
            Verdict::Inconclusive
        );
        // Lower bandwidth is worse.
        assert_eq!(judge(slow10, base, Family::Bandwidth), Verdict::Regression);
    }

    #[test]
    fn settings_from_a_pipeline_table() {
        let f: SettingsFile = toml::from_str(
            "threshold_percent = 3\nthresholds_percent = { wait = 20 }\nalpha = 0.05\ngate = [\"module\", \"wait\"]",
        )
        .unwrap();
        let mut s = Settings::default();
        f.apply(&mut s).unwrap();
        assert_eq!(s.threshold(Family::Module), 0.03);
        assert_eq!(s.threshold(Family::Wait), 0.2);
        assert_eq!(s.alpha, 0.05);
        assert!(s.gate.contains(&Family::Wait) && !s.gate.contains(&Family::Bandwidth));
        let bad: SettingsFile = toml::from_str("gate = [\"modules\"]").unwrap();
        let e = bad.apply(&mut s).unwrap_err().to_string();
        assert!(e.contains("unknown metric \"modules\""), "{e}");
    }
}
