//! `run`: profile a program with Nsight Systems, then archive and analyse its capture.

use super::archive::{ArchiveJob, Written, write_archive};
use super::pipeline::AnalysisRequest;
use super::{Ui, refuse_existing};
use crate::engine::{Engine, default_cache_dir};
use crate::error::{EXIT_INPUT, one_line};
use crate::graph;
use anyhow::{Context, Result, bail};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What `run` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    /// The program and its arguments.
    pub program: Vec<OsString>,
    /// Options for `nsys profile`.
    pub nsys_args: Vec<String>,
    /// Make the `nvtx` package's domains real under Nsight Systems ([`crate::capture::nvtx_hook`]).
    pub nvtx_workaround: bool,
    /// The archive's name, as nsys-jax takes it (`%q{VAR}` expanded); None: a new
    /// `nsys-jax-report-XXXXXX.zip` in the current folder.
    pub output: Option<String>,
    pub force: bool,
    /// Profile only when this `[[ ... ]]` expression holds.
    pub condition: Option<String>,
    /// The analyses stored in the archive.
    pub analyses: Vec<AnalysisRequest>,
    /// A name for this run in the cache.
    pub label: Option<String>,
    /// A shared cache that the archive's nodes go to.
    pub cache_url: Option<String>,
    /// Also write the HTML report here.
    pub html: Option<PathBuf>,
    /// The Nsight Systems CLI (else found).
    pub nsys: Option<PathBuf>,
}

/// What `run` did.
pub struct Ran {
    /// The command's exit code: the program's when it failed, else 0 (or an input error when
    /// no report was made).
    pub exit_code: i32,
    /// The archive, when one was written.
    pub archive: Option<RunArchive>,
}

/// The archive `run` wrote and what making it took.
pub struct RunArchive {
    pub output: PathBuf,
    pub written: Written,
    pub record: crate::engine::RunRecord,
    /// The profiled program's wall time.
    pub profiled: std::time::Duration,
    /// Everything after it (archive and analyses).
    pub after: std::time::Duration,
}

