//! The comparison as an HTML page (`compare --html`): the verdict and what it means, every
//! metric's change with its confidence interval as a forest plot (regressions first), the
//! thunks and op types of the changed modules, and what was added or removed. A stored node
//! keyed by the comparison's content: an unchanged comparison reads it back.

use super::report::{change, ci, gate_list, p, shown, threshold_text, verdict_cell, what, within};
use super::{Family, Judged, Report, Verdict};
use crate::engine::kinds::kind;
use crate::engine::value::Bytes;
use crate::engine::{Key, KeyBuilder, node_kind};
use crate::graph::Db;
use crate::report::charts::{Interval, Tone};
use crate::report::{Cell, HtmlTable, Page, Section, charts, escape, facts_list, render_page};
use anyhow::Result;
use std::sync::Arc;

kind!(
    /// The HTML page of a comparison.
    COMPARE_HTML = "compare-html"
);

/// Metrics drawn in the forest plot at most.
const DRAWN: usize = 40;

/// The page of a comparison, keyed by the comparison's content.
struct CompareHtmlNode {
    report: Key,
}
node_kind!(CompareHtmlNode, COMPARE_HTML, Stored, Bytes);
impl CompareHtmlNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.report)
    }
}

/// The HTML page of `r`.
pub fn page(db: &Db, r: &Report) -> Result<Arc<Bytes>> {
    let node = CompareHtmlNode {
        report: Key(*blake3::hash(&serde_json::to_vec(r)?).as_bytes()),
    };
    let (_, v) = db.engine().compute(&node, "", || {
        let page = Page {
            title: format!(
                "nsys-jax-pipe compare: {} → {}",
                r.base.inputs.join(", "),
                r.head.inputs.join(", ")
            ),
            subtitle: super::report::headline(r),
            headline: String::new(),
            sections: vec![
                verdict(r),
                findings(r),
                changes(r)?,
                why(r),
                thunks(r),
                added_removed(r),
            ],
        };
        Ok(Bytes(render_page(&page, |_| None)?.into_bytes()))
    })?;
    Ok(v)
}

/// The findings that appeared, went away or changed severity (`diagnose` on each side).
fn findings(r: &Report) -> Section {
    let mut sec = Section::new("findings", "Findings");
    let md = super::findings::markdown(&r.findings);
    if md.is_empty() {
        sec.para("No finding on either side (docs/diagnosis.md).");
        return sec;
    }
    let mut html = String::from("<ul>");
    for line in md.lines().filter(|l| l.starts_with("- ")) {
        html.push_str(&format!(
            "<li>{}</li>",
            escape(&line[2..].replace(['*', '`'], ""))
        ));
    }
    html.push_str("</ul>");
    sec.raw(&html);
    sec
}

fn verdict(r: &Report) -> Section {
    let mut sec = Section::new("verdict", "Verdict");
    let class = if r.exit_code == 0 { "good" } else { "bad" };
    sec.raw(&format!(
        "<p class=\"verdict {class}\">{}</p>\n",
        escape(&super::report::headline(r))
    ));
    sec.para(&format!(
        "Exit code {}: {}.",
        r.exit_code,
        if r.exit_code == 0 {
            "no significant regression in a gated metric"
        } else {
            "a gated metric regressed (worse by more than its threshold, and significant)"
        }
    ));
    let side = |s: &super::SideInfo| {
        format!(
            "{} ({})",
            s.inputs.join(", "),
            crate::table::count(s.processes, "process", "processes")
        )
    };
    let mut facts = vec![
        ("Base".to_string(), side(&r.base)),
        ("Head".to_string(), side(&r.head)),
    ];
    if let Some(rr) = &r.rerun {
        facts.push((
            "Base rerun".into(),
            format!(
                "{}: each metric's threshold includes its change between the two base profiles",
                side(rr)
            ),
        ));
    }
    facts.extend([
        ("Thresholds".to_string(), threshold_text(r)),
        (
            "Significance level".to_string(),
            format!("α = {}", r.settings.alpha),
        ),
        (
            "Samples needed".to_string(),
            format!("{} per side, else inconclusive", r.settings.min_samples),
        ),
        ("Gated metrics".to_string(), gate_list(r)),
        (
            "Intervals".to_string(),
            format!(
                "{:.0} % bootstrap of the change of medians ({} resamples); p: two-sided \
                 Mann–Whitney U",
                100.0 * r.settings.stats.confidence,
                r.settings.stats.resamples
            ),
        ),
    ]);
    sec.raw(&facts_list(&facts));
    sec
}

/// A median with its unit, three significant figures.
fn median(v: Option<f64>, family: Family) -> Cell {
    let Some(v) = v else {
        return Cell::num("–", f64::NAN);
    };
    Cell::num(family.show(v), v)
}

/// One metric as a table row.
fn row(r: &Report, j: &Judged) -> Vec<Cell> {
    let change_value = j.row.stat.change.unwrap_or(0.0);
    vec![
        Cell::text(format!(
            "{}{}",
            j.row.family.name(),
            if j.gates { " (gated)" } else { "" }
        )),
        Cell::text(what(r, j)),
        median(j.row.stat.base_median, j.row.family),
        median(j.row.stat.head_median, j.row.family),
        Cell::num(change(j), change_value),
        Cell::text(ci(j)),
        Cell::num(p(j), j.row.stat.p_value.unwrap_or(1.0)),
        Cell::text(format!("{}/{}", j.row.stat.n_base, j.row.stat.n_head)),
        Cell::text(verdict_cell(j)),
    ]
}

