//! Compile-time statistics from compile frames ([`crate::frames::compile`]); design.md "Formulas".
//! Each range's time is attributed as [`crate::frames::compile_time`] says (parallel
//! compilation shared out, so a compilation's parts add up to its wall time).
//!
//! Two products:
//! - [`reduce_summary`] (of `range_sums`): nsys-jax's summary tables (time per range name over all processes,
//!   the same numbers as its `compilation-*.json`);
//! - [`per_compilation`]: one breakdown per `XlaCompile` range.

use std::collections::HashMap;

/// The parameters of the `compilation` analysis.
#[derive(serde::Deserialize, serde::Serialize, Debug, Default, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Break each compilation down by full range name (pass names with their module), not
    /// only by range kind.
    #[serde(default)]
    pub detail: bool,
}

use crate::report::Section;
use anyhow::Result;
use arrow::array::RecordBatch;
use serde::{Deserialize, Serialize};

pub use crate::analyses::range_sums::{
    CompilationTables, RangeSums, RangeSumsShare, reduce_summary,
};
use crate::analyses::range_sums::{percent, sort_desc};
use crate::analyses::{Analysis, ProcessView, Reads, Reduced, RunShares, Share, ShareUse};
use crate::frames::compile::is_xla_compile;
use crate::frames::compile_time::Attributed;

/// One part of a compilation's wall time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// Range kind (name up to `:#`), or the full range name in detail mode; `XlaCompile` for
    /// the compilation's own non-child time.
    pub kind: String,
    /// Share of the compilation's wall time.
    pub percent: f64,
    pub seconds: f64,
}

/// The breakdown of one `XlaCompile` range. Fields (and those of [`Part`]) in alphabetical
/// order: `compilation.json` is written in this order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompilationEntry {
    pub module: Option<String>,
    /// `XlaCompile:#module=...#`.
    pub name: String,
    /// By time, descending.
    pub parts: Vec<Part>,
    pub process: String,
    pub program_id: Option<i64>,
    pub start_ms: f64,
    pub wall_s: f64,
}

/// One process's compilations (the share of the `compilation` analysis).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Compilations(pub Vec<CompilationEntry>);
impl crate::engine::value::JsonValue for Compilations {}

/// One breakdown per `XlaCompile` range of every process, in process order then start time.
pub fn per_compilation(
    frames: &[(String, RecordBatch)],
    detail: bool,
) -> Result<Vec<CompilationEntry>> {
    let mut out = Vec::new();
    for (process, frame) in frames {
        let a = Attributed::new(frame)?;
        let c = &a.cols;
        let mut first = vec![0usize; frame.num_rows()];
        for (k, &i) in a.order.iter().enumerate() {
            first[i] = k;
        }
        let mut compiles: Vec<usize> = (0..frame.num_rows())
            .filter(|&i| is_xla_compile(c.name.value(i)))
            .collect();
        compiles.sort_by_key(|&i| (c.start[i], c.range_id[i]));
        for root in compiles {
            let mut index: HashMap<&str, usize> = HashMap::new();
            let mut parts: Vec<(&str, f64)> = Vec::new();
            let subtree = &a.order[first[root]..first[root] + a.size[root]];
            for &i in subtree {
                let kind = if i == root {
                    "XlaCompile"
                } else {
                    let name = c.name.value(i);
                    if detail {
                        name
                    } else {
                        name.split_once(":#").map_or(name, |(kind, _)| kind)
                    }
                };
                let k = *index.entry(kind).or_insert_with(|| {
                    parts.push((kind, 0.0));
                    parts.len() - 1
                });
                parts[k].1 += a.non_child[i];
            }
            let wall_ns = c.duration[root] as f64;
            let mut parts: Vec<Part> = parts
                .into_iter()
                .map(|(kind, ns)| Part {
                    kind: kind.to_string(),
                    seconds: ns * 1e-9,
                    percent: percent(ns, wall_ns),
                })
                .collect();
            sort_desc(&mut parts, |p| (p.seconds, &p.kind));
            let program_id = a.program_id[root];
            out.push(CompilationEntry {
                process: process.clone(),
                name: c.name.value(root).to_string(),
                module: a.program_name(root).map(str::to_string),
                program_id: (program_id >= 0).then_some(program_id),
                start_ms: c.start[root] as f64 * 1e-6,
                wall_s: wall_ns * 1e-9,
                parts,
            });
        }
    }
    Ok(out)
}

