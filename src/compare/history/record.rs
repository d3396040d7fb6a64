//! What a history is made of: the runs, and per metric its points and change points.

use serde::{Deserialize, Serialize};

use crate::compare::explain::OpChange;
use crate::stats::changepoint::{ChangePoint, Params};

/// One point of a metric's series.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Point {
    /// Its index among the history's runs.
    pub run: usize,
    pub median: f64,
    /// Quartiles of the samples.
    pub q1: f64,
    pub q3: f64,
    pub samples: Vec<f64>,
}

/// A change point with what surrounds it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Change {
    #[serde(flatten)]
    pub at: ChangePoint,
    /// The runs (labels) on either side.
    pub before: String,
    pub after: String,
    pub commit_before: Option<String>,
    pub commit_after: Option<String>,
    /// Whether the change is for the worse.
    pub regression: bool,
    /// For a module: the ops that changed between the two runs (`compare`'s explanation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ops: Vec<OpChange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hlo: Option<String>,
}

/// One metric over the history.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct MetricSeries {
    pub metric: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub points: Vec<Point>,
    pub changes: Vec<Change>,
    /// A step of the newest one or two runs, not yet confirmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub possible: Option<Possible>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A step of the newest runs that more runs would confirm.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Possible {
    #[serde(flatten)]
    pub change: Change,
    /// Runs needed to confirm it (or not).
    pub more: usize,
}

/// One run of the history.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RunInfo {
    pub label: String,
    pub commit: Option<String>,
    pub started_unix_s: Option<u64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct History {
    pub runs: Vec<RunInfo>,
    pub params: Params,
    pub metrics: Vec<MetricSeries>,
    pub notes: Vec<String>,
}
