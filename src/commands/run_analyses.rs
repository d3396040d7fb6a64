//! Opening the inputs of a run and running the requested analyses on it, for `analyze`,
//! `archive`, `combine` and `run`.

use super::pipeline::AnalysisRequest;
use super::ui::say_dump_notes;
use super::{CaptureOptions, Ui};
use crate::engine::kinds::kind;
use crate::engine::{Engine, Key, KeyBuilder};
use crate::graph::{self, AnalysisSpec, ScriptSpec};
use anyhow::{Result, bail};
use bytes::Bytes;
use std::path::{Path, PathBuf};

kind!(
    /// The content key of an output file that is part of a stored value (a key).
    OUTPUT_FILE = "output-file"
);

/// Open the inputs of a run, saying which dump folder each report uses.
pub fn open_inputs(
    engine: Engine,
    paths: &[PathBuf],
    capture: &CaptureOptions,
    ui: &dyn Ui,
) -> Result<(graph::Db, graph::Run)> {
    let inputs = graph::classify_inputs(paths, &capture.dumps)?;
    say_dump_notes(&inputs, ui);
    let (db, run) = graph::open_run(engine, &inputs, capture.nsys.clone())?;
    for problem in graph::members::member_problems(&db, run) {
        ui.warn(&problem);
    }
    Ok((db, run))
}

/// What the analyses of a run produced: files (relative to the output folder), where each
/// goes in an archive (`analysis/<analysis>/...`) and, per analysis, its terminal text.
pub struct AnalysisResults {
    pub files: Vec<OutputFile>,
    pub in_archive: Vec<PathBuf>,
    pub texts: Vec<(String, String)>,
    /// The built-in analyses' outputs, in order (what the HTML report shows).
    pub outputs: Vec<graph::Out<crate::analyses::AnalysisOutput>>,
}

/// Run the requested analyses on a run. Per-process work runs in parallel up front, unless
/// every analysis is already stored. Nothing is written here.
pub fn run_analyses(
    db: &graph::Db,
    run: graph::Run,
    requests: &[AnalysisRequest],
    ui: &dyn Ui,
) -> Result<AnalysisResults> {
    graph::prepare_archives(db, run)?;
    let specs: Vec<Option<AnalysisSpec>> = requests
        .iter()
        .map(|r| (!r.is_script()).then(|| AnalysisSpec::new(db, r.name.clone(), r.params.clone())))
        .collect();
    let registered: Vec<AnalysisSpec> = specs.iter().flatten().copied().collect();
    let mut all_stored = registered.is_empty() || graph::frames_keyed_cheaply(db, run)?;
    for &spec in &registered {
        all_stored = all_stored && graph::analysis_is_stored(db, run, spec)?;
    }
    if !all_stored {
        let n = run.processes(db).len() as u64;
        let bar = ui.step("loading profiles", Some(n));
        let needs = graph::Needs::of(
            requests
                .iter()
                .map(|r| (r.name.as_str(), r.params.as_str())),
        )?;
        graph::prepare_processes(db, run, &needs, &|| bar.advance())?;
    }
    let mut files: Vec<OutputFile> = Vec::new();
    let mut in_archive: Vec<PathBuf> = Vec::new();
    let mut texts: Vec<(String, String)> = Vec::new();
    let mut outputs = Vec::new();
    for (req, spec) in requests.iter().zip(specs) {
        if req.is_script() {
            let path = PathBuf::from(&req.name);
            if !path.is_file() {
                bail!("{}: analysis script not found", path.display());
            }
            let key = db.ctx.engine.file_key(&path)?;
            let spec = ScriptSpec::new(db, path.clone(), req.args.clone(), key);
            let out = graph::script_analysis(db, run, spec).map_err(anyhow::Error::from)?;
            let name = crate::analyses::external::script_name(&path);
            for (i, (rel, _)) in out.value.files.iter().enumerate() {
                let rel = Path::new("analysis").join(&name).join(rel);
                in_archive.push(rel.clone());
                let script = FileOf(out.value.clone(), i, |o, i| o.files[i].1.as_slice());
                files.push(OutputFile::of_value(
                    rel,
                    Bytes::from_owner(script),
                    out.key,
                ));
            }
            texts.push((name, out.value.stdout.clone()));
        } else if let Some(spec) = spec {
            let out = graph::analysis(db, run, spec).map_err(anyhow::Error::from)?;
            for (name, content) in &out.value.files {
                in_archive.push(Path::new("analysis").join(&req.name).join(name));
                files.push(OutputFile::of_value(name.into(), content.bytes(), out.key));
            }
            let text = (req.name.clone(), out.value.text.clone());
            // An analysis that sums the others up (`Analysis::LEADS`) goes first.
            if crate::analyses::find(&req.name).is_some_and(|a| a.leads()) {
                texts.insert(0, text);
                outputs.insert(0, out);
            } else {
                texts.push(text);
                outputs.push(out);
            }
        }
    }
    // The headline (step time, MFU, the top finding and its fix) leads the texts.
    let headline = graph::headline(db, &outputs)?.value;
    if !headline.is_empty() {
        texts.insert(0, ("headline".into(), headline.terminal()));
    }
    Ok(AnalysisResults {
        files,
        in_archive,
        texts,
        outputs,
    })
}