/// Terminal rendering of the per-compilation breakdown.
pub fn render(entries: &[CompilationEntry]) -> String {
    use crate::table::Table;
    use crate::units::{duration_ms, sig3};
    if entries.is_empty() {
        return "No XLA compilation in the profile.\n".into();
    }
    let mut order: Vec<&CompilationEntry> = entries.iter().collect();
    order.sort_by(|a, b| b.wall_s.total_cmp(&a.wall_s));
    let mut t = Table::new(&["process", "module", "program", "wall", "top parts [%]"]);
    t.align_right(&[3]);
    for e in order.iter().take(SHOWN) {
        let parts: Vec<String> = e
            .parts
            .iter()
            .take(2)
            .map(|p| format!("{} {}", p.kind.trim_start_matches("Xla"), sig3(p.percent)))
            .collect();
        t.row(vec![
            crate::units::fit(&e.process, 16),
            crate::units::fit(e.module.as_deref().unwrap_or_default(), 28),
            e.program_id.map(|p| p.to_string()).unwrap_or_default(),
            duration_ms(e.wall_s * 1e3),
            parts.join(", "),
        ]);
    }
    let total: f64 = entries.iter().map(|e| e.wall_s).sum();
    let mut out = format!(
        "== Compilations: {} in {}, the longest first ==\n{}",
        entries.len(),
        duration_ms(total * 1e3),
        t.render()
    );
    if entries.len() > SHOWN {
        out.push_str(&format!(
            "… and {} more (all of them in compilation.json)\n",
            entries.len() - SHOWN
        ));
    }
    out
}

/// Compilations the terminal lists.
const SHOWN: usize = 10;

// ---------------------------------------------------------------- shares and the analysis

/// The `compilation` share of one process: its compilations, each with its breakdown.
pub struct CompilationsShare;

impl Share for CompilationsShare {
    const KIND: &'static str = "compilations";
    const FILE: &'static str = file!();
    const READS: Reads = Reads::Compile;
    type Param = Params;
    type Value = Compilations;

    fn map(&self, p: &ProcessView, params: &Params) -> Result<Compilations> {
        Ok(Compilations(match p.compile {
            Some(frame) => per_compilation(&[(p.label.to_string(), frame.clone())], params.detail)?,
            None => vec![],
        }))
    }
}

/// What `compilation.json` holds.
#[derive(Serialize, Deserialize)]
pub struct CompilationResult {
    pub compilations: Vec<CompilationEntry>,
    /// The compile-time tables over every compilation (the report's pass table; the summary
    /// analysis writes them).
    #[serde(skip)]
    pub tables: CompilationTables,
}

/// The `compilation` analysis.
pub struct CompilationAnalysis;

impl Analysis for CompilationAnalysis {
    const NAME: &'static str = "compilation";
    const FILE: &'static str = file!();
    type Params = Params;
    type Result = CompilationResult;

    fn shares(&self, params: &Params) -> Vec<ShareUse> {
        vec![
            ShareUse::of(&CompilationsShare, params),
            ShareUse::of(&RangeSumsShare, &()),
        ]
    }

    fn reduce(&self, run: &dyn RunShares, params: &Params) -> Result<Reduced<CompilationResult>> {
        let compilations = run
            .all(&CompilationsShare, params)?
            .iter()
            .flat_map(|c| c.0.iter().cloned())
            .collect();
        let sums: Vec<RangeSums> = run
            .sums(&RangeSumsShare)?
            .iter()
            .map(|s| s.as_ref().clone())
            .collect();
        Ok(Reduced {
            result: CompilationResult {
                compilations,
                tables: reduce_summary(&sums),
            },
            notes: vec![],
        })
    }

    fn sections(&self, r: &CompilationResult) -> Result<Vec<Section>> {
        Ok(vec![section(r)?])
    }

    fn render(&self, r: &CompilationResult) -> String {
        render(&r.compilations)
    }

    /// `compilation.json`, with the keys of every object in alphabetical order (the order
    /// of the fields: written straight from the result, without a tree of maps, as a run of a
    /// thousand processes has tens of thousands of compilations).
    fn files(&self, r: &CompilationResult) -> Result<Vec<(String, String)>> {
        Ok(vec![(
            "compilation.json".into(),
            serde_json::to_string_pretty(r)?,
        )])
    }
}

