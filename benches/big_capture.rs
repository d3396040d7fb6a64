//! Memory benchmark: `analyze` of one process with millions of kernels.
//!
//! The capture is synthetic, built from a real one as the scale benchmark builds its ranks:
//! `tests/data/fsdp2-cmdbuf` (an FSDP training step on two GPUs of one process: GEMMs,
//! fusions and collectives as thunks of their own, and a command buffer whose fusions and
//! cuBLAS calls run as CUDA graph kernels, profiled with graph-node tracing; its XLA dump) is
//! archived, and its steady state (what follows its last compilation, if it has one) is repeated in time
//! until the kernels (thunks outside command buffers and graph kernels) number KERNELS. Each
//! copy's projected ranges, push/pop ranges and graph operations get new range ids, launch
//! ids and times, their nesting kept; the dump, the metadata and the first copy's
//! compilation stay as they are. Names are the program's own.
//!
//! For each KERNELS: wall time and peak RSS of `analyze` cold (empty cache) with the default
//! pipeline, warm (nothing changed), and cold with every analysis and `--html`; bytes per
//! kernel beyond the same run on the source capture, and ns per kernel; of the cold run, the
//! time of `whatif`'s own nodes (the critical path and scenarios) and its ns per kernel.
//!
//! `cargo bench --bench big_capture` runs 1 and 10 million kernels; `cargo bench --bench
//! big_capture -- 3000000` chooses. Under `cargo test` it runs 20,000 kernels as a check.
//! Needs Nsight Systems to archive the source capture (`NSYS`, else
//! `scripts/install-nsys.sh`'s place); without it the benchmark says it is skipped.

#[path = "common/timed.rs"]
mod timed;
use timed::timed;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, ListArray, RecordBatch,
    RecordBatchReader, StringArray,
};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

const TRACE: &str = "nvtx_gpu_proj_trace/trace.parquet";
const PUSHPOP: &str = "report_nvtx_pushpop_trace.parquet";
const GRAPH_OPS: &str = "nsys-jax-pipe/graph-ops.parquet";
/// Bump when the generated captures change, so stale ones are rebuilt.
const GENERATOR: &str = "big-v1";
const SOURCE: &str = "tests/data/fsdp2-cmdbuf";
/// Every analysis, for the "all" runs.
const ALL: [&str; 13] = [
    "summary",
    "provenance",
    "communication",
    "compilation",
    "stragglers",
    "ops",
    "sources",
    "pgle",
    "memory",
    "ranges",
    "roofline",
    "diagnose",
    "whatif",
];

