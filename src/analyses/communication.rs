//! `communication`: collective bus bandwidth per (collective, message size), and how much of
//! each collective's time is hidden behind compute (docs/design.md, "Formulas").
//!
//! Output contract (`communication.json`):
//! `{"bandwidth":[{collective, message_size_bytes, bus_bandwidth_gbps, stderr_gbps,
//! instances}], "hidden_fraction":{"<collective>": float}, "overall_hidden_fraction":
//! float|null}`

use crate::analyses::{
    Analysis, NoParams, ProcessView, Reads, Reduced, RunShares, Share, ShareUse,
};
use crate::frames::views::ThunkView;
use crate::frames::warmup::Steady;
use crate::report::charts::{self, Series};
use crate::report::{Cell, HtmlTable, Section};
use crate::stats::{group_by, mean, std};
use crate::table::Table;
use crate::units::sig3;
use anyhow::Result;
use arrow::array::Array;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct BandwidthRow {
    pub collective: String,
    pub message_size_bytes: i64,
    pub bus_bandwidth_gbps: f64,
    pub stderr_gbps: Option<f64>,
    pub instances: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Communication {
    pub bandwidth: Vec<BandwidthRow>,
    pub hidden_fraction: BTreeMap<String, f64>,
    pub overall_hidden_fraction: Option<f64>,
    /// The NVLink bandwidth per direction of the run's slowest device (GB/s), when all have
    /// NVLink: the roof of bus bandwidth within a node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_peak_gb_s: Option<f64>,
    /// Human-readable remarks (e.g. why cross-process alignment was skipped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl crate::engine::value::JsonValue for Communication {}

/// A collective instance: (program, execution, thunk index).
pub type InstanceKey = (String, i32, i32);

/// One process's share of the communication analysis (the map step; [`reduce`] combines the
/// shares of all processes into exactly the numbers of the whole run's frames).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct CommunicationPartial {
    /// Per (collective, message size): per instance (program, execution, thunk index), the
    /// best bus bandwidth over this process's devices.
    pub bandwidth: Vec<((String, i64), Vec<(InstanceKey, f64)>)>,
    /// Per collective: its hidden and total time [ns] over its thunk executions.
    pub hidden: Vec<(String, i64, i64)>,
    /// Hidden and total collective time [ns].
    pub total_hidden_ns: i64,
    pub total_ns: i64,
    /// Remarks, prefixed with the process.
    pub notes: Vec<String>,
    /// Per (collective, message size): the instructions that carry it, as (module, HLO
    /// instruction) — what a bandwidth row is measured on.
    #[serde(default)]
    pub carriers: Vec<((String, i64), Vec<(String, String)>)>,
    /// The slowest NVLink (GB/s per direction) of this process's devices, when every one
    /// of them is a product with NVLink.
    #[serde(default)]
    pub nvlink_gb_s: Option<f64>,
}

impl crate::engine::value::JsonValue for CommunicationPartial {}

/// The map step: one process's steady-state frames → its [`CommunicationPartial`].
pub fn partial(steady: &Steady) -> CommunicationPartial {
    let c = ThunkView::of(&steady.communication);
    let (coll, size, prog, exec) = (
        &c.collective,
        c.message_size,
        &c.program_id,
        c.program_execution,
    );
    let (tidx, bus, dur, hid) = (c.thunk_index, c.bus_bw, c.dur, c.dur_hidden);
    let m = crate::frames::views::ModuleView::of(&steady.module);
    let names: BTreeMap<&str, &str> = (0..m.rows)
        .map(|i| (m.program_id.value(i), m.program_name.value(i)))
        .collect();
    let mut bandwidth = Vec::new();
    let mut carriers = Vec::new();
    for ((cl, sz), idx) in group_by(c.rows, |i| (coll.value(i), size.value(i))) {
        // One instance = one (program, execution, thunk index) across devices. The fastest
        // device arrived last, so its bandwidth has no waiting in it.
        let mut best: BTreeMap<(&str, i32, i32), f64> = BTreeMap::new();
        for &i in &idx {
            if bus.is_null(i) {
                continue;
            }
            let e = best
                .entry((prog.value(i), exec.value(i), tidx.value(i)))
                .or_insert(f64::NEG_INFINITY);
            *e = e.max(bus.value(i));
        }
        let by: std::collections::BTreeSet<(String, String)> = idx
            .iter()
            .map(|&i| {
                let p = prog.value(i);
                let module = names.get(p).copied().unwrap_or(p);
                (module.to_string(), c.name.value(i).to_string())
            })
            .collect();
        carriers.push(((cl.to_string(), sz), by.into_iter().collect()));
        bandwidth.push((
            (cl.to_string(), sz),
            best.into_iter()
                .map(|((p, e, t), b)| ((p.to_string(), e, t), b))
                .collect(),
        ));
    }
    let hidden = group_by(c.rows, |i| coll.value(i))
        .into_iter()
        .map(|(cl, idx)| {
            let h: i64 = idx.iter().map(|&i| hid.value(i)).sum();
            let t: i64 = idx.iter().map(|&i| dur.value(i) + hid.value(i)).sum();
            (cl.to_string(), h, t)
        })
        .collect();
    CommunicationPartial {
        bandwidth,
        hidden,
        total_hidden_ns: (0..c.rows).map(|i| hid.value(i)).sum(),
        total_ns: (0..c.rows).map(|i| dur.value(i) + hid.value(i)).sum(),
        notes: steady.notes.clone(),
        carriers,
        nvlink_gb_s: None,
    }
}

/// The reduce step: bandwidth per (collective, size) over the instances of every process,
/// an instance's bandwidth being its best over all devices; hidden fractions.
/// Per (collective, message size), each instance's bus bandwidth: its best over the devices
/// of every process (the fastest device arrived last, so it has no waiting in it).
pub fn best_per_instance<'a, I>(partials: I) -> BTreeMap<(&'a str, i64), Vec<f64>>
where
    I: IntoIterator<Item = &'a CommunicationPartial>,
{
    let mut best: BTreeMap<(&str, i64), BTreeMap<(&str, i32, i32), f64>> = BTreeMap::new();
    for part in partials {
        for ((cl, sz), instances) in &part.bandwidth {
            let group = best.entry((cl.as_str(), *sz)).or_default();
            for ((p, e, t), b) in instances {
                let v = group
                    .entry((p.as_str(), *e, *t))
                    .or_insert(f64::NEG_INFINITY);
                *v = v.max(*b);
            }
        }
    }
    best.into_iter()
        .map(|(k, inst)| (k, inst.into_values().collect()))
        .collect()
}

