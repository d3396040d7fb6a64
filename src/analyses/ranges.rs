//! `ranges`: the program's own NVTX ranges (`nvtx.annotate("train_step")`, in any domain but
//! XLA's and NCCL's) and marks, with the GPU work each range launched, as Nsight Systems'
//! `nvtx_gpu_proj_sum` projects it (docs/design.md, "User NVTX ranges").
//!
//! Per range name (domain and style kept), over processes: instances, wall (CPU) time, the
//! projected GPU time (first operation start to last operation end of the work launched
//! inside it; summed, mean, median, min, max, sd over the instances that launched any), the
//! time the GPU was busy with that work, the XLA modules whose launch (`XlaModule` range) began
//! inside it, and the tree of nested ranges by path. Marks are counted with the mean interval
//! between them.
//!
//! Output contract (`ranges.json`, written only when the profile has user ranges or marks):
//! `{"processes","without_member","ranges":[{"label","domain","name","style","count",
//! "wall_ms_total","wall_ms_mean","wall_ms_sd","gpu_count","proj_ms_total","proj_ms_mean",
//! "proj_ms_median","proj_ms_min","proj_ms_max","proj_ms_sd","gpu_ops","busy_ms",
//! "busy_of_wall","busy_of_span","modules":[{"name","executions","gpu_ms"}]}],
//! "tree":[{"path","depth","count","wall_ms_total","proj_ms_total","busy_ms"}],
//! "marks":[{"label","domain","name","count","mean_interval_ms"}],"notes"}`.

use std::collections::BTreeMap;

use anyhow::Result;
use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use serde::{Deserialize, Serialize};

use crate::analyses::{
    Analysis, NoParams, ProcessView, Reads, Reduced, RunShares, Share, ShareUse,
};
use crate::engine::value::Text;
use crate::formats::user_nvtx::UserNvtx;
pub use crate::formats::user_nvtx::label;
use crate::frames::gpu::{ORIG_START, PROGRAM_NAME, PROJ_DUR};
use crate::report::Section;
use crate::stats;
use crate::table::Table;

const MS: f64 = 1e6;
/// Modules listed per range name (the rest are in no row).
const MODULES_KEPT: usize = 20;

/// One range name in one tree position, in one process (or summed).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct PathPart {
    /// Labels from the outermost range to this one.
    pub path: Vec<String>,
    pub domain: String,
    pub name: String,
    pub style: String,
    /// Wall time of each instance [ns].
    pub wall: Vec<i64>,
    /// Projected GPU time of each instance that launched GPU work [ns].
    pub proj: Vec<i64>,
    pub gpu_ops: i64,
    pub busy: i64,
    /// Module name -> (executions, GPU time [ns]).
    pub modules: BTreeMap<String, (u64, i64)>,
}

/// The marks of one name in one process (or summed).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct MarkPart {
    pub domain: String,
    pub name: String,
    pub count: u64,
    /// Sum and number of intervals between consecutive marks of a thread [ns].
    pub interval_sum: i64,
    pub intervals: u64,
}

/// One process's share of `ranges`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct RangesPartial {
    /// Whether the archive has the member (else nothing is known of the user's ranges).
    pub measured: bool,
    pub paths: Vec<PathPart>,
    pub marks: Vec<MarkPart>,
}

impl crate::engine::value::JsonValue for RangesPartial {}

/// (orig start, module name, GPU time) of the module executions, by orig start.
fn module_starts(modules: Option<&RecordBatch>) -> Vec<(i64, String, i64)> {
    let Some(m) = modules else { return Vec::new() };
    let (Some(start), Some(name), Some(dur)) = (
        m.column_by_name(ORIG_START),
        m.column_by_name(PROGRAM_NAME),
        m.column_by_name(PROJ_DUR),
    ) else {
        return Vec::new();
    };
    let (start, name, dur) = (
        start.as_primitive::<Int64Type>(),
        name.as_string::<i32>(),
        dur.as_primitive::<Int64Type>(),
    );
    let mut out: Vec<(i64, String, i64)> = (0..m.num_rows())
        .filter(|&i| start.is_valid(i))
        .map(|i| (start.value(i), name.value(i).to_string(), dur.value(i)))
        .collect();
    out.sort();
    out
}