fn main() {
    if let Err(e) = run() {
        eprintln!("big-capture benchmark failed: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bench = args.iter().any(|a| a == "--bench");
    let chosen: Vec<u64> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let sizes = match (chosen.is_empty(), bench) {
        (false, _) => chosen,
        (true, true) => vec![1_000_000, 10_000_000],
        (true, false) => vec![20_000],
    };
    let Some(nsys) = nsys() else {
        eprintln!(
            "\n!!! SKIPPED big-capture benchmark: no Nsight Systems to archive {SOURCE} \
             (set NSYS or run scripts/install-nsys.sh)\n"
        );
        return Ok(());
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("big-capture");
    std::fs::create_dir_all(&work)?;
    let source = work.join("source.zip");
    if !source.exists() {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nsys-jax-pipe"));
        cmd.args(["archive", "-q", "-f", "--nsys"])
            .arg(&nsys)
            .arg("--cache-dir")
            .arg(work.join("source-cache"))
            .arg("-o")
            .arg(&source)
            .arg(root.join(SOURCE).join("rep.nsys-rep"));
        timed(cmd).context("archiving the source capture")?;
    }
    let base = Source::read(&source)?;
    eprintln!(
        "source: {} kernels, {} per copy of its steady state ({} graph kernels), {} distinct \
         range names, {} distinct kernel names",
        base.kernels_whole,
        base.kernels_per_copy,
        base.graph_kernels_per_copy,
        base.range_names,
        base.kernel_names
    );

    let mut rows = vec![measure("source", &source, 0, &work)?];
    for &n in &sizes {
        let path = work.join(format!("{GENERATOR}-{n}.zip"));
        if !path.exists() {
            let t0 = Instant::now();
            let kernels = base.write(&source, n, &path)?;
            eprintln!(
                "{} ({kernels} kernels) written in {:.1} s",
                path.display(),
                t0.elapsed().as_secs_f64()
            );
        }
        let kernels = base.kernels_for(n);
        rows.push(measure(&format!("{n}"), &path, kernels, &work)?);
    }
    println!("{}", table(&rows));
    Ok(())
}

fn nsys() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NSYS") {
        return Some(PathBuf::from(p));
    }
    let home = std::env::var_os("HOME")?;
    let p = Path::new(&home).join(".cache/nsys-2023.4/target-linux-x64/nsys");
    p.is_file().then_some(p)
}

// ---------------------------------------------------------------- the synthetic capture

/// The source archive's three per-range tables and what a copy of its steady state holds.
struct Source {
    trace: RecordBatch,
    pushpop: RecordBatch,
    graph_ops: RecordBatch,
    /// Rows starting from here are copied (after the last compilation).
    steady: i64,
    /// Time between the starts of two copies.
    span: i64,
    /// Added to every range id per copy.
    id_stride: i64,
    /// Added to every launch id per copy.
    launch_stride: i64,
    kernels_whole: u64,
    kernels_per_copy: u64,
    graph_kernels_per_copy: u64,
    range_names: usize,
    kernel_names: usize,
}

fn read_table(zip: &mut zip::ZipArchive<std::fs::File>, name: &str) -> Result<RecordBatch> {
    let mut bytes = Vec::new();
    zip.by_name(name)
        .with_context(|| format!("no member {name}"))?
        .read_to_end(&mut bytes)?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))?.build()?;
    let schema = reader.schema();
    let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>()?;
    Ok(arrow::compute::concat_batches(&schema, &batches)?)
}

/// An integer or float column's values as i64 (null: None).
fn ints(batch: &RecordBatch, name: &str) -> Result<Vec<Option<i64>>> {
    let c = batch
        .column_by_name(name)
        .with_context(|| format!("no column {name}"))?;
    Ok(match c.data_type() {
        DataType::Int64 => c.as_primitive::<Int64Type>().iter().collect(),
        DataType::Float64 => c
            .as_primitive::<Float64Type>()
            .iter()
            .map(|v| v.filter(|v| v.is_finite()).map(|v| v as i64))
            .collect(),
        other => bail!("column {name} is {other}"),
    })
}

fn max_of(values: &[Option<i64>]) -> i64 {
    values.iter().flatten().copied().max().unwrap_or(0)
}

fn strings(batch: &RecordBatch, name: &str) -> Result<Vec<String>> {
    let c = batch
        .column_by_name(name)
        .with_context(|| format!("no column {name}"))?;
    let c = arrow::compute::cast(c, &DataType::Utf8)?;
    Ok(c.as_string::<i32>()
        .iter()
        .map(|s| s.unwrap_or("").to_string())
        .collect())
}

