//! The command line's arguments: the flags several commands share, each defined once and
//! flattened into the commands that take it (with the command's own help text where it
//! differs), the per-command argument structs, and the step that turns the low-level
//! arguments into what the commands work with (cache folder, analysis requests).

use crate::commands::pipeline::{self, AnalysisRequest};
use crate::engine::default_cache_dir;
use anyhow::{Result, bail};
use clap::Subcommand;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

// ---- Shared flags -------------------------------------------------------------------------

/// `--cache-dir`: where the on-disk cache is; `--cache-url`: the shared one behind it.
#[derive(clap::Args, Debug)]
pub(super) struct CacheDir {
    /// Cache directory (default: $NSYS_JAX_PIPE_CACHE, else the checkout's cache/, else ~/.cache/nsys-jax-pipe).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    #[command(flatten)]
    pub url: CacheUrl,
}

impl CacheDir {
    /// The cache folder: `--cache-dir`, else the default one.
    pub fn path(&self) -> PathBuf {
        default_cache_dir(self.cache_dir.as_deref())
    }
}

/// `--cache-url`: the remote tier of the cache.
#[derive(clap::Args, Debug)]
pub(super) struct CacheUrl {
    /// A cache shared between machines, behind the local one: s3://bucket/prefix (AWS_*
    /// variables, AWS_ENDPOINT_URL for S3-compatible servers), gs://bucket/prefix,
    /// az://container/prefix or file:///shared/folder.
    #[arg(long, env = "NSYS_JAX_PIPE_CACHE_URL", value_name = "URL")]
    pub cache_url: Option<String>,
}

impl CacheUrl {
    /// The remote tier, opened (the URL checked; nothing contacted yet).
    pub fn open(&self) -> Result<Option<crate::store::remote::Remote>> {
        self.cache_url
            .as_deref()
            .filter(|u| !u.is_empty())
            .map(crate::store::remote::Remote::open)
            .transpose()
    }
}

/// `--cache-dir` and `--no-cache`.
#[derive(clap::Args, Debug)]
pub(super) struct CacheArgs {
    #[command(flatten)]
    pub dir: CacheDir,
    /// Do not read or write the cache (neither the local one nor a shared one).
    #[arg(long)]
    pub no_cache: bool,
}

impl CacheArgs {
    /// The cache folder to use, or none with `--no-cache`.
    pub fn dir(&self) -> Option<PathBuf> {
        (!self.no_cache).then(|| self.dir.path())
    }

    /// The engine over the local cache and, with `--cache-url`, the shared one behind it
    /// (`--no-cache`: neither).
    pub fn engine(&self) -> Result<crate::engine::Engine> {
        let url = self.dir.url.cache_url.as_deref().filter(|u| !u.is_empty());
        crate::engine::Engine::tiered(self.dir().as_deref(), url.filter(|_| !self.no_cache))
    }
}

/// `--explain`.
#[derive(clap::Args, Debug)]
pub(super) struct Explain {
    /// Print which graph nodes executed and which were reused.
    #[arg(long)]
    pub explain: bool,
}

/// `-q`, `--quiet`.
#[derive(clap::Args, Debug)]
pub(super) struct Quiet {
    /// Print no analysis tables.
    #[arg(short, long)]
    pub quiet: bool,
}

