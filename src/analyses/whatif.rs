//! `whatif`: what the step would take with each problem fixed, predicted from this profile
//! alone (docs/whatif.md). The step's critical path per device — the GPU's work by kind, the
//! gaps in which it waited for the host by what the host did — and one scenario per problem
//! the profile shows, each re-timing the parts of the path it changes.
//!
//! Output contract (`whatif.json`): `{"step_ms", "unit" ("step"|"steady state"), "steps",
//! "critical_path":[{process, device, wall_ms, parts:[{what, ms, percent}],
//!                   gpu:[{module, what, ms, percent}]}],
//! "scenarios":[{rule, change, predicted_step_ms, saved_ms, path_before, path_after}],
//! "notes"}`; parts per step (per steady state when no step is known), scenarios largest
//! saving first.

use std::collections::BTreeMap;

use anyhow::Result;

use super::diagnose::DiagnoseAnalysis;
use super::whatif_model::{StepTimeline, Window, timeline};
use super::whatif_scenarios::{Facts, Part, Path, WhatIf};
use super::whatif_user::{WhatIfParams, user_changes};
use super::{
    Analysis, NoParams, ProcessView, Reads, Reduced, RunShares, Share, ShareUse, Upstream,
    compilation::CompilationAnalysis, roofline::RooflineAnalysis, roofline_model::RooflineParams,
    stragglers::StragglersAnalysis, upstream_or_note,
};
use crate::formats::hlo::HloModuleInfo;
use crate::report::{Cell, HtmlTable, Section, charts};
use crate::table::Table;
use crate::units::{duration_ms, pct};

/// One process's step timeline.
pub struct WhatIfShare;

impl Share for WhatIfShare {
    const KIND: &'static str = "whatif-partial";
    const FILE: &'static str = file!();
    const READS: Reads = Reads::Gpu;
    type Param = ();
    type Value = StepTimeline;

    fn map(&self, p: &ProcessView, _: &()) -> Result<StepTimeline> {
        let (Some(s), Some(m)) = (p.steady, p.modules) else {
            return Ok(StepTimeline::default());
        };
        // Without the HLO the collectives' edges are unknown, which the scenarios say.
        let programs = (p.programs)().ok();
        let by_stable: BTreeMap<String, &HloModuleInfo> =
            programs.as_ref().map_or_else(BTreeMap::new, |ps| {
                ps.by_id
                    .values()
                    .map(|m| (ps.stable_id(Some(m.id), &m.name), m.as_ref()))
                    .collect()
            });
        timeline(p.label, s, m, p.user_nvtx, |id| by_stable.get(id).copied())
    }
}

