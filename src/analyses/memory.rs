//! `memory`: the static heap of each program from XLA's buffer assignment, as nsys-jax's
//! notebook shows it (docs/design.md, "Memory"): peak bytes, the live-bytes curve over program
//! order, what is live at the peak, and what XLA's memory usage report adds.
//!
//! Output contract (`memory.json`): `{"modules":[{"program_id","name","steady_ns","peak_bytes","traces",
//! "allocated_bytes","curve":[[index, bytes]...],"at_peak":[{"op_name","source","bytes"}],
//! "largest_allocations":[{"index","bytes","defines"}]}],"notes":[..]}`; programs that ran in
//! the steady state, longest first. `allocated_bytes` (null without a report) is what XLA's
//! allocations take, padding and fragmentation included.

use std::collections::BTreeMap;

use crate::report::Section;
use anyhow::Result;
use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use serde::{Deserialize, Serialize};

use crate::analyses::memory_timeline::{DeviceHeld, HeldPartial, OtherKind};
use crate::analyses::{
    Analysis, NoParams, ProcessView, Reads, Reduced, RunShares, Share, ShareUse,
};
use crate::formats::hlo::HloModuleInfo;
use crate::frames::gpu::{PROJ_DUR, Programs};
use crate::frames::program_ids::short_id;
use crate::frames::views::ModuleView;
use crate::frames::warmup::Steady;
use crate::stats::group_by;
use crate::table::Table;

/// Points of a curve kept whole; a longer one keeps the largest value of each of this many
/// equal runs of points (the peak is always kept).
pub const CURVE_POINTS: usize = 5000;
/// Rows of `at_peak` kept.
const AT_PEAK_ROWS: usize = 20;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct LiveAtPeak {
    pub op_name: String,
    /// `file:line` of the defining instruction ("" when unknown).
    pub source: String,
    pub bytes: i64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Allocation {
    pub index: i64,
    pub bytes: i64,
    pub defines: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ModuleMemory {
    pub program_id: String,
    pub name: String,
    pub peak_bytes: i64,
    pub traces: usize,
    pub allocated_bytes: Option<i64>,
    pub curve: Vec<(usize, i64)>,
    pub at_peak: Vec<LiveAtPeak>,
    pub largest_allocations: Vec<Allocation>,
    /// Steady-state module time [ns] (summed over executions and processes).
    pub steady_ns: i64,
}

/// One process's share of `memory`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct MemoryPartial {
    pub modules: Vec<ModuleMemory>,
    pub notes: Vec<String>,
}

impl crate::engine::value::JsonValue for MemoryPartial {}

/// The curve as `[index, bytes]`, at most [`CURVE_POINTS`] points.
pub fn thin(curve: &[i64]) -> Vec<(usize, i64)> {
    if curve.len() <= CURVE_POINTS {
        return curve.iter().copied().enumerate().collect();
    }
    let run = curve.len().div_ceil(CURVE_POINTS);
    curve
        .chunks(run)
        .enumerate()
        .map(|(c, xs)| {
            let (k, v) = xs
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
                .expect("chunks are not empty");
            (c * run + k, *v)
        })
        .collect()
}

fn module_memory(id: &str, name: &str, time: i64, m: &HloModuleInfo) -> Option<ModuleMemory> {
    let heap = m.heap.as_ref()?;
    let mut live: BTreeMap<(String, String), i64> = BTreeMap::new();
    for (instr, bytes) in &heap.at_peak {
        let (op_name, source) = match m.instruction(instr) {
            Some(i) if !i.op_name().is_empty() || !i.source_file().is_empty() => (
                i.op_name().to_string(),
                if i.source_file().is_empty() {
                    String::new()
                } else {
                    format!("{}:{}", i.source_file(), i.source_line)
                },
            ),
            _ => (format!("[{instr}]"), String::new()),
        };
        *live.entry((op_name, source)).or_default() += bytes;
    }
    let mut at_peak: Vec<LiveAtPeak> = live
        .into_iter()
        .map(|((op_name, source), bytes)| LiveAtPeak {
            op_name,
            source,
            bytes,
        })
        .collect();
    at_peak.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.op_name.cmp(&b.op_name)));
    at_peak.truncate(AT_PEAK_ROWS);
    Some(ModuleMemory {
        program_id: id.to_string(),
        name: name.to_string(),
        peak_bytes: heap.peak_bytes,
        traces: heap.traces,
        allocated_bytes: m.usage.as_ref().map(|u| u.allocated_bytes),
        curve: thin(&heap.curve),
        at_peak,
        largest_allocations: m
            .usage
            .iter()
            .flat_map(|u| &u.largest)
            .map(|(index, bytes, defines)| Allocation {
                index: *index,
                bytes: *bytes,
                defines: defines.clone(),
            })
            .collect(),
        steady_ns: time,
    })
}