/// `--html` of the commands that write an archive (which stores the page as report.html).
#[derive(clap::Args, Debug)]
pub(super) struct HtmlFile {
    /// Also write the archive's report (report.html, one self-contained HTML page) here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// `--html`, `--no-html`.
#[derive(clap::Args, Debug)]
pub(super) struct Html {
    /// Where to write the report, one self-contained HTML page (charts, tables, flame
    /// graphs; viewable offline in any browser). Default: report.html in the output folder
    /// (beside the archive for the commands that write one).
    #[arg(long, value_name = "FILE", conflicts_with = "no_html")]
    pub html: Option<PathBuf>,
    /// Write no HTML report.
    #[arg(long)]
    pub no_html: bool,
}

impl Html {
    /// The page's path: `--html FILE`, else `default`; none with `--no-html`.
    pub fn path(&self, default: Option<PathBuf>) -> Option<PathBuf> {
        if self.no_html {
            return None;
        }
        self.html.clone().or(default)
    }
}

/// `--nsys`.
#[derive(clap::Args, Debug)]
pub(super) struct NsysPath {
    /// The Nsight Systems CLI (default: $NSYS, else nsys on PATH, else the usual places).
    #[arg(id = "nsys", long = "nsys", value_name = "PATH")]
    pub path: Option<PathBuf>,
}

/// `--pipeline`.
#[derive(clap::Args, Debug)]
pub(super) struct PipelineFile {
    /// A pipeline file choosing the analyses and their parameters.
    #[arg(long)]
    pub pipeline: Option<PathBuf>,
}

/// Which analyses to run: `--analysis` (with its `--analysis-arg`s) and `--pipeline`. The
/// names and their arguments are read in command-line order by [`analysis_plan`].
#[derive(clap::Args, Debug)]
pub(super) struct AnalysisSelection {
    /// An analysis to run: {analyses}, or the path of a script (run like nsys-jax's
    /// analysis scripts). Repeatable. Default: pipelines/default.toml.
    #[arg(long = "analysis", value_name = "NAME")]
    pub analyses: Vec<String>,
    /// An argument of the analysis named before it: KEY=VALUE for a built-in one (e.g.
    /// `--analysis compilation --analysis-arg detail=true`), passed as is to a script.
    /// Repeatable.
    #[arg(long = "analysis-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub analysis_args: Vec<String>,
    #[command(flatten)]
    pub pipeline: PipelineFile,
    /// A peak for the roofline, over the GPU's: MATH=TFLOPS (fp8, int8, bf16, f16, tf32,
    /// f32, f64; dense) or hbm=GB/s, e.g. `--peak bf16=989 --peak hbm=3350`. Repeatable.
    #[arg(long = "peak", value_name = "NAME=VALUE")]
    pub peaks: Vec<String>,
    /// The `--analysis` names, each with the `--analysis-arg`s that follow it, in
    /// command-line order (set from the parsed command line by [`analysis_plan`]).
    #[arg(skip)]
    pub plan: Vec<(String, Vec<String>)>,
}

impl AnalysisSelection {
    /// Which analyses to run: `--analysis` names (their plan), else the pipeline file, else
    /// the default pipeline (`default` false: none); `--peak`s go to the roofline's
    /// parameters (and to `diagnose`'s, which are the roofline's it reads).
    pub fn requests(&self, default: bool) -> Result<Vec<AnalysisRequest>> {
        let mut r = requests(&self.plan, self.pipeline.pipeline.as_deref(), default)?;
        if !self.peaks.is_empty() {
            use crate::analyses::Analysis;
            use crate::analyses::diagnose::DiagnoseAnalysis;
            use crate::analyses::roofline::RooflineAnalysis;
            use crate::analyses::roofline_model::RooflineParams;
            let name = RooflineAnalysis::NAME;
            let mut any = false;
            // `diagnose` takes the parameters of the roofline it reads.
            let takes = |q: &str| q == name || q == DiagnoseAnalysis::NAME;
            for req in r.iter_mut().filter(|q| takes(&q.name)) {
                let mut p: RooflineParams = serde_json::from_str(&req.params)?;
                for arg in &self.peaks {
                    p.peak.set(arg)?;
                }
                req.params = crate::analyses::find(&req.name)
                    .expect("a built-in analysis")
                    .canonical_params(&serde_json::to_value(&p)?)
                    .map_err(anyhow::Error::msg)?;
                any = true;
            }
            if !any {
                bail!("--peak: no {name} analysis is run (add --analysis {name})");
            }
        }
        Ok(r)
    }
}

fn requests(
    plan: &[(String, Vec<String>)],
    pipeline: Option<&Path>,
    default: bool,
) -> Result<Vec<AnalysisRequest>> {
    Ok(if !plan.is_empty() {
        plan.iter()
            .map(|(n, args)| AnalysisRequest::from_command_line(n, args.clone()))
            .collect::<Result<_>>()?
    } else if let Some(p) = pipeline {
        pipeline::load(p)?
    } else if default {
        pipeline::default_pipeline()
    } else {
        vec![]
    })
}

/// Where reports find their XLA dump and nsys.
#[derive(clap::Args, Debug)]
pub(super) struct CaptureArgs {
    /// The XLA dump folder of a report (default: dump_<stem>/ or <stem>_dump/ beside it, else
    /// its only dump*/ folder). With several reports, one per report, in the same order.
    #[arg(long = "dump", value_name = "DIR")]
    pub dumps: Vec<PathBuf>,
    #[command(flatten)]
    pub nsys: NsysPath,
}

impl CaptureArgs {
    pub fn options(&self) -> crate::commands::CaptureOptions {
        crate::commands::CaptureOptions {
            dumps: self.dumps.clone(),
            nsys: self.nsys.path.clone(),
        }
    }
}

// ---- Commands -----------------------------------------------------------------------------

#[derive(Subcommand, Debug)]
pub(super) enum CacheCommand {
    /// Number and size of cached entries, by node kind.
    Stats(CacheDir),
    /// Upload the local cache's entries to the shared cache (--cache-url) that it lacks:
    /// entries computed before a shared cache was given are otherwise only ever local.
    Push(CacheDir),
    /// Make a key pair for signing a shared cache's entries: the secret key goes to FILE (give
    /// it to the machines that write the cache, as $NSYS_JAX_PIPE_CACHE_SIGNING_KEY); the
    /// public key is printed (give it to the machines that read, in
    /// $NSYS_JAX_PIPE_CACHE_TRUSTED_KEYS, several separated by spaces).
    Keygen {
        /// The key's name, e.g. ci-2026 (letters, digits, . _ -).
        name: String,
        /// Where to write the secret key (refused if it exists).
        #[arg(long, short, value_name = "FILE")]
        output: PathBuf,
    },
    /// Remove entries not used for a while, then the least recently used ones above a size.
    Gc {
        #[command(flatten)]
        cache: CacheDir,
        /// Keep at most this much (e.g. 500M, 2G).
        #[arg(long)]
        max_size: Option<String>,
        /// Remove entries unused for longer than this (e.g. 7d, 12h, 30m).
        #[arg(long)]
        max_age: Option<String>,
    },
}

#[derive(clap::Args, Debug)]
#[command(
    mut_arg("analyses", |a| a.help("An analysis to run and store in the archive under analysis/<name>/: {analyses}, or the path of a script. Repeatable. Default: none")),
    mut_arg("pipeline", |a| a.help("A pipeline file choosing the analyses to run and store in the archive")),
)]
pub(super) struct ArchiveArgs {
    /// The report (.nsys-rep).
    pub report: PathBuf,
    /// The archive to write (default: <report stem>.zip in the current folder).
    #[arg(short, long, value_name = "OUT.zip")]
    pub output: Option<PathBuf>,
    /// Replace an existing archive.
    #[arg(short, long)]
    pub force: bool,
    #[command(flatten)]
    pub analyses: AnalysisSelection,
    #[command(flatten)]
    pub html: HtmlFile,
    #[command(flatten)]
    pub quiet: Quiet,
    #[command(flatten)]
    pub capture: CaptureArgs,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub explain: Explain,
}

