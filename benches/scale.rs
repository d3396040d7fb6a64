//! Scale benchmark: `analyze` and `combine --analysis` over N synthetic ranks.
//!
//! The ranks are built from the four real JAX-Toolbox pax archives (rank i from proc i % 4):
//! every time point of the GPU projection and of the push/pop trace goes through a rank's own
//! affine map (an offset of about a millisecond per rank and a clock-rate change of up to
//! 0.6 %), so no two ranks have the same content and the cache cannot share their nodes, while
//! the nesting of ranges is kept exactly. The XLA dumps stay identical, as in an SPMD job.
//!
//! For each N: wall time and peak RSS of the command cold (empty cache), warm (nothing
//! changed) and "+1 rank" (rank N added to a warm cache), with the nodes the +1 run executed;
//! the +1 run must execute nothing of the first N ranks.
//!
//! `cargo bench --bench scale` runs N = 8, 64, 256; `cargo bench --bench scale -- 16 32`
//! chooses N. Under `cargo test` it runs N = 3 as a check of the same assertions.
//!
//! `cargo bench --bench scale -- --shared 1024`: the shared cache instead. Each of N + 1 ranks
//! is analysed alone, as on the node where it ran, with a local cache of its own (removed
//! after) and the shared cache (`file://` under the work folder, or
//! `$NSYS_JAX_PIPE_BENCH_CACHE_URL`); then `analyze` of the N ranks with an empty local cache
//! and the shared one (reduce-only: it must execute no rank's per-process node), the same
//! with rank N added, and a cold local `analyze` of the N ranks without the shared cache.

#[path = "common/timed.rs"]
mod timed;
use timed::timed;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, RecordBatchReader};
use arrow::datatypes::DataType;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rayon::prelude::*;

const TRACE: &str = "nvtx_gpu_proj_trace/trace.parquet";
const PUSHPOP: &str = "report_nvtx_pushpop_trace.csv.xz";
/// Bump when the generated ranks change, so stale ones are rebuilt.
const GENERATOR: &str = "ranks-v1";
const ANALYSES: [&str; 4] = ["summary", "communication", "compilation", "stragglers"];

fn main() {
    if let Err(e) = run() {
        eprintln!("scale benchmark failed: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bench = args.iter().any(|a| a == "--bench");
    let shared = args.iter().any(|a| a == "--shared");
    let chosen: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let ns = match (chosen.is_empty(), bench) {
        (false, _) => chosen,
        (true, true) => vec![8, 64, 256],
        (true, false) => vec![3],
    };
    let Some(fixtures) = fixtures() else {
        eprintln!(
            "\n!!! SKIPPED scale benchmark: the pax fixtures are missing \
             (set NSYS_JAX_PIPE_FIXTURES or put them at ../shared/fixtures)\n"
        );
        return Ok(());
    };
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("scale");
    let ranks_dir = work.join(GENERATOR);
    let most = ns.iter().max().copied().unwrap_or(0) + 1;
    let t0 = Instant::now();
    let ranks = generate(&fixtures, &ranks_dir, most)?;
    eprintln!(
        "{most} synthetic ranks ready in {:.1} s ({})",
        t0.elapsed().as_secs_f64(),
        ranks_dir.display()
    );

    if shared {
        for &n in &ns {
            println!("{}", measure_shared(n, &ranks, &work)?);
        }
        return Ok(());
    }
    let mut rows = Vec::new();
    for &n in &ns {
        for command in [Cmd::Analyze, Cmd::Combine] {
            rows.push(measure(command, n, &ranks, &work)?);
        }
    }
    println!("{}", table(&rows));
    Ok(())
}

fn fixtures() -> Option<PathBuf> {
    let root = std::env::var_os("NSYS_JAX_PIPE_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures"));
    let dir = root.join("jaxtoolbox-pax-fsdp4-4proc");
    dir.join("proc0.zip").is_file().then_some(dir)
}

// ---------------------------------------------------------------- synthetic ranks

/// A rank's clock: t -> origin + offset + (t - origin) * num / den.
#[derive(Clone, Copy)]
struct Clock {
    origin: i64,
    offset: i64,
    num: i128,
    den: i128,
}

impl Clock {
    fn of_rank(rank: usize, origin: i64) -> Clock {
        Clock {
            origin,
            offset: rank as i64 * 1_000_003,
            num: 1_000_000 + ((rank * 7919) % 6007) as i128,
            den: 1_000_000,
        }
    }
    fn at(&self, t: i64) -> i64 {
        self.origin + self.offset + ((t - self.origin) as i128 * self.num / self.den) as i64
    }
}

fn generate(fixtures: &Path, dir: &Path, count: usize) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let paths: Vec<PathBuf> = (0..count)
        .map(|i| dir.join(format!("rank{i:04}.zip")))
        .collect();
    paths
        .par_iter()
        .enumerate()
        .filter(|(_, p)| !p.exists())
        .map(|(i, p)| {
            let base = fixtures.join(format!("proc{}.zip", i % 4));
            make_rank(&base, i, p).with_context(|| format!("building {}", p.display()))
        })
        .collect::<Result<Vec<()>>>()?;
    Ok(paths)
}

