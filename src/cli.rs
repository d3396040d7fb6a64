//! The command-line front-end: parses arguments, runs graph queries, writes outputs.

use crate::engine::{Engine, default_cache_dir};
use crate::error::{EXIT_INPUT, EXIT_INTERNAL, one_line};
use crate::graph::{self, AnalysisSpec, ScriptSpec};
use crate::pipeline::{self, AnalysisRequest};
use anyhow::{Context, Result, bail};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::ffi::OsString;
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
    /// Analyse profiles: nsys-jax archives (zip files or extracted folders) or Nsight Systems
    /// reports with their XLA dumps. Several inputs are the processes of one run, analysed
    /// like their combined archive.
    Analyze(AnalyzeArgs),
    /// Turn an Nsight Systems report and its XLA dump into an nsys-jax archive.
    Archive(ArchiveArgs),
    /// Profile a program with Nsight Systems, write its nsys-jax archive and analyse it
    /// (as `nsys-jax`; also `nsys-jax-pipe nsys-jax ...` or a link named nsys-jax).
    #[command(
        override_usage = "nsys-jax-pipe run [OPTIONS] [NSYS PROFILE OPTIONS] -- PROGRAM [ARGS]...\n       nsys-jax-pipe run [OPTIONS] PROGRAM [ARGS]...",
        after_help = RUN_AFTER_HELP
    )]
    Run(RunArgs),
    /// Combine the per-process archives (or reports) of one run into one nsys-jax archive
    /// (as `nsys-jax-combine`; also a link named nsys-jax-combine).
    Combine(CombineArgs),
    /// Compare two profiled runs (e.g. the base and head commits of a pull request) with
    /// statistics, and fail on a significant regression.
    #[command(after_help = COMPARE_AFTER_HELP)]
    Compare(CompareArgs),
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

/// Where reports find their XLA dump and nsys.
#[derive(clap::Args, Debug)]
struct CaptureArgs {
    /// The XLA dump folder of a report (default: dump_<stem>/ or <stem>_dump/ beside it, else
    /// its only dump*/ folder). With several reports, one per report, in the same order.
    #[arg(long = "dump", value_name = "DIR")]
    dumps: Vec<PathBuf>,
    /// The Nsight Systems CLI (default: $NSYS, else nsys on PATH, else the usual places).
    #[arg(long, value_name = "PATH")]
    nsys: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
struct ArchiveArgs {
    /// The report (.nsys-rep).
    report: PathBuf,
    /// The archive to write (default: <report stem>.zip in the current folder).
    #[arg(short, long, value_name = "OUT.zip")]
    output: Option<PathBuf>,
    /// Replace an existing archive.
    #[arg(short, long)]
    force: bool,
    /// An analysis to run and store in the archive under analysis/<name>/ (as for
    /// `analyze`). Repeatable. Default: none.
    #[arg(long = "analysis", value_name = "NAME")]
    analyses: Vec<String>,
    /// An argument for the analysis script named before it. Repeatable.
    #[arg(long = "analysis-arg", value_name = "ARG", allow_hyphen_values = true)]
    analysis_args: Vec<String>,
    /// A pipeline file choosing the analyses to run and store in the archive.
    #[arg(long)]
    pipeline: Option<PathBuf>,
    /// Print no analysis tables.
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    capture: CaptureArgs,
    #[command(flatten)]
    cache: CacheArgs,
    /// Do not read or write the on-disk cache.
    #[arg(long)]
    no_cache: bool,
    /// Print which graph nodes executed and which were reused.
    #[arg(long)]
    explain: bool,
}

const RUN_AFTER_HELP: &str = "\
Options before `--` that are not listed above go to `nsys profile` as given (e.g.
--capture-range=cudaProfilerApi --capture-range-end=stop). Unless given, these are added:
--cuda-graph-trace=node --cpuctxsw=none --trace=cuda,nvtx,cublas,cudnn. The report and the
XLA dump are written to a local temporary folder (TMPDIR); only the finished archive is
written to the output location.

The program runs with XLA_FLAGS extended by --xla_dump_to=<temporary folder>/dump (a
--xla_dump_to of yours is replaced, with a warning) and --xla_dump_hlo_as_proto=true (unless
set); every other flag is kept as written. JAX_TRACEBACK_IN_LOCATIONS_LIMIT=-1 and
JAX_ENABLE_COMPILATION_CACHE=false are set unless already set.

Exit code: the program's, except 0 when Nsight Systems ended it by its --kill signal
(default SIGTERM) at the end of the capture: a capture range ending by stop-shutdown or
repeat-shutdown:N (a --capture-range without --capture-range-end ends by stop-shutdown,
Nsight Systems' default) or a --duration. 2 for a usage or input error; 128+N when
interrupted by signal N (nothing is written then).";

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// The archive to write, NAME.zip (a .zip or .nsys-rep suffix is dropped; %q{VAR} is
    /// replaced by the environment variable VAR, %% by %). Default: a new
    /// nsys-jax-report-XXXXXX.zip in the current folder.
    #[arg(short, long, value_name = "NAME")]
    output: Option<String>,
    /// Replace an existing archive.
    #[arg(short = 'f', long = "force-overwrite", visible_alias = "force")]
    force: bool,
    /// Profile only when this bash test holds (evaluated as [[ EXPR ]], e.g.
    /// '$SLURM_LOCALID == 0'); otherwise run the program without profiling.
    #[arg(long, value_name = "EXPR")]
    condition: Option<String>,
    /// An analysis to run on the profile, stored in the archive under analysis/<name>/ and
    /// printed: summary, communication, compilation, or the path of a script. Repeatable;
    /// each --analysis-arg goes to the --analysis before it. Default: pipelines/default.toml.
    #[arg(long = "analysis", value_name = "NAME")]
    analyses: Vec<String>,
    /// An argument for the analysis script named before it. Repeatable.
    #[arg(long = "analysis-arg", value_name = "ARG", allow_hyphen_values = true)]
    analysis_args: Vec<String>,
    /// A pipeline file choosing the analyses and their parameters (e.g. pipelines/ci.toml).
    #[arg(long)]
    pipeline: Option<PathBuf>,
    /// Run no analyses: the archive holds the profile only.
    #[arg(long, conflicts_with_all = ["analyses", "pipeline"])]
    no_analysis: bool,
    /// Record the archive under a label (e.g. a commit hash) in the cache folder, for
    /// `compare`.
    #[arg(long)]
    label: Option<String>,
    /// Print no analysis tables.
    #[arg(short, long)]
    quiet: bool,
    /// Print which graph nodes executed.
    #[arg(long)]
    explain: bool,
    /// The Nsight Systems CLI (default: $NSYS, else nsys on PATH, else the usual places).
    #[arg(long, value_name = "PATH")]
    nsys: Option<PathBuf>,
    /// An option for nsys profile (what the command line has before `--` and is not listed
    /// here ends up here).
    #[arg(long = "nsys-arg", hide = true, allow_hyphen_values = true)]
    nsys_args: Vec<String>,
    /// nsys-jax's behaviour: no analyses unless asked for.
    #[arg(long = "nsys-jax-compat", hide = true)]
    nsys_jax: bool,
    /// The program to profile and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    program: Vec<OsString>,
}

