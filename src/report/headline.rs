//! The headline: what an ML engineer looks for first, above everything else on the page and
//! on the terminal: the step time, MFU and HFU, the top finding and what fixing it buys.
//! Read off the analyses' own outputs (`whatif.json`, `roofline.json`, `diagnosis.json`),
//! so it says nothing they do not.

use super::escape;
use crate::units::{duration_ms, sig3};
use serde_json::Value;

/// The headline's facts; each is absent when the analysis that gives it did not run or could
/// not tell.
#[derive(Debug, Clone, Default, PartialEq)]
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

#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub rule: String,
    pub severity: String,
    pub title: String,
    pub at_stake_ms: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Fix {
    pub change: String,
    pub predicted_step_ms: f64,
    pub saved_ms: f64,
}

impl Headline {
    /// The headline from the analyses' output files (`file(name)` gives one's content).
    pub fn read<'a>(file: impl Fn(&str) -> Option<&'a str>) -> Headline {
        let json = |name: &str| file(name).and_then(|t| serde_json::from_str::<Value>(t).ok());
        let (whatif, roofline, diagnosis) = (
            json("whatif.json"),
            json("roofline.json"),
            json("diagnosis.json"),
        );
        let num = |v: Option<&Value>| v.and_then(Value::as_f64).filter(|x| x.is_finite());
        let step = roofline
            .as_ref()
            .map(|r| &r["step"])
            .filter(|s| s.is_object());
        let mut h = Headline {
            step_ms: whatif
                .as_ref()
                .and_then(|w| num(w.get("step_ms")))
                .filter(|&ms| ms > 0.0)
                .or_else(|| step.and_then(|s| num(s.get("period_ms")))),
            steps: whatif.as_ref().and_then(|w| num(w.get("steps"))),
            ..Headline::default()
        };
        if h.steps.is_none() && h.step_ms.is_some() {
            h.steps = step.and_then(|s| num(s.get("steps")));
        }
        let utilisation = step.or_else(|| roofline.as_ref().map(|r| &r["steady"]));
        h.mfu_percent = utilisation.and_then(|u| num(u.get("mfu_percent")));
        h.hfu_percent = utilisation.and_then(|u| num(u.get("hfu_percent")));
        h.finding = diagnosis.as_ref().and_then(|d| {
            let f = d.get("findings")?.as_array()?.first()?;
            Some(Finding {
                rule: f.get("rule")?.as_str()?.to_string(),
                severity: f.get("severity")?.as_str()?.to_string(),
                title: f.get("title")?.as_str()?.to_string(),
                at_stake_ms: num(f.get("at_stake_ms")).unwrap_or(0.0),
            })
        });
        if let (Some(f), Some(w)) = (&h.finding, &whatif) {
            h.fix = w
                .get("scenarios")
                .and_then(Value::as_array)
                .and_then(|s| {
                    s.iter()
                        .find(|s| s.get("rule").and_then(Value::as_str) == Some(&f.rule))
                })
                .and_then(|s| {
                    Some(Fix {
                        change: s.get("change")?.as_str()?.to_string(),
                        predicted_step_ms: num(s.get("predicted_step_ms"))?,
                        saved_ms: num(s.get("saved_ms"))?,
                    })
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

    const WHATIF: &str = r#"{"step_ms": 18.49, "steps": 20.0, "scenarios": [
        {"rule": "other", "change": "x", "predicted_step_ms": 1.0, "saved_ms": 17.0},
        {"rule": "host-bound", "change": "one jitted call", "predicted_step_ms": 1.21, "saved_ms": 17.28}]}"#;
    const ROOFLINE: &str = r#"{"step": {"period_ms": 18.0, "steps": 5.0, "mfu_percent": 1.234, "hfu_percent": 2.5},
        "steady": {"mfu_percent": 9.0}}"#;
    const DIAGNOSIS: &str = r#"{"findings": [{"rule": "host-bound", "severity": "critical",
        "title": "Input-bound <loop>", "at_stake_ms": 195.9}]}"#;

    fn files(name: &str) -> Option<&'static str> {
        match name {
            "whatif.json" => Some(WHATIF),
            "roofline.json" => Some(ROOFLINE),
            "diagnosis.json" => Some(DIAGNOSIS),
            _ => None,
        }
    }

    #[test]
    fn reads_the_step_the_utilisation_and_the_top_finding_with_its_own_scenario() {
        let h = Headline::read(files);
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
        let h = Headline::read(|n| (n == "roofline.json").then_some(ROOFLINE));
        assert_eq!((h.step_ms, h.steps), (Some(18.0), Some(5.0)));
        assert_eq!(
            h.terminal(),
            "step 18.0 ms (median of 5 steps) · MFU 1.23 % · HFU 2.50 %\nno findings\n"
        );
        let none = Headline::read(|_| None);
        assert!(none.is_empty());
        assert_eq!(none.terminal(), "");
        // A malformed file is as good as none.
        assert!(Headline::read(|_| Some("{not json")).is_empty());
    }
}