fn make_rank(base: &Path, rank: usize, out: &Path) -> Result<()> {
    let mut zip = zip::ZipArchive::new(std::fs::File::open(base)?)?;
    let tmp = out.with_extension("zip.tmp");
    let mut w = zip::ZipWriter::new(std::fs::File::create(&tmp)?);
    let stored = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .large_file(false);
    for i in 0..zip.len() {
        let name = zip.by_index_raw(i)?.name()?.to_string();
        match name.as_str() {
            TRACE | PUSHPOP => {
                let mut bytes = Vec::new();
                zip.by_index(i)?.read_to_end(&mut bytes)?;
                let new = if name == TRACE {
                    perturb_trace(bytes, rank)?
                } else {
                    perturb_pushpop(&bytes, rank)?
                };
                w.start_file(name.as_str(), stored)?;
                w.write_all(&new)?;
            }
            _ => w.raw_copy_file(zip.by_index_raw(i)?)?,
        }
    }
    w.finish()?;
    std::fs::rename(&tmp, out)?;
    Ok(())
}

fn i64_column(a: &ArrayRef) -> Vec<Option<i64>> {
    match a.data_type() {
        DataType::Int64 => {
            let a = a.as_any().downcast_ref::<Int64Array>().unwrap();
            a.iter().collect()
        }
        DataType::Float64 => {
            let a = a.as_any().downcast_ref::<Float64Array>().unwrap();
            a.iter()
                .map(|v| v.filter(|v| v.is_finite()).map(|v| v as i64))
                .collect()
        }
        other => panic!("time column of type {other}"),
    }
}

fn like(template: &ArrayRef, values: Vec<Option<i64>>) -> ArrayRef {
    match template.data_type() {
        DataType::Int64 => std::sync::Arc::new(Int64Array::from(values)),
        _ => std::sync::Arc::new(Float64Array::from(
            values
                .into_iter()
                .map(|v| v.map(|v| v as f64))
                .collect::<Vec<_>>(),
        )),
    }
}