#[derive(clap::Args, Debug)]
struct CombineArgs {
    /// The combined archive to write (.zip is added when missing).
    #[arg(short, long, value_name = "OUT.zip")]
    output: PathBuf,
    /// Replace an existing archive.
    #[arg(short = 'f', long = "force-overwrite", visible_alias = "force")]
    force: bool,
    /// Which inputs' reports (.nsys-rep) to keep.
    #[arg(long, value_enum, default_value = "first")]
    keep_nsys_rep: crate::combine::KeepReports,
    /// An analysis to run on the combined run and store under analysis/<name>/ (as for
    /// `analyze`). Repeatable; each --analysis-arg goes to the --analysis before it.
    /// Default: none.
    #[arg(long = "analysis", value_name = "NAME")]
    analyses: Vec<String>,
    /// An argument for the analysis script named before it. Repeatable.
    #[arg(long = "analysis-arg", value_name = "ARG", allow_hyphen_values = true)]
    analysis_args: Vec<String>,
    /// A pipeline file choosing the analyses to run and store.
    #[arg(long)]
    pipeline: Option<PathBuf>,
    /// The per-process inputs: archives (.zip or extracted folders) or reports (.nsys-rep).
    #[arg(required = true, num_args = 2..)]
    inputs: Vec<PathBuf>,
    #[command(flatten)]
    capture: CaptureArgs,
    #[command(flatten)]
    cache: CacheArgs,
    /// Do not read or write the on-disk cache.
    #[arg(long)]
    no_cache: bool,
    /// Print which graph nodes executed and which were reused.
    #[arg(long)]
    explain: bool,
    /// Print no analysis tables.
    #[arg(short, long)]
    quiet: bool,
}

const COMPARE_AFTER_HELP: &str = "\
Metrics: module (steady-state duration per execution), wait (time waiting in collectives per
module execution), thunk and op (per HLO op and per opcode, within the modules that changed),
compile (wall time per compilation of a module), pass (time per XLA pass), bandwidth (bus
bandwidth per collective and message size). A metric regresses when it is worse by more than
its threshold and the Mann-Whitney U test is significant at --alpha; with fewer than
--min-samples samples on a side it is inconclusive. Settings come from defaults, then the
[compare] table of --pipeline, then these options.

Writes OUTDIR/compare.json, OUTDIR/compare.md (for a pull-request comment) and
OUTDIR/pipeline-run.json. Exit code: 0 no significant regression in a gated metric,
1 regression, 2 usage or input error.";

#[derive(clap::Args, Debug)]
struct CompareArgs {
    /// BASE and HEAD: an archive, a report (.nsys-rep) or the label of an analysed run
    /// (`analyze --label`). For runs of several processes, use --base and --head.
    #[arg(value_name = "BASE HEAD", num_args = 0..=2)]
    sides: Vec<String>,
    /// A process of the base run (archive, report or label). Repeatable.
    #[arg(long = "base", value_name = "INPUT")]
    base: Vec<String>,
    /// A process of the head run (archive, report or label). Repeatable.
    #[arg(long = "head", value_name = "INPUT")]
    head: Vec<String>,
    /// A process of a second profile of the base, made the same way (repeatable as --base).
    /// Each metric's base-vs-rerun change is its run-to-run noise and is added to its
    /// threshold: run-to-run variation (clocks, placement, communication set-up) is not in
    /// the spread of one run's executions.
    #[arg(long = "base-rerun", value_name = "INPUT")]
    base_rerun: Vec<String>,
    /// Output folder.
    #[arg(short, long, default_value = "nsys-jax-pipe-compare")]
    output: PathBuf,
    /// Regression threshold in percent, for every metric [default: 5].
    #[arg(long, value_name = "PERCENT")]
    threshold: Option<f64>,
    /// The threshold of one metric, e.g. `wait=20`. Repeatable.
    #[arg(long = "threshold-for", value_name = "METRIC=PERCENT")]
    threshold_for: Vec<String>,
    /// Significance level [default: 0.01].
    #[arg(long)]
    alpha: Option<f64>,
    /// Fewer samples than this on a side: inconclusive [default: 5].
    #[arg(long)]
    min_samples: Option<usize>,
    /// The metrics whose regressions fail the comparison, comma-separated, or `none`
    /// [default: module,compile,bandwidth].
    #[arg(long, value_delimiter = ',')]
    gate: Option<Vec<String>>,
    /// Bootstrap resamples of the confidence intervals [default: 2000].
    #[arg(long)]
    resamples: Option<usize>,
    /// A pipeline file whose [compare] table sets the defaults (e.g. pipelines/ci.toml).
    #[arg(long)]
    pipeline: Option<PathBuf>,
    /// The Nsight Systems CLI (default: $NSYS, else nsys on PATH, else the usual places).
    #[arg(long, value_name = "PATH")]
    nsys: Option<PathBuf>,
    #[command(flatten)]
    cache: CacheArgs,
    /// Do not read or write the on-disk cache.
    #[arg(long)]
    no_cache: bool,
    /// Print which graph nodes executed and which were reused.
    #[arg(long)]
    explain: bool,
    /// Print only the verdict line (the files are still written).
    #[arg(short, long)]
    quiet: bool,
}