/// Compilations drawn at most, the longest first; range kinds named in the legend at most
/// (the rest are drawn as one, "other").
const DRAWN: usize = 20;
const KINDS: usize = 9;

/// The report's section: compile time per compilation as bars stacked by range kind, the
/// high-level split and the pass table.
fn section(r: &CompilationResult) -> Result<Section> {
    use crate::report::{Cell, HtmlTable, charts};
    use crate::units::{duration_ms, percent};
    let mut sec = Section::new("compilation", "Compilation");
    if r.compilations.is_empty() {
        sec.para("No XLA compilation in the profile.");
        return Ok(sec);
    }
    let total: f64 = r.compilations.iter().map(|c| c.wall_s).sum();
    sec.para(&format!(
        "{} in {} (wall time of the compile ranges; parallel work counted once).",
        crate::table::count(r.compilations.len(), "compilation", "compilations"),
        duration_ms(total * 1e3)
    ));
    let mut order: Vec<&CompilationEntry> = r.compilations.iter().collect();
    order.sort_by(|a, b| b.wall_s.total_cmp(&a.wall_s));
    let drawn = &order[..order.len().min(DRAWN)];
    // Range kinds by their time over the drawn compilations, largest first.
    let mut kinds: Vec<(String, f64)> = Vec::new();
    for c in drawn {
        for p in &c.parts {
            match kinds.iter_mut().find(|k| k.0 == p.kind) {
                Some(k) => k.1 += p.seconds,
                None => kinds.push((p.kind.clone(), p.seconds)),
            }
        }
    }
    kinds.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut names: Vec<String> = kinds.iter().take(KINDS).map(|k| k.0.clone()).collect();
    let other = kinds.len() > KINDS;
    if other {
        names.push("other".into());
    }
    let bars: Vec<(String, Vec<f64>)> = drawn
        .iter()
        .map(|c| {
            let label = format!("{} ({})", c.module.as_deref().unwrap_or(&c.name), c.process);
            let named = &names[..names.len() - usize::from(other)];
            let mut values: Vec<f64> = named
                .iter()
                .map(|k| {
                    c.parts
                        .iter()
                        .filter(|p| &p.kind == k)
                        .map(|p| p.seconds * 1e3)
                        .sum()
                })
                .collect();
            if other {
                values.push(
                    c.parts
                        .iter()
                        .filter(|p| !named.contains(&p.kind))
                        .map(|p| p.seconds * 1e3)
                        .sum(),
                );
            }
            (label, values)
        })
        .collect();
    sec.heading(&format!(
        "Compile time per compilation, by range kind{}",
        if order.len() > DRAWN {
            format!(" (the {DRAWN} longest of {})", order.len())
        } else {
            String::new()
        }
    ));
    sec.chart(charts::stacked_bars(&bars, &names, "compile time", &|v| {
        duration_ms(v)
    })?);
    let t = &r.tables;
    if !t.high_level.is_empty() {
        sec.heading("Where compile time goes");
        let mut h = HtmlTable::new(&["stage", "time", "share"]).limit(25, Some("summary.json"));
        for row in &t.high_level {
            h.row(vec![
                Cell::text(&row.name),
                Cell::ms(row.non_child_ms),
                Cell::num(percent(row.percent / 100.0), row.percent),
            ]);
        }
        sec.table(&h);
    }
    if !t.passes.is_empty() {
        sec.heading("XLA passes");
        let mut p =
            HtmlTable::new(&["pass", "time", "share of pass time"]).limit(60, Some("summary.json"));
        for row in &t.passes {
            p.row(vec![
                Cell::text(&row.name),
                Cell::ms(row.non_child_ms),
                Cell::num(percent(row.percent / 100.0), row.percent),
            ]);
        }
        sec.table(&p);
    }
    Ok(sec)
}

#[cfg(test)]
mod tests {
    use crate::analyses::range_sums::{Row, passes_by_name, range_label, summary_tables};