pub(super) const RUN_AFTER_HELP: &str = "\
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
#[command(
    mut_arg("analyses", |a| a.help("An analysis to run on the profile, stored in the archive under analysis/<name>/ and printed: {analyses}, or the path of a script. Repeatable; each --analysis-arg goes to the --analysis before it. Default: pipelines/default.toml")),
    mut_arg("pipeline", |a| a.help("A pipeline file choosing the analyses and their parameters (e.g. pipelines/ci.toml)")),
    mut_arg("explain", |a| a.help("Print which graph nodes executed")),
)]
pub(super) struct RunArgs {
    /// The archive to write, NAME.zip (a .zip or .nsys-rep suffix is dropped; %q{VAR} is
    /// replaced by the environment variable VAR, %% by %). Default: a new
    /// nsys-jax-report-XXXXXX.zip in the current folder.
    #[arg(short, long, value_name = "NAME")]
    pub output: Option<String>,
    /// Replace an existing archive.
    #[arg(short = 'f', long = "force-overwrite", visible_alias = "force")]
    pub force: bool,
    /// Profile only when this bash test holds (evaluated as [[ EXPR ]], e.g.
    /// '$SLURM_LOCALID == 0'); otherwise run the program without profiling.
    #[arg(long, value_name = "EXPR")]
    pub condition: Option<String>,
    #[command(flatten)]
    pub analyses: AnalysisSelection,
    /// Run no analyses: the archive holds the profile only.
    #[arg(long, conflicts_with_all = ["analyses", "pipeline"])]
    pub no_analysis: bool,
    /// Record the archive under a label (e.g. a commit hash) in the cache folder, for
    /// `compare`.
    #[arg(long)]
    pub label: Option<String>,
    /// Record every device memory allocation and free (nsys profile
    /// --cuda-memory-usage=true), for the memory analysis's memory over time.
    #[arg(long)]
    pub memory: bool,
    /// Leave the `nvtx` Python package as it is: without this, `run` makes its domains real
    /// under Nsight Systems releases that would otherwise drop its ranges (README, "User
    /// NVTX ranges").
    #[arg(long)]
    pub no_nvtx_workaround: bool,
    #[command(flatten)]
    pub cache_url: CacheUrl,
    #[command(flatten)]
    pub html: HtmlFile,
    #[command(flatten)]
    pub quiet: Quiet,
    #[command(flatten)]
    pub explain: Explain,
    #[command(flatten)]
    pub nsys: NsysPath,
    /// An option for nsys profile (what the command line has before `--` and is not listed
    /// here ends up here).
    #[arg(long = "nsys-arg", hide = true, allow_hyphen_values = true)]
    pub nsys_args: Vec<String>,
    /// nsys-jax's behaviour: no analyses unless asked for.
    #[arg(long = "nsys-jax-compat", hide = true)]
    pub nsys_jax: bool,
    /// The program to profile and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    pub program: Vec<OsString>,
}

