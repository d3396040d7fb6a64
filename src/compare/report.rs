//! The three faces of a comparison: a terminal table, `compare.md` (a pull-request comment:
//! the verdict first, then the top changes with their confidence intervals, where the time
//! went, what appeared or disappeared, and the settings) and `compare.json` (the
//! [`Report`] itself).

use super::{Family, Judged, Report, Verdict};
use crate::table::Table;
use std::collections::{BTreeMap, BTreeSet};

/// How many changes the table and the comment show (the JSON has them all).
const TOP: usize = 15;

use crate::units::signed_percent as pct;

pub(super) fn change(j: &Judged) -> String {
    j.row.stat.change.map(pct).unwrap_or_else(|| "–".into())
}

pub(super) fn ci(j: &Judged) -> String {
    match j.row.stat.ci {
        Some((lo, hi)) => format!("{} … {}", pct(lo), pct(hi)),
        None => "–".into(),
    }
}

pub(super) fn p(j: &Judged) -> String {
    match j.row.stat.p_value {
        Some(p) if p < 1e-4 => "<0.0001".into(),
        Some(p) => format!("{p:.4}"),
        None => "–".into(),
    }
}

pub(super) fn median(x: Option<f64>, family: Family) -> String {
    x.map(|v| family.show(v)).unwrap_or_else(|| "–".into())
}

pub(super) fn what(r: &Report, j: &Judged) -> String {
    let row = &j.row;
    let mut module = row.module.clone();
    // Programs of the same name (e.g. one step function compiled twice): add the short
    // fingerprint.
    if let (Some(m), Some(id)) = (&module, &row.program_id) {
        let twins = r
            .metrics
            .iter()
            .filter(|o| o.row.family == row.family && o.row.module.as_ref() == Some(m))
            .filter(|o| o.row.key == row.key && o.row.program_id != row.program_id)
            .count();
        if twins > 0 {
            module = Some(format!(
                "{m} [{}]",
                crate::frames::program_ids::short_id(id)
            ));
        }
    }
    let mut s = match (&module, row.family) {
        (Some(m), Family::Thunk | Family::Op | Family::Rate) => format!("{m} › {}", row.key),
        (Some(m), _) => m.clone(),
        _ => row.key.clone(),
    };
    let r = row;
    if r.matched == super::Matched::ByName {
        s.push_str(" (HLO changed)");
    }
    s
}

pub(super) fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Regression => "regression",
        Verdict::Improvement => "improvement",
        Verdict::Inconclusive => "inconclusive",
        Verdict::Unchanged => "unchanged",
    }
}

/// The verdict, with the run-to-run noise that was added to the threshold when known.
pub(super) fn verdict_cell(j: &Judged) -> String {
    match j.noise {
        Some(n) => format!(
            "{} (run-to-run ±{:.1} %)",
            verdict_word(j.verdict),
            100.0 * n
        ),
        None => verdict_word(j.verdict).to_string(),
    }
}

/// The metrics worth showing: everything that changed or is inconclusive, then the largest
/// unchanged ones, up to [`TOP`].
pub(super) fn shown(r: &Report) -> Vec<&Judged> {
    r.metrics
        .iter()
        .filter(|m| !matches!(m.row.family, Family::Thunk | Family::Op | Family::Rate))
        .take(TOP)
        .collect()
}

/// The thunks and op types of the changed modules that changed themselves, those that gained
/// or lost the most time first.
pub(super) fn within(r: &Report) -> Vec<&Judged> {
    let mut v: Vec<&Judged> = r
        .metrics
        .iter()
        .filter(|m| matches!(m.row.family, Family::Thunk | Family::Op | Family::Rate))
        .filter(|m| matches!(m.verdict, Verdict::Regression | Verdict::Improvement))
        .filter(|m| !by_name_across_programs(r, m.row.family, m.row.module.as_deref()))
        .collect();
    v.sort_by(|a, b| {
        let w = |j: &Judged| match (j.row.stat.base_median, j.row.stat.head_median) {
            (Some(b), Some(h)) => (h - b).abs(),
            _ => 0.0,
        };
        // Times first (ms, by what they gained or lost), then FLOP rates (TFLOP/s).
        let rate = |j: &Judged| j.row.family == Family::Rate;
        rate(a)
            .cmp(&rate(b))
            .then_with(|| w(b).total_cmp(&w(a)))
            .then_with(|| a.row.key.cmp(&b.row.key))
    });
    v.truncate(TOP);
    v
}

