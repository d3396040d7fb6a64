//! `sources`: GPU time per Python source stack and per `op_name` path, as flame graphs, with
//! the rules of nsys-jax's notebook (docs/design.md, "Where the GPU time goes").
//!
//! Output contract: `sources.json` `{"source":[{stack:[..], ms}], "op_name":[{stack:[..], ms}],
//! "lines":[{frame, ms, percent}]}` (stacks root first; `lines`: the innermost Python frame
//! of the source stacks), `source.folded` and `op_name.folded` (folded stacks, counts in ns,
//! `;` inside a frame written `|`), and the flame graphs `flamegraph-source.svg` and
//! `flamegraph-op_name.svg` (interactive SVG: click to zoom, Ctrl-F to search).
//!
//! Map: per process, for each (program, thunk) of its steady state, the `op_name` and Python
//! stack of the thunk's HLO instruction and of the instructions of the computations it calls
//! (one level), per dump of the program. Reduce: the time of each thunk of the top modules
//! ([`crate::analyses::ops`]) shared equally among its distinct stacks; the dumps of a
//! program merged as the notebook merges them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use anyhow::Result;
use arrow::array::AsArray;
use serde::{Deserialize, Serialize};

use crate::analyses::ops::{self, OpsPartial, OpsShare, modules_by_program};
use crate::analyses::{
    Analysis, NoParams, ProcessView, Reads, Reduced, RunShares, Share, ShareUse,
};
use crate::frames::gpu::{NAME, PROGRAM_ID, Programs};
use crate::frames::warmup::Steady;
use crate::stats::group_by;
use crate::table::{Table, round_sig};

pub const GPU_ACTIVE: &str = "[GPU active]";
pub const UNKNOWN: &str = "[Unknown]";
pub const IDLE_DURING: &str = "[GPU idle during module execution]";
pub const IDLE_BETWEEN: &str = "[GPU idle between module executions]";
pub const INCONSISTENT: &str = "[inconsistent metadata]";

/// The metadata of a thunk's instructions in one dump: (op_name, Python frames root first).
pub type Instrs = Vec<(String, Vec<String>)>;

/// One (program, thunk) of one process: its instructions' metadata per dump of the program
/// (each as (op_name id, stack id)); distinct dumps only.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ThunkMeta {
    pub program_id: String,
    pub thunk: String,
    pub dumps: Vec<Vec<(u32, u32)>>,
}

/// One process's share of `sources`, with its strings and stacks interned.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct StacksPartial {
    pub strings: Vec<String>,
    /// Stacks as string ids, root first.
    pub stacks: Vec<Vec<u32>>,
    pub thunks: Vec<ThunkMeta>,
}

impl crate::engine::value::JsonValue for StacksPartial {}

#[derive(Default)]
struct Interner {
    out: StacksPartial,
    strings: HashMap<String, u32>,
    stacks: HashMap<Vec<u32>, u32>,
}