impl Source {
    fn read(path: &Path) -> Result<Source> {
        let mut zip = zip::ZipArchive::new(std::fs::File::open(path)?)?;
        let trace = read_table(&mut zip, TRACE)?;
        let pushpop = read_table(&mut zip, PUSHPOP)?;
        let graph_ops = read_table(&mut zip, GRAPH_OPS)?;

        let pp_names = strings(&pushpop, "Name")?;
        let pp_end = ints(&pushpop, "End (ns)")?;
        let steady = pp_names
            .iter()
            .zip(&pp_end)
            .filter(|(n, _)| n.contains("XlaCompile"))
            .filter_map(|(_, e)| *e)
            .max();
        let t_start = ints(&trace, "Projected Start")?;
        // A capture that began after its compilations is steady from its first range.
        let steady = steady.unwrap_or_else(|| t_start.iter().flatten().copied().min().unwrap_or(0));
        let t_dur = ints(&trace, "Projected Duration")?;
        let t_orig = ints(&trace, "Orig Start")?;
        let t_orig_dur = ints(&trace, "Orig Duration")?;
        let end = [
            max_of(&pp_end),
            max_of(&ints(&graph_ops, "End")?),
            t_start
                .iter()
                .zip(&t_dur)
                .filter_map(|(s, d)| Some((*s)? + (*d)?))
                .max()
                .unwrap_or(0),
            t_orig
                .iter()
                .zip(&t_orig_dur)
                .filter_map(|(s, d)| Some((*s)? + (*d)?))
                .max()
                .unwrap_or(0),
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        let span = end - steady + 1_000_000;
        let id_stride = [
            max_of(&ints(&trace, "RangeId")?),
            max_of(&ints(&pushpop, "RangeId")?),
            max_of(&ints(&graph_ops, "RangeId")?),
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
            + 1;
        let launch_stride = max_of(&ints(&graph_ops, "Launch")?) + 1;

        let t_names = strings(&trace, "Name")?;
        let is_kernel_thunk =
            |n: &str| n.contains("Thunk:#") && !n.contains("hlo_op=command_buffer");
        let g_start = ints(&graph_ops, "Start")?;
        let thunks_after = t_names
            .iter()
            .zip(&t_start)
            .filter(|(n, s)| is_kernel_thunk(n) && s.is_some_and(|s| s >= steady))
            .count() as u64;
        let graph_after = g_start
            .iter()
            .filter(|s| s.is_some_and(|s| s >= steady))
            .count() as u64;
        let kernels_whole =
            t_names.iter().filter(|n| is_kernel_thunk(n)).count() as u64 + g_start.len() as u64;
        let mut names: Vec<&String> = t_names.iter().chain(&pp_names).collect();
        names.sort();
        names.dedup();
        let mut kernel_names = strings(&graph_ops, "Name")?;
        kernel_names.sort();
        kernel_names.dedup();
        ensure!(
            thunks_after + graph_after > 0,
            "nothing to copy after {steady}"
        );
        Ok(Source {
            steady,
            span,
            id_stride,
            launch_stride,
            kernels_whole,
            kernels_per_copy: thunks_after + graph_after,
            graph_kernels_per_copy: graph_after,
            range_names: names.len(),
            kernel_names: kernel_names.len(),
            trace,
            pushpop,
            graph_ops,
        })
    }

    fn copies_for(&self, kernels: u64) -> u64 {
        kernels
            .saturating_sub(self.kernels_whole)
            .div_ceil(self.kernels_per_copy)
    }

    fn kernels_for(&self, kernels: u64) -> u64 {
        self.kernels_whole + self.copies_for(kernels) * self.kernels_per_copy
    }

    /// Writes the synthetic archive: the source's members but the report and its analyses,
    /// the three tables with `copies_for(kernels)` copies of their steady rows appended.
    fn write(&self, source: &Path, kernels: u64, out: &Path) -> Result<u64> {
        let copies = self.copies_for(kernels);
        let mut zip = zip::ZipArchive::new(std::fs::File::open(source)?)?;
        let tmp = out.with_extension("zip.tmp");
        let mut w = zip::ZipWriter::new(std::fs::File::create(&tmp)?);
        let stored = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .large_file(true);
        for (member, table, start) in [
            (TRACE, &self.trace, "Projected Start"),
            (PUSHPOP, &self.pushpop, "Start (ns)"),
            (GRAPH_OPS, &self.graph_ops, "Start"),
        ] {
            let bytes = self.tiled(table, start, copies)?;
            w.start_file(member, stored)?;
            w.write_all(&bytes)?;
        }
        for i in 0..zip.len() {
            let name = zip.by_index_raw(i)?.name()?.to_string();
            let skip = [TRACE, PUSHPOP, GRAPH_OPS].contains(&name.as_str())
                || name.ends_with(".nsys-rep")
                || name.starts_with("analysis/")
                || name == "report.html";
            if !skip {
                w.raw_copy_file(zip.by_index_raw(i)?)?;
            }
        }
        w.finish()?;
        std::fs::rename(&tmp, out)?;
        Ok(self.kernels_for(kernels))
    }

    /// A table with `copies` copies of its rows from the steady state on, as parquet.
    fn tiled(&self, table: &RecordBatch, start: &str, copies: u64) -> Result<Vec<u8>> {
        let starts = ints(table, start)?;
        let steady = BooleanArray::from(
            starts
                .iter()
                .map(|s| s.is_some_and(|s| s >= self.steady))
                .collect::<Vec<_>>(),
        );
        let rows = arrow::compute::filter_record_batch(table, &steady)?;
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::ZSTD(Default::default()))
            .build();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, table.schema(), Some(props))?;
        w.write(table)?;
        // Copies in groups, so that the writer sees batches of some size.
        let per_batch = (65_536 / rows.num_rows().max(1)).max(1) as u64;
        let mut k = 1;
        while k <= copies {
            let last = (k + per_batch - 1).min(copies);
            let parts: Vec<RecordBatch> = (k..=last)
                .map(|c| self.copy(&rows, c as i64))
                .collect::<Result<_>>()?;
            w.write(&arrow::compute::concat_batches(&table.schema(), &parts)?)?;
            k = last + 1;
        }
        w.close()?;
        Ok(out)
    }

