//! What carries a metric that changed (docs/compare.md, "What carries the other metrics"):
//! a bandwidth's instructions and modules, the collectives a module waits in, the passes of a
//! compile time.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{Family, FamilyComparison, Row, Settings, Verdict, verdict};
use crate::analyses::communication::CommunicationShare;
use crate::graph::{self, Db, Run};

/// An XLA pass whose time changed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct PassChange {
    pub pass: String,
    pub base_ms: Option<f64>,
    pub head_ms: Option<f64>,
    pub delta_ms: f64,
    pub change: Option<f64>,
}

/// What carries a metric that changed: a bandwidth's instructions and modules, the
/// collectives a module waits in, the passes of a compile time.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Carrier {
    pub family: Family,
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    pub by: Vec<String>,
}

/// How many carriers a metric lists.
const CARRIERS: usize = 6;

/// `a, b, c and 4 more`.
fn listed(v: &[String]) -> String {
    match v.len().saturating_sub(CARRIERS) {
        0 => v.join(", "),
        n => format!("{} and {n} more", v[..CARRIERS].join(", ")),
    }
}

impl Carrier {
    pub fn phrase(&self) -> String {
        match self.family {
            Family::Bandwidth => format!("{}: measured on {}", self.key, listed(&self.by)),
            Family::Wait => format!(
                "waiting in {}: in {}",
                self.module.as_deref().unwrap_or(&self.key),
                listed(&self.by)
            ),
            _ => format!("compiling {}: {}", self.key, listed(&self.by)),
        }
    }
}

/// The carriers of the bandwidth, wait and compile metrics whose change is significant.
pub fn carriers(
    db: &Db,
    base: Run,
    head: Run,
    out: &BTreeMap<Family, FamilyComparison>,
    s: &Settings,
    passes: &[PassChange],
) -> Result<Vec<Carrier>> {
    let changed = |f: Family| -> Vec<&Row> {
        out.get(&f)
            .map(|c| {
                c.rows
                    .iter()
                    .filter(|r| {
                        matches!(
                            verdict(r, s, s.threshold(f)),
                            Verdict::Regression | Verdict::Improvement
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let (bw, wait, compile) = (
        changed(Family::Bandwidth),
        changed(Family::Wait),
        changed(Family::Compile),
    );
    let mut v = Vec::new();
    if !bw.is_empty() || !wait.is_empty() {
        // (collective, size) → (module, instruction), over both runs' processes.
        let mut by: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
        for run in [base, head] {
            for p in graph::run_shares(db, run, &CommunicationShare, &())? {
                for ((cl, sz), list) in &p.value.carriers {
                    by.entry(format!("{cl} {}", super::samples::human_bytes(*sz)))
                        .or_default()
                        .extend(list.iter().cloned());
                }
            }
        }
        for r in bw {
            let list: Vec<String> = by
                .get(&r.key)
                .map(|l| l.iter().map(|(m, i)| format!("`{i}` ({m})")).collect())
                .unwrap_or_default();
            if !list.is_empty() {
                v.push(Carrier {
                    family: Family::Bandwidth,
                    key: r.key.clone(),
                    module: None,
                    by: list,
                });
            }
        }
        for r in wait {
            let Some(module) = &r.module else { continue };
            let list: Vec<String> = by
                .iter()
                .flat_map(|(k, l)| {
                    l.iter()
                        .filter(|(m, _)| m == module)
                        .map(move |(_, i)| format!("`{i}` ({k})"))
                })
                .collect();
            if !list.is_empty() {
                v.push(Carrier {
                    family: Family::Wait,
                    key: r.key.clone(),
                    module: Some(module.clone()),
                    by: list,
                });
            }
        }
    }
    for r in compile {
        let list: Vec<String> = passes
            .iter()
            .map(|p| format!("`{}` {}", p.pass, crate::units::signed_ms(p.delta_ms)))
            .collect();
        if !list.is_empty() {
            v.push(Carrier {
                family: Family::Compile,
                key: r.key.clone(),
                module: r.module.clone(),
                by: list,
            });
        }
    }
    Ok(v)
}
