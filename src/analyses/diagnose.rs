//! `diagnose`: what is wrong with the program, the evidence, and what to try. It reads the
//! results of the other analyses (typed, as their files hold them; it recomputes none of
//! them) and runs the rules of `super::diagnose_rules` on them (docs/diagnosis.md, one section per rule).
//!
//! Output contract (`diagnosis.json`): `{"steady_ms", "findings":[{rule, severity
//! (critical|warning|info), title, at_stake_ms, percent, evidence:[{text, analysis, module?,
//! op?, device?, op_name?}], remedies:[{action, why}]}], "checks":[{rule, status (fired|quiet|
//! no data), why}], "notes":[..]}`; findings by severity, then by time at stake.

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::diagnose_rules::{self as rules, Check, Finding, Inputs, Severity};
use super::roofline_model::RooflineParams;
use super::{
    Analysis, Reduced, RunShares, ShareUse, Upstream, communication, compilation, memory, ops,
    provenance, ranges, roofline, stragglers, summary, upstream_or_note,
};
use crate::engine::value::Text;
use crate::report::{Section, escape};
use crate::units::{duration_ms, pct, wrap};

/// Its file.
const FILE: &str = "diagnosis.json";

/// What `diagnose` finds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Diagnosis {
    /// The steady state's wall time summed over devices [ms], what shares are of.
    pub steady_ms: Option<f64>,
    pub findings: Vec<Finding>,
    pub checks: Vec<Check>,
    pub notes: Vec<String>,
}

/// The `diagnose` analysis. Its parameters are those of the roofline it reads (`--peak`).
pub struct DiagnoseAnalysis;

/// Rows of the long tables the rules read (the analyses list them longest first, so the
/// first few hundred hold the evidence).
const ROWS: usize = 300;
/// The latest arrivals at collectives read, and the program's own ranges.
const WORST: usize = 5;
const RANGES: usize = 50;

/// The result of `a` with its default parameters; None (and a note) when it failed.
fn read<A: Analysis>(run: &dyn RunShares, a: &A, notes: &mut Vec<String>) -> Option<A::Result> {
    upstream_or_note(run, a, &A::Params::default(), JUDGE, notes)
}

/// What a note on a failed analysis says of its rules.
const JUDGE: &str = "its rules could not judge";

impl Analysis for DiagnoseAnalysis {
    const NAME: &'static str = "diagnose";
    const FILE: &'static str = file!();
    const LEADS: bool = true;
    type Params = RooflineParams;
    type Result = Diagnosis;

    fn shares(&self, _: &RooflineParams) -> Vec<ShareUse> {
        Vec::new()
    }

    fn upstream(&self, params: &RooflineParams) -> Vec<Upstream> {
        let none = || serde_json::json!({});
        vec![
            Upstream::of(&summary::SummaryAnalysis, none()),
            Upstream::of(&ops::OpsAnalysis, none()),
            Upstream::of(&communication::CommunicationAnalysis, none()),
            Upstream::of(&compilation::CompilationAnalysis, none()),
            Upstream::of(&stragglers::StragglersAnalysis, none()),
            Upstream::of(&memory::MemoryAnalysis, none()),
            Upstream::of(
                &roofline::RooflineAnalysis,
                serde_json::to_value(params).unwrap_or_default(),
            ),
            Upstream::of(&provenance::ProvenanceAnalysis, none()),
            Upstream::of(&ranges::RangesAnalysis, none()),
        ]
    }

    fn reduce(&self, run: &dyn RunShares, params: &RooflineParams) -> Result<Reduced<Diagnosis>> {
        let mut notes = Vec::new();
        let n = &mut notes;
        let ins = Inputs {
            summary: read(run, &summary::SummaryAnalysis, n),
            ops: read(run, &ops::OpsAnalysis, n).map(|mut o| {
                o.top_thunks.truncate(ROWS);
                o
            }),
            communication: read(run, &communication::CommunicationAnalysis, n),
            compilation: read(run, &compilation::CompilationAnalysis, n),
            stragglers: read(run, &stragglers::StragglersAnalysis, n).map(|mut s| {
                s.worst.truncate(WORST);
                s
            }),
            memory: read(run, &memory::MemoryAnalysis, n),
            roofline: upstream_or_note(run, &roofline::RooflineAnalysis, params, JUDGE, n).map(
                |mut r| {
                    r.ops.truncate(ROWS);
                    r
                },
            ),
            provenance: read(run, &provenance::ProvenanceAnalysis, n),
            ranges: read(run, &ranges::RangesAnalysis, n).map(|mut r| {
                r.ranges.truncate(RANGES);
                r
            }),
        };
        let (findings, checks) = rules::run(&ins);
        let steady_ms = rules::Context::of(&ins).steady_ms;
        Ok(Reduced {
            notes: notes.clone(),
            result: Diagnosis {
                steady_ms,
                findings,
                checks,
                notes,
            },
        })
    }