/// The partial of one process from its user-NVTX table and module frame.
pub fn partial(user: &RecordBatch, modules: Option<&RecordBatch>) -> Result<RangesPartial> {
    let t = UserNvtx::of(user)?;
    let mods = module_starts(modules);
    let by_id: BTreeMap<i64, usize> = (0..t.len()).map(|i| (t.range_id.value(i), i)).collect();
    let path_of = |mut i: usize| {
        let mut path = vec![label(t.domain.value(i), t.name.value(i))];
        while t.parent_id.is_valid(i) {
            match by_id.get(&t.parent_id.value(i)) {
                Some(&p) if path.len() < 64 => {
                    path.push(label(t.domain.value(p), t.name.value(p)));
                    i = p;
                }
                _ => break,
            }
        }
        path.reverse();
        path
    };
    let mut paths: BTreeMap<(Vec<String>, String), PathPart> = BTreeMap::new();
    // (domain, name, thread) -> mark times.
    let mut marks: BTreeMap<(String, String), (u64, BTreeMap<i64, Vec<i64>>)> = BTreeMap::new();
    for i in 0..t.len() {
        let (domain, name) = (t.domain.value(i), t.name.value(i));
        if t.is_mark(i) {
            let e = marks.entry((domain.into(), name.into())).or_default();
            e.0 += 1;
            e.1.entry(t.tid.value(i))
                .or_default()
                .push(t.start.value(i));
            continue;
        }
        let style = t.kind.value(i).to_string();
        let path = path_of(i);
        let e = paths
            .entry((path.clone(), style.clone()))
            .or_insert_with(|| PathPart {
                path,
                domain: domain.into(),
                name: name.into(),
                style,
                ..Default::default()
            });
        let (start, end) = (t.start.value(i), t.end.value(i));
        e.wall.push(end - start);
        if t.gpu_ops.value(i) > 0 {
            e.proj.push(t.gpu_end.value(i) - t.gpu_start.value(i));
        }
        e.gpu_ops += t.gpu_ops.value(i);
        e.busy += t.gpu_busy.value(i);
        let from = mods.partition_point(|m| m.0 < start);
        for (_, module, gpu) in mods[from..].iter().take_while(|m| m.0 <= end) {
            let m = e.modules.entry(module.clone()).or_default();
            m.0 += 1;
            m.1 += gpu;
        }
    }
    let marks = marks
        .into_iter()
        .map(|((domain, name), (count, threads))| {
            let (mut sum, mut n) = (0i64, 0u64);
            for mut times in threads.into_values() {
                times.sort_unstable();
                for w in times.windows(2) {
                    sum += w[1] - w[0];
                    n += 1;
                }
            }
            MarkPart {
                domain,
                name,
                count,
                interval_sum: sum,
                intervals: n,
            }
        })
        .collect();
    Ok(RangesPartial {
        measured: true,
        paths: paths.into_values().collect(),
        marks,
    })
}

/// A module run inside a range name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ModuleInside {
    pub name: String,
    pub executions: u64,
    pub gpu_ms: f64,
}

/// One range name over the run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RangeStats {
    pub label: String,
    pub domain: String,
    pub name: String,
    pub style: String,
    pub count: u64,
    pub wall_ms_total: f64,
    pub wall_ms_mean: f64,
    pub wall_ms_sd: Option<f64>,
    /// Instances that launched GPU work.
    pub gpu_count: u64,
    pub proj_ms_total: f64,
    pub proj_ms_mean: Option<f64>,
    pub proj_ms_median: Option<f64>,
    pub proj_ms_min: Option<f64>,
    pub proj_ms_max: Option<f64>,
    pub proj_ms_sd: Option<f64>,
    pub gpu_ops: i64,
    pub busy_ms: f64,
    /// GPU busy time over wall time (may pass 1 when the work runs on after the range).
    pub busy_of_wall: f64,
    /// GPU busy time over the projected span.
    pub busy_of_span: Option<f64>,
    pub modules: Vec<ModuleInside>,
}

/// One position of the tree of nested ranges.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TreeNode {
    pub path: Vec<String>,
    pub depth: usize,
    pub count: u64,
    pub wall_ms_total: f64,
    pub proj_ms_total: f64,
    pub busy_ms: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct MarkStats {
    pub label: String,
    pub domain: String,
    pub name: String,
    pub count: u64,
    pub mean_interval_ms: Option<f64>,
}

/// `ranges.json`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Ranges {
    pub processes: usize,
    /// Processes whose archive does not say (no user-NVTX member).
    pub without_member: usize,
    pub ranges: Vec<RangeStats>,
    pub tree: Vec<TreeNode>,
    pub marks: Vec<MarkStats>,
    pub notes: Vec<String>,
}

