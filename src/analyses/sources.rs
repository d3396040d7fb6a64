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

use std::collections::{BTreeSet, HashMap};

use crate::report::Section;
use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::analyses::op_times::{self as ops, OpsPartial, OpsShare};
use crate::analyses::{
    Analysis, NoParams, ProcessView, Reads, Reduced, RunShares, Share, ShareUse,
};
use crate::frames::gpu::Programs;
use crate::frames::views::ThunkView;
use crate::frames::warmup::Steady;
use crate::stats::group_by;
use crate::table::Table;

pub const GPU_ACTIVE: &str = "[GPU active]";
pub const UNKNOWN: &str = "[Unknown]";
pub const IDLE_DURING: &str = "[GPU idle during module execution]";
pub const IDLE_BETWEEN: &str = "[GPU idle between module executions]";
pub const INCONSISTENT: &str = "[inconsistent metadata]";

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
        self.stack_ids(ids)
    }

    fn stack_ids(&mut self, ids: Vec<u32>) -> u32 {
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
    let by_program = programs.by_program();
    let t = ThunkView::of(&steady.thunk);
    let (prog, thunk) = (&t.program_id, &t.name);
    let mut interner = Interner::default();
    let mut stack_of: HashMap<(usize, i64), u32> = HashMap::new();
    for ((p, th), _) in group_by(t.rows, |i| (prog.value(i), thunk.value(i))) {
        let mut dumps: Vec<Vec<(u32, u32)>> = Vec::new();
        for (mi, m) in by_program.get(p).into_iter().flatten().enumerate() {
            let Some(own) = m.position(th) else {
                continue;
            };
            let indices =
                std::iter::once(own as u32).chain(m.instructions[own].called.iter().copied());
            let mut list = Vec::new();
            for i in indices {
                let instr = &m.instructions[i as usize];
                let stack = match stack_of.get(&(mi, instr.stack_frame_id)) {
                    Some(&s) => s,
                    None => {
                        let s = interner.stack(&m.frames(instr.stack_frame_id));
                        stack_of.insert((mi, instr.stack_frame_id), s);
                        s
                    }
                };
                list.push((interner.string(instr.op_name()), stack));
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

/// The metadata of a thunk's instructions in one dump, interned: (op_name, stack) ids.
type Ids = Vec<(u32, u32)>;

/// Merge the metadata of two dumps of one program as nsys-jax does: equal names required;
/// stacks that differ keep their common root, then [`INCONSISTENT`], then their common
/// innermost frames — innermost first, as nsys-jax writes them.
fn merge(into: &mut Interner, a: &Ids, b: &Ids) -> Option<Ids> {
    if a.len() != b.len() || a.iter().zip(b).any(|(x, y)| x.0 != y.0) {
        return None;
    }
    let inconsistent = into.string(INCONSISTENT);
    Some(
        a.iter()
            .zip(b)
            .map(|(&(name, s1), &(_, s2))| {
                if s1 == s2 {
                    return (name, s1);
                }
                let (f1, f2) = (&into.out.stacks[s1 as usize], &into.out.stacks[s2 as usize]);
                let prefix = f1.iter().zip(f2).take_while(|(x, y)| x == y).count();
                let mut merged = f1[..prefix].to_vec();
                merged.push(inconsistent);
                merged.extend(
                    f1.iter()
                        .rev()
                        .zip(f2.iter().rev())
                        .take_while(|(x, y)| x == y)
                        .map(|(x, _)| *x),
                );
                (name, into.stack_ids(merged))
            })
            .collect(),
    )
}

/// The source and op_name paths of a thunk's instructions, as string ids (each set holds
/// distinct paths; the thunk's time is shared equally among them).
fn paths(
    into: &mut Interner,
    split: &mut HashMap<u32, Vec<u32>>,
    instrs: &Ids,
) -> (BTreeSet<Vec<u32>>, BTreeSet<Vec<u32>>) {
    let (active, unknown, empty) = (
        into.string(GPU_ACTIVE),
        into.string(UNKNOWN),
        into.string(""),
    );
    let (mut stacks, mut unknown_with_name, mut names) =
        (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for &(n, s) in instrs {
        let frames = &into.out.stacks[s as usize];
        if !frames.is_empty() {
            let mut path = Vec::with_capacity(frames.len() + 2);
            path.push(active);
            path.extend_from_slice(frames);
            if n != empty {
                path.push(n);
            }
            stacks.insert(path);
        }
        if n != empty {
            unknown_with_name.insert(vec![active, unknown, n]);
            if !split.contains_key(&n) {
                let parts: Vec<String> = into.out.strings[n as usize]
                    .split('/')
                    .map(str::to_string)
                    .collect();
                let ids = parts.iter().map(|p| into.string(p)).collect();
                split.insert(n, ids);
            }
            let mut path = vec![active];
            path.extend_from_slice(&split[&n]);
            names.insert(path);
        }
    }
    let fallback = || BTreeSet::from([vec![active, unknown]]);
    let source = [stacks, unknown_with_name]
        .into_iter()
        .find(|s| !s.is_empty())
        .unwrap_or_else(fallback);
    let op_name = if names.is_empty() { fallback() } else { names };
    (source, op_name)
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct StackRow {
    pub stack: Vec<String>,
    pub ms: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct LineRow {
    pub frame: String,
    pub ms: f64,
    pub percent: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Sources {
    pub source: Vec<StackRow>,
    pub op_name: Vec<StackRow>,
    pub lines: Vec<LineRow>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Paths of string ids with their time [ns] as rows (time descending, then stack).
fn rows(strings: &[String], map: HashMap<Vec<u32>, f64>, idle: [(&str, f64); 2]) -> Vec<StackRow> {
    let mut rows: Vec<StackRow> = map
        .into_iter()
        .map(|(p, ns)| StackRow {
            stack: p.iter().map(|&s| strings[s as usize].clone()).collect(),
            ms: ns * 1e-6,
        })
        .chain(idle.map(|(label, ns)| StackRow {
            stack: vec![label.to_string()],
            ms: ns * 1e-6,
        }))
        .collect();
    rows.sort_unstable_by(|a, b| b.ms.total_cmp(&a.ms).then_with(|| a.stack.cmp(&b.stack)));
    rows
}

/// The reduce step.
pub fn reduce(ops_parts: &[&OpsPartial], parts: &[&StacksPartial]) -> Sources {
    let (_, top) = ops::top_programs(ops_parts);
    let tot = ops::totals(ops_parts, &top);
    // Every process's strings and stacks in one table; per (program, thunk) its distinct
    // dumps' metadata.
    let mut all = Interner::default();
    let mut meta: HashMap<(String, String), Vec<Ids>> = HashMap::new();
    for p in parts {
        let strings: Vec<u32> = p.strings.iter().map(|s| all.string(s)).collect();
        let stacks: Vec<u32> = p
            .stacks
            .iter()
            .map(|s| all.stack_ids(s.iter().map(|&f| strings[f as usize]).collect()))
            .collect();
        for t in &p.thunks {
            let dumps = meta
                .entry((t.program_id.clone(), t.thunk.clone()))
                .or_default();
            for d in &t.dumps {
                let ids: Ids = d
                    .iter()
                    .map(|&(n, s)| (strings[n as usize], stacks[s as usize]))
                    .collect();
                if !dumps.contains(&ids) {
                    dumps.push(ids);
                }
            }
        }
    }
    let active = all.string(GPU_ACTIVE);
    let unknown_id = all.string(UNKNOWN);
    let mut split = HashMap::new();
    let (mut source, mut op_name): (HashMap<Vec<u32>, f64>, HashMap<Vec<u32>, f64>) =
        Default::default();
    let mut lines: HashMap<u32, f64> = HashMap::new();
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
            match merge(&mut all, &instrs, &d) {
                Some(m) => instrs = m,
                None => unmerged += 1,
            }
        }
        if instrs.is_empty() {
            unknown += 1;
        }
        let ns = t.time.sum as f64;
        let names: BTreeSet<u32> = instrs.iter().map(|&(n, _)| n).collect();
        let (src, ops) = paths(&mut all, &mut split, &instrs);
        for p in &src {
            *source.entry(p.clone()).or_insert(0.0) += ns / src.len() as f64;
            // The innermost Python frame: the last element, or the one before the op_name.
            let frames = match p.last() {
                Some(last) if p.len() > 1 && names.contains(last) => &p[1..p.len() - 1],
                _ => &p[1..],
            };
            if let Some(&f) = frames.last().filter(|&&f| f != unknown_id && f != active) {
                *lines.entry(f).or_default() += ns / src.len() as f64;
            }
        }
        for p in &ops {
            *op_name.entry(p.clone()).or_insert(0.0) += ns / ops.len() as f64;
        }
    }
    let idle = [
        (IDLE_DURING, (tot.modules - tot.thunks).max(0) as f64),
        (IDLE_BETWEEN, (tot.wall - tot.modules).max(0) as f64),
    ];
    let (source, op_name) = (
        rows(&all.out.strings, source, idle),
        rows(&all.out.strings, op_name, idle),
    );
    let mut notes = Vec::new();
    if unknown > 0 {
        notes.push(format!(
            "{} of the top modules without HLO metadata (instruction not in the dump): counted under {UNKNOWN}",
            crate::table::count(unknown as usize, "thunk", "thunks")
        ));
    }
    if unmerged > 0 {
        notes.push(format!(
            "{} whose instructions differ between dumps of one program: the first dump's metadata is used",
            crate::table::count(unmerged as usize, "thunk", "thunks")
        ));
    }
    let mut lines: Vec<LineRow> = lines
        .into_iter()
        .map(|(frame, ns)| LineRow {
            frame: all.out.strings[frame as usize].clone(),
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
        source,
        op_name,
        lines,
        notes,
    }
}

/// Folded stacks (`a;b;c <ns>`), in the order of the rows; `;` inside a frame is written `|`.
pub fn folded(rows: &[StackRow]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(
        rows.iter()
            .map(|r| r.stack.iter().map(|f| f.len() + 1).sum::<usize>() + 24)
            .sum(),
    );
    for r in rows {
        let ns = (r.ms * 1e6).round();
        if ns < 1.0 {
            continue;
        }
        for (i, f) in r.stack.iter().enumerate() {
            if i > 0 {
                s.push(';');
            }
            if f.contains(';') {
                s.push_str(&f.replace(';', "|"));
            } else {
                s.push_str(f);
            }
        }
        let _ = writeln!(s, " {}", ns as u64);
    }
    s
}

/// An interactive SVG flame graph of folded stacks.
pub fn flame_graph(folded: &str, title: &str) -> Result<String> {
    if folded.trim().is_empty() {
        // Nothing to draw (no GPU time in the profile's modules): a plain page that says so.
        return Ok(format!(
            concat!(
                "<?xml version=\"1.0\" standalone=\"no\"?>\n",
                "<svg version=\"1.1\" width=\"600\" height=\"60\" xmlns=\"http://www.w3.org/2000/svg\">\n",
                "<text x=\"10\" y=\"24\" font-family=\"Verdana\" font-size=\"17\">{}</text>\n",
                "<text x=\"10\" y=\"48\" font-family=\"Verdana\" font-size=\"12\">No GPU time in the steady state of the profile's modules.</text>\n",
                "</svg>\n"
            ),
            title
        ));
    }
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
                crate::units::duration_ms(r.ms),
                crate::units::pct(r.percent),
            ]);
        }
        out.push_str("GPU time by source line (top modules):\n");
        out.push_str(&t.render());
    }
    out.push_str("Flame graphs: flamegraph-source.svg, flamegraph-op_name.svg\n(folded stacks: source.folded, op_name.folded)\n");
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
    const FILE: &'static str = file!();
    const READS: Reads = Reads::Gpu;
    type Param = ();
    type Value = StacksPartial;

    fn map(&self, p: &ProcessView, _: &()) -> Result<StacksPartial> {
        p.with_programs(partial)
    }
}

/// The `sources` analysis.
pub struct SourcesAnalysis;

impl Analysis for SourcesAnalysis {
    const NAME: &'static str = "sources";
    const FILE: &'static str = file!();
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

    /// The two flame graphs (the files this analysis writes, shown as they are), and the
    /// source lines that take the most GPU time.
    fn sections(&self, s: &Sources) -> Result<Vec<Section>> {
        use crate::report::{Cell, HtmlTable};
        let mut source = Section::new("flamegraph-source", "GPU time by Python source");
        source.notes(&s.notes);
        let between: f64 = s
            .source
            .iter()
            .filter(|r| r.stack.len() == 1 && r.stack[0] == IDLE_BETWEEN)
            .map(|r| r.ms)
            .sum();
        let all: f64 = s.source.iter().map(|r| r.ms).sum();
        if between > 0.0 && all > 0.0 {
            source.para(&format!(
                "The GPU idled {} between module executions ({} of the profile's steady \
                 state): host time, not drawn here (the host-bound finding and the what-if \
                 say what it costs; the .folded files keep it as {IDLE_BETWEEN}).",
                crate::units::duration_ms(between),
                crate::units::percent(between / all)
            ));
        }
        source.para(
            "Each box is a Python frame of the code that emitted the HLO operations, as wide \
             as their steady-state GPU time. Click a box to zoom in, Search (or Ctrl-F) to \
             highlight frames matching a pattern, Reset Zoom to go back.",
        );
        source.flame_graph("flamegraph-source.svg");
        if !s.lines.is_empty() {
            source.heading("Source lines with the most GPU time");
            let mut t =
                HtmlTable::new(&["frame", "GPU time", "share"]).limit(30, Some("sources.json"));
            for (i, l) in s.lines.iter().enumerate() {
                if t.is_full() {
                    t.more(s.lines.len() - i);
                    break;
                }
                t.row(vec![
                    Cell::text(&l.frame),
                    Cell::ms(l.ms),
                    Cell::num(crate::units::percent(l.percent / 100.0), l.percent),
                ]);
            }
            source.table(&t);
        }
        let mut op_name = Section::new("flamegraph-op_name", "GPU time by op_name");
        op_name.para(
            "The same time by the hierarchical op_name JAX gives each operation \
             (jit(train_step)/jvp(...)/dot_general).",
        );
        op_name.flame_graph("flamegraph-op_name.svg");
        Ok(vec![source, op_name])
    }

    fn files(&self, s: &Sources) -> Result<Vec<(String, String)>> {
        let source = folded(&s.source);
        let op_name = folded(&s.op_name);
        // The drawings leave out the idle time between modules (the section says it): it
        // would take most of the width of a host-bound profile.
        let drawn = |folded: &str| {
            let prefix = format!("{IDLE_BETWEEN} ");
            folded
                .lines()
                .filter(|l| !l.starts_with(&prefix))
                .map(|l| format!("{l}\n"))
                .collect::<String>()
        };
        Ok(vec![
            ("sources.json".into(), serde_json::to_string(s)?),
            (
                "flamegraph-source.svg".into(),
                flame_graph(&drawn(&source), "GPU time by Python source")?,
            ),
            (
                "flamegraph-op_name.svg".into(),
                flame_graph(&drawn(&op_name), "GPU time by op_name")?,
            ),
            ("source.folded".into(), source),
            ("op_name.folded".into(), op_name),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_profile_still_gets_a_flame_graph() {
        let svg = flame_graph("", "t").unwrap();
        assert!(svg.contains("<svg") && svg.contains("No GPU time"), "{svg}");
        assert!(
            flame_graph("a;b 5\na;c 7\n", "t")
                .unwrap()
                .contains("function search")
        );
    }

    #[test]
    fn differing_dumps_merge_as_nsys_jax_does() {
        let mut i = Interner::default();
        let frames = |i: &mut Interner, f: &[&str]| {
            i.stack(&f.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        };
        let n = i.string("op");
        let a = vec![(n, frames(&mut i, &["main", "f", "g", "h"]))];
        let b = vec![(n, frames(&mut i, &["main", "x", "g", "h"]))];
        let m = merge(&mut i, &a, &b).unwrap();
        let got: Vec<&str> = i.out.stacks[m[0].1 as usize]
            .iter()
            .map(|&s| i.out.strings[s as usize].as_str())
            .collect();
        // Common root, the marker, then the common innermost frames innermost first.
        assert_eq!(got, ["main", INCONSISTENT, "h", "g"]);
        assert_eq!(merge(&mut i, &a, &a).unwrap(), a);
        let other = vec![(i.string("other"), a[0].1)];
        assert!(merge(&mut i, &a, &other).is_none());
    }
}
