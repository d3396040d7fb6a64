//! `pgle`: profile-guided latency estimator input for XLA (docs/design.md, "PGLE profiles"):
//! per program, the measured cost of each instruction in the text format
//! `--xla_gpu_pgle_profile_file_or_directory_path` reads, one file per module fingerprint.
//!
//! Output contract: `OUTDIR/pgle/<fingerprint>.pbtxt`, lines `costs { name: "<scheduling
//! name>" cost_us: <µs, one decimal> }` sorted by instruction name, and `OUTDIR/pgle.json`:
//! `{"modules":[{"program_id","name","file","instructions","communication",
//! "without_scheduling_name"}],"notes":[..]}`.
//!
//! The choices of nsys-jax's `pgle_costs.py`: steady-state thunks; a thunk's time is its whole
//! time (exposed + hidden); a communication instruction costs the slowest time seen (any
//! execution, any device), a compute one the fastest. Unlike it, instructions without a
//! scheduling name (2024 dumps have none) are left out rather than written with an empty name,
//! and programs without a dump (no fingerprint) are named in the notes.

use std::collections::BTreeMap;

use crate::engine::value::Text;
use crate::report::Section;
use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::analyses::{
    Analysis, NoParams, ProcessView, Reads, Reduced, RunShares, Share, ShareUse,
};
use crate::frames::command_buffers::is_command_buffer;
use crate::frames::views::{ModuleView, ThunkView};
use crate::frames::warmup::Steady;
use crate::stats::group_by;
use crate::table::Table;

/// One instruction of one program, as one process saw it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct InstructionCost {
    pub thunk: String,
    /// Its scheduling name ("" when the dump has none; None when the dump lacks it).
    pub scheduling_name: Option<String>,
    pub communication: bool,
    /// Fastest and slowest whole time [ns].
    pub min: i64,
    pub max: i64,
}

/// One program of one process.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ProgramCosts {
    pub program_id: String,
    pub name: String,
    /// The module's fingerprint (None without a dump).
    pub fingerprint: Option<String>,
    /// Steady module time [ns] (to order the programs).
    pub time: i64,
    pub instructions: Vec<InstructionCost>,
}

/// One process's share of `pgle`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct PglePartial {
    pub programs: Vec<ProgramCosts>,
}

impl crate::engine::value::JsonValue for PglePartial {}

/// The map step.
pub fn partial(steady: &Steady, programs: &crate::frames::gpu::Programs) -> PglePartial {
    let by_program = programs.by_program();
    let m = ModuleView::of(&steady.module);
    let m_prog = &m.program_id;
    let m_name = m.program_name;
    let m_dur = m.dur;
    let t = ThunkView::of(&steady.thunk);
    let prog = &t.program_id;
    let thunk = &t.name;
    let comm = t.communication;
    let dur = t.dur;
    let hidden = t.dur_hidden;
    let mut thunks: BTreeMap<&str, Vec<InstructionCost>> = BTreeMap::new();
    for ((p, th), rows) in group_by(t.rows, |i| (prog.value(i), thunk.value(i))) {
        if is_command_buffer(th) {
            continue;
        }
        let whole = |i: usize| dur.value(i) + hidden.value(i);
        let instr = by_program
            .get(p)
            .and_then(|ms| ms.iter().find_map(|m| m.instruction(th)));
        thunks.entry(p).or_default().push(InstructionCost {
            thunk: th.to_string(),
            scheduling_name: instr.map(|i| i.scheduling_name().to_string()),
            communication: comm.value(rows[0]),
            min: rows.iter().map(|&i| whole(i)).min().unwrap_or(0),
            max: rows.iter().map(|&i| whole(i)).max().unwrap_or(0),
        });
    }
    let mut out = PglePartial::default();
    for (p, rows) in group_by(m.rows, |i| m_prog.value(i)) {
        let fingerprint = by_program
            .get(p)
            .and_then(|ms| ms.iter().find_map(|m| m.fingerprint.clone()));
        out.programs.push(ProgramCosts {
            program_id: p.to_string(),
            name: m_name.value(rows[0]).to_string(),
            fingerprint,
            time: rows.iter().map(|&i| m_dur.value(i)).sum(),
            instructions: thunks.remove(p).unwrap_or_default(),
        });
    }
    out
}

/// One program's profile.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ModuleProfile {
    pub program_id: String,
    pub name: String,
    /// `pgle/<fingerprint>.pbtxt`.
    pub file: String,
    /// Instructions written.
    pub instructions: usize,
    /// Of those, communication (costed at their slowest).
    pub communication: usize,
    /// Instructions left out: no scheduling name in the dump.
    pub without_scheduling_name: usize,
    /// The file's text.
    #[serde(skip)]
    pub text: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Pgle {
    pub modules: Vec<ModuleProfile>,
    pub notes: Vec<String>,
}

