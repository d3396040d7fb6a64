//! The command-line front-end: parses arguments, runs graph queries, writes outputs.

use crate::engine::{Engine, default_cache_dir};
use crate::error::{EXIT_INPUT, EXIT_INTERNAL, one_line};
use crate::graph::{self, AnalysisSpec, ScriptSpec};
use crate::pipeline::{self, AnalysisRequest};
use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Parser, Debug)]
#[command(
    name = "nsys-jax-pipe",
    version,
    about = "Profile JAX programs with Nsight Systems and turn the profiles into answers, incrementally."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Analyse nsys-jax archives (zip files or extracted folders). Several inputs are the
    /// processes of one run, analysed like their combined archive.
    Analyze(AnalyzeArgs),
    /// Inspect or trim the on-disk cache.
    Cache {
        #[command(subcommand)]
        command: CacheCommand,
    },
}

#[derive(clap::Args, Debug)]
struct CacheArgs {
    /// Cache directory (default: $NSYS_JAX_PIPE_CACHE, else the checkout's cache/, else ~/.cache/nsys-jax-pipe).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum CacheCommand {
    /// Number and size of cached entries, by node kind.
    Stats(CacheArgs),
    /// Remove entries not used for a while, then the least recently used ones above a size.
    Gc {
        #[command(flatten)]
        cache: CacheArgs,
        /// Keep at most this much (e.g. 500M, 2G).
        #[arg(long)]
        max_size: Option<String>,
        /// Remove entries unused for longer than this (e.g. 7d, 12h, 30m).
        #[arg(long)]
        max_age: Option<String>,
    },
}

#[derive(clap::Args, Debug)]
struct AnalyzeArgs {
    /// Archives (.zip or extracted folders) of the profiled processes.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// An analysis to run: summary, communication, compilation, or the path of a script
    /// (run like nsys-jax's analysis scripts). Repeatable. Default: pipelines/default.toml.
    #[arg(long = "analysis", value_name = "NAME")]
    analyses: Vec<String>,
    /// An extra argument for analysis scripts (before the archive folder). Repeatable.
    #[arg(long = "analysis-arg", value_name = "ARG", allow_hyphen_values = true)]
    analysis_args: Vec<String>,
    /// A pipeline file choosing the analyses and their parameters.
    #[arg(long)]
    pipeline: Option<PathBuf>,
    /// Output folder.
    #[arg(short, long, default_value = "nsys-jax-pipe-out")]
    output: PathBuf,
    #[command(flatten)]
    cache: CacheArgs,
    /// Do not read or write the on-disk cache.
    #[arg(long)]
    no_cache: bool,
    /// Print which graph nodes executed and which were reused.
    #[arg(long)]
    explain: bool,
    /// Print no analysis tables (the files are still written).
    #[arg(short, long)]
    quiet: bool,
}

/// Entry point: returns the process exit code. Errors are printed as one line.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_INPUT } else { 0 };
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NSYS_JAX_PIPE_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .without_time()
        .with_target(false)
        .init();
    std::panic::set_hook(Box::new(|info| {
        eprintln!("nsys-jax-pipe: internal error: {info}");
    }));
    match std::panic::catch_unwind(|| run(cli)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            eprintln!("nsys-jax-pipe: error: {}", one_line(&e));
            EXIT_INPUT
        }
        Err(_) => EXIT_INTERNAL,
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Analyze(a) => analyze(a),
        Command::Cache { command } => cache(command),
    }
}