/// The map step.
pub fn partial(steady: &Steady, programs: &Programs) -> MemoryPartial {
    let by_program = programs.by_program();
    let m = ModuleView::of(&steady.module);
    let (prog, name, dur) = (&m.program_id, m.program_name, m.dur);
    let mut out = MemoryPartial::default();
    for (p, rows) in group_by(m.rows, |i| prog.value(i)) {
        let time = rows.iter().map(|&i| dur.value(i)).sum();
        let nm = name.value(rows[0]);
        let Some(module) = by_program.get(p).and_then(|ms| ms.first()) else {
            continue;
        };
        for e in [&module.heap_error, &module.usage_error]
            .into_iter()
            .flatten()
        {
            out.notes.push(format!("{nm} ({}): {e}", short_id(p)));
        }
        out.modules.extend(module_memory(p, nm, time, module));
    }
    out
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Memory {
    pub modules: Vec<ModuleMemory>,
    /// What each process held on its devices over the run (`--cuda-memory-usage=true`);
    /// None when no process's profile recorded it.
    #[serde(default)]
    pub held: Option<Held>,
    pub notes: Vec<String>,
}

/// Memory over time of the run's processes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Held {
    /// One per process and device, in process order.
    pub devices: Vec<HeldDevice>,
    /// Processes whose profile has no memory events.
    pub not_recorded: usize,
}

/// One device of one process, with its process's steady state and host allocations.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct HeldDevice {
    pub process: usize,
    #[serde(flatten)]
    pub held: DeviceHeld,
    pub steady: Option<(i64, i64)>,
    pub other: Vec<OtherKind>,
}

/// How to record memory over time, for a run without it.
pub const HOW_TO_RECORD: &str = "device memory over time was not recorded: profile with `nsys-jax-pipe run --memory` (nsys profile --cuda-memory-usage=true)";

/// The run's memory over time from each process's partial.
pub fn reduce_held(parts: &[&HeldPartial]) -> Option<Held> {
    let mut devices = Vec::new();
    for (process, p) in parts.iter().enumerate() {
        for d in &p.devices {
            devices.push(HeldDevice {
                process,
                held: d.clone(),
                steady: p.steady,
                other: p.other.clone(),
            });
        }
    }
    let not_recorded = parts.iter().filter(|p| !p.measured).count();
    (!devices.is_empty()).then_some(Held {
        devices,
        not_recorded,
    })
}

/// The reduce: each program once (processes that dumped it differently are noted), longest
/// steady time first.
pub fn reduce(parts: &[&MemoryPartial]) -> Memory {
    let mut by_id: BTreeMap<&str, ModuleMemory> = BTreeMap::new();
    let mut notes: Vec<String> = Vec::new();
    for part in parts {
        for n in &part.notes {
            if !notes.contains(n) {
                notes.push(n.clone());
            }
        }
        for m in &part.modules {
            match by_id.get_mut(m.program_id.as_str()) {
                None => {
                    by_id.insert(&m.program_id, m.clone());
                }
                Some(seen) => {
                    seen.steady_ns += m.steady_ns;
                    if seen.peak_bytes != m.peak_bytes {
                        let note = format!(
                            "{} ({}): processes' dumps give different heap peaks ({} and {} bytes); the larger is shown",
                            m.name,
                            short_id(&m.program_id),
                            seen.peak_bytes,
                            m.peak_bytes
                        );
                        if !notes.contains(&note) {
                            notes.push(note);
                        }
                        if m.peak_bytes > seen.peak_bytes {
                            let time = seen.steady_ns;
                            *seen = m.clone();
                            seen.steady_ns = time;
                        }
                    }
                }
            }
        }
    }
    let mut modules: Vec<ModuleMemory> = by_id.into_values().collect();
    let no_report = modules
        .iter()
        .filter(|m| m.allocated_bytes.is_none())
        .count();
    if no_report > 0 {
        notes.push(format!(
            "{} without XLA's memory usage report in the dump (older XLA, or a damaged report): allocated bytes unknown",
            crate::table::count(no_report, "program", "programs")
        ));
    }
    modules.sort_by(|a, b| {
        b.steady_ns
            .cmp(&a.steady_ns)
            .then(a.program_id.cmp(&b.program_id))
    });
    Memory {
        modules,
        held: None,
        notes,
    }
}