    /// Copy `k` of some rows: times moved by `k` spans, ids by `k` strides.
    fn copy(&self, rows: &RecordBatch, k: i64) -> Result<RecordBatch> {
        let (dt, did, dl) = (k * self.span, k * self.id_stride, k * self.launch_stride);
        let columns: Vec<ArrayRef> =
            rows.schema()
                .fields()
                .iter()
                .zip(rows.columns())
                .map(|(f, c)| match f.name().as_str() {
                    "Projected Start" | "Orig Start" | "Start" | "End" | "Start (ns)"
                    | "End (ns)" => add(c, dt),
                    "RangeId" | "ParentId" => add(c, did),
                    "Launch" => add(c, dl),
                    "RangeStack" => restack(c, did),
                    _ => Ok(c.clone()),
                })
                .collect::<Result<_>>()?;
        Ok(RecordBatch::try_new(rows.schema(), columns)?)
    }
}

/// `by` added to every value of an integer or float column (nulls stay null).
fn add(c: &ArrayRef, by: i64) -> Result<ArrayRef> {
    Ok(match c.data_type() {
        DataType::Int64 => Arc::new(
            c.as_primitive::<Int64Type>()
                .iter()
                .map(|v| v.map(|v| v + by))
                .collect::<Int64Array>(),
        ),
        DataType::Float64 => Arc::new(
            c.as_primitive::<Float64Type>()
                .iter()
                .map(|v| v.map(|v| v + by as f64))
                .collect::<Float64Array>(),
        ),
        other => bail!("cannot shift a column of {other}"),
    })
}

/// A range stack (`:a:b:c`, or a list of ids) with every id moved by `by`.
fn restack(c: &ArrayRef, by: i64) -> Result<ArrayRef> {
    Ok(match c.data_type() {
        DataType::Utf8 => Arc::new(
            c.as_string::<i32>()
                .iter()
                .map(|s| {
                    s.map(|s| {
                        s.split(':')
                            .filter(|p| !p.is_empty())
                            .map(|p| format!(":{}", p.parse::<i64>().unwrap_or(0) + by))
                            .collect::<String>()
                    })
                })
                .collect::<StringArray>(),
        ),
        DataType::List(_) => {
            let list = c.as_list::<i32>();
            let values = add(list.values(), by)?;
            let DataType::List(field) = c.data_type() else {
                unreachable!()
            };
            Arc::new(ListArray::try_new(
                field.clone(),
                list.offsets().clone(),
                values,
                list.nulls().cloned(),
            )?)
        }
        other => bail!("a range stack of {other}"),
    })
}