impl Interner {
    fn string(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.out.strings.len() as u32;
        self.out.strings.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    fn stack(&mut self, frames: &[String]) -> u32 {
        let ids: Vec<u32> = frames.iter().map(|f| self.string(f)).collect();
        if let Some(&i) = self.stacks.get(&ids) {
            return i;
        }
        let i = self.out.stacks.len() as u32;
        self.out.stacks.push(ids.clone());
        self.stacks.insert(ids, i);
        i
    }
}

/// The map step.
pub fn partial(steady: &Steady, programs: &Programs) -> StacksPartial {
    let by_program = modules_by_program(programs);
    let t = &steady.thunk;
    let prog = t.column_by_name(PROGRAM_ID).unwrap().as_string::<i32>();
    let thunk = t.column_by_name(NAME).unwrap().as_string::<i32>();
    let mut interner = Interner::default();
    let mut frames_of: HashMap<(usize, i64), Vec<String>> = HashMap::new();
    for ((p, th), _) in group_by(t.num_rows(), |i| (prog.value(i), thunk.value(i))) {
        let mut dumps: Vec<Vec<(u32, u32)>> = Vec::new();
        for (mi, m) in by_program.get(p).into_iter().flatten().enumerate() {
            let Some(own) = m
                .instructions
                .binary_search_by(|i| i.name.as_str().cmp(th))
                .ok()
            else {
                continue;
            };
            let indices =
                std::iter::once(own as u32).chain(m.instructions[own].called.iter().copied());
            let mut list = Vec::new();
            for i in indices {
                let instr = &m.instructions[i as usize];
                let frames = frames_of
                    .entry((mi, instr.stack_frame_id))
                    .or_insert_with(|| m.frames(instr.stack_frame_id));
                let frames = frames.clone();
                list.push((interner.string(&instr.op_name), interner.stack(&frames)));
            }
            if !dumps.contains(&list) {
                dumps.push(list);
            }
        }
        interner.out.thunks.push(ThunkMeta {
            program_id: p.to_string(),
            thunk: th.to_string(),
            dumps,
        });
    }
    interner.out
}

/// Merge the metadata of two dumps of one program as nsys-jax does: equal names required;
/// stacks that differ keep their common root, then [`INCONSISTENT`], then their common
/// innermost frames — innermost first, as nsys-jax writes them.
fn merge(a: Instrs, b: &Instrs) -> Option<Instrs> {
    if a.len() != b.len() || a.iter().zip(b).any(|(x, y)| x.0 != y.0) {
        return None;
    }
    Some(
        a.into_iter()
            .zip(b)
            .map(|((name, s1), (_, s2))| {
                if &s1 == s2 {
                    return (name, s1);
                }
                let prefix = s1.iter().zip(s2).take_while(|(x, y)| x == y).count();
                let suffix: Vec<String> = s1
                    .iter()
                    .rev()
                    .zip(s2.iter().rev())
                    .take_while(|(x, y)| x == y)
                    .map(|(x, _)| x.clone())
                    .collect();
                let mut s = s1[..prefix].to_vec();
                s.push(INCONSISTENT.to_string());
                s.extend(suffix);
                (name, s)
            })
            .collect(),
    )
}

/// The source and op_name paths of a thunk's instructions (each set holds distinct paths;
/// the thunk's time is shared equally among them).
fn paths(instrs: &Instrs) -> (BTreeSet<Vec<String>>, BTreeSet<Vec<String>>) {
    let (mut stacks, mut unknown_with_name, mut names) =
        (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for (n, frames) in instrs {
        if !frames.is_empty() {
            let mut path = vec![GPU_ACTIVE.to_string()];
            path.extend(frames.iter().cloned());
            if !n.is_empty() {
                path.push(n.clone());
            }
            stacks.insert(path);
        }
        if !n.is_empty() {
            unknown_with_name.insert(vec![GPU_ACTIVE.into(), UNKNOWN.into(), n.clone()]);
            let mut path = vec![GPU_ACTIVE.to_string()];
            path.extend(n.split('/').map(str::to_string));
            names.insert(path);
        }
    }
    let unknown = || BTreeSet::from([vec![GPU_ACTIVE.to_string(), UNKNOWN.to_string()]]);
    let source = [stacks, unknown_with_name]
        .into_iter()
        .find(|s| !s.is_empty())
        .unwrap_or_else(unknown);
    let op_name = if names.is_empty() { unknown() } else { names };
    (source, op_name)
}

#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct StackRow {
    pub stack: Vec<String>,
    pub ms: f64,
}

#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct LineRow {
    pub frame: String,
    pub ms: f64,
    pub percent: f64,
}

#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Sources {
    pub source: Vec<StackRow>,
    pub op_name: Vec<StackRow>,
    pub lines: Vec<LineRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

fn rows(map: BTreeMap<Vec<String>, f64>) -> Vec<StackRow> {
    let mut rows: Vec<StackRow> = map
        .into_iter()
        .map(|(stack, ns)| StackRow {
            stack,
            ms: ns * 1e-6,
        })
        .collect();
    rows.sort_by(|a, b| b.ms.total_cmp(&a.ms).then_with(|| a.stack.cmp(&b.stack)));
    rows
}