#[derive(clap::Args, Debug)]
#[command(
    mut_arg("analyses", |a| a.help("An analysis to run on the combined run and store under analysis/<name>/: {analyses}, or the path of a script. Repeatable; each --analysis-arg goes to the --analysis before it. Default: none")),
    mut_arg("pipeline", |a| a.help("A pipeline file choosing the analyses to run and store")),
)]
pub(super) struct CombineArgs {
    /// The combined archive to write (.zip is added when missing).
    #[arg(short, long, value_name = "OUT.zip")]
    pub output: PathBuf,
    /// Replace an existing archive.
    #[arg(short = 'f', long = "force-overwrite", visible_alias = "force")]
    pub force: bool,
    /// Which inputs' reports (.nsys-rep) to keep.
    #[arg(long, value_enum, default_value = "first")]
    pub keep_nsys_rep: crate::commands::combine::members::KeepReports,
    #[command(flatten)]
    pub analyses: AnalysisSelection,
    #[command(flatten)]
    pub html: HtmlFile,
    /// The per-process inputs: archives (.zip or extracted folders) or reports (.nsys-rep).
    /// One input is rewritten as this version's archive (with install.sh and the notebook).
    #[arg(required = true, num_args = 1..)]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub capture: CaptureArgs,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub explain: Explain,
    #[command(flatten)]
    pub quiet: Quiet,
}