impl Ranges {
    /// Whether there is anything to show.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty() && self.marks.is_empty()
    }
}

fn ms_of(v: &[i64]) -> Vec<f64> {
    v.iter().map(|&x| x as f64 / MS).collect()
}

fn range_stats(p: &PathPart) -> RangeStats {
    let (wall, proj) = (ms_of(&p.wall), ms_of(&p.proj));
    let wall_total: f64 = wall.iter().sum();
    let proj_total: f64 = proj.iter().sum();
    let busy = p.busy as f64 / MS;
    let mut modules: Vec<ModuleInside> = p
        .modules
        .iter()
        .map(|(name, &(executions, ns))| ModuleInside {
            name: name.clone(),
            executions,
            gpu_ms: ns as f64 / MS,
        })
        .collect();
    modules.sort_by(|a, b| b.gpu_ms.total_cmp(&a.gpu_ms).then(a.name.cmp(&b.name)));
    modules.truncate(MODULES_KEPT);
    RangeStats {
        label: label(&p.domain, &p.name),
        domain: p.domain.clone(),
        name: p.name.clone(),
        style: p.style.clone(),
        count: wall.len() as u64,
        wall_ms_total: wall_total,
        wall_ms_mean: stats::mean(&wall).unwrap_or(0.0),
        wall_ms_sd: stats::std(&wall),
        gpu_count: proj.len() as u64,
        proj_ms_total: proj_total,
        proj_ms_mean: stats::mean(&proj),
        proj_ms_median: stats::median(&proj),
        proj_ms_min: proj.iter().copied().reduce(f64::min),
        proj_ms_max: proj.iter().copied().reduce(f64::max),
        proj_ms_sd: stats::std(&proj),
        gpu_ops: p.gpu_ops,
        busy_ms: busy,
        busy_of_wall: if wall_total > 0.0 {
            busy / wall_total
        } else {
            0.0
        },
        busy_of_span: (proj_total > 0.0).then(|| busy / proj_total),
        modules,
    }
}

fn merge(into: &mut PathPart, p: &PathPart) {
    into.wall.extend_from_slice(&p.wall);
    into.proj.extend_from_slice(&p.proj);
    into.gpu_ops += p.gpu_ops;
    into.busy += p.busy;
    for (m, &(n, ns)) in &p.modules {
        let e = into.modules.entry(m.clone()).or_default();
        e.0 += n;
        e.1 += ns;
    }
}

/// The run's ranges from every process's partial.
pub fn reduce(parts: &[&RangesPartial]) -> Ranges {
    let mut by_path: BTreeMap<(Vec<String>, String), PathPart> = BTreeMap::new();
    let mut by_mark: BTreeMap<(String, String), MarkPart> = BTreeMap::new();
    for part in parts {
        for p in &part.paths {
            let e = by_path
                .entry((p.path.clone(), p.style.clone()))
                .or_insert_with(|| PathPart {
                    modules: BTreeMap::new(),
                    wall: Vec::new(),
                    proj: Vec::new(),
                    gpu_ops: 0,
                    busy: 0,
                    ..p.clone()
                });
            merge(e, p);
        }
        for m in &part.marks {
            let e = by_mark
                .entry((m.domain.clone(), m.name.clone()))
                .or_insert_with(|| MarkPart {
                    domain: m.domain.clone(),
                    name: m.name.clone(),
                    ..Default::default()
                });
            e.count += m.count;
            e.interval_sum += m.interval_sum;
            e.intervals += m.intervals;
        }
    }
    let mut by_name: BTreeMap<(String, String, String), PathPart> = BTreeMap::new();
    let mut tree = Vec::new();
    for p in by_path.values() {
        let e = by_name
            .entry((p.domain.clone(), p.name.clone(), p.style.clone()))
            .or_insert_with(|| PathPart {
                path: vec![],
                domain: p.domain.clone(),
                name: p.name.clone(),
                style: p.style.clone(),
                ..Default::default()
            });
        merge(e, p);
        tree.push(TreeNode {
            path: p.path.clone(),
            depth: p.path.len() - 1,
            count: p.wall.len() as u64,
            wall_ms_total: p.wall.iter().sum::<i64>() as f64 / MS,
            proj_ms_total: p.proj.iter().sum::<i64>() as f64 / MS,
            busy_ms: p.busy as f64 / MS,
        });
    }
    let mut ranges: Vec<RangeStats> = by_name.values().map(range_stats).collect();
    ranges.sort_by(|a, b| {
        b.proj_ms_total
            .total_cmp(&a.proj_ms_total)
            .then(b.wall_ms_total.total_cmp(&a.wall_ms_total))
            .then(a.label.cmp(&b.label))
    });
    let marks = by_mark
        .into_values()
        .map(|m| MarkStats {
            label: label(&m.domain, &m.name),
            mean_interval_ms: (m.intervals > 0)
                .then(|| m.interval_sum as f64 / m.intervals as f64 / MS),
            domain: m.domain,
            name: m.name,
            count: m.count,
        })
        .collect();
    let without_member = parts.iter().filter(|p| !p.measured).count();
    let mut notes = Vec::new();
    if without_member > 0 {
        notes.push(format!(
            "{} without the user-NVTX member (archived by an older version, or by nsys-jax): their ranges are not counted",
            crate::table::count(without_member, "process", "processes")
        ));
    }
    Ranges {
        processes: parts.len(),
        without_member,
        ranges,
        tree,
        marks,
        notes,
    }
}