/// The reduce step.
pub fn reduce(ops_parts: &[&OpsPartial], parts: &[&StacksPartial]) -> Sources {
    let (_, top) = ops::top_programs(ops_parts);
    let tot = ops::totals(ops_parts, &top);
    let mut meta: BTreeMap<(String, String), Vec<Instrs>> = BTreeMap::new();
    for p in parts {
        for t in &p.thunks {
            let dumps = meta
                .entry((t.program_id.clone(), t.thunk.clone()))
                .or_default();
            for d in &t.dumps {
                let instrs: Instrs = d
                    .iter()
                    .map(|&(n, s)| {
                        let frames = p.stacks[s as usize]
                            .iter()
                            .map(|&f| p.strings[f as usize].clone())
                            .collect();
                        (p.strings[n as usize].clone(), frames)
                    })
                    .collect();
                if !dumps.contains(&instrs) {
                    dumps.push(instrs);
                }
            }
        }
    }
    let (mut source, mut op_name) = (BTreeMap::new(), BTreeMap::new());
    let mut lines: BTreeMap<String, f64> = BTreeMap::new();
    let (mut unmerged, mut unknown) = (0usize, 0usize);
    for t in ops::merged_thunks(ops_parts) {
        if !top.contains(&t.program_id) {
            continue;
        }
        let dumps = meta
            .remove(&(t.program_id.clone(), t.thunk.clone()))
            .unwrap_or_default();
        let mut dumps = dumps.into_iter();
        let mut instrs = dumps.next().unwrap_or_default();
        for d in dumps {
            match merge(instrs.clone(), &d) {
                Some(m) => instrs = m,
                None => unmerged += 1,
            }
        }
        if instrs.is_empty() {
            unknown += 1;
        }
        let ns = t.time.sum as f64;
        let (src, ops) = paths(&instrs);
        for p in &src {
            *source.entry(p.clone()).or_insert(0.0) += ns / src.len() as f64;
            // The innermost Python frame: the element before the op_name, if any.
            let frames = &p[1..];
            let frames = match instrs.iter().any(|(n, _)| frames.last() == Some(n)) {
                true => &frames[..frames.len() - 1],
                false => frames,
            };
            if let Some(f) = frames.last().filter(|f| f.as_str() != UNKNOWN) {
                *lines.entry(f.clone()).or_default() += ns / src.len() as f64;
            }
        }
        for p in &ops {
            *op_name.entry(p.clone()).or_insert(0.0) += ns / ops.len() as f64;
        }
    }
    for map in [&mut source, &mut op_name] {
        map.insert(
            vec![IDLE_DURING.to_string()],
            (tot.modules - tot.thunks).max(0) as f64,
        );
        map.insert(
            vec![IDLE_BETWEEN.to_string()],
            (tot.wall - tot.modules).max(0) as f64,
        );
    }
    let mut notes = Vec::new();
    if unknown > 0 {
        notes.push(format!(
            "{unknown} thunk(s) of the top modules have no HLO metadata (instruction not in the dump): counted under {UNKNOWN}"
        ));
    }
    if unmerged > 0 {
        notes.push(format!(
            "{unmerged} thunk(s) differ in their instructions between dumps of one program: the first dump's metadata is used"
        ));
    }
    let mut lines: Vec<LineRow> = lines
        .into_iter()
        .map(|(frame, ns)| LineRow {
            frame,
            ms: ns * 1e-6,
            percent: if tot.thunks > 0 {
                100.0 * ns / tot.thunks as f64
            } else {
                0.0
            },
        })
        .collect();
    lines.sort_by(|a, b| b.ms.total_cmp(&a.ms).then_with(|| a.frame.cmp(&b.frame)));
    Sources {
        source: rows(source),
        op_name: rows(op_name),
        lines,
        notes,
    }
}

