//! Small facts about a process's profile, stored apart from its frames so that what a run
//! needs to know about every process is known without loading their frames again.

use crate::engine::value::JsonValue;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The (program id, module name) of each compilation in a process's compile frame, distinct
/// and sorted: small and stored, so that the programs compiled in a profile are known without
/// loading its compile frame again once its HLO dumps are decoded.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct CompiledNames(pub Vec<(i64, String)>);
impl JsonValue for CompiledNames {}

/// What the warm-up split of every process needs to know about the others: the programs
/// compiled in any process's profile, and whether any process communicates (design.md "Formulas").
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct WarmupContext {
    pub compiled: BTreeSet<String>,
    pub has_communication: bool,
}
impl JsonValue for WarmupContext {}

/// Whether one process's profile has communication (small, stored: the context of a run
/// with one more process is known without loading the others' frames).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ProcessFacts {
    pub has_communication: bool,
    /// The programs this process executes.
    pub programs: BTreeSet<String>,
    /// The devices its modules ran on.
    pub devices: BTreeSet<i32>,
    /// Its first module start and last module end (on its own clock) [ns].
    pub span_ns: Option<(i64, i64)>,
    /// Module executions (every device, warm-up included).
    pub module_executions: u64,
}
impl JsonValue for ProcessFacts {}