    #[test]
    fn compilation_json_has_its_keys_in_alphabetical_order() {
        use super::*;
        let entry = |module: Option<&str>, program_id, wall_s: f64| CompilationEntry {
            process: "rank0".into(),
            name: "XlaCompile:#module=jit_f#".into(),
            module: module.map(String::from),
            program_id,
            start_ms: 12.5,
            wall_s,
            parts: vec![
                Part {
                    kind: "XlaPass".into(),
                    seconds: 0.25,
                    percent: 62.5,
                },
                Part {
                    kind: "XlaCompile".into(),
                    seconds: 0.15,
                    percent: f64::NAN,
                },
            ],
        };
        let r = CompilationResult {
            compilations: vec![entry(Some("jit_f"), Some(7), 0.4), entry(None, None, 1e-9)],
            tables: Default::default(),
        };
        let files = CompilationAnalysis.files(&r).unwrap();
        // serde_json's own maps are ordered by key.
        let sorted = serde_json::to_string_pretty(&serde_json::to_value(&r).unwrap()).unwrap();
        assert_eq!(files[0].1, sorted);
        assert!(sorted.find("\"module\"").unwrap() < sorted.find("\"wall_s\"").unwrap());
    }

    #[test]
    fn range_names_read_as_words_and_passes_sum_by_name() {
        assert_eq!(
            range_label("XlaPass:#name=algsimp,program_id=19#"),
            "XlaPass algsimp (program 19)"
        );
        assert_eq!(
            range_label("XlaEmitLlvmIr:#module=jit_f,program_id=40#"),
            "XlaEmitLlvmIr jit_f (program 40)"
        );
        assert_eq!(range_label("XlaPasses"), "XlaPasses");
        let row = |name: &str, ms, percent| Row {
            name: name.into(),
            non_child_ms: ms,
            percent,
        };
        let v = passes_by_name(&[
            row("XlaPass:#name=algsimp,program_id=19#", 1.0, 10.0),
            row("XlaPass:#name=fusion,program_id=19#", 3.0, 30.0),
            row("XlaPass:#name=algsimp,program_id=40#", 4.0, 40.0),
        ]);
        assert_eq!(
            v,
            [
                ("algsimp".to_string(), 5.0, 50.0),
                ("fusion".to_string(), 3.0, 30.0)
            ]
        );
    }