/// The reduce: every process's costs merged per program and instruction; one profile per
/// program with a fingerprint, largest steady time first.
pub fn reduce(parts: &[&PglePartial]) -> Pgle {
    struct Merged {
        name: String,
        fingerprint: Option<String>,
        time: i64,
        costs: BTreeMap<String, InstructionCost>,
    }
    let mut programs: BTreeMap<&str, Merged> = BTreeMap::new();
    for part in parts {
        for p in &part.programs {
            let m = programs.entry(&p.program_id).or_insert_with(|| Merged {
                name: p.name.clone(),
                fingerprint: None,
                time: 0,
                costs: BTreeMap::new(),
            });
            m.time += p.time;
            if m.fingerprint.is_none() {
                m.fingerprint = p.fingerprint.clone();
            }
            for c in &p.instructions {
                m.costs
                    .entry(c.thunk.clone())
                    .and_modify(|e| {
                        e.min = e.min.min(c.min);
                        e.max = e.max.max(c.max);
                        if e.scheduling_name.is_none() {
                            e.scheduling_name = c.scheduling_name.clone();
                        }
                    })
                    .or_insert_with(|| c.clone());
            }
        }
    }
    let mut order: Vec<(&str, Merged)> = programs.into_iter().collect();
    order.sort_by(|a, b| b.1.time.cmp(&a.1.time).then(a.0.cmp(b.0)));
    let mut modules = Vec::new();
    let mut notes = Vec::new();
    for (id, m) in order {
        let Some(fingerprint) = m.fingerprint.filter(|f| !f.is_empty()) else {
            notes.push(format!(
                "{} ({id}): no HLO dump with a fingerprint: no profile",
                m.name
            ));
            continue;
        };
        let mut text = String::new();
        let (mut written, mut comm, mut unnamed, mut missing) = (0, 0, 0, 0);
        for c in m.costs.values() {
            let name = match c.scheduling_name.as_deref() {
                None => {
                    missing += 1;
                    continue;
                }
                Some("") => {
                    unnamed += 1;
                    continue;
                }
                Some(n) => n,
            };
            let ns = if c.communication { c.max } else { c.min };
            text.push_str(&format!(
                "costs {{ name: \"{}\" cost_us: {:.1} }}\n",
                escape(name),
                ns as f64 / 1000.0
            ));
            written += 1;
            comm += c.communication as usize;
        }
        if written == 0 {
            notes.push(format!(
                "{} ({}): none of its {} has a scheduling name in the dump (older XLA): no profile",
                m.name,
                crate::frames::program_ids::short_id(id),
                crate::table::count((unnamed + missing) as usize, "instruction", "instructions")
            ));
            continue;
        }
        if unnamed > 0 {
            notes.push(format!(
                "{} ({}): {} without a scheduling name in the dump left out",
                m.name,
                crate::frames::program_ids::short_id(id),
                crate::table::count(unnamed as usize, "instruction", "instructions")
            ));
        }
        if missing > 0 {
            notes.push(format!(
                "{} ({}): {} naming instructions missing from the dump left out",
                m.name,
                crate::frames::program_ids::short_id(id),
                crate::table::count(missing as usize, "thunk", "thunks")
            ));
        }
        modules.push(ModuleProfile {
            program_id: id.to_string(),
            name: m.name,
            file: format!("pgle/{fingerprint}.pbtxt"),
            instructions: written,
            communication: comm,
            without_scheduling_name: unnamed,
            text,
        });
    }
    Pgle { modules, notes }
}

/// A string as a text-format proto literal (quotes and backslashes escaped).
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

pub fn render(p: &Pgle) -> String {
    if p.modules.is_empty() {
        return "No program with an HLO dump ran in the steady state: no PGLE profile.\n".into();
    }
    let mut t = Table::new(&[
        "module",
        "profile",
        "instructions",
        "communication",
        "left out",
    ]);
    for m in &p.modules {
        t.row(vec![
            m.name.clone(),
            m.file.clone(),
            m.instructions.to_string(),
            m.communication.to_string(),
            m.without_scheduling_name.to_string(),
        ]);
    }
    format!(
        "PGLE cost profiles (pass the pgle/ folder to --xla_gpu_pgle_profile_file_or_directory_path):\n{}",
        t.render()
    )
}

/// The share `pgle` reads.
pub struct PgleShare;

impl Share for PgleShare {
    const KIND: &'static str = "pgle-partial";
    const FILE: &'static str = file!();
    const READS: Reads = Reads::Gpu;
    type Param = ();
    type Value = PglePartial;

    fn map(&self, p: &ProcessView, _: &()) -> Result<PglePartial> {
        p.with_programs(partial)
    }
}

/// The `pgle` analysis.
pub struct PgleAnalysis;

impl Analysis for PgleAnalysis {
    const NAME: &'static str = "pgle";
    const FILE: &'static str = file!();
    type Params = NoParams;
    type Result = Pgle;

    fn shares(&self, _: &NoParams) -> Vec<ShareUse> {
        vec![ShareUse::of(&PgleShare, &())]
    }

    fn reduce(&self, run: &dyn RunShares, _: &NoParams) -> Result<Reduced<Pgle>> {
        let parts = run.all(&PgleShare, &())?;
        let refs: Vec<&PglePartial> = parts.iter().map(|p| p.as_ref()).collect();
        let result = reduce(&refs);
        Ok(Reduced {
            notes: result.notes.clone(),
            result,
        })
    }

