//! The inputs of the graph: the archives (and captures) a command opens, their processes,
//! and the runs they make up — salsa inputs, registered when the command opens its inputs.

use crate::capture::{self, CaptureInput};
use crate::engine::kinds::kind;
use crate::engine::{Engine, Key, KeyBuilder};
use crate::formats::archive::Archive;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Db, GraphContext};

kind!(
    /// The key of a capture input (a report with its dump), or of an archive folder.
    CAPTURE = "capture"
);

kind!(FOLDER = "folder");

/// One input archive (file or folder) and its content key.
#[salsa::input(debug)]
pub struct InputArchive {
    #[returns(copy)]
    pub index: usize,
    #[returns(copy)]
    pub file_key: Key,
}

/// One profiled process of the run: an archive and, for combined archives, the stem that
/// names this process's copies of differing files.
#[salsa::input(debug)]
pub struct Process {
    #[returns(copy)]
    pub archive: InputArchive,
    #[returns(ref)]
    pub stem: Option<String>,
    /// Position in the run; used only as the device of last resort.
    #[returns(copy)]
    pub position: u32,
}

/// One analysis to run, with its canonical parameters (JSON).
#[salsa::input(debug)]
pub struct AnalysisSpec {
    #[returns(ref)]
    pub name: String,
    #[returns(ref)]
    pub params: String,
}

/// The processes of one run.
#[salsa::input(debug)]
pub struct Run {
    #[returns(ref)]
    pub processes: Vec<Process>,
}

impl Process {
    pub fn archive_ref(self, db: &Db) -> Arc<Archive> {
        db.ctx.archive(self.archive(db).index(db))
    }

    /// A human label: the archive file name and stem.
    pub fn label(self, db: &Db) -> String {
        let a = self.archive_ref(db);
        let file = a
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        match self.stem(db) {
            Some(s) => format!("{file}:{s}"),
            None => file,
        }
    }

    pub(super) fn resolve(self, db: &Db, path: &str) -> Option<String> {
        self.archive_ref(db).resolve(path, self.stem(db).as_deref())
    }
}

/// One input of a run: an nsys-jax archive (zip or folder) or a capture.
#[derive(Clone, Debug)]
pub enum RunInput {
    Archive(PathBuf),
    Capture(CaptureInput),
}

impl RunInput {
    pub fn path(&self) -> &Path {
        match self {
            RunInput::Archive(p) => p,
            RunInput::Capture(c) => &c.report,
        }
    }
}

/// Sort command-line inputs into archives and captures; `dumps` are the `--dump` folders,
/// matched in order with the reports.
pub fn classify_inputs(paths: &[PathBuf], dumps: &[PathBuf]) -> Result<Vec<RunInput>> {
    input_paths_exist(paths)?;
    let reports = paths.iter().filter(|p| capture::is_report(p)).count();
    if !dumps.is_empty() && dumps.len() != reports {
        anyhow::bail!(
            "{} for {}: give one --dump per report, in the same order, or none",
            crate::table::count(dumps.len(), "--dump folder", "--dump folders"),
            crate::table::count(reports, "report", "reports")
        );
    }
    let mut dumps = dumps.iter();
    paths
        .iter()
        .map(|p| {
            Ok(if capture::is_report(p) {
                RunInput::Capture(capture::find_dump(p, dumps.next().map(PathBuf::as_path))?)
            } else {
                RunInput::Archive(p.clone())
            })
        })
        .collect()
}

/// Open the inputs of one run and register them with a new database.
pub fn open_run(
    engine: Engine,
    inputs: &[RunInput],
    nsys_flag: Option<PathBuf>,
) -> Result<(Db, Run)> {
    let (db, mut runs) = open_runs(engine, &[inputs.to_vec()], nsys_flag)?;
    Ok((db, runs.remove(0)))
}

