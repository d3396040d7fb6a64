//! What the rules of `diagnose` share: findings and their parts, the inputs and context every
//! rule reads, and helpers over the other analyses' results.

use serde::{Deserialize, Serialize};

use crate::analyses::communication::Communication;
use crate::analyses::compilation::CompilationResult;
use crate::analyses::memory::Memory;
use crate::analyses::ops::Ops;
use crate::analyses::provenance::Provenance;
use crate::analyses::ranges::Ranges;
use crate::analyses::roofline_model::Roofline;
use crate::analyses::stragglers::Stragglers;
use crate::analyses::summary::Summary;

use crate::units::{duration_ms, sig3};

/// How much a finding matters: from the share of the steady-state GPU time it explains.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

/// At or above this share of the steady state [%] a finding is critical.
pub const CRITICAL_PERCENT: f64 = 25.0;
/// At or above this share, a warning. A well-fed loop that waits for each step's result
/// (`block_until_ready`) idles about 7 % between steps (measured on an H200 bf16 GEMM chain):
/// below 10 % a remedy rarely repays the change.
pub const WARNING_PERCENT: f64 = 10.0;
/// Below this share a rule reports nothing.
pub const REPORT_PERCENT: f64 = 2.0;

impl Severity {
    pub fn of(percent: f64) -> Severity {
        if percent >= CRITICAL_PERCENT {
            Severity::Critical
        } else if percent >= WARNING_PERCENT {
            Severity::Warning
        } else {
            Severity::Info
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// One number a finding rests on, and the row it comes from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Evidence {
    /// The fact, in words, with its number.
    pub text: String,
    /// The analysis whose output holds it.
    pub analysis: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<i64>,
    /// The JAX name of the op (`op_name` metadata: the Python function path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op_name: Option<String>,
    /// The Python line of the op (`file:line`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Something to try, and why it helps.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Remedy {
    pub action: String,
    pub why: String,
}

/// What a rule found.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Finding {
    /// The rule's stable id (the anchor of its page in docs/diagnosis.md).
    pub rule: String,
    pub severity: Severity,
    pub title: String,
    /// The steady-state GPU time [ms, summed over devices] the problem costs, as estimated.
    pub at_stake_ms: f64,
    /// `at_stake_ms` as a share of the steady state [%].
    pub percent: f64,
    pub evidence: Vec<Evidence>,
    pub remedies: Vec<Remedy>,
}

/// Whether a rule could judge, and what it concluded.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Check {
    pub rule: String,
    /// `fired`, `quiet` (judged, nothing to report) or `no data` (could not judge).
    pub status: String,
    pub why: String,
}

/// The other analyses' results the rules read, typed as the analyses write them (None: that
/// analysis did not run or failed). Their longest rows only: see `diagnose`'s sources.
#[derive(Default)]
pub struct Inputs {
    pub summary: Option<Summary>,
    pub ops: Option<Ops>,
    pub communication: Option<Communication>,
    pub compilation: Option<CompilationResult>,
    pub stragglers: Option<Stragglers>,
    pub memory: Option<Memory>,
    pub roofline: Option<Roofline>,
    /// The run's record (`facts`: its environment variables among them).
    pub provenance: Option<Provenance>,
    /// The program's own NVTX ranges (`ranges`), longest first.
    pub ranges: Option<Ranges>,
}

/// A rule: a finding, or why there is none.
pub type Rule = fn(&Inputs, &Context) -> Outcome;

pub enum Outcome {
    Fired(Finding),
    Quiet(String),
    NoData(String),
}

/// What every rule measures against.
pub struct Context {
    /// The steady state's wall time summed over devices [ms] (`ops`' `wall_ms`).
    pub steady_ms: Option<f64>,
    pub devices: usize,
    /// A capture in which no module ran on the GPU but XLA compiled (a compile profile,
    /// `run --trace=nvtx`): the time from the first compilation's start to the last one's
    /// end [ms], what its findings are shares of.
    pub compile_only_ms: Option<f64>,
}