fn analyze(a: AnalyzeArgs) -> Result<()> {
    graph::input_paths_exist(&a.inputs)?;
    let requests: Vec<AnalysisRequest> = if !a.analyses.is_empty() {
        a.analyses
            .iter()
            .map(|n| AnalysisRequest::new(n, a.analysis_args.clone()))
            .collect()
    } else if let Some(p) = &a.pipeline {
        pipeline::load(p)?
    } else {
        pipeline::default_pipeline()
    };
    let cache_dir = (!a.no_cache).then(|| default_cache_dir(a.cache.cache_dir.as_deref()));
    let engine = Engine::new(cache_dir.as_deref())?;
    let (db, run) = graph::open_run(engine, &a.inputs)?;

    // Per-process work runs in parallel up front, unless every analysis is already stored.
    graph::prepare_archives(&db, run)?;
    let mut all_stored = true;
    for req in requests.iter().filter(|r| !r.is_script()) {
        let spec = AnalysisSpec::new(&db, req.name.clone(), req.params.clone());
        all_stored &= graph::analysis_is_stored(&db, run, spec)?;
    }
    if !all_stored {
        let n = run.processes(&db).len() as u64;
        let bar = indicatif::ProgressBar::new(n).with_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} loading profiles {pos}/{len} [{elapsed}]",
            )
            .expect("valid template"),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        let result = graph::prepare_processes(&db, run, &|| bar.inc(1));
        bar.finish_and_clear();
        result?;
    }

    // Compute everything first; write nothing unless all analyses succeeded.
    let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    let mut texts: Vec<(String, String)> = Vec::new();
    for req in &requests {
        if req.is_script() {
            let path = PathBuf::from(&req.name);
            if !path.is_file() {
                bail!("{}: analysis script not found", path.display());
            }
            let key = db.ctx.engine.file_key(&path)?;
            let spec = ScriptSpec::new(&db, path.clone(), req.args.clone(), key);
            let out = graph::script_analysis(&db, run, spec).map_err(anyhow::Error::from)?;
            let name = crate::analyses::external::script_name(&path);
            for (rel, bytes) in &out.value.files {
                files.push((Path::new("analysis").join(&name).join(rel), bytes.clone()));
            }
            texts.push((name, out.value.stdout.clone()));
        } else {
            let spec = AnalysisSpec::new(&db, req.name.clone(), req.params.clone());
            let out = graph::analysis(&db, run, spec).map_err(anyhow::Error::from)?;
            for (name, content) in &out.value.files {
                files.push((PathBuf::from(name), content.clone().into_bytes()));
            }
            texts.push((req.name.clone(), out.value.text.clone()));
        }
    }
    let record = db.ctx.engine.finish();
    files.push((
        "pipeline-run.json".into(),
        serde_json::to_vec_pretty(&record)?,
    ));
    for (rel, bytes) in &files {
        write_atomic(&a.output.join(rel), bytes)?;
    }
    let mut stdout = std::io::stdout().lock();
    if !a.quiet {
        for (name, text) in &texts {
            writeln!(stdout, "──── {name} ────\n{text}")?;
        }
    }
    if a.explain {
        writeln!(stdout, "──── pipeline ────\n{}", record.table())?;
    }
    writeln!(
        stdout,
        "wrote {} ({} nodes executed, {} reused, {:.0} ms)",
        a.output.display(),
        record.executed,
        record.reused,
        record.wall_ms
    )?;
    // The process ends here: freeing the loaded profiles one allocation at a time would only
    // delay the exit.
    std::mem::forget(db);
    Ok(())
}

/// Write a file via a temporary file in the same folder and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .with_context(|| format!("{}: cannot create folder", dir.display()))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .with_context(|| format!("{}: cannot write", dir.display()))?;
    tmp.write_all(bytes)?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(())
}

fn cache(c: CacheCommand) -> Result<()> {
    match c {
        CacheCommand::Stats(args) => {
            let dir = default_cache_dir(args.cache_dir.as_deref());
            let store = crate::engine::Store::open(&dir)?;
            let s = store.stats();
            println!(
                "cache {}: {} entries, {}",
                dir.display(),
                s.entries,
                human_bytes(s.bytes)
            );
            let mut t = crate::table::Table::new(&["node kind", "entries", "size"]);
            t.align_right(&[1, 2]);
            for (k, (n, b)) in &s.by_kind {
                t.row(vec![k.clone(), n.to_string(), human_bytes(*b)]);
            }
            print!("{}", t.render());
        }
        CacheCommand::Gc {
            cache,
            max_size,
            max_age,
        } => {
            if max_size.is_none() && max_age.is_none() {
                bail!("cache gc needs --max-size and/or --max-age");
            }
            let dir = default_cache_dir(cache.cache_dir.as_deref());
            let store = crate::engine::Store::open(&dir)?;
            let max_bytes = max_size.as_deref().map(parse_size).transpose()?;
            let max_age = max_age.as_deref().map(parse_age).transpose()?;
            let s = store.gc(max_bytes, max_age);
            println!(
                "removed {} entries ({}); {} entries ({}) remain in {}",
                s.removed_entries,
                human_bytes(s.removed_bytes),
                s.entries,
                human_bytes(s.bytes),
                dir.display()
            );
        }
    }
    Ok(())
}

fn human_bytes(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = b as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < units.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{x:.1} {}", units[u])
    }
}

/// `500M`, `2G`, `1024` (bytes), `10K`.
pub fn parse_size(s: &str) -> Result<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        Some('T' | 't') => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| anyhow::anyhow!("bad size {s:?} (e.g. 500M, 2G)"))?;
    Ok((n * mult as f64) as u64)
}

/// `30d`, `12h`, `45m`, `90s`.
pub fn parse_age(s: &str) -> Result<std::time::Duration> {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('d') => (&s[..s.len() - 1], 86400.0),
        Some('h') => (&s[..s.len() - 1], 3600.0),
        Some('m') => (&s[..s.len() - 1], 60.0),
        Some('s') => (&s[..s.len() - 1], 1.0),
        _ => bail!("bad age {s:?} (e.g. 30d, 12h, 45m)"),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| anyhow::anyhow!("bad age {s:?} (e.g. 30d, 12h, 45m)"))?;
    Ok(std::time::Duration::from_secs_f64(n * mult))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_ages() {
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("10").unwrap(), 10);
        assert!(parse_size("x").is_err());
        assert_eq!(parse_age("2h").unwrap().as_secs(), 7200);
        assert!(parse_age("2").is_err());
    }
}
