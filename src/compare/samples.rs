//! What `compare` measures on each side: the per-execution samples of every metric, gathered
//! from the per-process shares of the analyses (module durations and collective spreads from
//! `summary`'s share, bandwidths from `communication`'s, compile times from the compile
//! shares) and from one share of its own, the thunk and op-type durations per module
//! execution ([`ThunkPartial`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::analyses::communication::CommunicationPartial;
use crate::analyses::compilation::{Compilations, RangeSums};
use crate::analyses::ranges::RangesPartial;
use crate::analyses::summary::SummaryPartial;
pub use crate::analyses::thunks::ThunkPartial;

/// The kinds of metric `compare` compares.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// Steady-state duration of one execution of an XLA module.
    Module,
    /// Time one execution of a module waits in collectives for the other devices.
    Wait,
    /// Duration of one thunk (HLO op) per module execution.
    Thunk,
    /// Duration of all thunks of one HLO opcode per module execution.
    Op,
    /// Wall time of one compilation of a module.
    Compile,
    /// Time of one XLA pass over all compilations of a process.
    Pass,
    /// Bus bandwidth of one collective instance, per (collective, message size).
    Bandwidth,
    /// Achieved TFLOP/s of one thunk per module execution (its FLOPs from the HLO over its
    /// time): slower at the same work shows here, more work in more time does not.
    Rate,
    /// Wall time of one instance of a user NVTX range (`nvtx.annotate("train_step")`).
    Range,
}

impl Family {
    pub const ALL: [Family; 9] = [
        Family::Module,
        Family::Wait,
        Family::Thunk,
        Family::Op,
        Family::Compile,
        Family::Pass,
        Family::Bandwidth,
        Family::Rate,
        Family::Range,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Family::Module => "module",
            Family::Wait => "wait",
            Family::Thunk => "thunk",
            Family::Op => "op",
            Family::Compile => "compile",
            Family::Pass => "pass",
            Family::Bandwidth => "bandwidth",
            Family::Rate => "rate",
            Family::Range => "range",
        }
    }

    pub fn parse(s: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == s)
    }

    /// Whether a larger value is worse (durations) or better (bandwidth, FLOP rates).
    pub fn lower_is_better(self) -> bool {
        !matches!(self, Family::Bandwidth | Family::Rate)
    }

    pub fn unit(self) -> &'static str {
        match self {
            Family::Bandwidth => "GB/s",
            Family::Rate => "TFLOP/s",
            Family::Compile => "s",
            _ => "ms",
        }
    }

    /// A value of this family with its unit, three significant figures, scaled to read
    /// (`412 µs`, `43.4 ms`, `528 kB/s`).
    pub fn show(self, v: f64) -> String {
        match self.unit() {
            "ms" => crate::units::duration_ms(v),
            "s" => crate::units::duration_ms(v * 1e3),
            "GB/s" => crate::units::rate_gbps(v, None),
            unit => format!("{} {unit}", crate::units::sig3(v)),
        }
    }
}

/// One metric's samples on one side.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Series {
    /// The module's stable id (its fingerprint) for metrics within a module.
    pub program_id: Option<String>,
    /// The module's name for metrics within a module.
    pub module: Option<String>,
    /// What is measured within the module (a thunk, an opcode), or the metric's own name
    /// (a collective and size, a pass); the module name for module-level metrics.
    pub key: String,
    pub values: Vec<f64>,
}

// ---------------------------------------------------------------- one side's series

const NS_PER_MS: f64 = 1e6;

/// Module durations per execution [ms], by program.
pub fn modules(parts: &[&SummaryPartial]) -> Vec<Series> {
    let mut by: BTreeMap<&str, Series> = BTreeMap::new();
    for part in parts {
        for m in &part.modules {
            by.entry(m.program_id.as_str())
                .or_insert_with(|| Series {
                    program_id: Some(m.program_id.clone()),
                    module: Some(m.name.clone()),
                    key: m.name.clone(),
                    values: vec![],
                })
                .values
                .extend(m.durations_ns.iter().map(|&d| d as f64 / NS_PER_MS));
        }
    }
    by.into_values().collect()
}

/// Wall time of each instance of each user NVTX range [ms], by its label (`domain:name`),
/// wherever it nests.
pub fn ranges(parts: &[&RangesPartial]) -> Vec<Series> {
    let mut by: BTreeMap<String, Series> = BTreeMap::new();
    for part in parts {
        for p in &part.paths {
            let label = crate::analyses::ranges::label(&p.domain, &p.name);
            by.entry(label.clone())
                .or_insert_with(|| Series {
                    program_id: None,
                    module: None,
                    key: label,
                    values: vec![],
                })
                .values
                .extend(p.wall.iter().map(|&d| d as f64 / NS_PER_MS));
        }
    }
    by.into_values().collect()
}