/// Open the inputs of several runs (e.g. the two sides of a comparison) and register them
/// with one database, so that they share every node.
pub fn open_runs(
    engine: Engine,
    runs: &[Vec<RunInput>],
    nsys_flag: Option<PathBuf>,
) -> Result<(Db, Vec<Run>)> {
    use rayon::prelude::*;
    let inputs: Vec<&RunInput> = runs.iter().flatten().collect();
    let files: Vec<&Path> = inputs.iter().map(|i| i.path()).collect();
    engine.claim_file_keys(&files);
    // Opened and keyed in parallel (each reads its central directory; the content key of an
    // input not seen before is the hash of the whole file); the first failure in input order
    // is the one said.
    let (archives, file_keys): (Vec<Arc<Archive>>, Vec<Key>) = inputs
        .par_iter()
        .map(|i| {
            let mut a = open_input(i)?;
            // An archive that holds its report but none of the members this project derives
            // from reports (nsys-jax's) gets them from the report, where an nsys can export it.
            if !a.missing_from_report().is_empty()
                && capture::nsys::find(&engine, nsys_flag.as_deref()).is_ok()
            {
                a.derive_from_report();
            }
            let key = input_key(&engine, &a)?;
            Ok((Arc::new(a), key))
        })
        .collect::<Vec<Result<_>>>()
        .into_iter()
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    let stems: Vec<Vec<Option<String>>> = archives
        .iter()
        .map(|a| a.process_stems())
        .collect::<Result<_>>()?;
    let db = Db::new(GraphContext::new(engine, archives, nsys_flag));
    let mut out = Vec::new();
    let mut stems = stems.into_iter().enumerate();
    for run in runs {
        // Positions count within each run: a run's nodes are those of the same inputs
        // analysed alone.
        let mut processes = Vec::new();
        for (i, stems) in stems.by_ref().take(run.len()) {
            let a = InputArchive::new(&db, i, file_keys[i]);
            for s in stems {
                let pos = processes.len() as u32;
                processes.push(Process::new(&db, a, s, pos));
            }
        }
        out.push(Run::new(&db, processes));
    }
    Ok((db, out))
}

fn open_input(input: &RunInput) -> Result<Archive> {
    match input {
        RunInput::Archive(p) => Archive::open(p),
        RunInput::Capture(c) => capture::open(c),
    }
}

/// The content key of an opened input: a zip's, or that of a folder's or capture's files,
/// keyed one by one (a capture's derived members follow from its report).
fn input_key(engine: &Engine, a: &Archive) -> Result<Key> {
    if a.is_zip() {
        return engine.file_key_read(&a.path, || {
            crate::formats::archive::content_keys::read_content_key(&a)
        });
    }
    let mut kb = KeyBuilder::of(if a.is_capture() { &CAPTURE } else { &FOLDER });
    for m in a.members() {
        if let Some(file) = a.member_file(m) {
            kb = kb.param(m, engine.file_key(&file)?.0);
        }
    }
    Ok(kb.finish())
}

/// Open one more input and register it with a database that is already in use (a new
/// revision of its inputs follows): the input and the stems of its processes.
pub fn add_input(db: &Db, input: &RunInput) -> Result<(InputArchive, Vec<Option<String>>)> {
    db.engine().claim_file_keys(&[input.path()]);
    let archive = open_input(input)?;
    let key = input_key(db.engine(), &archive)?;
    let stems = archive.process_stems()?;
    let index = db.ctx.push_archive(Arc::new(archive));
    Ok((InputArchive::new(db, index, key), stems))
}

pub fn input_paths_exist(paths: &[PathBuf]) -> Result<()> {
    for p in paths {
        if !Path::new(p).exists() {
            anyhow::bail!("{}: no such file or folder", p.display());
        }
    }
    Ok(())
}

/// An external analysis script and its extra arguments.
#[salsa::input(debug)]
pub struct ScriptSpec {
    #[returns(ref)]
    pub path: PathBuf,
    #[returns(ref)]
    pub args: Vec<String>,
    #[returns(copy)]
    pub script_key: Key,
}