#[derive(clap::Args, Debug)]
struct AnalyzeArgs {
    /// The profiled processes: archives (.zip or extracted folders) or reports (.nsys-rep).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    #[command(flatten)]
    capture: CaptureArgs,
    /// An analysis to run: summary, communication, compilation, or the path of a script
    /// (run like nsys-jax's analysis scripts). Repeatable. Default: pipelines/default.toml.
    #[arg(long = "analysis", value_name = "NAME")]
    analyses: Vec<String>,
    /// An argument for the analysis script named before it (passed before the archive
    /// folder). Repeatable.
    #[arg(long = "analysis-arg", value_name = "ARG", allow_hyphen_values = true)]
    analysis_args: Vec<String>,
    /// A pipeline file choosing the analyses and their parameters.
    #[arg(long)]
    pipeline: Option<PathBuf>,
    /// Output folder.
    #[arg(short, long, default_value = "nsys-jax-pipe-out")]
    output: PathBuf,
    /// Record these inputs under a label (e.g. a commit hash) that `compare` accepts.
    #[arg(long)]
    label: Option<String>,
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
    let argv = match crate::capture::compat::rewrite(std::env::args_os().collect(), &run_options()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("nsys-jax-pipe: error: {}", one_line(&e));
            return EXIT_INPUT;
        }
    };
    let parsed = Cli::command()
        .try_get_matches_from(argv)
        .and_then(|m| Cli::from_arg_matches(&m).map(|c| (c, m)));
    let (cli, matches) = match parsed {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_INPUT } else { 0 };
        }
    };
    let plan = match matches.subcommand().map(|(_, m)| analysis_plan(m)) {
        Some(Err(e)) => {
            eprintln!("nsys-jax-pipe: error: {}", one_line(&e));
            return EXIT_INPUT;
        }
        Some(Ok(p)) => p,
        None => vec![],
    };
    match crate::formats::limits::Limits::from_env() {
        Ok(l) => crate::formats::limits::set(l),
        Err(e) => {
            eprintln!("nsys-jax-pipe: error: {e}");
            return EXIT_INPUT;
        }
    }
    crate::interrupt::install();
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
    match std::panic::catch_unwind(|| dispatch(cli, &plan)) {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            // A reader that stopped early (`| head`) is not an error.
            let broken_pipe = e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            });
            if broken_pipe {
                return 0;
            }
            eprintln!("nsys-jax-pipe: error: {}", one_line(&e));
            match e.downcast_ref::<crate::error::Interrupted>() {
                Some(i) => 128 + i.0,
                None => EXIT_INPUT,
            }
        }
        Err(_) => EXIT_INTERNAL,
    }
}

fn dispatch(cli: Cli, plan: &[(String, Vec<String>)]) -> Result<i32> {
    match cli.command {
        Command::Analyze(a) => analyze(a, plan).map(|()| 0),
        Command::Archive(a) => archive(a, plan).map(|()| 0),
        Command::Run(a) => run(a, plan),
        Command::Combine(a) => combine(a, plan).map(|()| 0),
        Command::Compare(a) => compare(a),
        Command::Cache { command } => cache(command).map(|()| 0),
    }
}

/// `run`'s options, for splitting its command line (see [`crate::capture::compat`]).
fn run_options() -> Vec<crate::capture::compat::OptionSpec> {
    let cmd = Cli::command();
    let Some(run) = cmd.find_subcommand("run") else {
        return vec![];
    };
    let mut specs: Vec<crate::capture::compat::OptionSpec> = run
        .get_arguments()
        .filter(|a| !a.is_positional())
        .map(|a| crate::capture::compat::OptionSpec {
            longs: a
                .get_long()
                .into_iter()
                .chain(a.get_all_aliases().unwrap_or_default())
                .map(str::to_string)
                .collect(),
            short: a.get_short(),
            takes_value: a.get_action().takes_values(),
        })
        .collect();
    // clap's own --help / -h.
    specs.push(crate::capture::compat::OptionSpec {
        longs: vec!["help".into()],
        short: Some('h'),
        takes_value: false,
    });
    specs
}

/// `--analysis` names with the `--analysis-arg`s that follow each, in command-line order.
fn analysis_plan(m: &clap::ArgMatches) -> Result<Vec<(String, Vec<String>)>> {
    let indexed = |id: &str| -> Vec<(usize, String)> {
        if !matches!(m.try_contains_id(id), Ok(true)) {
            return vec![];
        }
        match (m.indices_of(id), m.try_get_many::<String>(id)) {
            (Some(i), Ok(Some(v))) => i.zip(v.cloned()).collect(),
            _ => vec![],
        }
    };
    let names = indexed("analyses");
    let mut args = indexed("analysis_args");
    let mut events: Vec<(usize, bool, String)> = names
        .into_iter()
        .map(|(i, n)| (i, true, n))
        .chain(args.drain(..).map(|(i, a)| (i, false, a)))
        .collect();
    events.sort_by_key(|e| e.0);
    let mut plan: Vec<(String, Vec<String>)> = Vec::new();
    for (_, is_name, v) in events {
        if is_name {
            plan.push((v, vec![]));
        } else if let Some(last) = plan.last_mut() {
            last.1.push(v);
        } else {
            bail!(
                "--analysis-arg {v}: comes before any --analysis (an argument belongs to the --analysis before it)"
            );
        }
    }
    Ok(plan)
}

