//! `stragglers`: who arrives last at collectives, and what waiting for them costs
//! (docs/design.md, "Formulas", for the clock alignment).
//!
//! Clocks: devices of different processes (hosts) have different clocks. A collective ends at
//! the same moment on every device it spans, so for each instance spanning every profiled
//! device, a device's skew is its end time minus the mean end over the devices; its median
//! skew over those instances is its clock offset, subtracted from its timestamps. Arrival at
//! an instance = the aligned start of its thunk on that device; the device that arrives last
//! is the straggler, and every other device waits for it.
//!
//! Map: per process, the steady-state collective thunks (instance, device, start, end) and
//! the module time per program ([`partial`]); reduce: alignment and the statistics
//! ([`reduce`]).
//!
//! Output contract (`stragglers.json`):
//! `{"devices": n, "aligned_instances": n, "offsets_us": {"<device>": f},
//!   "per_device": [{device, instances, times_last, lateness_us_mean, lateness_us_median,
//!   lateness_us_p90, lateness_us_max, steps, steps_last, step_lateness_us_median,
//!   step_lateness_us_max, steps_late_ms}] (a step's lateness: at its first collective),
//!   "per_module": [{program_id, name, instances, wait_ms, module_ms, wait_percent}],
//!   "worst": [{program_id, execution, thunk, thunk_execution, last_device, late_by_us,
//!   margin_us}], "wait_histograms": [{collective, waits, mean_us, max_us, bins_us:
//!   [[low, high, count]]}], "notes": [..]}`; a wait histogram counts, for the collectives
//!   (thunk names) with the most waiting, how long each device that was not last waited.

use crate::analyses::{
    Analysis, NoParams, ProcessView, Reads, Reduced, RunShares, Share, ShareUse,
};
use crate::frames::views::{ModuleView, ThunkView};
use crate::frames::warmup::Steady;
use crate::report::Section;
use crate::table::Table;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One collective thunk execution on one device. Its program id and thunk are indices into
/// its partial's `names`, and its fields have one-letter names when stored: a process has
/// one per collective execution, millions in a long capture (docs/design.md, "Bounded
/// memory").
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
pub struct Arrival {
    #[serde(rename = "p")]
    pub program: u32,
    #[serde(rename = "e")]
    pub execution: i32,
    #[serde(rename = "t")]
    pub thunk: u32,
    #[serde(rename = "x")]
    pub thunk_execution: i32,
    #[serde(rename = "d")]
    pub device: i32,
    #[serde(rename = "s")]
    pub start_ns: i64,
    #[serde(rename = "n")]
    pub end_ns: i64,
}

/// One process's share: its collective arrivals and its module time per program.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct StragglersPartial {
    /// The program ids and thunk names of the arrivals, each once.
    pub names: Vec<String>,
    pub arrivals: Vec<Arrival>,
    /// program id -> (name, steady module time summed over executions and devices [ns]).
    pub module_ns: BTreeMap<String, (String, i64)>,
}

impl StragglersPartial {
    /// Name `i` of [`StragglersPartial::names`] ("" past its end: a damaged entry).
    pub fn name(&self, i: u32) -> &str {
        self.names.get(i as usize).map_or("", |s| s.as_str())
    }
}

impl crate::engine::value::JsonValue for StragglersPartial {}