/// Wait time per module execution [ms] (none without communication).
pub fn waits(parts: &[&SummaryPartial]) -> Vec<Series> {
    let names: BTreeMap<String, String> = parts
        .iter()
        .flat_map(|p| &p.modules)
        .map(|m| (m.program_id.clone(), m.name.clone()))
        .collect();
    crate::analyses::summary::wait_times(parts.iter().copied())
        .unwrap_or_default()
        .into_iter()
        .map(|(program, values)| {
            let name = names.get(&program).cloned().unwrap_or_default();
            Series {
                program_id: Some(program),
                module: Some(name.clone()),
                key: name,
                values,
            }
        })
        .collect()
}

/// Thunk (or op-type) durations per module execution [ms].
pub fn thunks(parts: &[&ThunkPartial], ops: bool) -> Vec<Series> {
    let mut by: BTreeMap<(&str, &str), Series> = BTreeMap::new();
    for part in parts {
        let rows = if ops { &part.ops } else { &part.thunks };
        for (program, module, key, v) in rows {
            by.entry((program.as_str(), key.as_str()))
                .or_insert_with(|| Series {
                    program_id: Some(program.clone()),
                    module: Some(module.clone()),
                    key: key.clone(),
                    values: vec![],
                })
                .values
                .extend(v.iter().map(|&d| d as f64 / NS_PER_MS));
        }
    }
    by.into_values().collect()
}

/// Achieved TFLOP/s of each thunk per module execution.
pub fn rates(parts: &[&ThunkPartial]) -> Vec<Series> {
    let mut by: BTreeMap<(&str, &str), Series> = BTreeMap::new();
    for part in parts {
        for (program, module, key, v) in &part.rates {
            by.entry((program.as_str(), key.as_str()))
                .or_insert_with(|| Series {
                    program_id: Some(program.clone()),
                    module: Some(module.clone()),
                    key: key.clone(),
                    values: vec![],
                })
                .values
                .extend(v.iter().copied().filter(|x| x.is_finite()));
        }
    }
    by.into_values().collect()
}

/// Bus bandwidth per collective instance [GB/s], per (collective, message size): the best
/// over the devices of every process, as the `communication` analysis counts it.
pub fn bandwidths(parts: &[&CommunicationPartial]) -> Vec<Series> {
    crate::analyses::communication::best_per_instance(parts.iter().copied())
        .into_iter()
        .map(|((cl, sz), values)| Series {
            program_id: None,
            module: None,
            key: format!("{cl} {}", human_bytes(sz)),
            values: values.into_iter().filter(|v| v.is_finite()).collect(),
        })
        .collect()
}

/// A message size as people write it when that is exact (`8 MiB`), else in bytes with an
/// approximation (`7012352 B (6.69 MiB)`): two sizes never read the same.
pub fn human_bytes(b: i64) -> String {
    let units = ["B", "KiB", "MiB", "GiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if v.fract() == 0.0 {
        format!("{v:.0} {}", units[u])
    } else {
        format!("{b} B ({v:.2} {})", units[u])
    }
}

/// Wall time of each compilation [s], per module name.
pub fn compiles(parts: &[&Compilations]) -> Vec<Series> {
    let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for part in parts {
        for c in &part.0 {
            let name = c.module.clone().unwrap_or_else(|| c.name.clone());
            by.entry(name).or_default().push(c.wall_s);
        }
    }
    by.into_iter()
        .map(|(name, values)| Series {
            program_id: None,
            module: Some(name.clone()),
            key: name,
            values,
        })
        .collect()
}

/// Time of each XLA pass per process, over all its compilations [ms].
pub fn passes(parts: &[&RangeSums]) -> Vec<Series> {
    let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for part in parts {
        for (name, non_child, _) in &part.by_name {
            if let Some(pass) = name.strip_prefix("XlaPass:#") {
                by.entry(pass.trim_end_matches('#').to_string())
                    .or_default()
                    .push(non_child / NS_PER_MS);
            }
        }
    }
    by.into_iter()
        .map(|(key, values)| Series {
            program_id: None,
            module: None,
            key,
            values,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_bytes(8 * 1024 * 1024), "8 MiB");
        assert_eq!(human_bytes(1536), "1536 B (1.50 KiB)");
        assert_ne!(human_bytes(7_012_352), human_bytes(7_012_353));
        assert_eq!(human_bytes(100), "100 B");
    }
}