/// Open the inputs of a run, saying which dump folder each report uses.
fn open_inputs(
    engine: Engine,
    paths: &[PathBuf],
    capture: &CaptureArgs,
) -> Result<(graph::Db, graph::Run)> {
    let inputs = graph::classify_inputs(paths, &capture.dumps)?;
    for i in &inputs {
        if let graph::RunInput::Capture(c) = i {
            eprintln!("{}", c.dump_note);
        }
    }
    graph::open_run(engine, &inputs, capture.nsys.clone())
}

fn archive(a: ArchiveArgs, plan: &[(String, Vec<String>)]) -> Result<()> {
    if !crate::capture::is_report(&a.report) {
        bail!(
            "{}: not an Nsight Systems report (.nsys-rep)",
            a.report.display()
        );
    }
    let output = a.output.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "{}.zip",
            a.report
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "report".into())
        ))
    });
    let output = if output.extension().is_some_and(|e| e == "zip") {
        output
    } else {
        output.with_extension("zip")
    };
    refuse_existing(&output, a.force)?;
    let cache_dir = (!a.no_cache).then(|| default_cache_dir(a.cache.cache_dir.as_deref()));
    let engine = Engine::new(cache_dir.as_deref())?;
    let (db, run) = open_inputs(engine, std::slice::from_ref(&a.report), &a.capture)?;
    let requests = requests(plan, a.pipeline.as_deref(), false)?;
    let written = write_archive(&db, run, &requests, &output, a.force, None)?;
    let record = db.ctx.engine.finish();
    let mut stdout = std::io::stdout().lock();
    print_results(&mut stdout, &written.texts, a.quiet, a.explain, &record)?;
    crate::capture::import_check::warn(written.import.as_slice());
    writeln!(
        stdout,
        "wrote {} ({} members; {} nodes executed, {} reused, {:.0} ms)",
        output.display(),
        written.members,
        record.executed,
        record.reused,
        record.wall_ms
    )?;
    std::mem::forget(db);
    Ok(())
}

/// What writing an archive did.
struct Written {
    members: usize,
    texts: Vec<(String, String)>,
    /// Time to lay out the archive's members (export, projection, compression).
    contents: std::time::Duration,
    /// Time to run the analyses.
    analyses: std::time::Duration,
    /// An incomplete import, stored in the archive as `import-diagnostics.json`.
    import: Option<crate::capture::import_check::ImportDiagnostics>,
}

/// Lay out the archive of the run's only process (a capture), run the analyses, store their
/// outputs under `analysis/<name>/`, and write the zip `output` in one rename.
fn write_archive(
    db: &graph::Db,
    run: graph::Run,
    requests: &[AnalysisRequest],
    output: &Path,
    force: bool,
    nsys_output: Option<&str>,
) -> Result<Written> {
    let p = run.processes(db)[0];
    let start = std::time::Instant::now();
    let bar = spinner("writing the archive: nsys export, projection, compression");
    let contents = crate::capture::archive_contents(db, p, false);
    bar.finish_and_clear();
    let mut contents = contents?;
    for n in &contents.notes {
        eprintln!("note: {n}");
    }
    let contents_time = start.elapsed();
    let import = capture_import(db, run, nsys_output)?;
    if let Some(d) = &import {
        contents
            .entries
            .push(crate::formats::archive_writer::Entry::deflated(
                crate::capture::import_check::MEMBER,
                d.to_json(),
            ));
    }
    let start = std::time::Instant::now();
    let mut results = run_analyses(db, run, requests)?;
    let analyses = start.elapsed();
    mark_import_problems(&mut results.texts, import.as_slice());
    contents.entries.extend(analysis_entries(&results));
    let members = contents.entries.len();
    crate::formats::archive_writer::write_zip(contents.entries, output, force)?;
    Ok(Written {
        members,
        texts: results.texts,
        contents: contents_time,
        analyses,
        import,
    })
}

/// What is known of an incomplete import of the capture of `run` (one process): what nsys
/// printed when it made the report (`nsys_output`, from `run`), else what the report records
/// (see [`crate::capture::import_check`]). Warned about here.
fn capture_import(
    db: &graph::Db,
    run: graph::Run,
    nsys_output: Option<&str>,
) -> Result<Option<crate::capture::import_check::ImportDiagnostics>> {
    use crate::capture::import_check::{self, ImportDiagnostics};
    let from_output = nsys_output
        .map(import_check::from_nsys_output)
        .unwrap_or_default();
    let found = if from_output.is_empty() {
        import_check::of_run(db, run)?.pop()
    } else {
        let report = run.processes(db)[0].archive_ref(db).path.clone();
        Some(ImportDiagnostics {
            report: report
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
            source: "nsys output".into(),
            errors: from_output,
        })
    };
    import_check::warn(found.as_slice());
    Ok(found)
}

/// The summary's "no module executions" line says why when the import was incomplete.
fn mark_import_problems(
    texts: &mut [(String, String)],
    found: &[crate::capture::import_check::ImportDiagnostics],
) {
    use crate::analyses::summary::{NO_MODULES, NO_MODULES_IMPORT};
    if found.is_empty() {
        return;
    }
    for (_, text) in texts.iter_mut() {
        if text.contains(NO_MODULES) {
            *text = text.replace(NO_MODULES, NO_MODULES_IMPORT);
        }
    }
}

/// The analyses' output files as archive members under `analysis/<name>/`.
fn analysis_entries(results: &AnalysisResults) -> Vec<crate::formats::archive_writer::Entry> {
    results
        .files
        .iter()
        .map(|(rel, bytes)| {
            // Built-in analyses name their files `<analysis>.json`; scripts' files already
            // lie under analysis/<name>/.
            let rel = if rel.starts_with("analysis") {
                rel.clone()
            } else {
                let stem = rel
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                Path::new("analysis").join(stem).join(rel)
            };
            crate::formats::archive_writer::Entry::deflated(
                rel.to_string_lossy().replace('\\', "/"),
                bytes.clone(),
            )
        })
        .collect()
}