/// Whether a row of `family` in `module` pairs instructions by name across two different
/// programs (thunks and their FLOP rates in a module whose program changed): such pairs say
/// nothing (`custom-call.9` is another op on each side), so tables leave them out.
fn by_name_across_programs(r: &Report, family: Family, module: Option<&str>) -> bool {
    matches!(family, Family::Thunk | Family::Rate) && module.is_some_and(|m| r.program_changed(m))
}

/// The modules whose thunks the tables leave out (their program changed), with a line
/// saying so.
pub(super) fn unpaired_note(r: &Report) -> Option<String> {
    let modules: BTreeSet<&str> = r
        .metrics
        .iter()
        .filter(|m| by_name_across_programs(r, m.row.family, m.row.module.as_deref()))
        .filter_map(|m| m.row.module.as_deref())
        .collect();
    (!modules.is_empty()).then(|| {
        format!(
            "thunks of {} not paired by name: the program changed, so the same name is another \
             op on each side; the changes by source line are under \"why\"",
            modules.into_iter().collect::<Vec<_>>().join(", ")
        )
    })
}

/// What is only on one side, for a list: names, except the thunks (and their rates) of a
/// module whose program changed, which are counted ("jit_step: 55 thunks") instead.
pub(super) fn only_in(r: &Report, family: Family, names: &[String]) -> (Vec<String>, Vec<String>) {
    let mut kept = Vec::new();
    let mut counted: BTreeMap<&str, usize> = BTreeMap::new();
    for n in names {
        let module = n.split_once('/').map(|(m, _)| m);
        if by_name_across_programs(r, family, module) {
            *counted.entry(module.unwrap_or_default()).or_default() += 1;
        } else {
            kept.push(n.clone());
        }
    }
    let counts = counted
        .into_iter()
        .map(|(m, n)| {
            format!(
                "{m}: {} (its program changed)",
                crate::table::count(n, family.name(), &format!("{}s", family.name()))
            )
        })
        .collect();
    (kept, counts)
}

/// The one-line verdict.
pub fn headline(r: &Report) -> String {
    let gated: Vec<&Judged> = r
        .metrics
        .iter()
        .filter(|m| m.gates && m.verdict == Verdict::Regression)
        .collect();
    if gated.is_empty() {
        let improvements = r.count(Verdict::Improvement, false);
        let inconclusive = r.count(Verdict::Inconclusive, true);
        let mut s = format!(
            "No significant regression (gated: {}; threshold {}, α = {}).",
            gate_list(r),
            threshold_text(r),
            r.settings.alpha
        );
        if improvements > 0 {
            s.push_str(&format!(
                " {}.",
                crate::table::count(
                    improvements,
                    "significant improvement",
                    "significant improvements"
                )
            ));
        }
        if inconclusive > 0 {
            s.push_str(&format!(
                " {} inconclusive (fewer than {} samples on a side).",
                crate::table::count(inconclusive, "gated metric", "gated metrics"),
                r.settings.min_samples
            ));
        }
        s
    } else {
        let first = gated[0];
        format!(
            "{}: {} {} {} (95 % CI {}, p {}){}.",
            crate::table::count(gated.len(), "regression", "regressions"),
            first.row.family.name(),
            what(r, first),
            change(first),
            ci(first),
            p(first),
            if gated.len() > 1 { ", …" } else { "" }
        )
    }
}

/// A fraction as a percentage with the digits it needs (5 %, 0.5 %, 2.25 %).
fn percent(t: f64) -> String {
    let p = (100.0 * t * 1e6).round() / 1e6;
    format!("{p} %")
}

