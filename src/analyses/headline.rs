//! The headline: what an ML engineer looks for first, above everything else on the page and
//! on the terminal: the step time, MFU and HFU, the top finding and what fixing it buys.
//! Read off the analyses' own results (`whatif`, `roofline`, `diagnose`, typed, as their
//! files hold them), so it says nothing they do not.

use super::diagnose::{DiagnoseAnalysis, Diagnosis};
use super::roofline::RooflineAnalysis;
use super::roofline_model::Roofline;
use super::whatif::WhatIfAnalysis;
use super::whatif_result::WhatIf;
use super::{Analysis, AnalysisOutput};
use crate::report::escape;
use crate::units::{duration_ms, sig3};
use serde::{Deserialize, Serialize};

/// The headline's facts; each is absent when the analysis that gives it did not run or could
/// not tell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// The median step (what-if's step, else the roofline's step period), in ms.
    pub step_ms: Option<f64>,
    /// The steps it is the median of.
    pub steps: Option<f64>,
    /// Model and hardware FLOP utilisation of the step (else of the steady state), percent.
    pub mfu_percent: Option<f64>,
    pub hfu_percent: Option<f64>,
    /// The top finding of the diagnosis.
    pub finding: Option<Finding>,
    /// What fixing the top finding buys, when a scenario re-times it.
    pub fix: Option<Fix>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub rule: String,
    pub severity: String,
    pub title: String,
    pub at_stake_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fix {
    pub change: String,
    pub predicted_step_ms: f64,
    pub saved_ms: f64,
}

impl crate::engine::value::JsonValue for Headline {}

impl Headline {
    /// The analyses whose outputs the headline reads.
    pub const READS: [&'static str; 3] = [
        WhatIfAnalysis::NAME,
        RooflineAnalysis::NAME,
        DiagnoseAnalysis::NAME,
    ];

