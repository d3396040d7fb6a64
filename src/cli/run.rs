//! `run`: profile a program with Nsight Systems, then archive and analyse its capture.

use super::archive::write_archive;
use super::args::RunArgs;
use super::output::{finish, refuse_existing};
use crate::engine::{Engine, default_cache_dir};
use crate::error::{EXIT_INPUT, one_line};
use crate::graph;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

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
pub(super) fn run(a: RunArgs, plan: &[(String, Vec<String>)]) -> Result<i32> {
    use crate::capture::launch;
    let requests = if a.no_analysis {
        vec![]
    } else {
        a.analyses.requests(plan, !a.nsys_jax)?
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
    // A capture is new: a local cache would only hold it. With a shared cache, the nodes of
    // this process go there (through the local one), for whoever analyses the run.
    let engine = match a.cache_url.cache_url.as_deref().filter(|u| !u.is_empty()) {
        Some(url) => Engine::tiered(Some(&default_cache_dir(None)), Some(url))?,
        None => Engine::new(None)?,
    };
    let nsys = crate::capture::nsys::find(&engine, a.nsys.path.as_deref())?;
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
        if launch::importer_missing(&profiled.output) {
            eprintln!(
                "nsys-jax-pipe: error: {}: this Nsight Systems has no importer (host-linux-x64/QdstrmImporter and its libraries), so nsys profile wrote only a .qdstrm capture, not a report; no archive written. Install a complete Nsight Systems, or add the importer with scripts/install-nsys.sh DIR",
                nsys.path.display()
            );
        } else {
            eprintln!(
                "nsys-jax-pipe: error: nsys profile wrote no report (exit code {}); no archive written",
                profiled.exit_code
            );
        }
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
                a.html.html.as_deref(),
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
            db.ctx.engine.store().and_then(|s| s.remote()),
            l,
            std::slice::from_ref(&output),
            &[],
        )?;
    }
    let record = db.ctx.engine.finish();
    let after = after.elapsed();
    finish(
        &written.texts,
        a.quiet.quiet,
        a.explain.explain,
        &record,
        written.import.as_slice(),
        &format!(
            "wrote {} ({}) · profiled run {:.1} s · after it {:.2} s (archive {:.2} s, analyses {:.2} s){}",
            output.display(),
            crate::table::count(written.members, "member", "members"),
            profiled.wall.as_secs_f64(),
            after.as_secs_f64(),
            written.contents.as_secs_f64(),
            written.analyses.as_secs_f64(),
            written.shared_note(),
        ),
    )?;
    std::mem::forget(db);
    Ok(failed_code)
}