/// The projected trace (the classic layout of these archives: `<X> Start` + `<X> Duration`).
fn perturb_trace(bytes: Vec<u8>, rank: usize) -> Result<Vec<u8>> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))?.build()?;
    let schema = reader.schema();
    let batches = reader.collect::<std::result::Result<Vec<_>, _>>()?;
    let batch = arrow::compute::concat_batches(&schema, &batches)?;
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    let mut pairs = 0;
    let origin = {
        let i = schema.index_of("Orig Start")?;
        i64_column(&columns[i])
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(0)
    };
    let clock = Clock::of_rank(rank, origin);
    for prefix in ["Projected", "Orig"] {
        let (Ok(s), Ok(d)) = (
            schema.index_of(&format!("{prefix} Start")),
            schema.index_of(&format!("{prefix} Duration")),
        ) else {
            continue;
        };
        let starts = i64_column(&columns[s]);
        let durs = i64_column(&columns[d]);
        let (mut new_s, mut new_d) = (Vec::new(), Vec::new());
        for (s0, d0) in starts.iter().zip(&durs) {
            match (s0, d0) {
                (Some(s0), Some(d0)) => {
                    let a = clock.at(*s0);
                    new_s.push(Some(a));
                    new_d.push(Some(clock.at(s0 + d0) - a));
                }
                (s0, d0) => {
                    new_s.push(s0.map(|s| clock.at(s)));
                    new_d.push(*d0);
                }
            }
        }
        columns[s] = like(&columns[s], new_s);
        columns[d] = like(&columns[d], new_d);
        pairs += 1;
    }
    ensure!(pairs == 2, "trace.parquet is not in the classic layout");
    let batch = RecordBatch::try_new(schema.clone(), columns)?;
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, schema, None)?;
    w.write(&batch)?;
    w.close()?;
    Ok(out)
}

/// The push/pop CSV: `Start (ns),End (ns),Duration (ns),DurChild (ns),DurNonChild (ns),...`.
fn perturb_pushpop(xz: &[u8], rank: usize) -> Result<Vec<u8>> {
    let mut text = String::new();
    liblzma::read::XzDecoder::new(xz).read_to_string(&mut text)?;
    let mut lines = text.lines();
    let header = lines.next().context("empty push/pop CSV")?;
    if !header.starts_with("Start (ns),End (ns),Duration (ns),DurChild (ns),DurNonChild (ns),") {
        bail!("unexpected push/pop CSV header {header:?}");
    }
    let rows: Vec<&str> = lines.collect();
    let origin = rows
        .iter()
        .filter_map(|l| l.split(',').next()?.parse::<i64>().ok())
        .min()
        .unwrap_or(0);
    let clock = Clock::of_rank(rank, origin);
    let mut out = String::with_capacity(text.len() + 1024);
    out.push_str(header);
    out.push('\n');
    for line in rows {
        let mut f = line.splitn(6, ',');
        let mut num = || -> Result<i64> {
            f.next()
                .context("short push/pop row")?
                .parse()
                .context("push/pop time not an integer")
        };
        let (start, end, _dur, child, _nonchild) = (num()?, num()?, num()?, num()?, num()?);
        let rest = f.next().context("short push/pop row")?;
        let (s, e) = (clock.at(start), clock.at(end));
        let child = ((child as i128 * clock.num / clock.den) as i64).min(e - s);
        out.push_str(&format!(
            "{s},{e},{},{child},{},{rest}\n",
            e - s,
            e - s - child
        ));
    }
    let mut enc = liblzma::write::XzEncoder::new(Vec::new(), 1);
    enc.write_all(out.as_bytes())?;
    Ok(enc.finish()?)
}

// ---------------------------------------------------------------- measurement

#[derive(Clone, Copy, PartialEq)]
enum Cmd {
    Analyze,
    Combine,
}

struct Run {
    wall_s: f64,
    rss_mib: f64,
    executed: usize,
}

struct Row {
    command: Cmd,
    n: usize,
    cold: Run,
    warm: Run,
    plus_one: Run,
    plus_one_kinds: String,
}