const HEADER: [&str; 9] = [
    "metric",
    "what",
    "base median",
    "head median",
    "change",
    "95 % interval",
    "p",
    "n (base/head)",
    "verdict",
];

fn changes(r: &Report) -> Result<Section> {
    let mut sec = Section::new("changes", "Changes");
    let metrics: Vec<&Judged> = r
        .metrics
        .iter()
        .filter(|m| {
            !matches!(
                m.row.family,
                super::Family::Thunk | super::Family::Op | super::Family::Rate
            )
        })
        .collect();
    if metrics.is_empty() {
        sec.para("Nothing to compare: no metric is on both sides.");
        return Ok(sec);
    }
    // Regressions first (the comparison orders its metrics so), then the rest.
    let drawn: Vec<Interval> = metrics
        .iter()
        .filter_map(|j| {
            let c = j.row.stat.change?;
            let (lo, hi) = j.row.stat.ci.unwrap_or((c, c));
            Some(Interval {
                label: format!("{} {}", j.row.family.name(), what(r, j)),
                estimate: 100.0 * c,
                low: 100.0 * lo,
                high: 100.0 * hi,
                tone: match j.verdict {
                    Verdict::Regression => Tone::Worse,
                    Verdict::Improvement => Tone::Better,
                    _ => Tone::Neither,
                },
            })
        })
        .take(DRAWN)
        .collect();
    sec.para(&format!(
        "Change of each metric's median (head / base − 1) with its interval; red: a \
         regression, green: an improvement (for bandwidth, higher is better). {}",
        if metrics.len() > DRAWN {
            format!("The first {DRAWN} of {} metrics are drawn.", metrics.len())
        } else {
            String::new()
        }
    ));
    sec.chart(charts::forest(&drawn, "change [%]", &|v| {
        format!("{:+} %", crate::units::sig3(v))
    })?);
    let mut t = HtmlTable::new(&HEADER).limit(100, Some("compare.json"));
    for j in &metrics {
        t.row(row(r, j));
    }
    sec.table(&t);
    let top = shown(r);
    let regressions = top
        .iter()
        .filter(|j| j.verdict == Verdict::Regression)
        .count();
    if regressions > 0 {
        sec.para(&format!(
            "{} among the top changes.",
            crate::table::count(regressions, "regression", "regressions")
        ));
    }
    Ok(sec)
}

/// Why: each changed module's ops and HLO diff, and what else changed between the runs.
fn why(r: &Report) -> Section {
    use super::explain::{env_phrase, module_phrase, op_phrase};
    let mut sec = Section::new("why", "Why");
    let w = &r.why;
    if w.is_empty() {
        sec.para(
            "No module changed or was compiled anew, and nothing else differs between the runs.",
        );
        return sec;
    }
    let mut html = String::new();
    for m in &w.modules {
        html.push_str(&format!("<h3>{}</h3>\n", escape(&module_phrase(m))));
        if !m.ops.is_empty() {
            html.push_str("<ul>");
            for o in &m.ops {
                html.push_str(&format!("<li><code>{}</code></li>", escape(&op_phrase(o))));
            }
            html.push_str("</ul>\n");
        }
        if let Some(h) = &m.hlo {
            html.push_str(&format!("<p>HLO: {}</p>\n", escape(&h.line())));
        }
        if let Some(n) = &m.hlo_note {
            html.push_str(&format!("<p>HLO: {}</p>\n", escape(n)));
        }
    }
    if !w.environment.changes.is_empty() {
        html.push_str("<h3>What else changed</h3>\n<ul>");
        for c in &w.environment.changes {
            html.push_str(&format!("<li><code>{}</code></li>", escape(&env_phrase(c))));
        }
        html.push_str("</ul>\n");
    }
    if !(w.environment.base_recorded && w.environment.head_recorded) {
        html.push_str("<p>Versions, XLA flags and commits are known only for archives made by <code>nsys-jax-pipe run</code>.</p>\n");
    }
    if !w.passes.is_empty() {
        html.push_str("<h3>XLA passes whose time changed most</h3>\n<ul>");
        for p in &w.passes {
            html.push_str(&format!(
                "<li><code>{}</code> {}</li>",
                escape(&p.pass),
                crate::units::signed_ms(p.delta_ms)
            ));
        }
        html.push_str("</ul>\n");
    }
    sec.raw(&html);
    sec
}

fn thunks(r: &Report) -> Section {
    let mut sec = Section::new("thunks", "Inside the changed modules");
    let inner = within(r);
    if inner.is_empty() {
        sec.para("No thunk or op type of a changed module changed significantly.");
        return sec;
    }
    sec.para("The thunks and op types of the changed modules that changed themselves, those that gained or lost the most time first.");
    let mut t = HtmlTable::new(&HEADER);
    for j in inner {
        t.row(row(r, j));
    }
    sec.table(&t);
    if let Some(n) = super::report::unpaired_note(r) {
        sec.para(&format!("{n}."));
    }
    sec
}

fn added_removed(r: &Report) -> Section {
    let mut sec = Section::new("added-removed", "Added and removed");
    if r.added.is_empty() && r.removed.is_empty() {
        sec.para("Both sides have the same metrics.");
        return sec;
    }
    let mut t = HtmlTable::new(&["side", "metric", "what"]).limit(200, Some("compare.json"));
    for (side, map) in [("only in head", &r.added), ("only in base", &r.removed)] {
        for (f, names) in map {
            let (kept, counts) = super::report::only_in(r, *f, names);
            for n in kept.iter().chain(&counts) {
                t.row(vec![Cell::text(side), Cell::text(f.name()), Cell::text(n)]);
            }
        }
    }
    sec.table(&t);
    sec
}
