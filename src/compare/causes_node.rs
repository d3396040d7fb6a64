//! A changed module's causes as a stored node of the graph (docs/compare.md, "Why"): its
//! change by source line ([`super::causes`], with each line's code from the archives' copy of
//! the file) and whether both sides' programs before optimization are the same. Keyed by both
//! runs' decoded programs, their archives and the module's thunk comparison, so a warm
//! comparison decodes no HLO and reads no archive.

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::causes::{self, SourceChange};
use std::sync::Arc;

use super::{FamilyComparison, Row};
use crate::engine::{Keep, Key, KeyBuilder, Node};
use crate::formats::hlo::HloModuleInfo;
use crate::graph::{self, Db, Run};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Causes {
    pub sources: Vec<SourceChange>,
    /// None when a side's dump lacks the module before optimization.
    pub same_before_optimization: Option<bool>,
}

impl crate::engine::value::JsonValue for Causes {}

struct CausesNode<'a> {
    ids: (&'a str, &'a str),
    /// Both runs' decoded programs, then their archives' content keys.
    inputs: &'a [Key],
    /// The module's thunk rows, hashed; the floor of a group's change.
    thunks: String,
    floor: f64,
    /// Whether the module changed (else only the programs before optimization are compared).
    changed: bool,
}

impl Node for CausesNode<'_> {
    type Value = Causes;
    const KEEP: Keep = Keep::Stored;
    fn kind(&self) -> &str {
        "compare:causes"
    }
    fn roots(&self) -> Vec<&'static str> {
        vec![file!()]
    }
    fn recipe(&self, kb: KeyBuilder) -> KeyBuilder {
        let mut kb = kb
            .param("base_id", self.ids.0)
            .param("head_id", self.ids.1)
            .param("thunks", &self.thunks)
            .param("floor", self.floor.to_le_bytes())
            .param("changed", [self.changed as u8]);
        for k in self.inputs {
            kb = kb.input(k);
        }
        kb
    }
}

/// The decoded HLO of the module with stable id `id` in the first process of `run` that has
/// it.
pub(super) fn module_hlo(db: &Db, run: Run, id: &str) -> Result<Option<Arc<HloModuleInfo>>> {
    for &p in run.processes(db) {
        let programs = graph::hlo::programs(db, p)?;
        if let Some(m) = programs
            .value
            .iter()
            .find(|m| m.fingerprint.as_deref() == Some(id))
        {
            return Ok(Some(m.clone()));
        }
    }
    Ok(None)
}

/// The keys a run's causes depend on: its decoded programs and its archives' contents.
fn keys(db: &Db, run: Run) -> Result<Vec<Key>> {
    let mut v = Vec::new();
    for &p in run.processes(db) {
        v.push(graph::hlo::programs_key(db, p)?);
        v.push(p.archive(db).file_key(db));
    }
    Ok(v)
}

/// The causes of the module of `row` (its change by source line only when `changed`).
pub fn of(
    db: &Db,
    base: Run,
    head: Run,
    row: &Row,
    thunks: &FamilyComparison,
    floor: f64,
    changed: bool,
) -> Result<Causes> {
    let Some(b) = row.program_id.as_deref() else {
        return Ok(Causes::default());
    };
    let h = row.head_program_id.as_deref().unwrap_or(b);
    let mut inputs = keys(db, base)?;
    inputs.extend(keys(db, head)?);
    // The rows `causes` reads: the module's, both sides'.
    let mine: (Vec<&Row>, Vec<&super::OneSided>) = (
        thunks
            .rows
            .iter()
            .filter(|t| t.module == row.module && t.program_id == row.program_id)
            .collect(),
        thunks
            .one_sided
            .iter()
            .filter(|o| o.module == row.module)
            .collect(),
    );
    let node = CausesNode {
        ids: (b, h),
        inputs: &inputs,
        thunks: blake3::hash(serde_json::to_string(&mine)?.as_bytes())
            .to_hex()
            .to_string(),
        floor,
        changed,
    };
    let (_, v) = db.engine().compute(&node, "", || {
        let (Ok(Some(bm)), Ok(Some(hm))) = (module_hlo(db, base, b), module_hlo(db, head, h))
        else {
            return Ok(Causes::default());
        };
        let mut sources = Vec::new();
        if changed {
            sources = causes::by_source(row, thunks, &bm, &hm, floor);
            for g in sources.iter_mut().filter(|g| !g.file.is_empty()) {
                g.code = code_line(db, head, &g.file, g.line)
                    .or_else(|| code_line(db, base, &g.file, g.line))
                    .unwrap_or_default();
            }
        }
        let same = (b != h)
            .then(|| Some(before_optimizations(db, base, b)? == before_optimizations(db, head, h)?))
            .flatten();
        Ok(Causes {
            sources,
            same_before_optimization: same,
        })
    })?;
    Ok((*v).clone())
}

/// Line `line` of a Python file, from the copy a run's archives keep under `sources/`
/// (trimmed, at most 80 characters); None when no archive has the file.
fn code_line(db: &Db, run: Run, file: &str, line: i64) -> Option<String> {
    let member = format!("sources/{}", file.trim_start_matches('/'));
    let n = usize::try_from(line).ok()?.checked_sub(1)?;
    for &p in run.processes(db) {
        let a = p.archive_ref(db);
        if !a.members().any(|m| m == member) {
            continue;
        }
        let Ok(bytes) = graph::members::read_archive_member(db, &a, &member) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        let code = text.lines().nth(n)?.trim();
        return Some(match code.char_indices().nth(80) {
            Some((at, _)) => format!("{}…", &code[..at]),
            None => code.to_string(),
        });
    }
    None
}

/// The hash of a module's program before optimization (without the module's id: the order it
/// was compiled in), from the first process of `run` whose dump holds it (`module_NNNN.NAME.before_optimizations.hlo.pb[.xz]`).
fn before_optimizations(db: &Db, run: Run, id: &str) -> Option<blake3::Hash> {
    let m = module_hlo(db, run, id).ok()??;
    let prefix = format!(
        "dump/module_{:04}.{}.before_optimizations.hlo.pb",
        m.id, m.name
    );
    for &p in run.processes(db) {
        let a = p.archive_ref(db);
        let Some(member) = a
            .members()
            .find(|n| n.starts_with(&prefix))
            .map(str::to_string)
        else {
            continue;
        };
        if let Ok(bytes) = graph::hlo::read_xz_member(&a, &member) {
            return Some(crate::formats::hlo::program_hash(&bytes));
        }
    }
    None
}