fn ms(v: f64) -> String {
    crate::units::duration_ms(v)
}

pub fn render(r: &Ranges) -> String {
    if r.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    if !r.ranges.is_empty() {
        let mut t = Table::new(&[
            "range",
            "count",
            "wall (mean ± sd)",
            "GPU projected",
            "GPU busy",
            "modules inside",
        ]);
        t.align_right(&[1, 2, 3, 4]);
        for x in &r.ranges {
            let top = x
                .modules
                .first()
                .map(|m| format!("{} ×{}", m.name, m.executions))
                .unwrap_or_else(|| "-".into());
            t.row(vec![
                crate::units::fit(&x.label, 28),
                x.count.to_string(),
                crate::units::ms_pm(x.wall_ms_mean, x.wall_ms_sd),
                if x.gpu_count > 0 {
                    ms(x.proj_ms_total)
                } else {
                    "-".into()
                },
                format!(
                    "{} ({})",
                    ms(x.busy_ms),
                    crate::units::percent(x.busy_of_wall)
                ),
                crate::units::fit(&top, 24),
            ]);
        }
        out.push_str(
            "User NVTX ranges (GPU work launched inside each, as Nsight Systems projects it):\n",
        );
        out.push_str(&t.render());
    }
    if !r.marks.is_empty() {
        let marks: Vec<String> = r
            .marks
            .iter()
            .map(|m| match m.mean_interval_ms {
                Some(i) => format!("{} ×{} (every {})", m.label, m.count, ms(i)),
                None => format!("{} ×{}", m.label, m.count),
            })
            .collect();
        out.push_str(&crate::units::wrap(
            &format!("Marks: {}", marks.join(", ")),
            super::TEXT_WIDTH,
            2,
        ));
        out.push('\n');
    }
    out
}