    /// The headline from the outputs of the analyses that ran: those of `whatif`,
    /// `roofline` and `diagnose`, read back typed; one that did not run or cannot be read
    /// gives no fact.
    pub fn of<'a>(outputs: impl Iterator<Item = &'a AnalysisOutput> + Clone) -> Headline {
        let files = |name: &str| outputs.clone().find(|o| o.name == name).map(|o| &o.files);
        Headline::from_results(
            files(WhatIfAnalysis::NAME)
                .and_then(|f| WhatIfAnalysis.result_of(f).ok())
                .as_ref(),
            files(RooflineAnalysis::NAME)
                .and_then(|f| RooflineAnalysis.result_of(f).ok())
                .as_ref(),
            files(DiagnoseAnalysis::NAME)
                .and_then(|f| DiagnoseAnalysis.result_of(f).ok())
                .as_ref(),
        )
    }

    /// The headline from the three results.
    pub fn from_results(
        whatif: Option<&WhatIf>,
        roofline: Option<&Roofline>,
        diagnosis: Option<&Diagnosis>,
    ) -> Headline {
        let finite = |x: Option<f64>| x.filter(|v| v.is_finite());
        let step = roofline.and_then(|r| r.step.as_ref());
        let mut h = Headline {
            step_ms: finite(whatif.and_then(|w| w.step_ms))
                .filter(|&ms| ms > 0.0)
                .or_else(|| finite(step.map(|s| s.period_ms))),
            steps: finite(whatif.map(|w| w.steps)),
            ..Headline::default()
        };
        if h.steps.is_none() && h.step_ms.is_some() {
            h.steps = finite(step.map(|s| s.steps));
        }
        let utilisation = step
            .map(|s| &s.use_)
            .or_else(|| roofline.map(|r| &r.steady.use_));
        h.mfu_percent = finite(utilisation.and_then(|u| u.mfu_percent));
        h.hfu_percent = finite(utilisation.and_then(|u| u.hfu_percent));
        h.finding = diagnosis.and_then(|d| d.findings.first()).map(|f| Finding {
            rule: f.rule.clone(),
            severity: f.severity.word().to_string(),
            title: f.title.clone(),
            at_stake_ms: f.at_stake_ms,
        });
        if let (Some(f), Some(w)) = (&h.finding, whatif) {
            h.fix = w.scenarios.iter().find(|s| s.rule == f.rule).map(|s| Fix {
                change: s.change.clone(),
                predicted_step_ms: s.predicted_step_ms,
                saved_ms: s.saved_ms,
            });
        }
        h
    }

    /// Nothing to say: no analysis that gives a headline fact ran.
    pub fn is_empty(&self) -> bool {
        self.step_ms.is_none() && self.mfu_percent.is_none() && self.finding.is_none()
    }

    fn step_text(&self) -> Option<String> {
        let ms = self.step_ms?;
        Some(match self.steps {
            Some(n) if n >= 1.0 => format!(
                "step {} (median of {})",
                duration_ms(ms),
                crate::table::count(n.round() as usize, "step", "steps")
            ),
            _ => format!("step {}", duration_ms(ms)),
        })
    }

    fn utilisation_text(&self) -> Option<String> {
        let mfu = self.mfu_percent?;
        Some(match self.hfu_percent {
            Some(hfu) => format!("MFU {} % · HFU {} %", sig3(mfu), sig3(hfu)),
            None => format!("MFU {} %", sig3(mfu)),
        })
    }

    fn fix_text(&self) -> Option<String> {
        let (f, step) = (self.fix.as_ref()?, self.step_ms?);
        Some(format!(
            "fix: {} → step {} → {} (saves {})",
            f.change,
            duration_ms(step),
            duration_ms(f.predicted_step_ms),
            duration_ms(f.saved_ms)
        ))
    }

    /// The terminal's lines (empty when there is nothing to say).
    pub fn terminal(&self) -> String {
        let mut lines = Vec::new();
        let first: Vec<String> = [self.step_text(), self.utilisation_text()]
            .into_iter()
            .flatten()
            .collect();
        if !first.is_empty() {
            lines.push(first.join(" · "));
        }
        match &self.finding {
            Some(f) => lines.push(format!(
                "top finding [{}] {} (at stake: {} of the steady state)",
                f.rule,
                f.title,
                duration_ms(f.at_stake_ms)
            )),
            None if self.step_ms.is_some() => lines.push("no findings".into()),
            None => {}
        }
        if let Some(fix) = self.fix_text() {
            lines.push(fix);
        } else if self.finding.is_some() {
            lines.push("fix: no scenario re-times the top finding".into());
        }
        lines
            .iter()
            .map(|l| format!("{l}\n"))
            .collect::<Vec<_>>()
            .concat()
    }

    /// The page's strip (`<div id="headline">`): one cell per fact, each with a
    /// `data-fact` name tests and scripts can find.
    pub fn html(&self) -> String {
        let mut cells: Vec<(&str, String, String)> = Vec::new();
        if let Some(ms) = self.step_ms {
            let of = self
                .steps
                .filter(|n| *n >= 1.0)
                .map(|n| {
                    format!(
                        "median of {}",
                        crate::table::count(n.round() as usize, "step", "steps")
                    )
                })
                .unwrap_or_else(|| "per step".into());
            cells.push(("step", duration_ms(ms), format!("step time, {of}")));
        }
        if let Some(mfu) = self.mfu_percent {
            cells.push((
                "mfu",
                format!("{} %", sig3(mfu)),
                "MFU (model FLOPs)".into(),
            ));
        }
        if let Some(hfu) = self.hfu_percent {
            cells.push(("hfu", format!("{} %", sig3(hfu)), "HFU (all FLOPs)".into()));
        }
        let mut html = String::from("<div id=\"headline\">\n");
        for (fact, value, label) in &cells {
            html.push_str(&format!(
                "<div class=\"fact\" data-fact=\"{fact}\"><span class=\"value\">{}</span><span class=\"label\">{}</span></div>\n",
                escape(value),
                escape(label)
            ));
        }
        if let Some(f) = &self.finding {
            let fix = self
                .fix_text()
                .unwrap_or_else(|| "fix: no scenario re-times it".into());
            html.push_str(&format!(
                "<div class=\"fact top-finding {sev}\" data-fact=\"finding\"><span class=\"value\"><a href=\"#finding-{rule}\">{title}</a></span><span class=\"label\">top finding · at stake: {stake} of the steady state · {fix}</span></div>\n",
                sev = escape(&f.severity),
                rule = escape(&f.rule),
                title = escape(&f.title),
                stake = escape(&duration_ms(f.at_stake_ms)),
                fix = escape(&fix),
            ));
        }
        html.push_str("</div>\n");
        html
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyses::diagnose_rules::{Finding as Found, Severity};
    use crate::analyses::roofline_flops::Utilisation;
    use crate::analyses::roofline_model::{SteadyRow, StepRow};
    use crate::analyses::whatif_result::Scenario;

    fn scenario(rule: &str, change: &str, predicted_step_ms: f64, saved_ms: f64) -> Scenario {
        Scenario {
            rule: rule.into(),
            change: change.into(),
            predicted_step_ms,
            saved_ms,
            spread_ms: [predicted_step_ms; 2],
            path_before: vec![],
            path_after: vec![],
        }
    }

    fn whatif() -> WhatIf {
        WhatIf {
            step_ms: Some(18.49),
            steps: 20.0,
            scenarios: vec![
                scenario("other", "x", 1.0, 17.0),
                scenario("host-bound", "one jitted call", 1.21, 17.28),
            ],
            ..WhatIf::default()
        }
    }

    fn roofline() -> Roofline {
        let use_ = |mfu: f64, hfu: Option<f64>| Utilisation {
            mfu_percent: Some(mfu),
            hfu_percent: hfu,
            ..Utilisation::default()
        };
        Roofline {
            step: Some(StepRow {
                module: "jit_step".into(),
                program_id: "1".into(),
                steps: 5.0,
                period_ms: 18.0,
                use_: use_(1.234, Some(2.5)),
            }),
            steady: SteadyRow {
                use_: use_(9.0, None),
                devices: 1,
            },
            ..Roofline::default()
        }
    }

    fn diagnosis() -> Diagnosis {
        Diagnosis {
            steady_ms: None,
            findings: vec![Found {
                rule: "host-bound".into(),
                severity: Severity::Critical,
                title: "Input-bound <loop>".into(),
                at_stake_ms: 195.9,
                percent: 90.0,
                evidence: vec![],
                remedies: vec![],
            }],
            checks: vec![],
            notes: vec![],
        }
    }

    #[test]
    fn reads_the_step_the_utilisation_and_the_top_finding_with_its_own_scenario() {
        let h = Headline::from_results(Some(&whatif()), Some(&roofline()), Some(&diagnosis()));
        assert_eq!(h.step_ms, Some(18.49));
        assert_eq!(h.mfu_percent, Some(1.234));
        assert_eq!(h.fix.as_ref().unwrap().change, "one jitted call");
        assert_eq!(
            h.terminal(),
            "step 18.5 ms (median of 20 steps) · MFU 1.23 % · HFU 2.50 %\n\
             top finding [host-bound] Input-bound <loop> (at stake: 196 ms of the steady state)\n\
             fix: one jitted call → step 18.5 ms → 1.21 ms (saves 17.3 ms)\n"
        );
        let html = h.html();
        assert!(
            html.contains("data-fact=\"mfu\"><span class=\"value\">1.23 %"),
            "{html}"
        );
        assert!(html.contains("Input-bound &lt;loop&gt;"), "{html}");
        assert!(html.contains("href=\"#finding-host-bound\""), "{html}");
    }

    #[test]
    fn without_the_what_if_the_roofline_gives_the_step_and_a_missing_analysis_nothing() {
        let h = Headline::from_results(None, Some(&roofline()), None);
        assert_eq!((h.step_ms, h.steps), (Some(18.0), Some(5.0)));
        assert_eq!(
            h.terminal(),
            "step 18.0 ms (median of 5 steps) · MFU 1.23 % · HFU 2.50 %\nno findings\n"
        );
        let none = Headline::of(std::iter::empty());
        assert!(none.is_empty());
        assert_eq!(none.terminal(), "");
        // An output whose file cannot be read back is as good as none.
        let bad = AnalysisOutput {
            name: WhatIfAnalysis::NAME.into(),
            files: vec![("whatif.json".into(), "{not json".into())],
            text: String::new(),
            sections: vec![],
        };
        assert!(Headline::of(std::iter::once(&bad)).is_empty());
        // The outputs' own files, read back typed.
        let good = AnalysisOutput {
            name: RooflineAnalysis::NAME.into(),
            files: vec![(
                "roofline.json".into(),
                serde_json::to_string(&roofline()).unwrap().into(),
            )],
            text: String::new(),
            sections: vec![],
        };
        assert_eq!(Headline::of([&bad, &good].into_iter()).step_ms, Some(18.0));
    }
}