/// Folded stacks (`a;b;c <ns>`), sorted; `;` inside a frame is written `|`.
pub fn folded(rows: &[StackRow]) -> String {
    let mut lines: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            let ns = (r.ms * 1e6).round();
            (ns >= 1.0).then(|| {
                let frames: Vec<String> = r.stack.iter().map(|f| f.replace(';', "|")).collect();
                format!("{} {}", frames.join(";"), ns as u64)
            })
        })
        .collect();
    lines.sort();
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

/// An interactive SVG flame graph of folded stacks.
pub fn flame_graph(folded: &str, title: &str) -> Result<String> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = "ns".into();
    opts.name_type = "Frame:".into();
    opts.deterministic = true;
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, folded.lines(), &mut out)?;
    Ok(String::from_utf8(out)?)
}

/// Terminal rendering: the source lines that take the most GPU time.
pub fn render(s: &Sources) -> String {
    let mut out = String::new();
    if s.lines.is_empty() {
        out.push_str("No Python source stacks in the HLO metadata: see op_name.folded and the flame graphs.\n");
    } else {
        let mut t = Table::new(&["Python source (innermost frame)", "GPU time", "%"]);
        t.align_right(&[1, 2]);
        for r in s.lines.iter().take(10) {
            t.row(vec![
                r.frame.clone(),
                format!("{} ms", round_sig(r.ms)),
                format!("{:.1}", r.percent),
            ]);
        }
        out.push_str("GPU time by source line (top modules):\n");
        out.push_str(&t.render());
    }
    out.push_str("Flame graphs: flamegraph-source.svg, flamegraph-op_name.svg (folded stacks: source.folded, op_name.folded)\n");
    for n in &s.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

// ---------------------------------------------------------------- the analysis

/// `sources`' share: [`partial`] of one process.
pub struct StacksShare;

impl Share for StacksShare {
    const KIND: &'static str = "stacks-partial";
    const SOURCES: &'static [&'static str] =
        &["analyses/sources.rs", "frames/warmup.rs", "stats.rs"];
    const READS: Reads = Reads::Gpu;
    type Param = ();
    type Value = StacksPartial;

    fn map(&self, p: &ProcessView, _: &()) -> Result<StacksPartial> {
        let Some(steady) = p.steady else {
            return Ok(StacksPartial::default());
        };
        let programs = (p.programs)()?;
        Ok(partial(steady, &programs))
    }
}

/// The `sources` analysis.
pub struct SourcesAnalysis;

impl Analysis for SourcesAnalysis {
    const NAME: &'static str = "sources";
    const SOURCES: &'static [&'static str] =
        &["analyses/sources.rs", "analyses/ops.rs", "table.rs"];
    type Params = NoParams;
    type Result = Sources;

    fn shares(&self, _: &NoParams) -> Vec<ShareUse> {
        vec![
            ShareUse::of(&OpsShare, &()),
            ShareUse::of(&StacksShare, &()),
        ]
    }

    fn reduce(&self, run: &dyn RunShares, _: &NoParams) -> Result<Reduced<Sources>> {
        let ops = run.all(&OpsShare, &())?;
        let stacks = run.all(&StacksShare, &())?;
        let ops: Vec<&OpsPartial> = ops.iter().map(|p| p.as_ref()).collect();
        let stacks: Vec<&StacksPartial> = stacks.iter().map(|p| p.as_ref()).collect();
        Ok(Reduced {
            result: reduce(&ops, &stacks),
            notes: vec![],
        })
    }

    fn render(&self, s: &Sources) -> String {
        render(s)
    }

    fn files(&self, s: &Sources) -> Result<Vec<(String, String)>> {
        let source = folded(&s.source);
        let op_name = folded(&s.op_name);
        Ok(vec![
            ("sources.json".into(), serde_json::to_string_pretty(s)?),
            (
                "flamegraph-source.svg".into(),
                flame_graph(&source, "GPU time by Python source")?,
            ),
            (
                "flamegraph-op_name.svg".into(),
                flame_graph(&op_name, "GPU time by op_name")?,
            ),
            ("source.folded".into(), source),
            ("op_name.folded".into(), op_name),
        ])
    }
}
