//! What `diagnose` finds on each side: the findings that appeared in HEAD, those gone since
//! BASE, and those on both sides whose severity changed. Informative: the statistics alone
//! decide the exit code.

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::analyses::diagnose::{DiagnoseAnalysis, Diagnosis};
use crate::analyses::diagnose_rules::{Finding, Severity};
use crate::analyses::{Analysis, Registered};
use crate::graph::{self, AnalysisSpec, Db, Run};

/// A rule that fired on both sides.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Kept {
    pub rule: String,
    /// HEAD's title.
    pub title: String,
    pub base: Severity,
    pub head: Severity,
    /// Shares of each side's steady state [%].
    pub base_percent: f64,
    pub head_percent: f64,
}

/// How the findings changed from BASE to HEAD.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct FindingChanges {
    pub appeared: Vec<Finding>,
    pub disappeared: Vec<Finding>,
    pub kept: Vec<Kept>,
    /// Why a side could not be diagnosed.
    pub notes: Vec<String>,
}

/// The findings of both sides compared rule by rule.
pub fn diff(base: &Diagnosis, head: &Diagnosis) -> FindingChanges {
    let find = |d: &Diagnosis, rule: &str| d.findings.iter().find(|f| f.rule == rule).cloned();
    let mut out = FindingChanges::default();
    for h in &head.findings {
        match find(base, &h.rule) {
            None => out.appeared.push(h.clone()),
            Some(b) => out.kept.push(Kept {
                rule: h.rule.clone(),
                title: h.title.clone(),
                base: b.severity,
                head: h.severity,
                base_percent: b.percent,
                head_percent: h.percent,
            }),
        }
    }
    out.disappeared = base
        .findings
        .iter()
        .filter(|b| find(head, &b.rule).is_none())
        .cloned()
        .collect();
    out
}

/// The analysis computing the findings, with its default parameters.
fn spec(db: &Db) -> AnalysisSpec {
    let a: &dyn Registered = &DiagnoseAnalysis;
    let params = a
        .canonical_params(&serde_json::json!({}))
        .expect("the defaults are valid");
    AnalysisSpec::new(db, DiagnoseAnalysis::NAME.to_string(), params)
}

/// The shares diagnosing a run reads (computed with the comparison's, in parallel).
pub fn shares() -> Result<Vec<crate::analyses::ShareUse>> {
    let a: &dyn Registered = &DiagnoseAnalysis;
    a.shares(
        &a.canonical_params(&serde_json::json!({}))
            .map_err(anyhow::Error::msg)?,
    )
}

fn diagnose(db: &Db, run: Run) -> Result<Diagnosis> {
    let out = graph::analysis(db, run, spec(db)).map_err(anyhow::Error::from)?;
    let (_, text) = out
        .value
        .files
        .iter()
        .find(|(n, _)| n == "diagnosis.json")
        .ok_or_else(|| anyhow::anyhow!("no diagnosis.json in diagnose's output"))?;
    Ok(serde_json::from_str(text.as_str())?)
}

/// The findings of `base` and `head` compared; a side that cannot be diagnosed is a note.
pub fn changes(db: &Db, base: Run, head: Run) -> FindingChanges {
    match (diagnose(db, base), diagnose(db, head)) {
        (Ok(b), Ok(h)) => diff(&b, &h),
        (b, h) => FindingChanges {
            notes: [("BASE", b.err()), ("HEAD", h.err())]
                .into_iter()
                .filter_map(|(side, e)| Some(format!("{side}: {}", crate::error::one_line(&e?))))
                .collect(),
            ..FindingChanges::default()
        },
    }
}

fn line(f: &Finding) -> String {
    format!("**{}** `{}` {}", f.severity.word(), f.rule, f.title)
}

/// The findings' part of `compare.md` (empty when nothing changed and nothing fired).
pub fn markdown(c: &FindingChanges) -> String {
    let mut s = String::new();
    if c.appeared.is_empty() && c.disappeared.is_empty() && c.kept.is_empty() && c.notes.is_empty()
    {
        return s;
    }
    s.push_str("### Findings (`diagnose`; docs/diagnosis.md)\n\n");
    for n in &c.notes {
        s.push_str(&format!("- could not diagnose {n}\n"));
    }
    for f in &c.appeared {
        s.push_str(&format!("- new in HEAD: {}\n", line(f)));
    }
    for f in &c.disappeared {
        s.push_str(&format!("- gone since BASE: {}\n", line(f)));
    }
    for k in &c.kept {
        let how = if k.head > k.base {
            "worse"
        } else if k.head < k.base {
            "better"
        } else {
            "still"
        };
        s.push_str(&format!(
            "- {how}: `{}` {} ({} → {}, {} % → {} % of the steady state)\n",
            k.rule,
            k.title,
            k.base.word(),
            k.head.word(),
            crate::units::pct(k.base_percent),
            crate::units::pct(k.head_percent)
        ));
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(rule: &str, severity: Severity, percent: f64) -> Finding {
        Finding {
            rule: rule.into(),
            severity,
            title: format!("{rule} title"),
            at_stake_ms: percent,
            percent,
            evidence: vec![],
            remedies: vec![],
        }
    }

    fn diagnosis(findings: Vec<Finding>) -> Diagnosis {
        Diagnosis {
            steady_ms: Some(100.0),
            findings,
            checks: vec![],
            notes: vec![],
        }
    }

    #[test]
    fn findings_are_matched_by_rule() {
        let base = diagnosis(vec![
            finding("host-bound", Severity::Critical, 40.0),
            finding("precision", Severity::Warning, 12.0),
        ]);
        let head = diagnosis(vec![
            finding("precision", Severity::Critical, 30.0),
            finding("exposed-communication", Severity::Warning, 15.0),
        ]);
        let c = diff(&base, &head);
        assert_eq!(c.appeared.len(), 1);
        assert_eq!(c.appeared[0].rule, "exposed-communication");
        assert_eq!(c.disappeared.len(), 1);
        assert_eq!(c.disappeared[0].rule, "host-bound");
        assert_eq!(c.kept.len(), 1);
        assert_eq!(
            (c.kept[0].base, c.kept[0].head),
            (Severity::Warning, Severity::Critical)
        );
        let md = markdown(&c);
        assert!(
            md.contains("new in HEAD: **warning** `exposed-communication`"),
            "{md}"
        );
        assert!(
            md.contains("gone since BASE: **critical** `host-bound`"),
            "{md}"
        );
        assert!(md.contains("worse: `precision`"), "{md}");
        assert_eq!(diff(&base, &base).appeared.len(), 0);
        assert!(markdown(&FindingChanges::default()).is_empty());
    }
}