pub fn reduce(partials: &[CommunicationPartial]) -> Communication {
    let best = best_per_instance(partials);
    // Per collective, time-weighted: Σ hidden / Σ total over its executions (as nsys-jax),
    // so the one long all-reduce counts for its time, not as one of many tiny ones.
    let mut fractions: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    let (mut total_hidden, mut total) = (0i64, 0i64);
    for part in partials {
        for (cl, h, t) in &part.hidden {
            let e = fractions.entry(cl.as_str()).or_default();
            e.0 += h;
            e.1 += t;
        }
        total_hidden += part.total_hidden_ns;
        total += part.total_ns;
    }
    let mut bandwidth = Vec::new();
    for ((cl, sz), xs) in best {
        let Some(m) = mean(&xs) else { continue };
        bandwidth.push(BandwidthRow {
            collective: cl.to_string(),
            message_size_bytes: sz,
            bus_bandwidth_gbps: m,
            stderr_gbps: std(&xs).map(|s| s / (xs.len() as f64).sqrt()),
            instances: xs.len() as u64,
        });
    }
    bandwidth.sort_by(|a, b| {
        (a.message_size_bytes, &a.collective).cmp(&(b.message_size_bytes, &b.collective))
    });
    let hidden_fraction = fractions
        .into_iter()
        .filter(|(_, (_, t))| *t > 0)
        .map(|(cl, (h, t))| (cl.to_string(), h as f64 / t as f64))
        .collect();
    Communication {
        bandwidth,
        hidden_fraction,
        overall_hidden_fraction: (total > 0).then(|| total_hidden as f64 / total as f64),
        nvlink_peak_gb_s: None,
        notes: Vec::new(),
    }
}

pub fn render(c: &Communication) -> String {
    let mut out = String::new();
    for n in &c.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    if c.bandwidth.is_empty() {
        out.push_str("No steady-state communication in the profile.\n");
        return out;
    }
    let collectives: Vec<&str> = {
        let mut v: Vec<&str> = c.bandwidth.iter().map(|r| r.collective.as_str()).collect();
        v.sort();
        v.dedup();
        v
    };
    let mut header = vec!["message size"];
    header.extend(collectives.iter());
    let mut t = Table::new(&header);
    t.align_right(&(0..header.len()).collect::<Vec<_>>());
    for (sz, rows) in group_by(c.bandwidth.len(), |i| c.bandwidth[i].message_size_bytes) {
        let mut cells = vec![crate::units::bytes(sz as f64)];
        for cl in &collectives {
            cells.push(
                rows.iter()
                    .map(|&i| &c.bandwidth[i])
                    .find(|r| r.collective == *cl)
                    .map(|r| crate::units::rate_gbps(r.bus_bandwidth_gbps, r.stderr_gbps))
                    .unwrap_or_else(|| "-".into()),
            );
        }
        t.row(cells);
    }
    out.push_str("== Bus bandwidth (fastest device per instance; mean ± standard error) ==\n");
    out.push_str(&t.render());
    let mut t = Table::new(&["collective", "hidden"]);
    t.align_right(&[1]);
    for (cl, f) in &c.hidden_fraction {
        t.row(vec![cl.clone(), crate::units::percent(*f)]);
    }
    if let Some(o) = c.overall_hidden_fraction {
        t.row(vec!["(overall)".into(), crate::units::percent(o)]);
    }
    out.push_str(
        "\nhidden: share of a collective's time that computation overlaps (Σ hidden ÷ Σ time)\n",
    );
    out.push_str(&t.render());
    out
}