/// One output file: where it goes (relative to the output folder), its bytes, and a content
/// key for them.
pub struct OutputFile {
    pub rel: PathBuf,
    /// Shared with the stored value they come from, not copied.
    pub bytes: Bytes,
    /// The file's content key: that of the value it is part of with its name, when it is part
    /// of one (known without hashing megabytes), else the bytes' hash.
    pub key: Key,
}

impl OutputFile {
    /// A file of the stored value whose key is `value`.
    pub fn of_value(rel: PathBuf, bytes: Bytes, value: Key) -> OutputFile {
        let key = KeyBuilder::of(&OUTPUT_FILE)
            .input(&value)
            .param("file", rel.to_string_lossy().as_ref())
            .finish();
        OutputFile { rel, bytes, key }
    }

    /// A file made here.
    pub fn of_bytes(rel: PathBuf, bytes: Vec<u8>) -> OutputFile {
        let key = Key::of_bytes(&bytes);
        OutputFile {
            rel,
            bytes: bytes.into(),
            key,
        }
    }
}

/// File `.1` of the value `.0`, as `.2` finds it: the bytes of an output file, kept alive by
/// the value that holds them.
struct FileOf<T>(std::sync::Arc<T>, usize, fn(&T, usize) -> &[u8]);

impl<T> AsRef<[u8]> for FileOf<T> {
    fn as_ref(&self) -> &[u8] {
        (self.2)(&self.0, self.1)
    }
}

/// The summary's "no module executions" line says why when the import was incomplete.
pub fn mark_import_problems(
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
pub fn analysis_entries(results: &AnalysisResults) -> Vec<crate::formats::archive_writer::Entry> {
    results
        .files
        .iter()
        .zip(&results.in_archive)
        .map(|(f, rel)| {
            crate::formats::archive_writer::Entry::deflated(
                rel.to_string_lossy().replace('\\', "/"),
                f.bytes.to_vec(),
            )
        })
        .collect()
}

/// The archive member holding the HTML report of the analyses stored in an archive.
pub const REPORT_MEMBER: &str = "report.html";

/// The HTML report of `run` with the analyses' `results` (see [`crate::graph::report`]).
pub fn html_report(
    db: &graph::Db,
    run: graph::Run,
    results: &AnalysisResults,
) -> Result<std::sync::Arc<crate::engine::value::Bytes>> {
    let mut names: Vec<String> = Vec::new();
    for p in run.processes(db) {
        let path = &p.archive_ref(db).path;
        let name = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let shown = if names.len() > 3 {
        format!("{} and {} more", names[..3].join(", "), names.len() - 3)
    } else {
        names.join(", ")
    };
    let title = format!("nsys-jax-pipe: {shown}");
    Ok(graph::html_report(db, run, &title, &results.outputs)?.value)
}