pub(super) fn gate_list(r: &Report) -> String {
    if r.settings.gate.is_empty() {
        return "nothing".into();
    }
    r.settings
        .gate
        .iter()
        .map(|f| f.name())
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn threshold_text(r: &Report) -> String {
    let mut ts: Vec<f64> = r.settings.thresholds.values().copied().collect();
    ts.dedup();
    if ts.len() == 1 {
        percent(ts[0])
    } else {
        r.settings
            .thresholds
            .iter()
            .map(|(f, t)| format!("{} {}", f.name(), percent(*t)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The terminal rendering: within 100 columns, numbers to 3 significant figures with their
/// units, "HLO changed" said once below the table (its rows marked †).
pub fn terminal(r: &Report, width: usize) -> String {
    // One heading row per metric family; the family's rows under it.
    let mut t = Table::new(&[
        "metric",
        "base",
        "head",
        "change",
        "95% CI of change",
        "p",
        "n",
        "verdict",
    ]);
    t.align_right(&[1, 2, 3, 4, 5]);
    let short_ci = |j: &Judged| match j.row.stat.ci {
        Some((lo, hi)) => {
            format!(
                "{} … {}",
                pct(lo).trim_end_matches(" %"),
                pct(hi).trim_end_matches(" %")
            ) + " %"
        }
        None => "–".into(),
    };
    let mut hlo_changed = false;
    let mut group: Option<(Family, bool, Option<String>)> = None;
    let mut row = |t: &mut Table, j: &Judged| {
        // What is measured inside a module is grouped under it ("thunk in jit_step"), its rows
        // named by the thunk or op alone; the HLO mark goes on the module's own row only.
        let inside = matches!(j.row.family, Family::Thunk | Family::Op | Family::Rate);
        let module = inside.then(|| j.row.module.clone()).flatten();
        let key = (j.row.family, j.gates, module.clone());
        if group.as_ref() != Some(&key) {
            let star = if j.gates { "*" } else { "" };
            t.heading(match &module {
                Some(m) => format!("{}{star} in {m}", j.row.family.name()),
                None => format!("{}{star}", j.row.family.name()),
            });
            group = Some(key);
        }
        let w = match &module {
            Some(_) => j.row.key.clone(),
            None => what(r, j),
        };
        let w = match w.strip_suffix(" (HLO changed)") {
            Some(x) => {
                hlo_changed = true;
                format!("{x} †")
            }
            None => w,
        };
        t.row(vec![
            format!("  {w}"),
            median(j.row.stat.base_median, j.row.family),
            median(j.row.stat.head_median, j.row.family),
            change(j),
            short_ci(j),
            p(j),
            format!("{}/{}", j.row.stat.n_base, j.row.stat.n_head),
            verdict_cell(j),
        ])
    };
    for j in shown(r) {
        row(&mut t, j);
    }
    // Inside the changed modules: by family (ops, thunks, rates), each as `within` orders.
    let mut inner = within(r);
    inner.sort_by_key(|j| j.row.family);
    for j in &inner {
        row(&mut t, j);
    }
    let mut s = format!("{}\n\n{}", headline(r), t.render_within(width));
    s.push_str(&super::explain::terminal(&r.why));
    if r.rerun.is_some() {
        s.push_str("thresholds include each metric's run-to-run change (base against its rerun)\n");
    }
    s.push_str("* gated: a regression there fails the comparison\n");
    if let Some(h) = &r.hint {
        s.push_str(&format!("hint: {h}\n"));
    }
    if hlo_changed {
        s.push_str(
            "† HLO changed: the module's program differs between the two runs, matched by its name\n",
        );
    }
    if let Some(n) = unpaired_note(r) {
        s.push_str(&format!("{n}\n"));
    }
    for (side, lists) in [("HEAD", &r.added), ("BASE", &r.removed)] {
        for (f, names) in lists {
            let (kept, counts) = only_in(r, *f, names);
            let all: Vec<String> = kept.into_iter().chain(counts).collect();
            s.push_str(&format!(
                "only in {side} ({}): {}\n",
                f.name(),
                all.join(", ")
            ));
        }
    }
    s
}

/// `compare.md`: for a pull-request comment.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let mark = if r.exit_code == 0 { "✅" } else { "❌" };
    s.push_str(&format!("{mark} **{}**\n\n", headline(r)));
    s.push_str(&format!(
        "BASE: {} ({}) · HEAD: {} ({})\n\n",
        r.base.inputs.join(", "),
        crate::table::count(r.base.processes, "process", "processes"),
        r.head.inputs.join(", "),
        crate::table::count(r.head.processes, "process", "processes")
    ));
    if let Some(rr) = &r.rerun {
        s.push_str(&format!(
            "BASE rerun: {} — each metric's threshold includes its change between the two base profiles (run-to-run noise).\n\n",
            rr.inputs.join(", ")
        ));
    }
    if let Some(h) = &r.hint {
        s.push_str(&format!("> {h}\n\n"));
    }
    s.push_str(&super::findings::markdown(&r.findings));
    s.push_str(&super::explain::markdown(&r.why));
    let table = |s: &mut String, rows: &[&Judged]| {
        s.push_str("| metric | what | base median | head median | change | 95 % CI | p | n (base/head) | verdict |\n");
        s.push_str("|---|---|--:|--:|--:|---|--:|---|---|\n");
        for j in rows {
            s.push_str(&format!(
                "| {}{} | `{}` | {} | {} | **{}** | {} | {} | {}/{} | {} |\n",
                j.row.family.name(),
                if j.gates { " (gated)" } else { "" },
                what(r, j),
                median(j.row.stat.base_median, j.row.family),
                median(j.row.stat.head_median, j.row.family),
                change(j),
                ci(j),
                p(j),
                j.row.stat.n_base,
                j.row.stat.n_head,
                verdict_cell(j)
            ));
        }
        s.push('\n');
    };
    s.push_str("### Top changes\n\n");
    table(&mut s, &shown(r));
    if let Some(n) = unpaired_note(r) {
        s.push_str(&format!("{n}.\n\n"));
    }
    // The rest, as far as GitHub's limit on a comment allows.
    let mut rest: Vec<String> = Vec::new();
    let inner = within(r);
    if !inner.is_empty() {
        let mut t = String::from(
            "### Where the time went (thunks and op types of the changed modules)\n\n",
        );
        table(&mut t, &inner);
        rest.push(t);
    }
    if !r.added.is_empty() || !r.removed.is_empty() {
        let mut s = String::new();
        s.push_str("### Added and removed\n\n");
        for (side, lists) in [("HEAD", &r.added), ("BASE", &r.removed)] {
            for (f, names) in lists {
                let (kept, counts) = only_in(r, *f, names);
                let mut all = Vec::new();
                if !kept.is_empty() {
                    all.push(code_list(&kept));
                }
                all.extend(counts);
                s.push_str(&format!(
                    "- only in {side} ({}): {}\n",
                    f.name(),
                    all.join(", ")
                ));
            }
        }
        s.push('\n');
        rest.push(s);
    }
    let footer = format!(
        "<sub>Medians of per-execution samples; change = head/base − 1 of the median with a {:.0} % bootstrap interval ({} resamples); p: two-sided Mann–Whitney U. A regression: worse by more than the threshold ({}) and p < {}; fewer than {} samples on a side: inconclusive. Gated: {}. nsys-jax-pipe {}.</sub>\n",
        100.0 * r.settings.stats.confidence,
        r.settings.stats.resamples,
        threshold_text(r),
        r.settings.alpha,
        r.settings.min_samples,
        gate_list(r),
        env!("CARGO_PKG_VERSION"),
    );
    within_limit(s, rest, &footer)
}

/// GitHub's limit on a pull-request comment [characters].
pub const COMMENT_LIMIT: usize = 65_536;

/// `head`, then the sections of `rest` that fit under [`COMMENT_LIMIT`] with the footer, and
/// a line saying what was left out (everything is in compare.json).
fn within_limit(head: String, rest: Vec<String>, footer: &str) -> String {
    const NOTE: usize = 200;
    let len = |s: &str| s.chars().count();
    let mut s = head;
    if len(&s) + len(footer) + NOTE > COMMENT_LIMIT {
        // Even the lead is too long: cut it at a line.
        let keep = COMMENT_LIMIT - len(footer) - NOTE;
        let cut: String = s.chars().take(keep).collect();
        s = cut
            .rsplit_once('\n')
            .map_or(cut.clone(), |(a, _)| a.to_string());
        s.push_str("\n\n");
    }
    let mut left = 0;
    for part in rest {
        if len(&s) + len(&part) + len(footer) + NOTE <= COMMENT_LIMIT {
            s.push_str(&part);
        } else {
            left += 1;
        }
    }
    if left > 0 || len(&s) + len(footer) + NOTE > COMMENT_LIMIT {
        s.push_str(&format!(
            "*{} left out to stay within GitHub's {COMMENT_LIMIT}-character limit on a comment; everything is in compare.json.*\n\n",
            crate::table::count(left.max(1), "section", "sections")
        ));
    }
    s.push_str(footer);
    s
}

#[cfg(test)]
mod limit_tests {
    use super::*;

    #[test]
    fn a_comment_stays_within_github_s_limit() {
        let head = "lead\n".repeat(100);
        let big = "x".repeat(40_000);
        let out = within_limit(
            head.clone(),
            vec![big.clone(), big.clone(), "small\n".into()],
            "foot",
        );
        assert!(out.chars().count() <= COMMENT_LIMIT, "{}", out.len());
        assert!(
            out.contains("1 section left out"),
            "{}",
            &out[out.len() - 300..]
        );
        assert!(out.ends_with("foot") && out.contains("small"));
        let huge = "line\n".repeat(20_000);
        let out = within_limit(huge, vec![], "foot");
        assert!(out.chars().count() <= COMMENT_LIMIT);
        assert!(out.ends_with("foot"));
        // Under the limit: everything, no note.
        let out = within_limit(head, vec!["a\n".into()], "foot");
        assert!(!out.contains("left out"));
    }
}

fn code_list(names: &[String]) -> String {
    const MAX: usize = 20;
    let mut v: Vec<String> = names.iter().take(MAX).map(|n| format!("`{n}`")).collect();
    if names.len() > MAX {
        v.push(format!("and {} more", names.len() - MAX));
    }
    v.join(", ")
}
