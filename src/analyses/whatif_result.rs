//! What `whatif` answers (docs/whatif.md): the measured step, each device's critical path
//! and the scenarios with their predictions, as `whatif.json` holds them.

use serde::{Deserialize, Serialize};

/// A part of the critical path.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Part {
    pub what: String,
    /// Per step [ms].
    pub ms: f64,
    /// Of the step.
    pub percent: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct PathRow {
    pub process: usize,
    pub device: i32,
    /// The device's median step [ms] (its steady window without a step).
    pub wall_ms: f64,
    pub parts: Vec<Part>,
    /// The GPU's part of that step by module and what ran (op class and library; the
    /// collectives' exposed time), the largest first; the rest as one row.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu: Vec<OpShare>,
}

/// Time of the step on the path in one module's ops of one kind.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct OpShare {
    pub module: String,
    /// `cuDNN fused attention`, `Triton matmul`, `NCCL all-reduce`, …
    pub what: String,
    pub ms: f64,
    /// Of the step.
    pub percent: f64,
}

/// How many (module, kind) rows a path's GPU part lists before "other".
pub(super) const OP_ROWS: usize = 10;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Scenario {
    /// The finding rule whose problem it fixes (docs/diagnosis.md).
    pub rule: String,
    pub change: String,
    pub predicted_step_ms: f64,
    pub saved_ms: f64,
    /// The prediction's spread over the steps: its 25th and 75th percentiles [ms].
    #[serde(default)]
    pub spread_ms: [f64; 2],
    /// The critical path of the device that sets the median step, before and after.
    pub path_before: Vec<Part>,
    pub path_after: Vec<Part>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct WhatIf {
    /// The measured step [ms] (of the steady state when no step is known).
    pub step_ms: Option<f64>,
    pub unit: String,
    /// The steps the prediction is the median of.
    pub steps: f64,
    pub critical_path: Vec<PathRow>,
    pub scenarios: Vec<Scenario>,
    /// Each finding of the diagnosis with what fixing it buys: its time at stake (a share
    /// of the steady state) beside its best scenario's saving per step.
    #[serde(default)]
    pub findings: Vec<FindingSaving>,
    pub notes: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct FindingSaving {
    pub rule: String,
    pub title: String,
    /// As the diagnosis says: over the steady state [ms].
    pub at_stake_ms: f64,
    /// Its scenario's (the largest of its rule's): per step [ms]; None without one.
    pub saved_ms: Option<f64>,
    pub predicted_step_ms: Option<f64>,
}