fn measure(command: Cmd, n: usize, ranks: &[PathBuf], work: &Path) -> Result<Row> {
    let dir = work.join(format!(
        "{}-{n}",
        if command == Cmd::Analyze {
            "analyze"
        } else {
            "combine"
        }
    ));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    let go = |inputs: &[PathBuf], tag: &str| -> Result<(Run, serde_json::Value)> {
        let out = dir.join(format!("out-{tag}"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nsys-jax-pipe"));
        match command {
            Cmd::Analyze => {
                cmd.args(["analyze", "-q", "-o"]).arg(&out);
            }
            Cmd::Combine => {
                cmd.args([
                    "combine",
                    "-q",
                    "-f",
                    "--keep-nsys-rep",
                    "none",
                    "--explain",
                    "-o",
                ])
                .arg(dir.join("combined.zip"));
            }
        }
        cmd.arg("--cache-dir").arg(dir.join("cache"));
        for a in ANALYSES {
            cmd.args(["--analysis", a]);
        }
        cmd.args(inputs);
        let (wall_s, rss_mib, stdout) = timed(cmd)?;
        let log = match command {
            Cmd::Analyze => serde_json::from_slice(&std::fs::read(out.join("pipeline-run.json"))?)?,
            Cmd::Combine => explained(&stdout)?,
        };
        let executed = log["executed"].as_u64().unwrap_or(0) as usize;
        Ok((
            Run {
                wall_s,
                rss_mib,
                executed,
            },
            log,
        ))
    };
    let (cold, _) = go(&ranks[..n], "cold")?;
    let (warm, _) = go(&ranks[..n], "warm")?;
    let (plus_one, log) = go(&ranks[..n + 1], "plus1")?;
    // The +1 run may execute the new rank's nodes, the run-wide context and the reduces only.
    let new_label = ranks[n].file_name().unwrap().to_string_lossy().into_owned();
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for node in log["nodes"].as_array().context("no node list")? {
        if node["status"] != "executed" {
            continue;
        }
        let kind = node["kind"].as_str().unwrap_or("").to_string();
        let label = node["label"].as_str().unwrap_or("");
        // The reduces (and the group of 16 ranks the new one joins), the run's warm-up
        // context, the HTML report of the reduces (a combined archive stores it), and
        // decoding the HLO the new rank needs (decoded modules are cheaper to decode than to
        // store: never stored).
        let run_wide = kind == "warmup-context"
            || kind.starts_with("analysis:")
            || kind == "html-report"
            || kind == "compile-sums-group"
            || kind == "hlo-schema"
            || kind == "hlo-module";
        ensure!(
            run_wide || label.contains(&new_label),
            "adding {new_label} executed {kind} of {label}"
        );
        *kinds.entry(kind).or_default() += 1;
    }
    ensure!(
        warm.executed == 0 || command == Cmd::Combine,
        "warm analyze executed {} nodes",
        warm.executed
    );
    let plus_one_kinds = kinds
        .iter()
        .map(|(k, c)| format!("{k}×{c}"))
        .collect::<Vec<_>>()
        .join(" ");
    Ok(Row {
        command,
        n,
        cold,
        warm,
        plus_one,
        plus_one_kinds,
    })
}

/// The shared cache at scale (see the module's documentation); a table.
fn measure_shared(n: usize, ranks: &[PathBuf], work: &Path) -> Result<String> {
    let dir = work.join(format!("shared-{n}"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(dir.join("bucket"))?;
    let url = std::env::var("NSYS_JAX_PIPE_BENCH_CACHE_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| format!("file://{}", dir.join("bucket").display()));
    let analyze = |inputs: &[PathBuf], cache: &Path, out: &Path, shared: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nsys-jax-pipe"));
        cmd.args(["analyze", "-q", "-o"]).arg(out);
        cmd.arg("--cache-dir").arg(cache);
        if shared {
            cmd.args(["--cache-url", &url]);
        }
        for a in ANALYSES {
            cmd.args(["--analysis", a]);
        }
        cmd.args(inputs);
        cmd
    };
    // Where the ranks ran: each alone, two at a time.
    let t0 = Instant::now();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build()?;
    pool.install(|| {
        (0..=n).into_par_iter().try_for_each(|i| -> Result<()> {
            let local = dir.join(format!("node{i}"));
            let cmd = analyze(
                &ranks[i..=i],
                &local.join("cache"),
                &local.join("out"),
                true,
            );
            // The node's cache stays until the end: files deleted just before the runs
            // measured make ext4 skip the recently freed inodes when it creates the login
            // node's entries, which then costs seconds (a cost of this benchmark's set-up,
            // not of a login node).
            timed(cmd)?;
            Ok(())
        })
    })?;
    let maps_s = t0.elapsed().as_secs_f64();
    // The maps wrote gigabytes that the kernel is still writing back: on one machine standing
    // in for many, the measured runs would wait behind other nodes' writes. Flushed first.
    std::process::Command::new("sync").status()?;
    let run = |inputs: &[PathBuf],
               cache: &str,
               tag: &str,
               shared: bool|
     -> Result<(Run, serde_json::Value)> {
        let out = dir.join(format!("out-{tag}"));
        let (wall_s, rss_mib, _) = timed(analyze(inputs, &dir.join(cache), &out, shared))?;
        let log: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("pipeline-run.json"))?)?;
        let executed = log["executed"].as_u64().unwrap_or(0) as usize;
        Ok((
            Run {
                wall_s,
                rss_mib,
                executed,
            },
            log,
        ))
    };
    let (reduce, log) = run(&ranks[..n], "login-cache", "reduce", true)?;
    let (plus_one, log1) = run(&ranks[..=n], "login-cache", "plus1", true)?;
    for log in [&log, &log1] {
        for node in log["nodes"].as_array().context("no node list")? {
            let kind = node["kind"].as_str().unwrap_or("");
            ensure!(
                node["status"] != "executed"
                    || kind == "warmup-context"
                    || kind == "compile-sums-group"
                    || kind.starts_with("analysis:"),
                "the reduce-only run executed {kind} of {}",
                node["label"]
            );
        }
    }
    let (cold, _) = run(&ranks[..n], "cold-cache", "cold", false)?;
    ensure!(
        std::fs::read(dir.join("out-reduce/summary.json"))?
            == std::fs::read(dir.join("out-cold/summary.json"))?,
        "the reduce-only summary differs from the cold one"
    );
    for i in 0..=n {
        std::fs::remove_dir_all(dir.join(format!("node{i}")))?;
    }
    let row = |what: &str, r: &Run| {
        format!(
            "| {what} | {:.2} | {:.0} | {} |\n",
            r.wall_s, r.rss_mib, r.executed
        )
    };
    Ok(format!(
        "shared cache {url}: {} ranks analysed alone in {maps_s:.0} s\n\n| analyze of {n} ranks | s | peak MiB | executed |\n|---|---|---|---|\n{}{}{}",
        n + 1,
        row("reduce-only, from the shared cache", &reduce),
        row("+1 rank (its map also done elsewhere)", &plus_one),
        row("cold, local cache only", &cold),
    ))
}

/// The node table `--explain` prints (`node  about  key  status  ms` per line), as the run
/// record's JSON shape.
fn explained(stdout: &str) -> Result<serde_json::Value> {
    let table = stdout
        .split("──── pipeline ────")
        .nth(1)
        .context("combine --explain printed no node table")?;
    let mut nodes = Vec::new();
    let mut executed = 0;
    for line in table.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        if t.len() < 4 || !matches!(t[t.len() - 2], "executed" | "reused") {
            continue;
        }
        executed += (t[t.len() - 2] == "executed") as usize;
        nodes.push(serde_json::json!({
            "kind": t[0],
            "label": t[1..t.len() - 3].join(" "),
            "status": t[t.len() - 2],
        }));
    }
    ensure!(!nodes.is_empty(), "empty node table");
    Ok(serde_json::json!({ "nodes": nodes, "executed": executed }))
}

/// Run a command; its wall time, peak RSS (MiB) and stdout.

fn table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| command | N | cold s | cold MiB | warm s | warm MiB | +1 s | +1 MiB | +1 / cold | executed cold / warm / +1 | +1 executed |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {:.2} | {:.0} | {:.3} | {:.0} | {:.3} | {:.0} | {:.1} % | {} / {} / {} | {} |\n",
            if r.command == Cmd::Analyze { "analyze" } else { "combine" },
            r.n,
            r.cold.wall_s,
            r.cold.rss_mib,
            r.warm.wall_s,
            r.warm.rss_mib,
            r.plus_one.wall_s,
            r.plus_one.rss_mib,
            100.0 * r.plus_one.wall_s / r.cold.wall_s,
            r.cold.executed,
            r.warm.executed,
            r.plus_one.executed,
            r.plus_one_kinds
        ));
    }
    s
}