    use super::*;
    use crate::formats::pushpop::read_csv_xz;
    use crate::frames::compile::build_compile_frame;
    use crate::frames::compile::tests::{pushpop_batch, synthetic};
    use std::io::Read;
    use std::path::Path;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-12)
    }

    #[test]
    fn synthetic_parallel_region() {
        let frame = build_compile_frame(&synthetic()).unwrap();
        let entries = per_compilation(&[("p".to_string(), frame.clone())], false).unwrap();
        assert_eq!(entries.len(), 1);
        let e = &entries[0];
        assert_eq!(e.name, "XlaCompile:#module=jit_f#");
        assert_eq!(
            (e.module.as_deref(), e.program_id),
            (Some("jit_f"), Some(7))
        );
        assert!(close(e.wall_s, 990e-9, 1e-12));
        let sum: f64 = e.parts.iter().map(|p| p.seconds).sum();
        assert!(close(sum, e.wall_s, 1e-9), "{sum} vs {}", e.wall_s);
        let get = |k: &str| {
            e.parts
                .iter()
                .find(|p| p.kind == k)
                .map(|p| p.seconds * 1e9)
        };
        // XlaEmitLlvmIr [410, 900]: workers span [460, 800] (340 ns), its main child 15
        // [850, 890] does not overlap; so it keeps 490 - 40 - 340 = 110 ns.
        assert!(close(get("XlaEmitLlvmIr").unwrap(), 110.0, 1e-9));
        // Worker non-child: 16 -> 110, 17 -> 130, 19 -> 300; total 540 shares 340 ns.
        let scale = 340.0 / 540.0;
        assert!(close(
            get("XlaOptimizeLlvmIr").unwrap(),
            110.0 * scale,
            1e-9
        ));
        assert!(close(get("XlaEmitGpuAsm").unwrap(), 130.0 * scale, 1e-9));
        // Worker 20 sits directly under the XlaCompile [10, 1000], span [992, 1000] = 8 ns.
        assert!(close(get("XlaCreateGpuExecutable").unwrap(), 8.0, 1e-9));
        assert!(close(get("XlaCompile").unwrap(), 30.0 - 8.0, 1e-9));
        assert!(close(get("XlaAutotunerMeasurement").unwrap(), 80.0, 1e-9));
        assert!(close(get("XlaAutotunerCompilation").unwrap(), 90.0, 1e-9));
        // Pipeline 3 absorbed the NCCL range's own 40 ns.
        assert!(close(get("XlaPassPipeline").unwrap(), 110.0, 1e-9));
        let pct: f64 = e.parts.iter().map(|p| p.percent).sum();
        assert!(close(pct, 100.0, 1e-9));

        let detailed = per_compilation(&[("p".to_string(), frame.clone())], true).unwrap();
        assert!(
            detailed[0]
                .parts
                .iter()
                .any(|p| p.kind == "XlaPass:#name=a,module=jit_f,program_id=7#")
        );

        let t = summary_tables(&[frame]).unwrap();
        assert!(close(t.total_ms, 990e-6, 1e-9));
        let names: Vec<&str> = t.ranges.iter().map(|r| r.name.as_str()).collect();
        // Own module stripped, program id kept; module-only names lose the suffix.
        assert!(
            names.contains(&"XlaPass:#name=a,program_id=7#"),
            "{names:?}"
        );
        assert!(names.contains(&"XlaCompile"), "{names:?}");
        assert!(names.contains(&"XlaEmitLlvmIr:#module=jit_f,program_id=7#"));
        // Workers' modules differ from the program's: kept.
        assert!(names.contains(&"XlaOptimizeLlvmIr:#module=jit_f_0#"));
        let launcher = t
            .ranges
            .iter()
            .find(|r| r.name == "XlaEmitLlvmIr:#module=jit_f,program_id=7#")
            .unwrap();
        assert!(close(launcher.child_ms, 380e-6, 1e-9));
        let passes: f64 = t.passes.iter().map(|r| r.percent).sum();
        assert!(close(passes, 100.0, 1e-9));
        assert!(t.high_level.iter().any(|r| r.name == "XlaPasses"));
        let hl: f64 = t.high_level.iter().map(|r| r.non_child_ms).sum();
        assert!(close(hl, t.total_ms, 1e-9));
    }

    #[test]
    fn overlapping_main_thread_work_is_not_counted_twice() {
        // Main child 4 runs while workers do: the exclusive span is 100 - 20 ns.
        let frame = build_compile_frame(&pushpop_batch(&[
            (1, None, 1, 0, 200, "TSL:XlaCompile:#module=m,program_id=1#"),
            (
                2,
                Some(1),
                1,
                10,
                190,
                "TSL:XlaPass:#name=p,module=m,program_id=1#",
            ),
            (
                3,
                None,
                2,
                50,
                150,
                "TSL:XlaCompileBackend:#module=w,program_id=2#",
            ),
            (
                4,
                Some(2),
                1,
                60,
                80,
                "TSL:XlaPass:#name=q,module=m,program_id=1#",
            ),
        ]))
        .unwrap();
        let e = &per_compilation(&[("p".into(), frame)], false).unwrap()[0];
        let sum: f64 = e.parts.iter().map(|p| p.seconds).sum();
        assert!(close(sum, 200e-9, 1e-9));
        let get = |k: &str| e.parts.iter().find(|p| p.kind == k).unwrap().seconds * 1e9;
        assert!(close(get("XlaCompileBackend"), 80.0, 1e-9));
        assert!(close(get("XlaPass"), 180.0 - 80.0, 1e-9));
    }

    fn pax_frames(dir: &Path) -> Vec<(String, RecordBatch)> {
        (0..4)
            .map(|i| {
                let path = dir.join(format!("jaxtoolbox-pax-fsdp4-4proc/proc{i}.zip"));
                let file = std::fs::File::open(&path).unwrap();
                let mut archive = zip::ZipArchive::new(file).unwrap();
                let mut entry = archive.by_name("report_nvtx_pushpop_trace.csv.xz").unwrap();
                let mut bytes = Vec::new();
                entry.read_to_end(&mut bytes).unwrap();
                let pushpop = read_csv_xz(&bytes, crate::formats::limits::Checked::No).unwrap();
                (format!("proc{i}"), build_compile_frame(&pushpop).unwrap())
            })
            .collect()
    }

    /// (name, first column, second column) of a reference table in pandas "split" orient.
    fn reference(path: &Path) -> Vec<(String, f64, f64)> {
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let index = json["index"].as_array().unwrap();
        let data = json["data"].as_array().unwrap();
        index
            .iter()
            .zip(data)
            .map(|(name, row)| {
                (
                    name.as_str().unwrap().to_string(),
                    row[0].as_f64().unwrap(),
                    row[1].as_f64().unwrap(),
                )
            })
            .collect()
    }

    fn check_against(tables: &CompilationTables, reference: &[(String, f64, f64)]) {
        let total: f64 = reference.iter().map(|r| r.1).sum();
        eprintln!("total_ms: ours {} reference {}", tables.total_ms, total);
        assert!(close(tables.total_ms, total, 0.01));
        for (name, non_child, child) in reference.iter().take(10) {
            let ours = tables
                .ranges
                .iter()
                .find(|r| &r.name == name)
                .unwrap_or_else(|| panic!("{name} missing"));
            eprintln!(
                "{name}: ours {} / {} reference {non_child} / {child}",
                ours.non_child_ms, ours.child_ms
            );
            assert!(close(ours.non_child_ms, *non_child, 0.01), "{name}");
            assert!(
                (ours.child_ms - child).abs() <= 0.01 * child.max(*non_child),
                "{name}"
            );
        }
        let ours_top: Vec<&str> = tables
            .ranges
            .iter()
            .take(5)
            .map(|r| r.name.as_str())
            .collect();
        let ref_top: Vec<&str> = reference.iter().take(5).map(|r| r.0.as_str()).collect();
        assert_eq!(ours_top, ref_top);
    }

    /// Every row of a reference table, same names, values within 1e-6 relative.
    fn check_all(ours: &[(&str, f64, f64)], reference: &[(String, f64, f64)]) {
        assert_eq!(ours.len(), reference.len());
        let by_name: HashMap<&str, (f64, f64)> =
            ours.iter().map(|&(n, a, b)| (n, (a, b))).collect();
        for (name, a, b) in reference {
            let (oa, ob) = by_name
                .get(name.as_str())
                .unwrap_or_else(|| panic!("{name} missing"));
            assert!(
                (oa - a).abs() <= 1e-6 * a.abs().max(1.0),
                "{name}: {oa} vs {a}"
            );
            assert!(
                (ob - b).abs() <= 1e-6 * b.abs().max(1.0),
                "{name}: {ob} vs {b}"
            );
        }
    }

    fn check_tables(tables: &CompilationTables, dir: &Path) {
        let ranges: Vec<(&str, f64, f64)> = tables
            .ranges
            .iter()
            .map(|r| (r.name.as_str(), r.non_child_ms, r.child_ms))
            .collect();
        check_all(&ranges, &reference(&dir.join("compilation-ranges.json")));
        for (rows, file) in [
            (&tables.high_level, "compilation-high-level.json"),
            (&tables.passes, "compilation-passes.json"),
        ] {
            let rows: Vec<(&str, f64, f64)> = rows
                .iter()
                .map(|r| (r.name.as_str(), r.non_child_ms, r.percent))
                .collect();
            check_all(&rows, &reference(&dir.join(file)));
        }
    }

    #[test]
    fn pax_matches_reference() {
        let Some(dir) = crate::testutil::fixtures_dir() else {
            return;
        };
        let frames = pax_frames(&dir);
        let batches: Vec<RecordBatch> = frames.iter().map(|f| f.1.clone()).collect();

        let proc0 = summary_tables(&batches[..1]).unwrap();
        let proc0_dir = dir.join("reference/pax4-proc0");
        check_against(
            &proc0,
            &reference(&proc0_dir.join("compilation-ranges.json")),
        );
        check_tables(&proc0, &proc0_dir);
        let all = summary_tables(&batches).unwrap();
        let all_dir = dir.join("reference/pax4-combined");
        check_against(&all, &reference(&all_dir.join("compilation-ranges.json")));
        check_tables(&all, &all_dir);

        for detail in [false, true] {
            let entries = per_compilation(&frames, detail).unwrap();
            assert!(entries.len() >= 4 * 17, "{}", entries.len());
            for e in &entries {
                let sum: f64 = e.parts.iter().map(|p| p.seconds).sum();
                assert!(
                    close(sum, e.wall_s, 1e-6),
                    "{}: {sum} vs {}",
                    e.name,
                    e.wall_s
                );
            }
        }
    }
}