// ---------------------------------------------------------------- measuring

struct Run {
    wall_s: f64,
    rss_mib: f64,
}

struct Row {
    what: String,
    kernels: u64,
    cold: Run,
    warm: Run,
    all: Run,
    /// Of the cold run: the time of `whatif`'s own nodes (its partials and reduce) [s].
    whatif_s: f64,
}

/// The time of the nodes of `whatif` in a run's record (`pipeline-run.json`) [s].
fn whatif_time(out: &Path) -> Result<f64> {
    let text = std::fs::read_to_string(out.join("pipeline-run.json"))
        .with_context(|| format!("{}: the run's record", out.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)?;
    Ok(v["nodes"]
        .as_array()
        .map(|n| {
            n.iter()
                .filter(|n| n["kind"].as_str().is_some_and(|k| k.contains("whatif")))
                .filter(|n| n["status"] == "executed")
                .filter_map(|n| n["ms"].as_f64())
                .sum::<f64>()
        })
        .unwrap_or(0.0)
        * 1e-3)
}

fn measure(what: &str, capture: &Path, kernels: u64, work: &Path) -> Result<Row> {
    let dir = work.join(format!("run-{what}"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    let go = |tag: &str, every: bool| -> Result<Run> {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nsys-jax-pipe"));
        cmd.args(["analyze", "-q", "-o"])
            .arg(dir.join(format!("out-{tag}")))
            .arg("--cache-dir")
            .arg(dir.join(format!("cache-{}", every as u8)));
        if every {
            for a in ALL {
                cmd.args(["--analysis", a]);
            }
            cmd.arg("--html").arg(dir.join("report.html"));
        }
        cmd.arg(capture);
        let (wall_s, rss_mib, _) = timed(cmd)?;
        Ok(Run { wall_s, rss_mib })
    };
    let cold = go("cold", false)?;
    let whatif_s = whatif_time(&dir.join("out-cold"))?;
    let warm = go("warm", false)?;
    let all = go("all", true)?;
    std::fs::remove_dir_all(&dir)?;
    Ok(Row {
        what: what.to_string(),
        kernels,
        cold,
        warm,
        all,
        whatif_s,
    })
}

fn table(rows: &[Row]) -> String {
    let base = &rows[0];
    let per = |r: &Run, b: &Run, k: u64| {
        if k == 0 {
            ("-".to_string(), "-".to_string())
        } else {
            (
                format!("{:.0}", (r.rss_mib - b.rss_mib) * 1048576.0 / k as f64),
                format!("{:.0}", r.wall_s * 1e9 / k as f64),
            )
        }
    };
    let mut s = String::from(
        "| capture | kernels | cold s | cold MiB | B/kernel | ns/kernel | whatif s | whatif ns/kernel | warm s | warm MiB | all s | all MiB | B/kernel (all) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let (b, ns) = per(&r.cold, &base.cold, r.kernels);
        let (ball, _) = per(&r.all, &base.all, r.kernels);
        let wns = if r.kernels == 0 {
            "-".to_string()
        } else {
            format!("{:.0}", r.whatif_s * 1e9 / r.kernels as f64)
        };
        s.push_str(&format!(
            "| {} | {} | {:.2} | {:.0} | {b} | {ns} | {:.3} | {wns} | {:.3} | {:.0} | {:.2} | {:.0} | {ball} |\n",
            r.what,
            r.kernels,
            r.cold.wall_s,
            r.cold.rss_mib,
            r.whatif_s,
            r.warm.wall_s,
            r.warm.rss_mib,
            r.all.wall_s,
            r.all.rss_mib,
        ));
    }
    s
}