pub fn partial(steady: &Steady) -> StragglersPartial {
    let c = ThunkView::of(&steady.communication);
    let (prog, exec, name, texec) = (
        &c.program_id,
        c.program_execution,
        &c.name,
        c.thunk_execution,
    );
    let (dev, start, dur, hid) = (c.device, c.start, c.dur, c.dur_hidden);
    let mut names = crate::formats::interner::Interner::default();
    let arrivals = (0..c.rows)
        .map(|i| Arrival {
            program: names.intern(prog.value(i)),
            execution: exec.value(i),
            thunk: names.intern(name.value(i)),
            thunk_execution: texec.value(i),
            device: dev.value(i),
            start_ns: start.value(i),
            end_ns: start.value(i) + dur.value(i) + hid.value(i),
        })
        .collect();
    let m = ModuleView::of(&steady.module);
    let (mprog, mname, mdur) = (&m.program_id, m.program_name, m.dur);
    let mut module_ns: BTreeMap<String, (String, i64)> = BTreeMap::new();
    for i in 0..m.rows {
        module_ns
            .entry(mprog.value(i).to_string())
            .or_insert_with(|| (mname.value(i).to_string(), 0))
            .1 += mdur.value(i);
    }
    StragglersPartial {
        names: names.iter().map(String::from).collect(),
        arrivals,
        module_ns,
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DeviceRow {
    pub device: i32,
    pub instances: u64,
    pub times_last: u64,
    pub lateness_us_mean: f64,
    pub lateness_us_median: f64,
    pub lateness_us_p90: f64,
    pub lateness_us_max: f64,
    /// Steps (module executions with collectives) and, at each step's first collective,
    /// how often this device arrived last and how late it was (the step's lateness: a rank
    /// late to a step is late at its first collective, and the later ones wait for nothing).
    #[serde(default)]
    pub steps: u64,
    #[serde(default)]
    pub steps_last: u64,
    #[serde(default)]
    pub step_lateness_us_median: f64,
    #[serde(default)]
    pub step_lateness_us_max: f64,
    /// Summed over the steps it arrived last at [ms].
    #[serde(default)]
    pub steps_late_ms: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ModuleWait {
    pub program_id: String,
    pub name: String,
    pub instances: u64,
    /// Time devices spent waiting for the last arrival, summed over devices [ms].
    pub wait_ms: f64,
    /// Steady module time summed over executions and devices [ms].
    pub module_ms: f64,
    pub wait_percent: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Straggler {
    pub program_id: String,
    pub execution: i32,
    pub thunk: String,
    pub thunk_execution: i32,
    pub last_device: i32,
    /// Last arrival minus first arrival.
    pub late_by_us: f64,
    /// Last arrival minus the second-to-last.
    pub margin_us: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Stragglers {
    pub devices: u64,
    pub aligned_instances: u64,
    pub offsets_us: BTreeMap<String, f64>,
    pub per_device: Vec<DeviceRow>,
    pub per_module: Vec<ModuleWait>,
    pub worst: Vec<Straggler>,
    pub wait_histograms: Vec<WaitHistogram>,
    pub notes: Vec<String>,
}

/// How long devices waited at one collective (thunk name), over its executions.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct WaitHistogram {
    pub collective: String,
    /// Waits counted: one per device that was not last, per execution.
    pub waits: u64,
    pub mean_us: f64,
    pub max_us: f64,
    /// `(low, high, count)` per bin.
    pub bins_us: Vec<(f64, f64, u64)>,
}

/// Collectives given a wait histogram (those with the most waiting), and its bins.
const HISTOGRAMS: usize = 8;
const HISTOGRAM_BINS: usize = 30;

impl crate::engine::value::JsonValue for Stragglers {}

/// How many of the latest arrivals are listed.
const WORST: usize = 20;

fn median(xs: &mut [f64]) -> f64 {
    quantile(xs, 0.5)
}

use crate::stats::quantile;

pub fn reduce(partials: &[StragglersPartial]) -> Stragglers {
    type Instance<'a> = (&'a str, i32, &'a str, i32);
    let mut notes = Vec::new();
    let mut by_instance: BTreeMap<Instance, Vec<&Arrival>> = BTreeMap::new();
    let mut devices = BTreeSet::new();
    for p in partials {
        for a in &p.arrivals {
            devices.insert(a.device);
            by_instance
                .entry((
                    p.name(a.program),
                    a.execution,
                    p.name(a.thunk),
                    a.thunk_execution,
                ))
                .or_default()
                .push(a);
        }
    }
    let n = devices.len();
    let mut out = Stragglers {
        devices: n as u64,
        aligned_instances: 0,
        offsets_us: BTreeMap::new(),
        per_device: vec![],
        per_module: vec![],
        worst: vec![],
        wait_histograms: vec![],
        notes: vec![],
    };
    if n < 2 {
        out.notes.push(if n == 0 {
            "no steady-state collectives in the profile: nothing to compare".into()
        } else {
            "one device: nobody to wait for".into()
        });
        return out;
    }
    // Clock offsets from the instances that span every device.
    let mut skews: BTreeMap<i32, Vec<f64>> = BTreeMap::new();
    for arrivals in by_instance.values() {
        let devs: BTreeSet<i32> = arrivals.iter().map(|a| a.device).collect();
        if devs.len() != n || arrivals.len() != n {
            continue;
        }
        out.aligned_instances += 1;
        let mean_end = arrivals.iter().map(|a| a.end_ns as f64).sum::<f64>() / n as f64;
        for a in arrivals {
            skews
                .entry(a.device)
                .or_default()
                .push(a.end_ns as f64 - mean_end);
        }
    }
    let offset: BTreeMap<i32, f64> = devices
        .iter()
        .map(|&d| {
            let o = skews.get_mut(&d).map(|s| median(s)).unwrap_or(0.0);
            (d, o)
        })
        .collect();
    if out.aligned_instances == 0 {
        notes.push(format!(
            "no collective spans all {n} devices: clocks not aligned (arrivals compared as recorded)"
        ));
    }
    out.offsets_us = offset
        .iter()
        .map(|(d, o)| (d.to_string(), o * 1e-3))
        .collect();

    // Arrivals, aligned.
    let mut lateness: BTreeMap<i32, Vec<f64>> = BTreeMap::new();
    let mut last_count: BTreeMap<i32, u64> = BTreeMap::new();
    let mut wait_ns: BTreeMap<&str, (u64, f64)> = BTreeMap::new();
    let mut waits_us: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut worst = Vec::new();
    // Per step (program, execution): its first collective's first arrival and arrivals.
    let mut step_first: BTreeMap<(&str, i32), (f64, Vec<(i32, f64)>)> = BTreeMap::new();
    for ((prog, exec, thunk, texec), arrivals) in &by_instance {
        if arrivals.len() < 2 {
            continue;
        }
        let t: Vec<(i32, f64)> = arrivals
            .iter()
            .map(|a| (a.device, a.start_ns as f64 - offset[&a.device]))
            .collect();
        let first = t.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
        let s = step_first
            .entry((prog, *exec))
            .or_insert((f64::INFINITY, Vec::new()));
        if first < s.0 {
            *s = (first, t.clone());
        }
        let mut order: Vec<&(i32, f64)> = t.iter().collect();
        order.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        let (last_dev, last) = *order[order.len() - 1];
        let second = order[order.len() - 2].1;
        for (d, x) in &t {
            lateness.entry(*d).or_default().push((x - first) * 1e-3);
        }
        *last_count.entry(last_dev).or_default() += 1;
        let w = wait_ns.entry(prog).or_default();
        w.0 += 1;
        w.1 += t.iter().map(|(_, x)| last - x).sum::<f64>();
        let waits = waits_us.entry(thunk).or_default();
        let mut last_seen = false;
        for (d, x) in &t {
            // The last device does not wait (once, should two arrive together).
            if *d == last_dev && !last_seen {
                last_seen = true;
                continue;
            }
            waits.push((last - x) * 1e-3);
        }
        worst.push(Straggler {
            program_id: prog.to_string(),
            execution: *exec,
            thunk: thunk.to_string(),
            thunk_execution: *texec,
            last_device: last_dev,
            late_by_us: (last - first) * 1e-3,
            margin_us: (last - second) * 1e-3,
        });
    }
    // Each step's lateness: at its first collective, per device; the last one's.
    let mut step_late: BTreeMap<i32, (u64, u64, Vec<f64>, f64)> = BTreeMap::new();
    for (first, t) in step_first.values() {
        let last = t
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
            .map(|x| x.0);
        for (d, x) in t {
            let e = step_late.entry(*d).or_default();
            e.0 += 1;
            e.2.push((x - first) * 1e-3);
            if Some(*d) == last {
                e.1 += 1;
                e.3 += (x - first) * 1e-6;
            }
        }
    }
    out.per_device = devices
        .iter()
        .map(|&d| {
            let (steps, steps_last, mut sl, steps_late_ms) =
                step_late.remove(&d).unwrap_or_default();
            let mut l = lateness.remove(&d).unwrap_or_default();
            let k = l.len();
            let mean = if k > 0 {
                l.iter().sum::<f64>() / k as f64
            } else {
                f64::NAN
            };
            DeviceRow {
                device: d,
                instances: k as u64,
                times_last: last_count.get(&d).copied().unwrap_or(0),
                lateness_us_mean: mean,
                lateness_us_median: median(&mut l),
                lateness_us_p90: quantile(&mut l, 0.9),
                lateness_us_max: l.iter().copied().fold(f64::NAN, f64::max),
                steps,
                steps_last,
                step_lateness_us_median: median(&mut sl),
                step_lateness_us_max: sl.iter().copied().fold(f64::NAN, f64::max),
                steps_late_ms,
            }
        })
        .collect();
    let mut module_ns: BTreeMap<&str, (&str, i64)> = BTreeMap::new();
    for p in partials {
        for (id, (name, ns)) in &p.module_ns {
            module_ns.entry(id).or_insert((name, 0)).1 += ns;
        }
    }
    out.per_module = wait_ns
        .into_iter()
        .map(|(prog, (k, w))| {
            let (name, total) = module_ns.get(prog).copied().unwrap_or(("?", 0));
            ModuleWait {
                program_id: prog.to_string(),
                name: name.to_string(),
                instances: k,
                wait_ms: w * 1e-6,
                module_ms: total as f64 * 1e-6,
                wait_percent: if total > 0 {
                    100.0 * w / total as f64
                } else {
                    0.0
                },
            }
        })
        .collect();
    out.per_module.sort_by(|a, b| {
        b.wait_ms
            .total_cmp(&a.wait_ms)
            .then(a.program_id.cmp(&b.program_id))
    });
    worst.sort_by(|a, b| {
        b.late_by_us
            .total_cmp(&a.late_by_us)
            .then((&a.program_id, a.execution, &a.thunk).cmp(&(
                &b.program_id,
                b.execution,
                &b.thunk,
            )))
    });
    worst.truncate(WORST);
    out.worst = worst;
    let mut by_total: Vec<(&str, Vec<f64>)> = waits_us.into_iter().collect();
    by_total.sort_by(|a, b| {
        let sum = |v: &[f64]| v.iter().sum::<f64>();
        sum(&b.1).total_cmp(&sum(&a.1)).then(a.0.cmp(b.0))
    });
    out.wait_histograms = by_total
        .into_iter()
        .take(HISTOGRAMS)
        .filter(|(_, w)| !w.is_empty())
        .map(|(thunk, w)| WaitHistogram {
            collective: thunk.to_string(),
            waits: w.len() as u64,
            mean_us: w.iter().sum::<f64>() / w.len() as f64,
            max_us: w.iter().copied().fold(f64::NAN, f64::max),
            bins_us: crate::report::charts::bin(&w, HISTOGRAM_BINS),
        })
        .collect();
    out.notes = notes;
    out
}

pub fn render(s: &Stragglers) -> String {
    let mut out = String::new();
    for n in &s.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    if s.per_device.is_empty() {
        return out;
    }
    out.push_str(&format!(
        "== Arrival at collectives ({} devices; clocks aligned on {} collectives spanning all) ==\n",
        s.devices, s.aligned_instances
    ));
    let us = |v: f64| crate::units::duration_ns(v * 1e3);
    let mut t = Table::new(&[
        "device",
        "clock offset",
        "collectives",
        "last",
        "late: mean",
        "median",
        "p90",
        "max",
    ]);
    t.align_right(&[0, 1, 2, 3, 4, 5, 6, 7]);
    for d in &s.per_device {
        t.row(vec![
            d.device.to_string(),
            us(s.offsets_us
                .get(&d.device.to_string())
                .copied()
                .unwrap_or(0.0)),
            d.instances.to_string(),
            d.times_last.to_string(),
            us(d.lateness_us_mean),
            us(d.lateness_us_median),
            us(d.lateness_us_p90),
            us(d.lateness_us_max),
        ]);
    }
    out.push_str(&t.render());
    let mut t = Table::new(&["module", "collectives", "wait", "module time", "wait [%]"]);
    t.align_right(&[1, 2, 3, 4]);
    for m in &s.per_module {
        t.row(vec![
            m.name.clone(),
            m.instances.to_string(),
            crate::units::duration_ms(m.wait_ms),
            crate::units::duration_ms(m.module_ms),
            crate::units::sig3(m.wait_percent),
        ]);
    }
    out.push_str("\n== Waiting for the last arrival, per module (summed over devices) ==\n");
    out.push_str(
        "wait: Σ over collectives and devices of (last arrival − the device's arrival); wait [%]:\n\
         of the module's time summed over devices (summary's wait is the spread of exposed time)\n",
    );
    out.push_str(&t.render());
    let mut t = Table::new(&[
        "collective",
        "execution",
        "last device",
        "late by",
        "margin",
    ]);
    t.align_right(&[1, 2, 3, 4]);
    for w in s.worst.iter().take(10) {
        t.row(vec![
            format!("{}#{}", w.thunk, w.thunk_execution),
            w.execution.to_string(),
            w.last_device.to_string(),
            us(w.late_by_us),
            us(w.margin_us),
        ]);
    }
    out.push_str("\n== Latest arrivals ==\n");
    out.push_str(&t.render());
    out
}

// ---------------------------------------------------------------- the analysis

/// `stragglers`' share: [`partial`] of one process.
pub struct StragglersShare;

impl Share for StragglersShare {
    const KIND: &'static str = "stragglers-partial";
    const FILE: &'static str = file!();
    const READS: Reads = Reads::Gpu;
    type Param = ();
    type Value = StragglersPartial;

    fn map(&self, p: &ProcessView, _: &()) -> anyhow::Result<StragglersPartial> {
        Ok(p.steady.map(partial).unwrap_or_default())
    }
}

/// The `stragglers` analysis.
pub struct StragglersAnalysis;

impl Analysis for StragglersAnalysis {
    const NAME: &'static str = "stragglers";
    const FILE: &'static str = file!();
    type Params = NoParams;
    type Result = Stragglers;

    fn shares(&self, _: &NoParams) -> Vec<ShareUse> {
        vec![ShareUse::of(&StragglersShare, &())]
    }

    fn reduce(&self, run: &dyn RunShares, _: &NoParams) -> anyhow::Result<Reduced<Stragglers>> {
        let partials: Vec<StragglersPartial> = run.values(&StragglersShare, &())?;
        Ok(Reduced {
            result: reduce(&partials),
            notes: vec![],
        })
    }

    fn render(&self, s: &Stragglers) -> String {
        render(s)
    }

    fn sections(&self, s: &Stragglers) -> anyhow::Result<Vec<Section>> {
        Ok(vec![section(s)?])
    }
}

/// The report's section: per-device lateness and clock offsets, the wait-time histogram of
/// each collective with the most waiting, and the modules' waiting.
fn section(s: &Stragglers) -> anyhow::Result<Section> {
    use crate::report::{Cell, HtmlTable, charts};
    use crate::units::{duration_ns, percent};
    let us = |v: f64| duration_ns(v * 1e3);
    let mut sec = Section::new("stragglers", "Stragglers and waiting");
    sec.notes(&s.notes);
    if s.per_device.is_empty() {
        return Ok(sec);
    }
    sec.para(&format!(
        "{} devices; clocks aligned on {} collectives spanning all of them. A device's \
         lateness at a collective is its arrival minus the first device's.",
        s.devices, s.aligned_instances
    ));
    let label = |d: i32| format!("device {d}");
    sec.heading("Mean lateness per device");
    let late: Vec<(String, f64)> = s
        .per_device
        .iter()
        .map(|d| (label(d.device), d.lateness_us_mean))
        .collect();
    sec.chart(charts::bars(&late, "mean lateness", &us)?);
    let mut t = HtmlTable::new(&[
        "device",
        "clock offset",
        "collectives",
        "times last",
        "mean",
        "median",
        "p90",
        "max",
    ]);
    for d in &s.per_device {
        let offset = s
            .offsets_us
            .get(&d.device.to_string())
            .copied()
            .unwrap_or(0.0);
        t.row(vec![
            Cell::num(label(d.device), d.device as f64),
            Cell::num(us(offset), offset),
            Cell::count(d.instances),
            Cell::count(d.times_last),
            Cell::num(us(d.lateness_us_mean), d.lateness_us_mean),
            Cell::num(us(d.lateness_us_median), d.lateness_us_median),
            Cell::num(us(d.lateness_us_p90), d.lateness_us_p90),
            Cell::num(us(d.lateness_us_max), d.lateness_us_max),
        ]);
    }
    sec.table(&t);
    sec.heading("Clock offsets");
    let offsets: Vec<(String, f64)> = s
        .offsets_us
        .iter()
        .map(|(d, o)| (format!("device {d}"), *o))
        .collect();
    sec.para(&format!(
        "Each device's median end-time skew at the collectives spanning every device: {}.",
        offsets
            .iter()
            .map(|(d, o)| format!("{d} {}", us(*o)))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    for h in &s.wait_histograms {
        sec.heading(&format!(
            "Waiting at {}: {} waits, mean {}, max {}",
            h.collective,
            h.waits,
            us(h.mean_us),
            us(h.max_us)
        ));
        sec.chart(charts::histogram(
            &h.bins_us,
            "wait for the last device",
            &us,
        )?);
    }
    if !s.per_module.is_empty() {
        sec.heading("Waiting per module (summed over devices)");
        let mut m = HtmlTable::new(&["module", "collectives", "wait", "module time", "wait share"]);
        for w in &s.per_module {
            m.row(vec![
                Cell::text(&w.name),
                Cell::count(w.instances),
                Cell::ms(w.wait_ms),
                Cell::ms(w.module_ms),
                Cell::num(percent(w.wait_percent / 100.0), w.wait_percent),
            ]);
        }
        sec.table(&m);
    }
    Ok(sec)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adds an arrival of program "p" to `to`.
    fn arrive(
        to: &mut StragglersPartial,
        exec: i32,
        thunk: &str,
        device: i32,
        start: i64,
        end: i64,
    ) {
        let mut index = |name: &str| match to.names.iter().position(|n| n == name) {
            Some(i) => i as u32,
            None => {
                to.names.push(name.to_string());
                to.names.len() as u32 - 1
            }
        };
        let (program, thunk) = (index("p"), index(thunk));
        to.arrivals.push(Arrival {
            program,
            execution: exec,
            thunk,
            thunk_execution: 0,
            device,
            start_ns: start,
            end_ns: end,
        });
    }

    #[test]
    fn arrivals_are_stored_compactly_and_read_back() {
        let mut p = StragglersPartial::default();
        arrive(&mut p, 0, "all-gather.2", 0, 5, 10);
        arrive(&mut p, 1, "all-gather.2", 0, 15, 20);
        assert_eq!(p.names, ["p", "all-gather.2"], "each name once");
        let json = serde_json::to_string(&p.arrivals[0]).unwrap();
        assert_eq!(json, r#"{"p":0,"e":0,"t":1,"x":0,"d":0,"s":5,"n":10}"#);
        let back: StragglersPartial =
            serde_json::from_slice(&serde_json::to_vec(&p).unwrap()).unwrap();
        assert_eq!(back, p);
        assert_eq!(
            (back.name(0), back.name(1), back.name(9)),
            ("p", "all-gather.2", "")
        );
    }

    #[test]
    fn offsets_are_recovered_and_the_late_device_is_found() {
        // Device 1's clock runs 1 ms ahead; device 1 also arrives 100 us after device 0 at
        // every all-reduce (true time), which ends at the same true time on both.
        let mut rank0 = StragglersPartial::default();
        let mut rank1 = StragglersPartial::default();
        for e in 0..5 {
            let t = e as i64 * 10_000_000;
            arrive(&mut rank0, e, "all-reduce.1", 0, t, t + 500_000);
            arrive(
                &mut rank1,
                e,
                "all-reduce.1",
                1,
                t + 100_000 + 1_000_000,
                t + 500_000 + 1_000_000,
            );
        }
        rank0
            .module_ns
            .insert("p".into(), ("jit_step".into(), 5 * 2_000_000));
        rank1
            .module_ns
            .insert("p".into(), ("jit_step".into(), 5 * 2_000_000));
        let s = reduce(&[rank0, rank1]);
        assert_eq!(s.devices, 2);
        assert_eq!(s.aligned_instances, 5);
        assert!(
            (s.offsets_us["0"] + 500.0).abs() < 1e-9,
            "{:?}",
            s.offsets_us
        );
        assert!(
            (s.offsets_us["1"] - 500.0).abs() < 1e-9,
            "{:?}",
            s.offsets_us
        );
        let d1 = &s.per_device[1];
        assert_eq!((d1.device, d1.times_last, d1.instances), (1, 5, 5));
        assert!((d1.lateness_us_mean - 100.0).abs() < 1e-9, "{d1:?}");
        assert_eq!(s.per_device[0].times_last, 0);
        assert!((s.per_device[0].lateness_us_max).abs() < 1e-9);
        // Device 0 waits 100 us at each of 5 instances: 0.5 ms of 20 ms of module time.
        let m = &s.per_module[0];
        assert!(
            (m.wait_ms - 0.5).abs() < 1e-9 && (m.wait_percent - 2.5).abs() < 1e-9,
            "{m:?}"
        );
        assert_eq!(s.worst.len(), 5);
        assert!((s.worst[0].late_by_us - 100.0).abs() < 1e-9);
        assert!(render(&s).contains("Latest arrivals"));
    }

    #[test]
    fn one_device_and_partial_collectives() {
        let mut p = StragglersPartial::default();
        arrive(&mut p, 0, "all-gather.2", 0, 0, 10);
        let s = reduce(&[p.clone()]);
        assert_eq!(s.notes, ["one device: nobody to wait for"]);
        // Two devices that never share an instance: no alignment, said so.
        let mut q = StragglersPartial::default();
        arrive(&mut q, 1, "all-gather.2", 1, 0, 10);
        let s = reduce(&[p, q]);
        assert_eq!(s.aligned_instances, 0);
        assert!(s.notes[0].contains("clocks not aligned"), "{:?}", s.notes);
        assert!(reduce(&[]).notes[0].contains("no steady-state collectives"));
    }
}