pub(super) const COMPARE_AFTER_HELP: &str = "\
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
#[command(
    mut_arg("pipeline", |a| a.help("A pipeline file whose [compare] table sets the defaults (e.g. pipelines/ci.toml)")),
    mut_arg("quiet", |a| a.help("Print only the verdict line (the files are still written)")),
)]
pub(super) struct CompareArgs {
    /// BASE and HEAD: an archive, a report (.nsys-rep) or the label of an analysed run
    /// (`analyze --label`). For runs of several processes, use --base and --head.
    #[arg(value_name = "BASE HEAD", num_args = 0..=2)]
    pub sides: Vec<String>,
    /// A process of the base run (archive, report or label). Repeatable.
    #[arg(long = "base", value_name = "INPUT")]
    pub base: Vec<String>,
    /// A process of the head run (archive, report or label). Repeatable.
    #[arg(long = "head", value_name = "INPUT")]
    pub head: Vec<String>,
    /// A process of a second profile of the base, made the same way (repeatable as --base).
    /// Each metric's base-vs-rerun change is its run-to-run noise and is added to its
    /// threshold: run-to-run variation (clocks, placement, communication set-up) is not in
    /// the spread of one run's executions.
    #[arg(long = "base-rerun", value_name = "INPUT")]
    pub base_rerun: Vec<String>,
    /// Output folder.
    #[arg(short, long, default_value = "nsys-jax-pipe-compare")]
    pub output: PathBuf,
    /// Regression threshold in percent, for every metric [default: 5].
    #[arg(long, value_name = "PERCENT")]
    pub threshold: Option<f64>,
    /// The threshold of one metric, e.g. `wait=20`. Repeatable.
    #[arg(long = "threshold-for", value_name = "METRIC=PERCENT")]
    pub threshold_for: Vec<String>,
    /// Significance level [default: 0.01].
    #[arg(long)]
    pub alpha: Option<f64>,
    /// Fewer samples than this on a side: inconclusive [default: 5].
    #[arg(long)]
    pub min_samples: Option<usize>,
    /// The metrics whose regressions fail the comparison, comma-separated, or `none`
    /// [default: module,compile,bandwidth].
    #[arg(long, value_delimiter = ',')]
    pub gate: Option<Vec<String>>,
    /// Bootstrap resamples of the confidence intervals [default: 2000].
    #[arg(long)]
    pub resamples: Option<usize>,
    #[command(flatten)]
    pub html: Html,
    #[command(flatten)]
    pub pipeline: PipelineFile,
    #[command(flatten)]
    pub nsys: NsysPath,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub explain: Explain,
    #[command(flatten)]
    pub quiet: Quiet,
}

pub(super) const HISTORY_AFTER_HELP: &str = "\
Each run is a label of the cache (`analyze --label NAME`, `run --label NAME`), local or shared;
with --label-prefix, every label starting with it, in the order they were recorded. Each
metric's series has one point per run (the median of its samples, with its quartiles); change
points are found with E-Divisive means and Welch's t-test (deterministic; see --max-p,
--min-change, --min-size), each shown with the commits on either side and, for a module, the
ops whose time changed between the two runs.

Writes OUTDIR/history.json, OUTDIR/history.md and OUTDIR/pipeline-run.json.";