/// Bytes readably (decimal units, as the notebook's GB).
fn bytes(b: i64) -> String {
    crate::units::bytes(b as f64)
}

/// The last `n` characters of `s` (the innermost part of an op_name), marked when cut.
fn tail(s: &str, n: usize) -> String {
    let count = s.chars().count();
    if count <= n {
        return s.to_string();
    }
    format!("…{}", s.chars().skip(count - n + 1).collect::<String>())
}

pub fn render(m: &Memory) -> String {
    if m.modules.is_empty() {
        return "No steady-state program has a heap simulator trace in its dump: no static heap to show.\n".into();
    }
    let mut t = Table::new(&[
        "module",
        "heap peak",
        "allocated",
        "largest live at the peak",
    ]);
    for x in &m.modules {
        let top = x
            .at_peak
            .first()
            .map(|l| format!("{} ({})", tail(&l.op_name, 33), bytes(l.bytes)))
            .unwrap_or_default();
        t.row(vec![
            crate::units::fit(
                &format!(
                    "{} [{}]",
                    x.name,
                    crate::frames::program_ids::tiny_id(&x.program_id)
                ),
                34,
            ),
            bytes(x.peak_bytes),
            x.allocated_bytes.map(bytes).unwrap_or_else(|| "-".into()),
            top,
        ]);
    }
    format!(
        "Static heap memory (XLA's buffer assignment):\n{}",
        t.render()
    )
}

/// The share `memory` reads.
pub struct MemoryShare;

impl Share for MemoryShare {
    const KIND: &'static str = "memory-partial";
    const FILE: &'static str = file!();
    const READS: Reads = Reads::Gpu;
    type Param = ();
    type Value = MemoryPartial;

    fn map(&self, p: &ProcessView, _: &()) -> Result<MemoryPartial> {
        p.with_programs(partial)
    }
}

/// The share of memory over time: one process's memory events.
pub struct MemoryHeldShare;

impl Share for MemoryHeldShare {
    const KIND: &'static str = "memory-held-partial";
    const FILE: &'static str = file!();
    const READS: Reads = Reads::Gpu;
    const DEVICES: bool = true;
    type Param = ();
    type Value = HeldPartial;

    fn map(&self, p: &ProcessView, _: &()) -> Result<HeldPartial> {
        let steady = p.steady.and_then(|s| steady_window(&s.module));
        match p.memory_usage {
            Some(events) => {
                // Device metadata that cannot be read is said once, when the run opens.
                crate::analyses::memory_timeline::partial(
                    events,
                    &(p.devices)().unwrap_or_default(),
                    steady,
                )
            }
            None => Ok(HeldPartial::default()),
        }
    }
}

/// First start to last end of the steady module executions [ns].
fn steady_window(module: &arrow::array::RecordBatch) -> Option<(i64, i64)> {
    use crate::frames::gpu::PROJ_START;
    let start = module
        .column_by_name(PROJ_START)?
        .as_primitive_opt::<Int64Type>()?;
    let dur = module
        .column_by_name(PROJ_DUR)?
        .as_primitive_opt::<Int64Type>()?;
    let first = start.values().iter().min()?;
    let last = start
        .values()
        .iter()
        .zip(dur.values())
        .map(|(s, d)| s + d)
        .max()?;
    Some((*first, last))
}