/// `combine`: one archive from the per-process inputs of a run (see [`crate::combine`]).
fn combine(a: CombineArgs, plan: &[(String, Vec<String>)]) -> Result<()> {
    let output = if a.output.extension().is_some_and(|e| e == "zip") {
        a.output.clone()
    } else {
        let mut o = a.output.clone().into_os_string();
        o.push(".zip");
        PathBuf::from(o)
    };
    refuse_existing(&output, a.force)?;
    let requests = requests(plan, a.pipeline.as_deref(), false)?;
    let cache_dir = (!a.no_cache).then(|| default_cache_dir(a.cache.cache_dir.as_deref()));
    let engine = Engine::new(cache_dir.as_deref())?;
    let (db, run) = open_inputs(engine, &a.inputs, &a.capture)?;
    let bar = spinner("combining");
    let inputs = combine_inputs(&db, run, &a.inputs);
    bar.finish_and_clear();
    let combined = crate::combine::combine(inputs?, a.keep_nsys_rep)?;
    for w in &combined.warnings {
        eprintln!("nsys-jax-pipe: warning: {w}");
    }
    let mut entries = combined.entries;
    let results = run_analyses(&db, run, &requests)?;
    entries.extend(analysis_entries(&results));
    let members = entries.len();
    // An existing output (with -f) that is, unchanged, what this would write stays as it is.
    let key = crate::formats::archive_writer::archive_key(&entries);
    let unchanged = db.ctx.engine.output_is(&output, key);
    if !unchanged {
        crate::formats::archive_writer::write_zip(entries, &output, a.force)?;
        db.ctx.engine.record_output(&output, key)?;
    }
    let record = db.ctx.engine.finish();
    let mut stdout = std::io::stdout().lock();
    print_results(&mut stdout, &results.texts, a.quiet, a.explain, &record)?;
    writeln!(
        stdout,
        "{} {} ({} members from {} inputs; {} nodes executed, {} reused, {:.0} ms)",
        if unchanged { "unchanged:" } else { "wrote" },
        output.display(),
        members,
        a.inputs.len(),
        record.executed,
        record.reused,
        record.wall_ms
    )?;
    std::mem::forget(db);
    Ok(())
}

/// Every input's members: an archive's as they are, a capture's as `archive` lays them out.
fn combine_inputs(
    db: &graph::Db,
    run: graph::Run,
    paths: &[PathBuf],
) -> Result<Vec<crate::combine::Input>> {
    use rayon::prelude::*;
    let processes = run.processes(db).clone();
    if processes.len() != paths.len() {
        bail!("combine takes per-process inputs; an input is already a combined archive");
    }
    let stem = |p: &Path| {
        let name = p
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        ["zip", "nsys-rep", "qdrep"]
            .iter()
            .find_map(|e| name.strip_suffix(&format!(".{e}")).map(str::to_string))
            .unwrap_or(name)
    };
    // Captures are laid out one after another (each fans out inside); archives are read in
    // parallel.
    let mut out = Vec::with_capacity(paths.len());
    for (p, path) in processes.iter().zip(paths) {
        let archive = p.archive_ref(db);
        let entries = if archive.is_capture() {
            let contents = crate::capture::archive_contents(db, *p, false)?;
            for n in &contents.notes {
                eprintln!("note: {n}");
            }
            contents.entries
        } else if archive.is_zip() {
            // Copied from the input when written: a combined archive of many processes is
            // never in memory.
            let keys = graph::member_keys(db, p.archive(db))?;
            archive
                .members()
                .map(|m| {
                    Ok(crate::formats::archive_writer::Entry::in_zip(
                        m,
                        archive.clone(),
                        m,
                        keys.value.get(m)?.0,
                    ))
                })
                .collect::<Result<Vec<_>>>()?
        } else {
            let members: Vec<String> = archive.members().map(str::to_string).collect();
            members
                .par_iter()
                .map(|m| {
                    Ok(crate::formats::archive_writer::Entry::by_name(
                        m.clone(),
                        archive.read(m)?,
                    ))
                })
                .collect::<Result<Vec<_>>>()?
        };
        out.push(crate::combine::Input {
            path: path.clone(),
            stem: stem(path),
            entries,
        });
    }
    Ok(out)
}

/// An output name nobody else can take: `nsys-jax-report-XXXXXX.zip` created empty in the
/// current folder (concurrent ranks each get their own), removed again on failure.
struct Reserved {
    path: PathBuf,
    keep: bool,
    _interrupt: crate::interrupt::Guard,
}