#[derive(clap::Args, Debug)]
#[command(mut_arg("quiet", |a| a.help("Print only the first line (the files are still written)")))]
pub(super) struct HistoryArgs {
    /// The runs, by label, oldest first.
    #[arg(value_name = "LABEL")]
    pub labels: Vec<String>,
    /// Every label starting with this, in the order they were recorded.
    #[arg(
        long = "label-prefix",
        value_name = "PREFIX",
        conflicts_with = "labels"
    )]
    pub label_prefix: Option<String>,
    /// A metric family (module, wait, compile, bandwidth, mfu) or one metric
    /// (`module:jit_train_step`). Repeatable; all when not given.
    #[arg(long = "metric", value_name = "METRIC")]
    pub metrics: Vec<String>,
    /// Largest p-value of a change point [default: 0.0001].
    #[arg(long = "max-p")]
    pub max_p: Option<f64>,
    /// Smallest change of a change point, in percent [default: 1].
    #[arg(long = "min-change", value_name = "PERCENT")]
    pub min_change: Option<f64>,
    /// Runs needed on each side of a change point [default: 5].
    #[arg(long = "min-size")]
    pub min_size: Option<usize>,
    /// Smallest change of a change point in units of the series' run-to-run noise
    /// [default: 2].
    #[arg(long = "min-effect")]
    pub min_effect: Option<f64>,
    /// Output folder.
    #[arg(short, long, default_value = "nsys-jax-pipe-history")]
    pub output: PathBuf,
    #[command(flatten)]
    pub html: Html,
    #[command(flatten)]
    pub nsys: NsysPath,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub explain: Explain,
    #[command(flatten)]
    pub quiet: Quiet,
}

#[derive(clap::Args, Debug)]
#[command(
    mut_arg("analysis_args", |a| a.help("An argument of the analysis named before it: KEY=VALUE for a built-in one (e.g. --analysis compilation --analysis-arg detail=true), passed to a script before the archive folder. Repeatable")),
    mut_arg("quiet", |a| a.help("Print no analysis tables (the files are still written)")),
)]
pub(super) struct AnalyzeArgs {
    /// The profiled processes: archives (.zip or extracted folders) or reports (.nsys-rep).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub capture: CaptureArgs,
    #[command(flatten)]
    pub analyses: AnalysisSelection,
    /// Output folder.
    #[arg(short, long, default_value = "nsys-jax-pipe-out")]
    pub output: PathBuf,
    /// Also write the module, thunk, compile and communication frames to this folder as
    /// parquet files with nsys-jax's column and index names (for pandas and polars).
    #[arg(long, value_name = "DIR")]
    pub frames: Option<PathBuf>,
    /// Run no analyses and write no output folder (with --frames or --html).
    #[arg(long, conflicts_with_all = ["analyses", "pipeline"])]
    pub no_analysis: bool,
    /// Record these inputs under a label (e.g. a commit hash) that `compare` accepts.
    #[arg(long)]
    pub label: Option<String>,
    /// Keep running and update the outputs whenever an input (a folder of archives, an
    /// archive, an analysis script) appears or changes; Ctrl-C stops.
    #[arg(long, conflicts_with_all = ["label", "no_cache"])]
    pub watch: bool,
    #[command(flatten)]
    pub html: Html,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub explain: Explain,
    #[command(flatten)]
    pub quiet: Quiet,
}

/// `what-if`: the `whatif` analysis with the user's own scenarios.
#[derive(clap::Args, Debug)]
pub(super) struct WhatIfArgs {
    /// The profiled processes: archives (.zip or extracted folders) or reports (.nsys-rep).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub capture: CaptureArgs,
    /// A change to predict: `op:NAME=PCT%` (the HLO instruction NAME at PCT % of its roof),
    /// `range:LABEL` (the host's NVTX range LABEL done ahead, off the path) or
    /// `on-time:DEVICE` (the device arriving with the others). Repeatable; the scenarios the
    /// profile's own problems call for are predicted too.
    #[arg(long = "scenario", value_name = "SCENARIO")]
    pub scenarios: Vec<String>,
    /// Output folder.
    #[arg(short, long, default_value = "nsys-jax-pipe-out")]
    pub output: PathBuf,
    #[command(flatten)]
    pub html: Html,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub explain: Explain,
    #[command(flatten)]
    pub quiet: Quiet,
}

// ---- From arguments to what the commands take ---------------------------------------------

/// `--analysis` names with the `--analysis-arg`s that follow each, in command-line order.
pub(super) fn analysis_plan(m: &clap::ArgMatches) -> Result<Vec<(String, Vec<String>)>> {
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