/// The report's section: the GPU time of each range (bars) and the tree of nested ranges.
fn section(r: &Ranges) -> Result<Section> {
    use crate::report::{Cell, HtmlTable, charts};
    let mut sec = Section::new("ranges", "User NVTX ranges");
    sec.para(
        "The program's own NVTX ranges and marks (XLA's and NCCL's left out). GPU projected: \
         from the first to the last GPU operation launched inside the range, as Nsight \
         Systems' nvtx_gpu_proj_sum counts it; GPU busy: the time those operations ran.",
    );
    let bars: Vec<(String, f64)> = r
        .ranges
        .iter()
        .filter(|x| x.gpu_count > 0)
        .take(20)
        .map(|x| (x.label.clone(), x.proj_ms_total))
        .collect();
    if !bars.is_empty() {
        sec.chart(charts::bars(&bars, "GPU projected time", &|v| ms(v))?);
    }
    let mut t = HtmlTable::new(&[
        "range",
        "style",
        "count",
        "wall total",
        "wall mean",
        "GPU projected",
        "GPU busy",
        "busy / wall",
        "modules inside",
    ])
    .limit(100, Some("ranges.json"));
    for x in &r.ranges {
        t.row(vec![
            Cell::text(&x.label),
            Cell::text(&x.style),
            Cell::count(x.count),
            Cell::ms(x.wall_ms_total),
            Cell::ms(x.wall_ms_mean),
            Cell::ms(x.proj_ms_total),
            Cell::ms(x.busy_ms),
            Cell::num(crate::units::percent(x.busy_of_wall), x.busy_of_wall),
            Cell::text(
                x.modules
                    .iter()
                    .take(3)
                    .map(|m| format!("{} ×{} ({})", m.name, m.executions, ms(m.gpu_ms)))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        ]);
    }
    sec.table(&t);
    if r.tree.iter().any(|n| n.depth > 0) {
        sec.heading("Nesting");
        let mut t = HtmlTable::new(&["range", "count", "wall total", "GPU projected", "GPU busy"])
            .limit(200, Some("ranges.json"));
        for n in &r.tree {
            let indent = "\u{2003}".repeat(n.depth);
            t.row(vec![
                Cell::text(format!(
                    "{indent}{}",
                    n.path.last().map_or("", String::as_str)
                )),
                Cell::count(n.count),
                Cell::ms(n.wall_ms_total),
                Cell::ms(n.proj_ms_total),
                Cell::ms(n.busy_ms),
            ]);
        }
        sec.table(&t);
    }
    if !r.marks.is_empty() {
        sec.heading("Marks");
        let mut t = HtmlTable::new(&["mark", "count", "mean interval"]);
        for m in &r.marks {
            t.row(vec![
                Cell::text(&m.label),
                Cell::count(m.count),
                Cell::opt(m.mean_interval_ms, ms),
            ]);
        }
        sec.table(&t);
    }
    Ok(sec)
}

/// The share `ranges` reads.
pub struct RangesShare;

impl Share for RangesShare {
    const KIND: &'static str = "ranges-partial";
    const FILE: &'static str = file!();
    const READS: Reads = Reads::Gpu;
    type Param = ();
    type Value = RangesPartial;

    fn map(&self, p: &ProcessView, _: &()) -> Result<RangesPartial> {
        match p.user_nvtx {
            Some(user) => partial(user, p.modules),
            None => Ok(RangesPartial::default()),
        }
    }
}

/// The `ranges` analysis.
pub struct RangesAnalysis;

impl Analysis for RangesAnalysis {
    const NAME: &'static str = "ranges";
    const FILE: &'static str = file!();
    type Params = NoParams;
    type Result = Ranges;

    fn shares(&self, _: &NoParams) -> Vec<ShareUse> {
        vec![ShareUse::of(&RangesShare, &())]
    }

    fn reduce(&self, run: &dyn RunShares, _: &NoParams) -> Result<Reduced<Ranges>> {
        let parts = run.all(&RangesShare, &())?;
        let refs: Vec<&RangesPartial> = parts.iter().map(|p| p.as_ref()).collect();
        let result = reduce(&refs);
        // Only where there is something to say: a profile without user ranges prints nothing.
        let notes = if result.is_empty() {
            Vec::new()
        } else {
            result.notes.clone()
        };
        Ok(Reduced { notes, result })
    }

    fn render(&self, r: &Ranges) -> String {
        render(r)
    }

    fn sections(&self, r: &Ranges) -> Result<Vec<Section>> {
        if r.is_empty() {
            return Ok(Vec::new());
        }
        Ok(vec![section(r)?])
    }

    fn files(&self, r: &Ranges) -> Result<Vec<(String, String)>> {
        if r.is_empty() {
            return Ok(Vec::new());
        }
        Ok(vec![(
            format!("{}.json", Self::NAME),
            serde_json::to_string_pretty(r)?,
        )])
    }

    /// No file: a run without ranges of the program's own.
    fn result_of(&self, files: &[(String, Text)]) -> Result<Ranges> {
        let file = format!("{}.json", Self::NAME);
        if !files.iter().any(|(n, _)| *n == file) {
            return Ok(Ranges::default());
        }
        super::json_file(&format!("{}.json", Self::NAME), files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::user_nvtx::SCHEMA;
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use std::sync::Arc;

    type Row = (
        &'static str,
        &'static str,
        i64,
        Option<i64>,
        i64,
        Option<i64>,
        i64,
        Option<(i64, i64)>,
        i64,
    );

    /// (kind, name, start, end, range id, parent id, ops, span, busy), domain "" and tid 1.
    fn user(rows: &[Row]) -> RecordBatch {
        let s = |f: &dyn Fn(&Row) -> &str| -> ArrayRef {
            Arc::new(StringArray::from_iter_values(rows.iter().map(f)))
        };
        let i = |f: &dyn Fn(&Row) -> Option<i64>| -> ArrayRef {
            Arc::new(Int64Array::from(rows.iter().map(f).collect::<Vec<_>>()))
        };
        RecordBatch::try_new(
            SCHEMA.clone(),
            vec![
                s(&|r| r.0),
                s(&|_| ""),
                s(&|r| r.1),
                i(&|_| None),
                i(&|_| Some(9)),
                i(&|_| Some(1)),
                i(&|r| Some(r.2)),
                i(&|r| r.3),
                i(&|r| Some(r.4)),
                i(&|r| r.5),
                i(&|r| Some(r.5.is_some() as i64)),
                i(&|r| Some(r.6)),
                i(&|r| r.7.map(|s| s.0)),
                i(&|r| r.7.map(|s| s.1)),
                i(&|r| Some(r.8)),
            ],
        )
        .unwrap()
    }

    #[test]
    fn nested_ranges_marks_and_modules_are_counted() {
        let b = user(&[
            (
                "PushPop",
                "epoch",
                0,
                Some(10_000_000),
                1,
                None,
                3,
                Some((100, 9_000_100)),
                4_000_000,
            ),
            (
                "PushPop",
                "train_step",
                0,
                Some(4_000_000),
                2,
                Some(1),
                2,
                Some((100, 3_000_100)),
                2_000_000,
            ),
            (
                "PushPop",
                "train_step",
                5_000_000,
                Some(9_000_000),
                3,
                Some(1),
                1,
                Some((6_000_100, 9_000_100)),
                2_000_000,
            ),
            (
                "PushPop",
                "load",
                9_000_000,
                Some(9_500_000),
                4,
                Some(1),
                0,
                None,
                0,
            ),
            ("Mark", "ckpt", 4_000_000, None, 5, None, 0, None, 0),
            ("Mark", "ckpt", 9_000_000, None, 6, None, 0, None, 0),
        ]);
        let modules = RecordBatch::try_from_iter(vec![
            (
                "OrigStart",
                Arc::new(Int64Array::from(vec![10, 5_000_010, 9_900_000])) as ArrayRef,
            ),
            (
                "ProgramName",
                Arc::new(StringArray::from(vec!["jit_step", "jit_step", "jit_eval"])) as ArrayRef,
            ),
            (
                "ProjDur",
                Arc::new(Int64Array::from(vec![1_500_000, 1_600_000, 7])) as ArrayRef,
            ),
        ])
        .unwrap();
        let p = partial(&b, Some(&modules)).unwrap();
        let r = reduce(&[&p, &RangesPartial::default()]);
        assert_eq!(r.without_member, 1);
        let step = r.ranges.iter().find(|x| x.name == "train_step").unwrap();
        assert_eq!((step.count, step.gpu_count, step.gpu_ops), (2, 2, 3));
        assert!((step.proj_ms_total - 6.0).abs() < 1e-9);
        assert!((step.wall_ms_mean - 4.0).abs() < 1e-9);
        assert!((step.busy_of_wall - 0.5).abs() < 1e-9);
        assert_eq!(
            step.modules,
            vec![ModuleInside {
                name: "jit_step".into(),
                executions: 2,
                gpu_ms: 3.1
            }]
        );
        let epoch = r.ranges.iter().find(|x| x.name == "epoch").unwrap();
        assert_eq!(epoch.modules.len(), 2, "{:?}", epoch.modules);
        let load = r.ranges.iter().find(|x| x.name == "load").unwrap();
        assert_eq!(
            (load.count, load.gpu_count, load.proj_ms_mean),
            (1, 0, None)
        );
        let paths: Vec<(Vec<String>, u64)> =
            r.tree.iter().map(|n| (n.path.clone(), n.count)).collect();
        assert!(
            paths.contains(&(vec!["epoch".into(), "train_step".into()], 2)),
            "{paths:?}"
        );
        assert_eq!(r.marks[0].count, 2);
        assert_eq!(r.marks[0].mean_interval_ms, Some(5.0));
        let text = render(&r);
        assert!(
            text.contains("train_step") && text.contains("ckpt ×2 (every 5"),
            "{text}"
        );
        assert!(!section(&r).unwrap().html.is_empty());
    }

    #[test]
    fn a_profile_without_user_ranges_says_nothing() {
        let r = reduce(&[&partial(&user(&[]), None).unwrap()]);
        assert!(r.is_empty());
        assert_eq!(render(&r), "");
        assert!(RangesAnalysis.files(&r).unwrap().is_empty());
    }
}