impl Reserved {
    fn new() -> Result<Reserved> {
        let (_, path) = tempfile::Builder::new()
            .prefix("nsys-jax-report-")
            .suffix(".zip")
            .tempfile_in(".")
            .context("cannot create nsys-jax-report-*.zip in the current folder")?
            .keep()
            .context("cannot create nsys-jax-report-*.zip in the current folder")?;
        let path = path.file_name().map(PathBuf::from).unwrap_or(path);
        Ok(Reserved {
            _interrupt: crate::interrupt::remove_on_interrupt(&path),
            path,
            keep: false,
        })
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// `run`: profile the program, then archive and analyse its capture (see RUN_AFTER_HELP).
fn run(a: RunArgs, plan: &[(String, Vec<String>)]) -> Result<i32> {
    use crate::capture::launch;
    let requests = if a.no_analysis {
        vec![]
    } else {
        requests(plan, a.pipeline.as_deref(), !a.nsys_jax)?
    };
    // Everything that can be checked is checked before the program runs.
    for r in requests.iter().filter(|r| r.is_script()) {
        if !Path::new(&r.name).is_file() {
            bail!("{}: analysis script not found", r.name);
        }
    }
    if let Some(l) = &a.label {
        crate::labels::check(l)?;
    }
    let options = launch::NsysOptions::parse(&a.nsys_args)?;
    let shutdown_signal = options.shutdown_signal()?;
    if let Some(expr) = &a.condition
        && !launch::condition_holds(expr)?
    {
        eprintln!("nsys-jax-pipe: [[ {expr} ]] is false: running the program without profiling");
        launch::find_program(&a.program[0])?;
        let status = std::process::Command::new(&a.program[0])
            .args(&a.program[1..])
            .status()
            .with_context(|| format!("{}: cannot start", a.program[0].to_string_lossy()))?;
        return Ok(launch::exit_code(status));
    }
    launch::find_program(&a.program[0])?;
    let mut reserved = None;
    let output = match &a.output {
        Some(name) => {
            let (path, warnings) = launch::output_archive(name, |k| std::env::var(k).ok());
            for w in warnings {
                eprintln!("nsys-jax-pipe: warning: {w}");
            }
            refuse_existing(&path, a.force)?;
            if path.is_dir() {
                bail!("{}: is a folder", path.display());
            }
            path
        }
        None => reserved.insert(Reserved::new()?).path.clone(),
    };
    let engine = Engine::new(None)?;
    let nsys = crate::capture::nsys::find(&engine, a.nsys.as_deref())?;
    let work = crate::tmpfiles::ScratchDir::new("run")?;
    let stem = output
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".into());
    let profiled = launch::profile(&nsys.path, &options, &a.program, work.path(), &stem)?;
    let succeeded = launch::run_succeeded(profiled.exit_code, shutdown_signal);
    match (profiled.exit_code, succeeded) {
        (0, _) => {}
        (code, true) => eprintln!(
            "nsys-jax-pipe: the program ended by {} after the capture ({}): a successful run",
            crate::interrupt::signal_name(code - 128),
            match options.capture_range_end() {
                Some((end, true)) => format!(
                    "Nsight Systems' default --capture-range-end={end} ends the program with its --kill signal"
                ),
                Some((end, false)) => format!("--capture-range-end={end}"),
                None => "--duration".to_string(),
            }
        ),
        (code, false) => eprintln!("nsys-jax-pipe: warning: the program exited with code {code}"),
    }
    let failed_code = if succeeded { 0 } else { profiled.exit_code };
    if !profiled.report.is_file() {
        eprintln!(
            "nsys-jax-pipe: error: nsys profile wrote no report (exit code {}); no archive written",
            profiled.exit_code
        );
        return Ok(if failed_code != 0 {
            failed_code
        } else {
            EXIT_INPUT
        });
    }
    if profiled.dump.is_none() {
        eprintln!(
            "nsys-jax-pipe: warning: the program wrote no XLA dump (did it replace XLA_FLAGS, or run no JAX code?); the archive has no HLO"
        );
    }
    let after = std::time::Instant::now();
    let inputs = vec![graph::RunInput::Capture(crate::capture::CaptureInput {
        report: profiled.report.clone(),
        dump: profiled.dump.clone(),
        dump_note: String::new(),
    })];
    let processed =
        graph::open_run(engine, &inputs, Some(nsys.path.clone())).and_then(|(db, run)| {
            let w = write_archive(
                &db,
                run,
                &requests,
                &output,
                a.force || reserved.is_some(),
                Some(&profiled.output),
            )?;
            Ok((db, w))
        });
    let (db, written) = match processed {
        Ok(x) => x,
        // The program's failure is the news; ours follows it.
        Err(e) if failed_code != 0 => {
            eprintln!("nsys-jax-pipe: error: {}", one_line(&e));
            return Ok(failed_code);
        }
        Err(e) => return Err(e),
    };
    if let Some(r) = reserved.as_mut() {
        r.keep = true;
    }
    if let Some(l) = &a.label {
        crate::labels::record(
            &default_cache_dir(None),
            l,
            std::slice::from_ref(&output),
            &[],
        )?;
    }
    let record = db.ctx.engine.finish();
    let after = after.elapsed();
    let mut stdout = std::io::stdout().lock();
    print_results(&mut stdout, &written.texts, a.quiet, a.explain, &record)?;
    crate::capture::import_check::warn(written.import.as_slice());
    writeln!(
        stdout,
        "wrote {} ({} members) · profiled run {:.1} s · after it {:.2} s (archive {:.2} s, analyses {:.2} s)",
        output.display(),
        written.members,
        profiled.wall.as_secs_f64(),
        after.as_secs_f64(),
        written.contents.as_secs_f64(),
        written.analyses.as_secs_f64(),
    )?;
    std::mem::forget(db);
    Ok(failed_code)
}

fn spinner(what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new_spinner().with_style(
        indicatif::ProgressStyle::with_template(&format!("{{spinner}} {what} [{{elapsed}}]"))
            .expect("valid template"),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

/// Which analyses to run: `--analysis` names, else the pipeline file, else the default
/// pipeline (`default` false: none).
fn requests(
    plan: &[(String, Vec<String>)],
    pipeline: Option<&Path>,
    default: bool,
) -> Result<Vec<AnalysisRequest>> {
    Ok(if !plan.is_empty() {
        plan.iter()
            .map(|(n, args)| AnalysisRequest::new(n, args.clone()))
            .collect()
    } else if let Some(p) = pipeline {
        pipeline::load(p)?
    } else if default {
        pipeline::default_pipeline()
    } else {
        vec![]
    })
}

/// What the analyses of a run produced: files (relative to the output folder) and, per
/// analysis, its terminal text.
struct AnalysisResults {
    files: Vec<(PathBuf, Vec<u8>)>,
    texts: Vec<(String, String)>,
}

/// Run the requested analyses on a run. Per-process work runs in parallel up front, unless
/// every analysis is already stored. Nothing is written here.
fn run_analyses(
    db: &graph::Db,
    run: graph::Run,
    requests: &[AnalysisRequest],
) -> Result<AnalysisResults> {
    graph::prepare_archives(db, run)?;
    let mut all_stored = true;
    for req in requests.iter().filter(|r| !r.is_script()) {
        let spec = AnalysisSpec::new(db, req.name.clone(), req.params.clone());
        all_stored &= graph::analysis_is_stored(db, run, spec)?;
    }
    if !all_stored {
        let n = run.processes(db).len() as u64;
        let bar = indicatif::ProgressBar::new(n).with_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} loading profiles {pos}/{len} [{elapsed}]",
            )
            .expect("valid template"),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        let needs = graph::Needs::of(requests.iter().map(|r| r.name.as_str()));
        let result = graph::prepare_processes(db, run, needs, &|| bar.inc(1));
        bar.finish_and_clear();
        result?;
    }
    let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    let mut texts: Vec<(String, String)> = Vec::new();
    for req in requests {
        if req.is_script() {
            let path = PathBuf::from(&req.name);
            if !path.is_file() {
                bail!("{}: analysis script not found", path.display());
            }
            let key = db.ctx.engine.file_key(&path)?;
            let spec = ScriptSpec::new(db, path.clone(), req.args.clone(), key);
            let out = graph::script_analysis(db, run, spec).map_err(anyhow::Error::from)?;
            let name = crate::analyses::external::script_name(&path);
            for (rel, bytes) in &out.value.files {
                files.push((Path::new("analysis").join(&name).join(rel), bytes.clone()));
            }
            texts.push((name, out.value.stdout.clone()));
        } else {
            let spec = AnalysisSpec::new(db, req.name.clone(), req.params.clone());
            let out = graph::analysis(db, run, spec).map_err(anyhow::Error::from)?;
            for (name, content) in &out.value.files {
                files.push((PathBuf::from(name), content.clone().into_bytes()));
            }
            texts.push((req.name.clone(), out.value.text.clone()));
        }
    }
    Ok(AnalysisResults { files, texts })
}

/// The analyses' terminal texts (unless `quiet`) and, with `explain`, the node table.
fn print_results(
    out: &mut impl Write,
    texts: &[(String, String)],
    quiet: bool,
    explain: bool,
    record: &crate::engine::RunRecord,
) -> Result<()> {
    if !quiet {
        for (name, text) in texts {
            writeln!(out, "──── {name} ────\n{text}")?;
        }
    }
    if explain {
        writeln!(out, "──── pipeline ────\n{}", record.table())?;
    }
    Ok(())
}

/// An existing output is replaced only when asked to.
fn refuse_existing(path: &Path, force: bool) -> Result<()> {
    if path.exists() && !force {
        bail!("{}: already exists (use -f to overwrite)", path.display());
    }
    Ok(())
}

fn analyze(a: AnalyzeArgs, plan: &[(String, Vec<String>)]) -> Result<()> {
    let requests = requests(plan, a.pipeline.as_deref(), true)?;
    if let Some(l) = &a.label {
        crate::labels::check(l)?;
        if a.no_cache {
            bail!("--label records the run in the cache: it cannot go with --no-cache");
        }
    }
    let cache_dir = (!a.no_cache).then(|| default_cache_dir(a.cache.cache_dir.as_deref()));
    let engine = Engine::new(cache_dir.as_deref())?;
    let (db, run) = open_inputs(engine, &a.inputs, &a.capture)?;

    // Compute everything first; write nothing unless all analyses succeeded.
    let AnalysisResults {
        mut files,
        mut texts,
    } = run_analyses(&db, run, &requests)?;
    let import = crate::capture::import_check::of_run(&db, run)?;
    crate::capture::import_check::warn(&import);
    mark_import_problems(&mut texts, &import);
    let record = db.ctx.engine.finish();
    files.push((
        "pipeline-run.json".into(),
        serde_json::to_vec_pretty(&record)?,
    ));
    if !import.is_empty() {
        files.push((
            crate::capture::import_check::MEMBER.into(),
            serde_json::to_vec_pretty(&import)?,
        ));
    }
    for (rel, bytes) in &files {
        write_atomic(&a.output.join(rel), bytes)?;
    }
    if let (Some(l), Some(dir)) = (&a.label, &cache_dir) {
        crate::labels::record(dir, l, &a.inputs, &a.capture.dumps)?;
    }
    let mut stdout = std::io::stdout().lock();
    print_results(&mut stdout, &texts, a.quiet, a.explain, &record)?;
    crate::capture::import_check::warn(&import);
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

/// Write a file via a temporary file in the same folder and a rename (see
/// [`crate::tmpfiles::write_atomic`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::tmpfiles::write_atomic(path, bytes)
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
                crate::table::human_bytes(s.bytes)
            );
            let mut t = crate::table::Table::new(&["node kind", "entries", "size"]);
            t.align_right(&[1, 2]);
            for (k, (n, b)) in &s.by_kind {
                t.row(vec![k.clone(), n.to_string(), crate::table::human_bytes(*b)]);
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
                crate::table::human_bytes(s.removed_bytes),
                s.entries,
                crate::table::human_bytes(s.bytes),
                dir.display()
            );
            if s.removed_leftovers > 0 {
                println!(
                    "removed {} temporary files or folders of killed runs",
                    s.removed_leftovers
                );
            }
        }
    }
    Ok(())
}

