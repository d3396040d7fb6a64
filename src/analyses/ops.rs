//! `ops`: where the GPU time of the steady state goes — per HLO opcode, per category, the top
//! thunks and the noisiest compute thunks — with the definitions of nsys-jax's notebook
//! (docs/design.md, "Where the GPU time goes").
//!
//! Output contract (`ops.json`):
//! `{"totals":{thunks_ms, modules_ms, wall_ms}, "by_opcode":[{opcode, ms, percent}],
//! "by_category":[{category, ms, percent}], "top_thunks":[{program_id, module, thunk, opcode,
//! op_name, executions, total_ms, mean_ms, std_ms, percent}], "variability":[{program_id,
//! module, thunk, executions, mean_ms, std_ms, cv}], "command_buffers":{thunks, ms,
//! attributed_ms}, "notes":[..]}`
//!
//! Map: per process, per program its steady module time and, per device, its first start and
//! last end; per (program, thunk) the count, sum and spread of the thunk's exposed time, with
//! its opcode and op_name from the HLO. Reduce: the top modules (those making up 99 % of the
//! module time), the totals, and the tables.

use std::collections::BTreeMap;

use crate::report::Section;
use anyhow::Result;
use serde::{Deserialize, Serialize};

pub use crate::analyses::op_times::{
    COMMAND_BUFFER_OPCODE, OpsPartial, OpsShare, ThunkTime, merged_thunks, top_programs, totals,
};
use crate::analyses::{Analysis, NoParams, Reduced, RunShares, ShareUse};
use crate::table::Table;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct OpsTotals {
    pub thunks_ms: f64,
    pub modules_ms: f64,
    pub wall_ms: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct OpcodeRow {
    pub opcode: String,
    pub ms: f64,
    pub percent: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CategoryRow {
    pub category: String,
    pub ms: f64,
    pub percent: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TopThunk {
    pub program_id: String,
    pub module: String,
    pub thunk: String,
    pub opcode: String,
    pub op_name: String,
    pub executions: u64,
    pub total_ms: f64,
    pub mean_ms: f64,
    pub std_ms: Option<f64>,
    pub percent: f64,
    /// The Python line of its instruction (`file:line`, or "").
    pub source: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Variability {
    pub program_id: String,
    pub module: String,
    pub thunk: String,
    pub executions: u64,
    pub mean_ms: f64,
    pub std_ms: f64,
    pub cv: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CommandBuffers {
    /// Distinct command buffers (program, thunk) of the top modules.
    pub thunks: u64,
    pub ms: f64,
    /// Of `ms`, the time of what ran inside attributed to HLO instructions.
    pub attributed_ms: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Ops {
    pub totals: OpsTotals,
    pub by_opcode: Vec<OpcodeRow>,
    pub by_category: Vec<CategoryRow>,
    pub top_thunks: Vec<TopThunk>,
    pub variability: Vec<Variability>,
    pub command_buffers: CommandBuffers,
    /// The copies and sets between modules in the steady state.
    pub transfers: super::steady_copies::Transfers,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The label of the module time no thunk covers, as an opcode row.
pub const IDLE_IN_MODULES: &str = "GPU idle during modules";

const MS: f64 = 1e-6;

fn percent(x: i64, of: i64) -> f64 {
    if of == 0 {
        0.0
    } else {
        100.0 * x as f64 / of as f64
    }
}

/// The category of a thunk: communication, memcpy/memset (copies), or compute.
fn category(t: &ThunkTime) -> &'static str {
    if t.communication {
        "communication"
    } else if matches!(t.opcode.as_str(), "copy" | "copy-start" | "copy-done")
        || t.thunk.starts_with("memset")
        || t.thunk.starts_with("memcpy")
    {
        "memcpy/memset"
    } else {
        "compute"
    }
}

/// The reduce step.
pub fn reduce(parts: &[&OpsPartial]) -> Ops {
    let (_, top) = top_programs(parts);
    let tot = totals(parts, &top);
    let thunks = merged_thunks(parts);
    let is_top = |id: &str| top.iter().any(|t| t == id);

    let mut by_opcode: BTreeMap<&str, i64> = BTreeMap::new();
    let mut by_category: BTreeMap<&str, i64> = BTreeMap::new();
    // Command buffers: distinct ones, their whole time, the part attributed to instructions.
    let mut buffers = std::collections::BTreeSet::new();
    let mut cb = (0i64, 0i64);
    for t in thunks.iter().filter(|t| is_top(&t.program_id)) {
        let code = if t.opcode.is_empty() {
            "[unknown]"
        } else {
            t.opcode.as_str()
        };
        *by_opcode.entry(code).or_default() += t.time.sum;
        *by_category.entry(category(t)).or_default() += t.time.sum;
        if let Some((name, whole)) = &t.command_buffer {
            buffers.insert((t.program_id.as_str(), name.as_str()));
            cb.0 += whole;
            if *name != t.thunk {
                cb.1 += whole;
            }
        }
    }
    // Thunks that run side by side (concurrent graph branches, several streams) add up to
    // more than their modules' time: then no module time is idle (said in a note below).
    let overlapping = (tot.thunks - tot.modules).max(0);
    let idle_in = (tot.modules - tot.thunks).max(0);
    // Copies and sets between modules are GPU work, not idle time.
    let transfers = super::steady_copies::reduce(
        &parts
            .iter()
            .map(|p| p.transfers.as_ref())
            .collect::<Vec<_>>(),
    );
    let between = ((transfers.ms / MS) as i64).min((tot.wall - tot.modules).max(0));
    *by_category.entry("memcpy/memset").or_default() += between;
    let mut opcodes: Vec<OpcodeRow> = by_opcode
        .into_iter()
        .map(|(c, ns)| (c.to_string(), ns))
        .chain([(IDLE_IN_MODULES.to_string(), idle_in)])
        .map(|(opcode, ns)| OpcodeRow {
            opcode,
            ms: ns as f64 * MS,
            percent: percent(ns, tot.modules),
        })
        .collect();
    opcodes.sort_by(|a, b| b.ms.total_cmp(&a.ms).then(a.opcode.cmp(&b.opcode)));
    let mut categories: Vec<CategoryRow> = ["compute", "communication", "memcpy/memset"]
        .iter()
        .map(|c| (c.to_string(), by_category.get(c).copied().unwrap_or(0)))
        .chain([
            ("idle in modules".to_string(), idle_in),
            (
                "idle between modules".to_string(),
                (tot.wall - tot.modules - between).max(0),
            ),
        ])
        .map(|(category, ns)| CategoryRow {
            category,
            ms: ns as f64 * MS,
            percent: percent(ns, tot.wall),
        })
        .collect();
    categories.sort_by(|a, b| b.ms.total_cmp(&a.ms));

    let mut top_thunks: Vec<TopThunk> = thunks
        .iter()
        .filter(|t| is_top(&t.program_id))
        .map(|t| TopThunk {
            program_id: t.program_id.clone(),
            module: t.module.clone(),
            thunk: t.thunk.clone(),
            opcode: t.opcode.clone(),
            op_name: t.op_name.clone(),
            executions: t.time.n,
            total_ms: t.time.sum as f64 * MS,
            mean_ms: t.time.mean * MS,
            std_ms: t.time.std().map(|s| s * MS),
            percent: percent(t.time.sum, tot.modules),
            source: t.source.clone(),
        })
        .collect();
    top_thunks.sort_by(|a, b| {
        b.total_ms
            .total_cmp(&a.total_ms)
            .then_with(|| (&a.program_id, &a.thunk).cmp(&(&b.program_id, &b.thunk)))
    });

    // Every steady compute thunk, not only the top modules' (as the notebook).
    let mut variability: Vec<Variability> = thunks
        .iter()
        .filter(|t| !t.communication && t.time.mean > 0.0)
        .filter_map(|t| {
            let std = t.time.std()?;
            Some(Variability {
                program_id: t.program_id.clone(),
                module: t.module.clone(),
                thunk: t.thunk.clone(),
                executions: t.time.n,
                mean_ms: t.time.mean * MS,
                std_ms: std * MS,
                cv: std / t.time.mean,
            })
        })
        .collect();
    variability.sort_by(|a, b| b.cv.total_cmp(&a.cv).then(b.mean_ms.total_cmp(&a.mean_ms)));

    let mut notes = Vec::new();
    if overlapping > 0 {
        notes.push(format!(
            "the thunks' times add up to {:.3} ms more than their modules' ({:.3} ms): thunks ran side by side; GPU idle during modules counted as 0",
            overlapping as f64 * MS,
            tot.modules as f64 * MS
        ));
    }
    let missing: u64 = parts.iter().map(|p| p.missing.0).sum();
    if missing > 0 {
        let example = parts
            .iter()
            .find(|p| p.missing.0 > 0)
            .map(|p| p.missing.1.clone())
            .unwrap_or_default();
        notes.push(format!(
            "{} naming HLO instructions missing from their module's dump (e.g. {example}): opcode [unknown]",
            crate::table::count(missing as usize, "thunk", "thunks")
        ));
    }
    if cb.0 > cb.1 {
        notes.push(format!(
            "{} of the time of {} (CUDA graphs) ({:.1} %) is not attributed to HLO instructions: counted as opcode {COMMAND_BUFFER_OPCODE}, compute",
            ms((cb.0 - cb.1) as f64 * MS),
            crate::table::count(buffers.len(), "command buffer", "command buffers"),
            percent(cb.0 - cb.1, cb.0)
        ));
    }
    Ops {
        totals: OpsTotals {
            thunks_ms: tot.thunks as f64 * MS,
            modules_ms: tot.modules as f64 * MS,
            wall_ms: tot.wall as f64 * MS,
        },
        by_opcode: opcodes,
        by_category: categories,
        top_thunks,
        variability,
        command_buffers: CommandBuffers {
            thunks: buffers.len() as u64,
            ms: cb.0 as f64 * MS,
            attributed_ms: cb.1 as f64 * MS,
        },
        transfers,
        notes,
    }
}

/// A time in ms, readably.
fn ms(x: f64) -> String {
    crate::units::duration_ms(x)
}

/// Terminal rendering: totals, top 10 thunks, time per opcode and per category.
pub fn render(o: &Ops) -> String {
    let mut s = String::new();
    if o.top_thunks.is_empty() {
        return "No steady-state thunks in the profile: no GPU time to break down.\n".into();
    }
    s.push_str(&format!(
        "GPU time of the top modules (summed over devices): {} in thunks, {} in modules,\n\
         {} from the first start to the last end\n\n",
        ms(o.totals.thunks_ms),
        ms(o.totals.modules_ms),
        ms(o.totals.wall_ms)
    ));
    let mut t = Table::new(&["module", "thunk", "total", "[%]", "mean", "execs"]);
    t.align_right(&[2, 3, 4, 5]);
    for r in o.top_thunks.iter().take(10) {
        t.row(vec![
            crate::units::fit(
                &format!(
                    "{} [{}]",
                    r.module,
                    crate::frames::program_ids::tiny_id(&r.program_id)
                ),
                34,
            ),
            crate::units::fit(&r.thunk, 32),
            ms(r.total_ms),
            crate::units::pct(r.percent),
            ms(r.mean_ms),
            r.executions.to_string(),
        ]);
    }
    s.push_str("Top thunks:\n");
    s.push_str(&t.render());
    let mut t = Table::new(&["opcode", "time", "%"]);
    t.align_right(&[1, 2]);
    for r in &o.by_opcode {
        t.row(vec![
            r.opcode.clone(),
            ms(r.ms),
            crate::units::pct(r.percent),
        ]);
    }
    s.push_str("\nGPU time by HLO opcode (% of module time):\n");
    s.push_str(&t.render());
    let mut t = Table::new(&["category", "time", "%"]);
    t.align_right(&[1, 2]);
    for r in &o.by_category {
        t.row(vec![
            r.category.clone(),
            ms(r.ms),
            crate::units::pct(r.percent),
        ]);
    }
    s.push_str("\nBy category (% of first start to last end):\n");
    s.push_str(&t.render());
    for n in &o.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    s
}

// ---------------------------------------------------------------- the analysis

/// The `ops` analysis.
pub struct OpsAnalysis;

impl Analysis for OpsAnalysis {
    const NAME: &'static str = "ops";
    const FILE: &'static str = file!();
    type Params = NoParams;
    type Result = Ops;

    fn shares(&self, _: &NoParams) -> Vec<ShareUse> {
        vec![ShareUse::of(&OpsShare, &())]
    }

    fn reduce(&self, run: &dyn RunShares, _: &NoParams) -> Result<Reduced<Ops>> {
        let parts = run.all(&OpsShare, &())?;
        let refs: Vec<&OpsPartial> = parts.iter().map(|p| p.as_ref()).collect();
        Ok(Reduced {
            result: reduce(&refs),
            notes: refs
                .iter()
                .flat_map(|p| p.command_buffer_notes.iter().cloned())
                .collect(),
        })
    }

    fn render(&self, o: &Ops) -> String {
        render(o)
    }

    fn sections(&self, o: &Ops) -> Result<Vec<Section>> {
        Ok(vec![section(o)?])
    }
}

/// Opcodes drawn at most.
const OPCODES_DRAWN: usize = 25;

/// The report's section: GPU time by category and by opcode, and the top thunks.
fn section(o: &Ops) -> Result<Section> {
    use crate::report::{Cell, HtmlTable, charts};
    use crate::units::{duration_ms, percent};
    let mut sec = Section::new("ops", "Where the GPU time goes");
    sec.notes(&o.notes);
    if o.by_opcode.is_empty() {
        sec.para("No steady-state module execution in the profile.");
        return Ok(sec);
    }
    let t = &o.totals;
    sec.para(&format!(
        "Steady state: {} in XLA modules over {} of wall time; thunks cover {}.",
        duration_ms(t.modules_ms),
        duration_ms(t.wall_ms),
        duration_ms(t.thunks_ms)
    ));
    if o.command_buffers.thunks > 0 {
        let c = &o.command_buffers;
        sec.para(&format!(
            "{}: {} of which {} attributed to the HLO instructions inside.",
            crate::table::count(c.thunks as usize, "command buffer", "command buffers"),
            duration_ms(c.ms),
            duration_ms(c.attributed_ms)
        ));
    }
    let ms = |v: f64| duration_ms(v);
    sec.heading("By category");
    let cats: Vec<(String, f64)> = o
        .by_category
        .iter()
        .map(|r| (r.category.clone(), r.ms))
        .collect();
    sec.chart(charts::bars(&cats, "GPU time", &ms)?);
    sec.heading(&format!(
        "By opcode{}",
        if o.by_opcode.len() > OPCODES_DRAWN {
            format!(" (the {OPCODES_DRAWN} largest of {})", o.by_opcode.len())
        } else {
            String::new()
        }
    ));
    let ops: Vec<(String, f64)> = o
        .by_opcode
        .iter()
        .take(OPCODES_DRAWN)
        .map(|r| (r.opcode.clone(), r.ms))
        .collect();
    sec.chart(charts::bars(&ops, "GPU time", &ms)?);
    sec.heading("Top thunks");
    let mut table = HtmlTable::new(&[
        "module",
        "thunk",
        "opcode",
        "op name",
        "executions",
        "total",
        "mean",
        "share",
    ])
    .limit(50, Some("ops.json"));
    for (i, r) in o.top_thunks.iter().enumerate() {
        if table.is_full() {
            table.more(o.top_thunks.len() - i);
            break;
        }
        table.row(vec![
            Cell::text(&r.module),
            Cell::text(&r.thunk),
            Cell::text(&r.opcode),
            Cell::text(&r.op_name),
            Cell::count(r.executions),
            Cell::ms(r.total_ms),
            Cell::num(
                match r.std_ms {
                    Some(s) if s > 0.0 => {
                        format!("{} ± {}", duration_ms(r.mean_ms), duration_ms(s))
                    }
                    _ => duration_ms(r.mean_ms),
                },
                r.mean_ms,
            ),
            Cell::num(percent(r.percent / 100.0), r.percent),
        ]);
    }
    sec.table(&table);
    Ok(sec)
}
