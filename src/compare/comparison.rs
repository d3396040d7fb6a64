//! What a comparison is made of: its settings, the statistics of one metric on both sides,
//! the rows of a family's comparison, and the verdict on a row.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::samples::{Family, Series};
use crate::engine::value::JsonValue;
use crate::stats::median;

/// How the statistics are computed (part of the comparison nodes' keys).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct StatSettings {
    /// Bootstrap resamples for the confidence interval.
    pub resamples: usize,
    /// Confidence level of the interval.
    pub confidence: f64,
}

impl Default for StatSettings {
    fn default() -> Self {
        StatSettings {
            resamples: 2000,
            confidence: 0.95,
        }
    }
}

/// When a change is a regression, and which families decide the exit code.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Settings {
    /// Relative change (0.05 = 5 %) in the bad direction beyond which a significant change
    /// counts, per family.
    pub thresholds: BTreeMap<Family, f64>,
    /// Significance level of the Mann–Whitney test.
    pub alpha: f64,
    /// Fewer samples than this on either side: inconclusive.
    pub min_samples: usize,
    /// The families whose regressions fail the comparison.
    pub gate: BTreeSet<Family>,
    /// Thresholds of single metrics, by `family:key` (`range:train_step`); a metric named
    /// here fails the comparison when it regresses, whatever its family's gate.
    #[serde(default)]
    pub keyed: BTreeMap<String, f64>,
    pub stats: StatSettings,
}

pub const DEFAULT_THRESHOLD: f64 = 0.05;

impl Default for Settings {
    fn default() -> Self {
        Settings {
            thresholds: Family::ALL
                .into_iter()
                .map(|f| (f, DEFAULT_THRESHOLD))
                .collect(),
            alpha: 0.01,
            min_samples: 5,
            gate: [Family::Module, Family::Compile, Family::Bandwidth]
                .into_iter()
                .collect(),
            keyed: BTreeMap::new(),
            stats: StatSettings::default(),
        }
    }
}

impl Settings {
    pub fn threshold(&self, f: Family) -> f64 {
        self.thresholds
            .get(&f)
            .copied()
            .unwrap_or(DEFAULT_THRESHOLD)
    }

    /// The threshold of one metric (its own, else its family's) and whether it gates.
    pub fn threshold_of(&self, f: Family, key: &str) -> (f64, bool) {
        match self.keyed.get(&format!("{}:{key}", f.name())) {
            Some(&t) => (t, true),
            None => (self.threshold(f), self.gate.contains(&f)),
        }
    }
}

/// The statistics of one metric on both sides.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Stat {
    pub n_base: usize,
    pub n_head: usize,
    pub base_median: Option<f64>,
    pub head_median: Option<f64>,
    /// `head_median / base_median - 1`.
    pub change: Option<f64>,
    /// Confidence interval of `change` (bootstrap).
    pub ci: Option<(f64, f64)>,
    /// Two-sided Mann–Whitney U p-value.
    pub p_value: Option<f64>,
}

/// How a metric of BASE was paired with one of HEAD.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Matched {
    /// Same module fingerprint (or, outside modules, the same name).
    Same,
    /// The module's fingerprint changed (its HLO differs); paired by the module's name.
    ByName,
}

/// One metric present on both sides.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Row {
    pub family: Family,
    /// The module's stable id on the base side (its fingerprint), for metrics of modules.
    pub program_id: Option<String>,
    /// The module's stable id on the head side, when it differs (its HLO changed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_program_id: Option<String>,
    pub module: Option<String>,
    pub key: String,
    pub matched: Matched,
    pub stat: Stat,
}

/// One family's comparison: the metrics on both sides, and those on one side only.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct FamilyComparison {
    pub rows: Vec<Row>,
    /// Metrics only HEAD has (`module/key` within modules).
    pub added: Vec<String>,
    /// Metrics only BASE has.
    pub removed: Vec<String>,
    /// The metrics on one side only, with their medians (what an added or removed op costs).
    #[serde(default)]
    pub one_sided: Vec<OneSided>,
}

/// A metric only one side has.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct OneSided {
    /// Whether HEAD has it (else BASE).
    pub head: bool,
    pub program_id: Option<String>,
    pub module: Option<String>,
    pub key: String,
    pub median: Option<f64>,
}

impl OneSided {
    pub(super) fn of(s: &Series, head: bool) -> OneSided {
        OneSided {
            head,
            program_id: s.program_id.clone(),
            module: s.module.clone(),
            key: s.key.clone(),
            median: median(&s.values),
        }
    }
}

impl JsonValue for FamilyComparison {}

// ---------------------------------------------------------------- verdicts

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Regression,
    Improvement,
    Inconclusive,
    Unchanged,
}

/// The change in the bad direction (positive = worse): slower for durations, lower for
/// bandwidth.
pub fn worse_by(family: Family, change: f64) -> f64 {
    if family.lower_is_better() {
        change
    } else {
        -change
    }
}

/// The verdict on one metric at threshold `t` (the family's, plus any run-to-run noise).
pub fn verdict(row: &Row, s: &Settings, t: f64) -> Verdict {
    let st = &row.stat;
    if st.n_base < s.min_samples.max(2) || st.n_head < s.min_samples.max(2) {
        return Verdict::Inconclusive;
    }
    let (Some(change), Some(p)) = (st.change, st.p_value) else {
        return Verdict::Inconclusive;
    };
    let worse = worse_by(row.family, change);
    if p >= s.alpha {
        // Not significant: unchanged only if the change seen is also within the threshold;
        // a larger one the samples cannot confirm is left open.
        return if worse.abs() > t {
            Verdict::Inconclusive
        } else {
            Verdict::Unchanged
        };
    }
    if worse > t {
        Verdict::Regression
    } else if worse < -t {
        Verdict::Improvement
    } else {
        Verdict::Unchanged
    }
}