/// Memory over time in the report: per device, the held memory against the device's size
/// with the steady state shaded, and the table of peaks.
fn held_section(sec: &mut Section, held: Option<&Held>) -> Result<()> {
    use crate::report::{Cell, HtmlTable, charts};
    use crate::units::bytes;
    sec.heading("Device memory over time");
    let Some(h) = held else {
        sec.para(&format!(
            "Not recorded: {}.",
            HOW_TO_RECORD.trim_start_matches("device memory over time was not recorded: ")
        ));
        return Ok(());
    };
    sec.para(
        "What each process held on each device (allocations minus frees, as Nsight Systems \
         records them with --cuda-memory-usage=true). Memory held before the capture began \
         shows at its start; XLA's preallocated pool is named.",
    );
    let mut t = HtmlTable::new(&[
        "process",
        "device",
        "held at start",
        "preallocated pool",
        "peak",
        "peak at",
        "allocations",
        "frees",
        "growth steps",
    ]);
    for d in &h.devices {
        let x = &d.held;
        t.row(vec![
            Cell::count(d.process as u64),
            Cell::text(x.device.to_string()),
            Cell::num(bytes(x.held_at_start as f64), x.held_at_start as f64),
            Cell::opt(x.preallocated.map(|b| b as f64), bytes),
            Cell::num(bytes(x.peak_bytes as f64), x.peak_bytes as f64),
            Cell::ms((x.peak_ns - x.start_ns) as f64 / 1e6),
            Cell::text(format!(
                "{} ({})",
                x.allocations,
                bytes(x.allocated_bytes as f64)
            )),
            Cell::text(format!("{} ({})", x.frees, bytes(x.freed_bytes as f64))),
            Cell::count(x.growth_steps),
        ]);
    }
    sec.table(&t);
    for d in h.devices.iter().take(8) {
        let x = &d.held;
        let ms = |ns: i64| (ns - x.start_ns) as f64 / 1e6;
        let most = x.curve.iter().map(|c| c.1).max().unwrap_or(0) as f64;
        let (size, unit) = charts::byte_unit(most.max(x.capacity.unwrap_or(0) as f64));
        let points = x
            .curve
            .iter()
            .map(|&(t, b)| (ms(t), b as f64 / size))
            .collect();
        sec.chart(charts::steps_over_time(
            &[charts::Series {
                name: format!(
                    "process {} device {} held (peak {})",
                    d.process,
                    x.device,
                    bytes(most)
                ),
                points,
            }],
            d.steady.map(|(a, b)| ("steady state", ms(a), ms(b))),
            x.capacity.map(|c| ("device memory", c as f64 / size)),
            ("time since the capture's start [ms]", &|v| {
                format!("{v:.0}")
            }),
            ("held", &|v| format!("{} {unit}", crate::units::sig3(v))),
        )?);
    }
    Ok(())
}

/// Terminal lines of memory over time.
fn render_held(h: &Held) -> String {
    let mut t = Table::new(&[
        "process/device",
        "held at start",
        "peak (at)",
        "allocs / frees",
        "growth",
    ]);
    for d in &h.devices {
        let x = &d.held;
        let start = match x.preallocated {
            Some(p) => format!("{} (pool {})", bytes(x.held_at_start), bytes(p)),
            None => bytes(x.held_at_start),
        };
        t.row(vec![
            format!("{}/{}", d.process, x.device),
            start,
            format!(
                "{} ({})",
                bytes(x.peak_bytes),
                crate::units::duration_ms((x.peak_ns - x.start_ns) as f64 / 1e6)
            ),
            format!("{} / {}", x.allocations, x.frees),
            x.growth_steps.to_string(),
        ]);
    }
    format!(
        "Device memory held over the run (--cuda-memory-usage):\n{}",
        t.render()
    )
}

/// The `memory` analysis.
pub struct MemoryAnalysis;

impl Analysis for MemoryAnalysis {
    const NAME: &'static str = "memory";
    const FILE: &'static str = file!();
    type Params = NoParams;
    type Result = Memory;

    fn shares(&self, _: &NoParams) -> Vec<ShareUse> {
        vec![
            ShareUse::of(&MemoryShare, &()),
            ShareUse::of(&MemoryHeldShare, &()),
        ]
    }

    fn reduce(&self, run: &dyn RunShares, _: &NoParams) -> Result<Reduced<Memory>> {
        let parts = run.all(&MemoryShare, &())?;
        let refs: Vec<&MemoryPartial> = parts.iter().map(|p| p.as_ref()).collect();
        let mut result = reduce(&refs);
        let held = run.all(&MemoryHeldShare, &())?;
        let held: Vec<&HeldPartial> = held.iter().map(|p| p.as_ref()).collect();
        result.held = reduce_held(&held);
        match &result.held {
            None => result.notes.push(HOW_TO_RECORD.to_string()),
            Some(h) if h.not_recorded > 0 => result.notes.push(format!(
                "{} without memory events: {HOW_TO_RECORD}",
                crate::table::count(h.not_recorded, "process", "processes")
            )),
            Some(_) => {}
        }
        Ok(Reduced {
            notes: result.notes.clone(),
            result,
        })
    }

    fn render(&self, m: &Memory) -> String {
        let mut out = render(m);
        if let Some(h) = &m.held {
            out.push_str(&render_held(h));
        }
        out
    }