/// `500M`, `2G`, `1024` (bytes), `10K`.
pub fn parse_size(s: &str) -> Result<u64> {
    crate::formats::limits::parse_size(s)
        .ok_or_else(|| anyhow::anyhow!("bad size {s:?} (e.g. 500M, 2G)"))
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

/// One side of a comparison: its arguments (paths or labels) resolved to inputs.
fn compare_side(
    args: &[String],
    cache: Option<&Path>,
) -> Result<(Vec<graph::RunInput>, Vec<String>)> {
    let mut paths = Vec::new();
    let mut dumps = Vec::new();
    for arg in args {
        let p = PathBuf::from(arg);
        if p.exists() {
            paths.push(p);
            continue;
        }
        let label = match cache {
            Some(dir) => crate::labels::find(dir, arg)?,
            None => None,
        };
        match label {
            Some(l) => {
                paths.extend(l.inputs);
                dumps.extend(l.dumps);
            }
            None => bail!(
                "{arg}: no such file, and no run labelled {arg:?} in the cache (label runs with `analyze --label NAME`)"
            ),
        }
    }
    let shown = paths.iter().map(|p| p.display().to_string()).collect();
    Ok((graph::classify_inputs(&paths, &dumps)?, shown))
}

fn compare(a: CompareArgs) -> Result<i32> {
    use crate::compare::{self, Settings, SettingsFile};
    let (base, head) = match (a.sides.len(), a.base.is_empty(), a.head.is_empty()) {
        (2, true, true) => (vec![a.sides[0].clone()], vec![a.sides[1].clone()]),
        (0, false, false) => (a.base.clone(), a.head.clone()),
        _ => bail!(
            "give BASE and HEAD, or --base and --head (each repeatable for runs of several processes)"
        ),
    };
    let mut settings = Settings::default();
    if let Some(p) = &a.pipeline
        && let Some(f) = crate::pipeline::compare_settings(p)?
    {
        f.apply(&mut settings)
            .with_context(|| format!("{}: [compare]", p.display()))?;
    }
    let mut thresholds = std::collections::BTreeMap::new();
    for t in &a.threshold_for {
        let Some((m, v)) = t.split_once('=') else {
            bail!("--threshold-for {t}: expected METRIC=PERCENT");
        };
        let v: f64 = v
            .trim()
            .parse()
            .with_context(|| format!("--threshold-for {t}: not a number"))?;
        thresholds.insert(m.trim().to_string(), v);
    }
    SettingsFile {
        threshold_percent: a.threshold,
        thresholds_percent: thresholds,
        alpha: a.alpha,
        min_samples: a.min_samples,
        gate: a.gate.clone(),
        resamples: a.resamples,
    }
    .apply(&mut settings)?;

    let cache_dir = (!a.no_cache).then(|| default_cache_dir(a.cache.cache_dir.as_deref()));
    let (base_inputs, base_shown) = compare_side(&base, cache_dir.as_deref())?;
    let (head_inputs, head_shown) = compare_side(&head, cache_dir.as_deref())?;
    let (rerun_inputs, rerun_shown) = compare_side(&a.base_rerun, cache_dir.as_deref())?;
    for i in base_inputs.iter().chain(&head_inputs).chain(&rerun_inputs) {
        if let graph::RunInput::Capture(c) = i {
            eprintln!("{}", c.dump_note);
        }
    }
    let engine = Engine::new(cache_dir.as_deref())?;
    let with_rerun = !rerun_inputs.is_empty();
    let mut sides = vec![base_inputs, head_inputs];
    if with_rerun {
        sides.push(rerun_inputs);
    }
    let (db, runs) = graph::open_runs(engine, &sides, a.nsys.clone())?;
    let (base_run, head_run, rerun) = (runs[0], runs[1], runs.get(2).copied());
    for &run in &runs {
        graph::prepare_archives(&db, run)?;
    }
    // The per-process shares, in parallel, unless they are all stored.
    let needs = graph::Needs {
        summary: true,
        communication: true,
        thunks: true,
        compile_sums: true,
        compilations: true,
        ..Default::default()
    };
    let mut all_stored = true;
    for &run in &runs {
        all_stored &= graph::shares_stored(&db, run, needs)?;
    }
    if !all_stored {
        let n = runs.iter().map(|r| r.processes(&db).len()).sum::<usize>() as u64;
        let bar = indicatif::ProgressBar::new(n).with_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} loading profiles {pos}/{len} [{elapsed}]",
            )
            .expect("valid template"),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        let result = runs
            .iter()
            .try_for_each(|&run| graph::prepare_processes(&db, run, needs, &|| bar.inc(1)));
        bar.finish_and_clear();
        result?;
    }
    let sides = (
        compare::SideInfo {
            inputs: base_shown,
            processes: base_run.processes(&db).len(),
        },
        compare::SideInfo {
            inputs: head_shown,
            processes: head_run.processes(&db).len(),
        },
        rerun.map(|r| compare::SideInfo {
            inputs: rerun_shown,
            processes: r.processes(&db).len(),
        }),
    );
    let report = compare::compare(&db, base_run, head_run, rerun, &settings, sides)?;
    let mut import = Vec::new();
    for &run in &runs {
        import.extend(crate::capture::import_check::of_run(&db, run)?);
    }
    crate::capture::import_check::warn(&import);
    let record = db.ctx.engine.finish();
    write_atomic(
        &a.output.join("compare.json"),
        &serde_json::to_vec_pretty(&report)?,
    )?;
    let mut md = String::new();
    for d in &import {
        md.push_str(&format!("> **Warning:** {}\n\n", d.warning()));
    }
    md.push_str(&compare::report::markdown(&report));
    write_atomic(&a.output.join("compare.md"), md.as_bytes())?;
    write_atomic(
        &a.output.join("pipeline-run.json"),
        &serde_json::to_vec_pretty(&record)?,
    )?;
    let mut stdout = std::io::stdout().lock();
    if a.quiet {
        writeln!(stdout, "{}", compare::report::headline(&report))?;
    } else {
        write!(stdout, "{}", compare::report::terminal(&report))?;
    }
    print_results(&mut stdout, &[], true, a.explain, &record)?;
    crate::capture::import_check::warn(&import);
    writeln!(
        stdout,
        "wrote {} ({} nodes executed, {} reused, {:.0} ms)",
        a.output.display(),
        record.executed,
        record.reused,
        record.wall_ms
    )?;
    Ok(report.exit_code)
}