// ---------------------------------------------------------------- the analysis

/// `communication`'s share: [`partial`] of one process.
pub struct CommunicationShare;

impl Share for CommunicationShare {
    const KIND: &'static str = "communication-partial";
    const FILE: &'static str = file!();
    const READS: Reads = Reads::Gpu;
    type Param = ();
    type Value = CommunicationPartial;

    const DEVICES: bool = true;

    fn map(&self, p: &ProcessView, _: &()) -> Result<CommunicationPartial> {
        let mut part = p.steady.map(partial).unwrap_or_default();
        let devices = (p.devices)()?;
        let links: Option<Vec<f64>> = devices
            .iter()
            .map(|d| crate::formats::gpus::nvlink_gb_s(&d.name))
            .collect();
        part.nvlink_gb_s = links.and_then(|l| l.into_iter().reduce(f64::min));
        Ok(part)
    }
}

/// The `communication` analysis.
pub struct CommunicationAnalysis;

impl Analysis for CommunicationAnalysis {
    const NAME: &'static str = "communication";
    const FILE: &'static str = file!();
    type Params = NoParams;
    type Result = Communication;

    fn shares(&self, _: &NoParams) -> Vec<ShareUse> {
        vec![ShareUse::of(&CommunicationShare, &())]
    }

    fn reduce(&self, run: &dyn RunShares, _: &NoParams) -> Result<Reduced<Communication>> {
        let partials: Vec<CommunicationPartial> = run.values(&CommunicationShare, &())?;
        let mut c = reduce(&partials);
        let links: Option<Vec<f64>> = partials.iter().map(|p| p.nvlink_gb_s).collect();
        c.nvlink_peak_gb_s = links.and_then(|l| l.into_iter().reduce(f64::min));
        c.notes
            .extend(partials.iter().flat_map(|p| p.notes.iter().cloned()));
        let processes = partials.len();
        c.notes.push(if processes > 1 {
            format!(
                "{processes} processes: bandwidths use durations only, so no cross-process clock alignment is needed"
            )
        } else {
            "one process: no cross-process clock alignment (not needed for bandwidth)".into()
        });
        Ok(Reduced {
            result: c,
            notes: vec![],
        })
    }

    fn render(&self, c: &Communication) -> String {
        render(c)
    }

    fn sections(&self, c: &Communication) -> Result<Vec<Section>> {
        Ok(vec![section(c)?])
    }
}

/// The report's section: bus bandwidth against message size per collective (log axis), the
/// hidden fractions, and the bandwidth table.
fn section(c: &Communication) -> Result<Section> {
    let mut sec = Section::new("communication", "Communication");
    sec.notes(&c.notes);
    if c.bandwidth.is_empty() {
        sec.para("No steady-state communication in the profile.");
        return Ok(sec);
    }
    let mut series: Vec<Series> = Vec::new();
    for r in &c.bandwidth {
        let point = (r.message_size_bytes as f64, r.bus_bandwidth_gbps);
        match series.iter_mut().find(|s| s.name == r.collective) {
            Some(s) => s.points.push(point),
            None => series.push(Series {
                name: r.collective.clone(),
                points: vec![point],
            }),
        }
    }
    sec.heading("Bus bandwidth against message size");
    sec.chart(charts::points_by_size(
        &series,
        c.nvlink_peak_gb_s
            .map(|p| (format!("NVLink {} GB/s per direction", sig3(p)), p)),
        ("message size", &|v| crate::units::bytes(v)),
        ("bus bandwidth [GB/s]", &|v| sig3(v)),
    )?);
    if !c.hidden_fraction.is_empty() {
        sec.heading("Communication hidden behind computation");
        let mut bars: Vec<(String, f64)> = c
            .hidden_fraction
            .iter()
            .map(|(k, v)| (k.clone(), v * 100.0))
            .collect();
        if let Some(all) = c.overall_hidden_fraction {
            bars.push(("all collectives".into(), all * 100.0));
        }
        sec.para(
            "Share of each collective's time during which computation ran on the same device \
             (time-weighted over its executions).",
        );
        sec.chart(charts::bars(&bars, "hidden [%]", &|v| {
            format!("{} %", sig3(v))
        })?);
    }
    let mut t = HtmlTable::new(&[
        "collective",
        "message size",
        "bus bandwidth",
        "± std. error",
        "executions",
    ])
    .limit(100, Some("communication.json"));
    for r in &c.bandwidth {
        t.row(vec![
            Cell::text(&r.collective),
            Cell::num(
                crate::units::bytes(r.message_size_bytes as f64),
                r.message_size_bytes as f64,
            ),
            Cell::num(
                crate::units::rate_gbps(r.bus_bandwidth_gbps, None),
                r.bus_bandwidth_gbps,
            ),
            Cell::opt(r.stderr_gbps, |e| crate::units::rate_gbps(e, None)),
            Cell::count(r.instances),
        ]);
    }
    sec.heading("Bandwidth per collective and message size");
    sec.table(&t);
    Ok(sec)
}