    fn render(&self, p: &Pgle) -> String {
        render(p)
    }

    /// The profiles written, and how to use them.
    fn sections(&self, p: &Pgle) -> Result<Vec<Section>> {
        use crate::report::{Cell, HtmlTable};
        let mut sec = Section::new("pgle", "Profile-guided latency estimation");
        sec.notes(&p.notes);
        if p.modules.is_empty() {
            sec.para("No profile written.");
            return Ok(vec![sec]);
        }
        sec.para(
            "One profile per program, in the output folder: give XLA the folder with \
             --xla_gpu_pgle_profile_file_or_directory_path so its scheduler uses measured \
             instruction costs.",
        );
        let mut t = HtmlTable::new(&[
            "module",
            "file",
            "instructions",
            "communication",
            "without scheduling name",
        ]);
        for m in &p.modules {
            t.row(vec![
                Cell::text(&m.name),
                Cell::text(&m.file),
                Cell::count(m.instructions as u64),
                Cell::count(m.communication as u64),
                Cell::count(m.without_scheduling_name as u64),
            ]);
        }
        sec.table(&t);
        Ok(vec![sec])
    }

    fn files(&self, p: &Pgle) -> Result<Vec<(String, String)>> {
        let mut files = vec![(
            format!("{}.json", Self::NAME),
            serde_json::to_string_pretty(p)?,
        )];
        for m in &p.modules {
            files.push((m.file.clone(), m.text.clone()));
        }
        Ok(files)
    }

    /// `pgle.json` with each profile's text from its own file.
    fn result_of(&self, files: &[(String, Text)]) -> Result<Pgle> {
        let mut p: Pgle = super::json_file(&format!("{}.json", Self::NAME), files)?;
        for m in &mut p.modules {
            let (_, text) = files
                .iter()
                .find(|(n, _)| *n == m.file)
                .ok_or_else(|| anyhow::anyhow!("no {} in the output of pgle", m.file))?;
            m.text = text.as_str().to_string();
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(thunk: &str, sched: Option<&str>, comm: bool, min: i64, max: i64) -> InstructionCost {
        InstructionCost {
            thunk: thunk.into(),
            scheduling_name: sched.map(str::to_string),
            communication: comm,
            min,
            max,
        }
    }

    #[test]
    fn slowest_communication_fastest_compute_across_processes() {
        let a = PglePartial {
            programs: vec![ProgramCosts {
                program_id: "fp".into(),
                name: "jit_step".into(),
                fingerprint: Some("fp".into()),
                time: 10,
                instructions: vec![
                    cost(
                        "all-gather.1",
                        Some("all-gather-start.1"),
                        true,
                        50_000,
                        60_000,
                    ),
                    cost("fusion.2", Some("fusion.2"), false, 9_000, 12_000),
                    cost("fusion.3", Some(""), false, 1_000, 1_000),
                    cost("fusion.4", None, false, 1_000, 1_000),
                ],
            }],
        };
        let b = PglePartial {
            programs: vec![ProgramCosts {
                program_id: "fp".into(),
                name: "jit_step".into(),
                fingerprint: Some("fp".into()),
                time: 10,
                instructions: vec![
                    cost(
                        "all-gather.1",
                        Some("all-gather-start.1"),
                        true,
                        40_000,
                        70_000,
                    ),
                    cost("fusion.2", Some("fusion.2"), false, 8_960, 9_500),
                ],
            }],
        };
        let nodump = PglePartial {
            programs: vec![ProgramCosts {
                program_id: "jit_other#7".into(),
                name: "jit_other".into(),
                fingerprint: None,
                time: 1,
                instructions: vec![],
            }],
        };
        let p = reduce(&[&a, &b, &nodump]);
        assert_eq!(p.modules.len(), 1);
        let m = &p.modules[0];
        assert_eq!(m.file, "pgle/fp.pbtxt");
        assert_eq!(
            m.text,
            "costs { name: \"all-gather-start.1\" cost_us: 70.0 }\n\
             costs { name: \"fusion.2\" cost_us: 9.0 }\n"
        );
        assert_eq!(
            (m.instructions, m.communication, m.without_scheduling_name),
            (2, 1, 1)
        );
        assert_eq!(p.notes.len(), 3, "{:?}", p.notes);
        // Nothing named at all (2024 dumps): no file, a note.
        let old = PglePartial {
            programs: vec![ProgramCosts {
                program_id: "fp2".into(),
                name: "pjit_step".into(),
                fingerprint: Some("fp2".into()),
                time: 1,
                instructions: vec![cost("fusion.1", Some(""), false, 1, 1)],
            }],
        };
        let p2 = reduce(&[&old]);
        assert!(p2.modules.is_empty());
        assert!(p2.notes[0].contains("none of its 1 instruction has a scheduling name"));
        assert!(
            p.notes
                .iter()
                .any(|n| n.contains("jit_other (jit_other#7): no HLO dump"))
        );
        assert_eq!(escape("a\"b\\c"), "a\\\"b\\\\c");
    }
}