    fn render(&self, d: &Diagnosis) -> String {
        render(d)
    }

    fn sections(&self, d: &Diagnosis) -> Result<Vec<Section>> {
        Ok(vec![section(d)])
    }

    fn files(&self, d: &Diagnosis) -> Result<Vec<(String, String)>> {
        Ok(vec![(FILE.to_string(), serde_json::to_string_pretty(d)?)])
    }

    fn result_of(&self, files: &[(String, Text)]) -> Result<Diagnosis> {
        super::json_file(FILE, files)
    }
}

/// Evidence lines and remedies shown per finding in the terminal (all in the JSON and HTML).
const TERMINAL_EVIDENCE: usize = 3;
const TERMINAL_REMEDIES: usize = 2;

fn headline(f: &Finding) -> String {
    let stake = if f.at_stake_ms > 0.0 {
        format!(
            "; {} at stake ({} %)",
            duration_ms(f.at_stake_ms),
            pct(f.percent)
        )
    } else {
        String::new()
    };
    format!("[{}] {}{stake}", f.rule, f.title)
}

pub fn render(d: &Diagnosis) -> String {
    let width = super::TEXT_WIDTH;
    let serious = d
        .findings
        .iter()
        .filter(|f| f.severity > Severity::Info)
        .count();
    let mut out = format!(
        "Findings: {} ({} critical or warning); each rule's page: docs/diagnosis.md\n",
        d.findings.len(),
        serious
    );
    if d.findings.is_empty() {
        out.push_str("  no rule found a problem worth reporting\n");
    }
    for f in &d.findings {
        let tag = f.severity.word().to_uppercase();
        out.push_str(&wrap(&format!("{tag:<8} {}", headline(f)), width, 9));
        out.push('\n');
        for e in f.evidence.iter().take(TERMINAL_EVIDENCE) {
            let line = match &e.source {
                Some(s) => format!("· {} ({s})", e.text),
                None => format!("· {}", e.text),
            };
            out.push_str(&indented(9, &line, 2));
        }
        for r in f.remedies.iter().take(TERMINAL_REMEDIES) {
            out.push_str(&indented(9, &format!("try: {}", r.action), 5));
        }
    }
    let unjudged: Vec<&str> = d
        .checks
        .iter()
        .filter(|c| c.status == "no data")
        .map(|c| c.rule.as_str())
        .collect();
    if !unjudged.is_empty() {
        out.push_str(&wrap(
            &format!("  not judged (no data): {}", unjudged.join(", ")),
            width,
            4,
        ));
        out.push('\n');
    }
    out
}

/// `text` wrapped within the terminal's width, every line `indent` columns in and the lines
/// after the first `hang` more.
fn indented(indent: usize, text: &str, hang: usize) -> String {
    let body = wrap(text, super::TEXT_WIDTH - indent, hang);
    let mut out = String::new();
    for line in body.lines() {
        out.push_str(&" ".repeat(indent));
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The report's first section.
pub fn section(d: &Diagnosis) -> Section {
    let mut sec = Section::new("findings", "Findings");
    let mut html = String::new();
    if d.findings.is_empty() {
        html.push_str("<p>No rule found a problem worth reporting.</p>");
    }
    for f in &d.findings {
        html.push_str(&format!(
            "<div class=\"finding {sev}\" id=\"finding-{rule}\"><h3><span class=\"severity\">{sev}</span> {title}</h3>",
            sev = f.severity.word(),
            rule = escape(&f.rule),
            title = escape(&f.title),
        ));
        if f.at_stake_ms > 0.0 {
            html.push_str(&format!(
                "<p>At stake: {} ({} % of the steady state). Rule <code>{}</code>.</p>",
                escape(&duration_ms(f.at_stake_ms)),
                escape(&pct(f.percent)),
                escape(&f.rule)
            ));
        }
        html.push_str("<p>Evidence:</p><ul>");
        for e in &f.evidence {
            let source = e
                .source
                .as_ref()
                .map_or(String::new(), |s| format!(" <code>{}</code>", escape(s)));
            html.push_str(&format!(
                "<li>{}{source} <small>({})</small></li>",
                escape(&e.text),
                escape(&e.analysis)
            ));
        }
        html.push_str("</ul><p>What to try:</p><ol>");
        for r in &f.remedies {
            html.push_str(&format!(
                "<li>{}<br><small>Why: {}</small></li>",
                escape(&r.action),
                escape(&r.why)
            ));
        }
        html.push_str("</ol></div>");
    }
    html.push_str("<details><summary>Every rule</summary><ul>");
    for c in &d.checks {
        html.push_str(&format!(
            "<li><code>{}</code> {}: {}</li>",
            escape(&c.rule),
            escape(&c.status),
            escape(&c.why)
        ));
    }
    html.push_str("</ul></details>");
    sec.raw(&html);
    sec
}