/// The (program id, thunk) pairs a field of the processes' timelines lists.
fn pairs<'a>(
    refs: &[&'a StepTimeline],
    field: impl Fn(&'a StepTimeline) -> &'a Vec<(String, String)>,
) -> rustc_hash::FxHashSet<(&'a str, &'a str)> {
    refs.iter()
        .flat_map(|&t| field(t))
        .map(|(p, o)| (p.as_str(), o.as_str()))
        .collect()
}

/// The `whatif` analysis.
pub struct WhatIfAnalysis;

impl Analysis for WhatIfAnalysis {
    const NAME: &'static str = "whatif";
    const FILE: &'static str = file!();
    type Params = WhatIfParams;
    type Result = WhatIf;

    fn shares(&self, _: &WhatIfParams) -> Vec<ShareUse> {
        vec![ShareUse::of(&WhatIfShare, &())]
    }

    fn upstream(&self, _: &WhatIfParams) -> Vec<Upstream> {
        let none = || serde_json::json!({});
        vec![
            Upstream::of(&DiagnoseAnalysis, none()),
            Upstream::of(&RooflineAnalysis, none()),
            Upstream::of(&StragglersAnalysis, none()),
            Upstream::of(&CompilationAnalysis, none()),
        ]
    }

    fn reduce(&self, run: &dyn RunShares, params: &WhatIfParams) -> Result<Reduced<WhatIf>> {
        let parts = run.all(&WhatIfShare, &())?;
        let refs: Vec<&StepTimeline> = parts.iter().map(|p| p.as_ref()).collect();
        let mut notes = Vec::new();
        let n = &mut notes;
        let then = "its scenarios are left out";
        let roofline_params = RooflineParams::default();
        let diagnosis = upstream_or_note(run, &DiagnoseAnalysis, &roofline_params, then, n);
        let roofline = upstream_or_note(run, &RooflineAnalysis, &roofline_params, then, n);
        let stragglers = upstream_or_note(run, &StragglersAnalysis, &NoParams {}, then, n);
        let compilation = upstream_or_note(run, &CompilationAnalysis, &Default::default(), then, n);
        let compiles: Vec<(String, f64, f64)> = compilation.as_ref().map_or(Vec::new(), |c| {
            c.compilations
                .iter()
                .map(|r| (r.process.clone(), r.start_ms, r.start_ms + r.wall_s * 1e3))
                .collect()
        });
        let step = roofline
            .as_ref()
            .and_then(|r| r.step.as_ref())
            .map(|s| s.module.as_str());
        let windows = Window::all(&refs, &compiles, step);
        let mut seen = std::collections::BTreeSet::new();
        let recompiles = compilation.as_ref().is_some_and(|c| {
            c.compilations
                .iter()
                .any(|r| r.module.is_some() && !seen.insert((&r.process, &r.module)))
        });
        let facts = Facts {
            diagnosis: diagnosis.as_ref(),
            roofline: roofline.as_ref(),
            stragglers: stragglers.as_ref(),
            recompiles,
            matmuls: pairs(&refs, |t| &t.matmuls),
            f32_casts: pairs(&refs, |t| &t.f32_casts),
        };
        let mut without: Vec<&str> = refs
            .iter()
            .flat_map(|t| &t.without_hlo)
            .map(String::as_str)
            .collect();
        without.sort();
        without.dedup();
        if !without.is_empty() {
            notes.push(format!(
                "no HLO for {}: the critical path follows stream order alone; collectives \
                 are told apart from computation only by instruction names XLA gives after \
                 the opcode (`all-reduce-start.3`), and their edges are unknown",
                without.join(", ")
            ));
        }
        let user = |paths: &[&Path], per_step: f64, notes: &mut Vec<String>| {
            user_changes(paths, roofline.as_ref(), &params.scenario, per_step, notes)
        };
        let mut result = super::whatif_scenarios::predict(&windows, &facts, &user);
        notes.append(&mut result.notes);
        result.notes = notes.clone();
        Ok(Reduced { result, notes })
    }

    fn render(&self, w: &WhatIf) -> String {
        render(w)
    }

    fn sections(&self, w: &WhatIf) -> Result<Vec<Section>> {
        Ok(vec![section(w)?])
    }
}

fn unit_of(w: &WhatIf) -> &str {
    if w.unit == "step" {
        "step"
    } else {
        "steady state"
    }
}

pub fn render(w: &WhatIf) -> String {
    let Some(step) = w.step_ms else {
        return "What if: no steady state to re-time\n".into();
    };
    let mut out = format!(
        "What if (predicted from this profile; docs/whatif.md): the {} takes {}\n",
        unit_of(w),
        duration_ms(step)
    );
    if let Some(row) = w
        .critical_path
        .iter()
        .max_by(|a, b| a.wall_ms.total_cmp(&b.wall_ms))
    {
        let mut t = Table::new(&["critical path (process, device)", "per step", "share"]);
        t.align_right(&[1, 2]);
        for p in &row.parts {
            t.row(vec![
                format!("{} (p{} d{})", p.what, row.process, row.device),
                duration_ms(p.ms),
                format!("{} %", pct(p.percent)),
            ]);
        }
        out.push_str(&t.render());
        if !row.gpu.is_empty() {
            let mut t = Table::new(&["of it on the GPU: module · ops", "per step", "share"]);
            t.align_right(&[1, 2]);
            for o in row.gpu.iter().take(6) {
                let what = if o.module.is_empty() {
                    o.what.clone()
                } else {
                    format!("{} · {}", o.module, o.what)
                };
                t.row(vec![
                    crate::units::fit(&what, 60),
                    duration_ms(o.ms),
                    format!("{} %", pct(o.percent)),
                ]);
            }
            out.push_str(&t.render());
        }
    }
    if w.scenarios.is_empty() {
        out.push_str("  no scenario applies\n");
    }
    if !w.findings.is_empty() {
        out.push_str(&format!(
            "  findings by what a fix buys (at stake: of the steady state; saved: per {}):\n",
            unit_of(w)
        ));
        for f in &w.findings {
            let buys = match (f.saved_ms, f.predicted_step_ms) {
                (Some(s), Some(p)) => format!("saves {} → {}", duration_ms(s), duration_ms(p)),
                _ => "no scenario re-times it in the steady state".into(),
            };
            out.push_str(&crate::units::wrap(
                &format!(
                    "    [{}] at stake {} · {buys}",
                    f.rule,
                    duration_ms(f.at_stake_ms)
                ),
                super::TEXT_WIDTH,
                6,
            ));
            out.push('\n');
        }
    }
    for s in &w.scenarios {
        out.push_str(&crate::units::wrap(
            &format!(
                "  fix [{}] {} → {} {} ({} saved)",
                s.rule,
                s.change,
                unit_of(w),
                duration_ms(s.predicted_step_ms),
                duration_ms(s.saved_ms)
            ),
            super::TEXT_WIDTH,
            6,
        ));
        out.push('\n');
    }
    out
}

/// The critical path drawn: a bar per device (its median step's parts), then the device
/// setting the median step before and after each of the first scenarios.
fn path_chart(w: &WhatIf) -> Result<Option<String>> {
    const SCENARIOS: usize = 4;
    let mut names: Vec<String> = Vec::new();
    let mut rows: Vec<(String, Vec<(String, f64)>)> = Vec::new();
    let parts = |ps: &[Part]| {
        ps.iter()
            .map(|p| (p.what.clone(), p.ms))
            .collect::<Vec<_>>()
    };
    for r in &w.critical_path {
        rows.push((
            format!("process {} device {}", r.process, r.device),
            parts(&r.parts),
        ));
    }
    if let Some(first) = w.scenarios.first() {
        rows.push(("the median step now".into(), parts(&first.path_before)));
    }
    for s in w.scenarios.iter().take(SCENARIOS) {
        rows.push((format!("fix [{}]", s.rule), parts(&s.path_after)));
    }
    if rows.is_empty() {
        return Ok(None);
    }
    for (_, ps) in &rows {
        for (n, _) in ps {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
    }
    let bars: Vec<(String, Vec<f64>)> = rows
        .into_iter()
        .map(|(l, ps)| {
            let v = names
                .iter()
                .map(|n| ps.iter().filter(|(m, _)| m == n).map(|(_, ms)| ms).sum())
                .collect();
            (l, v)
        })
        .collect();
    let unit = format!("per {}", unit_of(w));
    Ok(Some(charts::stacked_bars(&bars, &names, &unit, &|v| {
        duration_ms(v)
    })?))
}

pub fn section(w: &WhatIf) -> Result<Section> {
    let mut sec = Section::new("whatif", "What if");
    let Some(step) = w.step_ms else {
        sec.para("No steady state to re-time.");
        return Ok(sec);
    };
    sec.para(&format!(
        "The {} takes {}. Each scenario re-times the parts of the critical path its change \
         affects and predicts the {} from this profile alone.",
        unit_of(w),
        duration_ms(step),
        unit_of(w)
    ));
    let mut t = HtmlTable::new(&["rule", "change", "predicted", "saved"]);
    for s in &w.scenarios {
        t.row(vec![
            Cell::text(&s.rule),
            Cell::text(&s.change),
            Cell::ms(s.predicted_step_ms),
            Cell::ms(s.saved_ms),
        ]);
    }
    sec.table(&t);
    if !w.findings.is_empty() {
        sec.heading("The findings by what fixing them buys");
        let mut f = HtmlTable::new(&[
            "rule",
            "finding",
            "at stake (steady state)",
            "saved per step",
            "predicted",
        ]);
        for x in &w.findings {
            f.row(vec![
                Cell::text(&x.rule),
                Cell::text(&x.title),
                Cell::ms(x.at_stake_ms),
                x.saved_ms
                    .map_or_else(|| Cell::text("no scenario"), Cell::ms),
                x.predicted_step_ms.map_or_else(|| Cell::text(""), Cell::ms),
            ]);
        }
        sec.table(&f);
    }
    sec.heading("Critical path");
    if let Some(svg) = path_chart(w)? {
        sec.chart(svg);
    }
    let mut p = HtmlTable::new(&["process", "device", "part", "per step", "share"]);
    for row in &w.critical_path {
        for part in &row.parts {
            p.row(vec![
                Cell::count(row.process as u64),
                Cell::count(row.device.max(0) as u64),
                Cell::text(&part.what),
                Cell::ms(part.ms),
                Cell::text(&format!("{} %", pct(part.percent))),
            ]);
        }
    }
    sec.table(&p);
    if w.critical_path.iter().any(|r| !r.gpu.is_empty()) {
        sec.heading("The GPU's part of the path, by module and what ran");
        let mut g = HtmlTable::new(&["process", "device", "module", "ops", "per step", "share"]);
        for row in &w.critical_path {
            for o in &row.gpu {
                g.row(vec![
                    Cell::count(row.process as u64),
                    Cell::count(row.device.max(0) as u64),
                    Cell::text(&o.module),
                    Cell::text(&o.what),
                    Cell::ms(o.ms),
                    Cell::text(&format!("{} %", pct(o.percent))),
                ]);
            }
        }
        sec.table(&g);
    }
    Ok(sec)
}
