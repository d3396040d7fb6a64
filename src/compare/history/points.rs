//! One point of a history: what one labelled run measured, per metric, as samples — read from
//! the run's stored per-process shares (the same samples `compare` compares), and what its
//! provenance says (its commit, when it ran).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::analyses::ShareUse;
use crate::analyses::communication::CommunicationShare;
use crate::analyses::compilation::CompilationsShare;
use crate::analyses::provenance::{self, ProvenancePartial, ProvenanceShare};
use crate::analyses::roofline::RooflineShare;
use crate::analyses::roofline_model::{self, RooflineParams, RooflinePartial};
use crate::analyses::summary::{SummaryPartial, SummaryShare};
use crate::compare::samples::{self, Series};
use crate::graph::{self, Db, Run};

/// The metric families a history follows, by name (`--metric`).
pub const FAMILIES: [&str; 5] = ["module", "wait", "compile", "bandwidth", "mfu"];

/// The shares a history reads.
pub fn needs() -> graph::Needs {
    graph::Needs::new([
        ShareUse::of(&SummaryShare, &()),
        ShareUse::of(&CommunicationShare, &()),
        ShareUse::of(&CompilationsShare, &Default::default()),
        ShareUse::of(&RooflineShare, &()),
        ShareUse::of(&ProvenanceShare, &()),
    ])
}

/// One run's measurements.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct PointData {
    /// Samples by metric (`family:key`).
    pub samples: BTreeMap<String, Vec<f64>>,
    /// The XLA modules it executed (by name).
    pub modules: BTreeSet<String>,
    /// Its commit, when its archives hold `run`'s record.
    pub commit: Option<String>,
    /// When its program started [s since the Unix epoch], when recorded.
    pub started_unix_s: Option<u64>,
}

/// Series keyed by the module's name (a function compiled anew keeps its series).
fn by_name(family: &str, series: Vec<Series>, out: &mut BTreeMap<String, Vec<f64>>) {
    for s in series {
        let key = s.module.clone().unwrap_or(s.key);
        out.entry(format!("{family}:{key}"))
            .or_default()
            .extend(s.values);
    }
}

/// What run `run` measured.
pub fn point(db: &Db, run: Run) -> Result<PointData> {
    let mut d = PointData::default();
    let summary = graph::run_shares(db, run, &SummaryShare, &())?;
    let sp: Vec<&SummaryPartial> = summary.iter().map(|p| p.value.as_ref()).collect();
    d.modules = sp
        .iter()
        .flat_map(|p| p.modules.iter().map(|m| m.name.clone()))
        .collect();
    by_name("module", samples::modules(&sp), &mut d.samples);
    by_name("wait", samples::waits(&sp), &mut d.samples);
    let comm = graph::run_shares(db, run, &CommunicationShare, &())?;
    let cp: Vec<_> = comm.iter().map(|p| p.value.as_ref()).collect();
    for s in samples::bandwidths(&cp) {
        d.samples.insert(format!("bandwidth:{}", s.key), s.values);
    }
    let comp = graph::run_shares(db, run, &CompilationsShare, &Default::default())?;
    let xp: Vec<_> = comp.iter().map(|p| p.value.as_ref()).collect();
    by_name("compile", samples::compiles(&xp), &mut d.samples);
    let roof = graph::run_shares(db, run, &RooflineShare, &())?;
    let rp: Vec<&RooflinePartial> = roof.iter().map(|p| p.value.as_ref()).collect();
    let r = roofline_model::reduce(&rp, &RooflineParams::default());
    for m in &r.modules {
        if let Some(mfu) = m.use_.mfu_percent {
            d.samples
                .entry(format!("mfu:{}", m.module))
                .or_default()
                .push(mfu);
        }
    }
    let prov = graph::run_shares(db, run, &ProvenanceShare, &())?;
    let pp: Vec<&ProvenancePartial> = prov.iter().map(|p| p.value.as_ref()).collect();
    let p = provenance::reduce(&pp);
    d.commit = p.facts.get("commit").cloned();
    d.started_unix_s = p
        .record
        .as_ref()
        .map(|r| r.started_unix_s)
        .filter(|&s| s > 0);
    d.samples.retain(|_, v| {
        v.retain(|x| x.is_finite());
        !v.is_empty()
    });
    Ok(d)
}

/// The family of a metric id (`module:jit_step` → `module`).
pub fn family(metric: &str) -> &str {
    metric.split_once(':').map(|(f, _)| f).unwrap_or(metric)
}

/// Whether a larger value of the family is better.
pub fn higher_is_better(family: &str) -> bool {
    matches!(family, "bandwidth" | "mfu")
}

pub fn unit(family: &str) -> &'static str {
    match family {
        "bandwidth" => "GB/s",
        "mfu" => "%",
        "compile" => "s",
        _ => "ms",
    }
}
