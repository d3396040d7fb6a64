//! `combine`: one archive from the per-process inputs of a run.

use super::analysis::{analysis_entries, open_inputs, run_analyses};
use super::args::CombineArgs;
use super::output::{finish, graph_work, refuse_existing, spinner};
use crate::graph;
use anyhow::{Result, bail};
use std::path::{Path, PathBuf};

/// `combine`: one archive from the per-process inputs of a run (see [`crate::combine`]).
pub(super) fn combine(a: CombineArgs, plan: &[(String, Vec<String>)]) -> Result<()> {
    let output = if a.output.extension().is_some_and(|e| e == "zip") {
        a.output.clone()
    } else {
        let mut o = a.output.clone().into_os_string();
        o.push(".zip");
        PathBuf::from(o)
    };
    refuse_existing(&output, a.force)?;
    let requests = a.analyses.requests(plan, false)?;
    let engine = a.cache.engine()?;
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
    entries.extend(super::archive::report_entry(
        &db,
        run,
        &results,
        a.html.html.as_deref(),
    )?);
    let members = entries.len();
    // An existing output (with -f) that is, unchanged, what this would write stays as it is.
    let key = crate::formats::archive_writer::archive_key(&entries);
    let unchanged = db.ctx.engine.output_is(&output, key);
    if !unchanged {
        crate::formats::archive_writer::write_zip(entries, &output, a.force)?;
        db.ctx.engine.record_output(&output, key)?;
    }
    let record = db.ctx.engine.finish();
    finish(
        &results.texts,
        a.quiet.quiet,
        a.explain.explain,
        &record,
        &[],
        &format!(
            "{} {} ({} from {}; {})",
            if unchanged { "unchanged:" } else { "wrote" },
            output.display(),
            crate::table::count(members, "member", "members"),
            crate::table::count(a.inputs.len(), "input", "inputs"),
            graph_work(&record)
        ),
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
            let contents = crate::graph::capture::archive_contents(db, *p, false)?;
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