    fn sections(&self, m: &Memory) -> Result<Vec<Section>> {
        let mut sec = section(m)?;
        held_section(&mut sec, m.held.as_ref())?;
        Ok(vec![sec])
    }
}

/// Heap curves drawn at most (the longest-running programs first), and their points.
const CURVES_DRAWN: usize = 6;
const CHART_POINTS: usize = 600;

/// The report's section: each program's heap curve with its peak, and the table of peaks.
fn section(m: &Memory) -> Result<Section> {
    use crate::report::{Cell, HtmlTable, charts};
    use crate::units::bytes;
    let mut sec = Section::new("memory", "Memory");
    if m.modules.is_empty() {
        sec.para("No program with a heap simulation trace ran in the steady state.");
        return Ok(sec);
    }
    sec.para(
        "Bytes live on the device heap of each program as XLA's buffer assignment plans it, \
         over the program's order of operations.",
    );
    let mut t = HtmlTable::new(&[
        "module",
        "program",
        "peak",
        "allocated (XLA)",
        "at the peak",
    ])
    .limit(100, Some("memory.json"));
    for p in &m.modules {
        t.row(vec![
            Cell::text(&p.name),
            Cell::text(short_id(&p.program_id)),
            Cell::num(bytes(p.peak_bytes as f64), p.peak_bytes as f64),
            Cell::opt(p.allocated_bytes.map(|b| b as f64), bytes),
            Cell::text(
                p.at_peak
                    .first()
                    .map(|a| format!("{} ({})", a.op_name, bytes(a.bytes as f64)))
                    .unwrap_or_default(),
            ),
        ]);
    }
    sec.table(&t);
    for p in m.modules.iter().take(CURVES_DRAWN) {
        sec.heading(&format!("{}: peak {}", p.name, bytes(p.peak_bytes as f64)));
        // Thinned for drawing: each run of points keeps its largest, so the peak stays.
        let run = p.curve.len().div_ceil(CHART_POINTS).max(1);
        // In a binary unit chosen by the peak, so that the ticks fall on round numbers.
        let (size, unit) = charts::byte_unit(p.peak_bytes as f64);
        let points = p
            .curve
            .chunks(run)
            .filter_map(|c| c.iter().max_by_key(|x| x.1))
            .map(|&(i, b)| (i as f64, b as f64 / size))
            .collect();
        sec.chart(charts::lines(
            &[charts::Series {
                name: p.name.clone(),
                points,
            }],
            None,
            ("heap trace step", &|v| format!("{v:.0}")),
            ("live", &|v| format!("{} {unit}", crate::units::sig3(v))),
            Some("peak"),
        )?);
    }
    if m.modules.len() > CURVES_DRAWN {
        sec.para(&format!(
            "The curves of the other {} programs are in memory.json.",
            m.modules.len() - CURVES_DRAWN
        ));
    }
    Ok(sec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_curves_keep_every_runs_largest_point() {
        let short: Vec<i64> = vec![0, 5, 0];
        assert_eq!(thin(&short), [(0, 0), (1, 5), (2, 0)]);
        let mut long: Vec<i64> = (0..CURVE_POINTS as i64 * 3).map(|i| i % 7).collect();
        long[12_345] = 1_000;
        let t = thin(&long);
        assert!(t.len() <= CURVE_POINTS);
        assert!(t.contains(&(12_345, 1_000)));
    }

    #[test]
    fn programs_are_shown_once_with_differences_noted() {
        let m = |peak: i64| ModuleMemory {
            program_id: "fp".into(),
            name: "jit_step".into(),
            peak_bytes: peak,
            traces: 1,
            allocated_bytes: None,
            curve: vec![],
            at_peak: vec![],
            largest_allocations: vec![],
            steady_ns: 5,
        };
        let a = MemoryPartial {
            modules: vec![m(100)],
            notes: vec!["n".into()],
        };
        let b = MemoryPartial {
            modules: vec![m(120)],
            notes: vec!["n".into()],
        };
        let r = reduce(&[&a, &b]);
        assert_eq!(r.modules.len(), 1);
        assert_eq!(r.modules[0].peak_bytes, 120);
        assert_eq!(r.modules[0].steady_ns, 10);
        assert_eq!(r.notes.len(), 3, "{:?}", r.notes);
        assert!(r.notes[2].starts_with("1 program without"), "{:?}", r.notes);
        assert_eq!(tail("abcdef", 4), "…def");
        assert_eq!(tail("abc", 4), "abc");
        assert_eq!(bytes(16384076800), "15.3 GiB");
    }
}