impl Context {
    pub fn of(ins: &Inputs) -> Context {
        let steady_ms = ins
            .ops
            .as_ref()
            .map(|o| o.totals.wall_ms)
            .filter(|&w| w > 0.0);
        let devices = ins
            .stragglers
            .as_ref()
            .map(|s| s.devices as f64)
            .or_else(|| ins.roofline.as_ref().map(|r| r.steady.devices as f64))
            .map_or(1, |d| (d as usize).max(1));
        let no_modules = ins.summary.as_ref().is_some_and(|s| s.modules.is_empty());
        let compile_only_ms = ins
            .compilation
            .as_ref()
            .filter(|_| no_modules && steady_ms.is_none())
            .and_then(|c| {
                let spans = c
                    .compilations
                    .iter()
                    .map(|r| (r.start_ms, r.start_ms + r.wall_s * 1e3));
                let (a, b) = spans.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), (s, e)| {
                    (a.min(s), b.max(e))
                });
                (b > a).then_some(b - a)
            });
        Context {
            steady_ms,
            devices,
            compile_only_ms,
        }
    }

    /// `ms` as a share of the steady state (of the compiling time in a compile-only capture).
    pub(crate) fn percent(&self, ms: f64) -> f64 {
        self.steady_ms
            .or(self.compile_only_ms)
            .map_or(0.0, |t| 100.0 * ms / t)
    }

    /// A finding from `at_stake_ms`, or quiet when it is below what is reported.
    pub(crate) fn finding(
        &self,
        rule: &str,
        title: String,
        at_stake_ms: f64,
        ev: Vec<Evidence>,
        rem: Vec<Remedy>,
    ) -> Outcome {
        let percent = self.percent(at_stake_ms);
        if percent < REPORT_PERCENT {
            return Outcome::Quiet(format!(
                "{} at stake, {} % of the steady state (below {REPORT_PERCENT} %)",
                duration_ms(at_stake_ms),
                sig3(percent)
            ));
        }
        Outcome::Fired(Finding {
            rule: rule.to_string(),
            severity: Severity::of(percent),
            title,
            at_stake_ms,
            percent,
            evidence: ev,
            remedies: rem,
        })
    }
}

pub(crate) fn remedy(action: &str, why: &str) -> Remedy {
    Remedy {
        action: action.to_string(),
        why: why.to_string(),
    }
}

pub(crate) fn ev(analysis: &str, text: String) -> Evidence {
    Evidence {
        text,
        analysis: analysis.to_string(),
        ..Evidence::default()
    }
}

/// The Python line `ops` gives for `thunk` of `module` (among its longest thunks).
pub(crate) fn source_of(ins: &Inputs, module: &str, thunk: &str) -> Option<String> {
    let ops = ins.ops.as_ref()?;
    ops.top_thunks
        .iter()
        .find(|t| t.module == module && t.thunk == thunk)
        .map(|t| t.source.clone())
        .filter(|s| !s.is_empty())
}

/// The step's executions per device (`roofline`'s step).
pub(crate) fn steps(ins: &Inputs) -> Option<f64> {
    ins.roofline.as_ref()?.step.as_ref().map(|s| s.steps)
}

/// The ms of an `ops` category.
pub(crate) fn category_ms(ops: &Ops, category: &str) -> Option<f64> {
    ops.by_category
        .iter()
        .find(|c| c.category == category)
        .map(|c| c.ms)
}

/// A count: `9`, `6000`, `2.5`.
pub(crate) fn count(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        sig3(x)
    }
}

pub(crate) fn pc(p: f64) -> String {
    format!("{} %", crate::units::pct(p))
}

/// A range of the program's own in which the host works and the GPU does not.
pub(crate) struct HostRange {
    pub name: String,
    pub calls: f64,
    pub mean_ms: f64,
    pub total_ms: f64,
    pub busy_of_wall: f64,
}

/// Below this share of a range's wall time busy on the GPU, the range is host work.
const HOST_RANGE_BUSY: f64 = 0.1;

/// The program's ranges with (almost) no GPU work, longest first (`ranges`' rows).
pub(crate) fn host_ranges(ins: &Inputs) -> Vec<HostRange> {
    let Some(r) = &ins.ranges else {
        return Vec::new();
    };
    let mut out: Vec<HostRange> = r
        .ranges
        .iter()
        .filter(|x| x.busy_of_wall < HOST_RANGE_BUSY)
        .map(|x| HostRange {
            name: x.label.clone(),
            calls: x.count as f64,
            mean_ms: x.wall_ms_mean,
            total_ms: x.wall_ms_total,
            busy_of_wall: x.busy_of_wall,
        })
        .filter(|x| x.total_ms > 0.0)
        .collect();
    out.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms));
    out
}
