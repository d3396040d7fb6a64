//! `whatif`: what the step would take with each problem fixed, predicted from this profile
//! alone (docs/whatif.md). The step's critical path per device — the GPU's work by kind, the
//! gaps in which it waited for the host by what the host did — and one scenario per problem
//! the profile shows, each re-timing the parts of the path it changes.
//!
//! Output contract (`whatif.json`): `{"step_ms", "unit" ("step"|"steady state"), "steps",
//! "critical_path":[{process, device, wall_ms, parts:[{what, ms, percent}]}],
//! "scenarios":[{rule, change, predicted_step_ms, saved_ms, path_before, path_after}],
//! "notes"}`; parts per step (per steady state when no step is known), scenarios largest
//! saving first.

use anyhow::Result;

use super::diagnose::DiagnoseAnalysis;
use super::whatif_model::{StepTimeline, Window, timeline};
use super::whatif_scenarios::{Facts, WhatIf};
use super::{
    Analysis, NoParams, ProcessView, Reads, Reduced, RunShares, Share, ShareUse, Upstream,
    compilation::CompilationAnalysis, roofline::RooflineAnalysis, roofline_model::RooflineParams,
    stragglers::StragglersAnalysis, upstream_or_note,
};
use crate::report::{Cell, HtmlTable, Section};
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
        match (p.steady, p.modules) {
            (Some(s), Some(m)) => timeline(p.label, s, m, p.user_nvtx),
            _ => Ok(StepTimeline::default()),
        }
    }
}

/// The `whatif` analysis.
pub struct WhatIfAnalysis;

impl Analysis for WhatIfAnalysis {
    const NAME: &'static str = "whatif";
    const FILE: &'static str = file!();
    type Params = NoParams;
    type Result = WhatIf;

    fn shares(&self, _: &NoParams) -> Vec<ShareUse> {
        vec![ShareUse::of(&WhatIfShare, &())]
    }

    fn upstream(&self, _: &NoParams) -> Vec<Upstream> {
        let none = || serde_json::json!({});
        vec![
            Upstream::of(&DiagnoseAnalysis, none()),
            Upstream::of(&RooflineAnalysis, none()),
            Upstream::of(&StragglersAnalysis, none()),
            Upstream::of(&CompilationAnalysis, none()),
        ]
    }

    fn reduce(&self, run: &dyn RunShares, _: &NoParams) -> Result<Reduced<WhatIf>> {
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
        };
        let mut result = super::whatif_scenarios::predict(&windows, &facts);
        notes.append(&mut result.notes);
        result.notes = notes.clone();
        Ok(Reduced { result, notes })
    }

    fn render(&self, w: &WhatIf) -> String {
        render(w)
    }

    fn sections(&self, w: &WhatIf) -> Result<Vec<Section>> {
        Ok(vec![section(w)])
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
    }
    if w.scenarios.is_empty() {
        out.push_str("  no scenario applies\n");
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

pub fn section(w: &WhatIf) -> Section {
    let mut sec = Section::new("whatif", "What if");
    let Some(step) = w.step_ms else {
        sec.para("No steady state to re-time.");
        return sec;
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
    sec.heading("Critical path");
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
    sec
}