impl RunArchive {
    /// The command's last line.
    pub fn summary(&self) -> String {
        format!(
            "wrote {} ({}) · profiled run {:.1} s · after it {:.2} s (archive {:.2} s, analyses {:.2} s){}",
            self.output.display(),
            crate::table::count(self.written.members, "member", "members"),
            self.profiled.as_secs_f64(),
            self.after.as_secs_f64(),
            self.written.contents.as_secs_f64(),
            self.written.analyses.as_secs_f64(),
            self.written.shared_note(),
        )
    }
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
pub fn run(a: &RunRequest, ui: &dyn Ui) -> Result<Ran> {
    use crate::capture::launch;
    let finished = |exit_code| {
        Ok(Ran {
            exit_code,
            archive: None,
        })
    };
    // Everything that can be checked is checked before the program runs.
    for r in a.analyses.iter().filter(|r| r.is_script()) {
        if !Path::new(&r.name).is_file() {
            bail!("{}: analysis script not found", r.name);
        }
    }
    if let Some(l) = &a.label {
        super::labels::check(l)?;
    }
    let options = launch::NsysOptions::parse(&a.nsys_args)?;
    let shutdown_signal = options.shutdown_signal()?;
    if let Some(expr) = &a.condition
        && !launch::condition_holds(expr)?
    {
        ui.say(&format!(
            "nsys-jax-pipe: [[ {expr} ]] is false: running the program without profiling"
        ));
        launch::find_program(&a.program[0])?;
        let status = std::process::Command::new(&a.program[0])
            .args(&a.program[1..])
            .status()
            .with_context(|| format!("{}: cannot start", a.program[0].to_string_lossy()))?;
        return finished(launch::exit_code(status));
    }
    launch::find_program(&a.program[0])?;
    let mut reserved = None;
    let output = match &a.output {
        Some(name) => {
            let (path, warnings) = launch::output_archive(name, |k| std::env::var(k).ok());
            for w in warnings {
                ui.warn(&w);
            }
            refuse_existing(&path, a.force)?;
            if path.is_dir() {
                bail!("{}: is a folder", path.display());
            }
            path
        }
        None => reserved.insert(Reserved::new()?).path.clone(),
    };
    // A capture is new: a local cache would only hold it. With a shared cache, the nodes of
    // this process go there (through the local one), for whoever analyses the run.
    let engine = match a.cache_url.as_deref().filter(|u| !u.is_empty()) {
        Some(url) => Engine::tiered(Some(&default_cache_dir(None)), Some(url))?,
        None => Engine::new(None)?,
    };
    let nsys = crate::capture::nsys::find(&engine, a.nsys.as_deref())?;
    let work = crate::tmpfiles::ScratchDir::new("run")?;
    let stem = output
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".into());
    // The Python hook: what each Python process ran with, and the NVTX workaround.
    let hook = crate::capture::python_hook::write(work.path())?;
    let records = work.path().join("python-records");
    std::fs::create_dir_all(&records)
        .with_context(|| format!("{}: cannot create", records.display()))?;
    let mut hook_vars = vec![(
        crate::capture::python_hook::RUN_METADATA.to_string(),
        records.display().to_string(),
    )];
    if a.nvtx_workaround {
        hook_vars.push((
            crate::capture::python_hook::NVTX_WORKAROUND.to_string(),
            "1".to_string(),
        ));
    }
    let profiled = launch::profile(
        &nsys.path,
        &options,
        &a.program,
        work.path(),
        &stem,
        Some((&hook, hook_vars)),
    )?;
    let succeeded = launch::run_succeeded(profiled.exit_code, shutdown_signal);
    match (profiled.exit_code, succeeded) {
        (0, _) => {}
        (code, true) => ui.say(&format!(
            "nsys-jax-pipe: the program ended by {} after the capture ({}): a successful run",
            crate::interrupt::signal_name(code - 128),
            match options.capture_range_end() {
                Some((end, true)) => format!(
                    "Nsight Systems' default --capture-range-end={end} ends the program with its --kill signal"
                ),
                Some((end, false)) => format!("--capture-range-end={end}"),
                None => "--duration".to_string(),
            }
        )),
        (code, false) => ui.warn(&format!("the program exited with code {code}")),
    }
    let failed_code = if succeeded { 0 } else { profiled.exit_code };
    if !profiled.report.is_file() {
        if launch::importer_missing(&profiled.output) {
            ui.say(&format!(
                "nsys-jax-pipe: error: {}: this Nsight Systems has no importer (host-linux-x64/QdstrmImporter and its libraries), so nsys profile wrote only a .qdstrm capture, not a report; no archive written. Install a complete Nsight Systems, or add the importer with scripts/install-nsys.sh DIR",
                nsys.path.display()
            ));
        } else {
            ui.say(&format!(
                "nsys-jax-pipe: error: nsys profile wrote no report (exit code {}); no archive written",
                profiled.exit_code
            ));
        }
        return finished(if failed_code != 0 {
            failed_code
        } else {
            EXIT_INPUT
        });
    }
    if profiled.dump.is_none() {
        ui.warn(
            "the program wrote no XLA dump (did it replace XLA_FLAGS, or run no JAX code?); the archive has no HLO",
        );
    }
    let after = std::time::Instant::now();
    let metadata = crate::capture::provenance::record(crate::capture::provenance::Known {
        program: &a.program,
        environment: profiled.environment.clone(),
        started_unix_s: profiled.started_unix_s,
        nsys: &nsys.path,
        python_records: Some(&records),
    });
    let metadata_file = work.path().join("run-metadata.json");
    crate::tmpfiles::write_atomic(&metadata_file, &serde_json::to_vec_pretty(&metadata)?)?;
    let inputs = vec![graph::RunInput::Capture(crate::capture::CaptureInput {
        report: profiled.report.clone(),
        dump: profiled.dump.clone(),
        dump_note: String::new(),
        metadata: Some(metadata_file),
    })];
    let processed =
        graph::open_run(engine, &inputs, Some(nsys.path.clone())).and_then(|(db, run)| {
            let job = ArchiveJob {
                analyses: &a.analyses,
                output: &output,
                force: a.force || reserved.is_some(),
                nsys_output: Some(&profiled.output),
                html: a.html.as_deref(),
            };
            let w = write_archive(&db, run, &job, ui)?;
            Ok((db, w))
        });
    let (db, written) = match processed {
        Ok(x) => x,
        // The program's failure is the news; ours follows it.
        Err(e) if failed_code != 0 => {
            ui.say(&format!("nsys-jax-pipe: error: {}", one_line(&e)));
            return finished(failed_code);
        }
        Err(e) => return Err(e),
    };
    if let Some(r) = reserved.as_mut() {
        r.keep = true;
    }
    if let Some(l) = &a.label {
        super::labels::record(
            &default_cache_dir(None),
            db.ctx.engine.store().and_then(|s| s.remote()),
            l,
            std::slice::from_ref(&output),
            &[],
        )?;
    }
    let record = db.ctx.engine.finish();
    let after = after.elapsed();
    // A command is the last thing its process does (see `analyze`).
    std::mem::forget(db);
    Ok(Ran {
        exit_code: failed_code,
        archive: Some(RunArchive {
            output,
            written,
            record,
            profiled: profiled.wall,
            after,
        }),
    })
}
