//! Captures: an Nsight Systems report (`.nsys-rep`) and the XLA dump folder written beside
//! it, made into nsys-jax archive members by graph nodes (docs/design.md, "Captures"–"NVTX names"):
//!
//! - `nsys-export`: `nsys export` of the tables this project reads, keyed by the report's
//!   content and the nsys version (the only step that runs an external program; kept in
//!   memory only, as the members below are stored);
//! - `projection`: NVTX ranges projected onto the GPU → `nvtx_gpu_proj_trace/trace.parquet`
//!   (absent when the capture has no GPU activity, e.g. an NVTX-only capture);
//! - `pushpop`: CPU push/pop ranges → `report_nvtx_pushpop_trace.parquet`;
//! - `metadata`: thread, system and device metadata parquet files;
//! - `dump-xz`: one per dump file, its xz-compressed bytes (`dump/<file>.xz`);
//! - `sources`: the Python files named by the HLO stack frames that exist on this machine.
//!
//! Every node's key is computed from keys alone (the report's content key, the nsys version
//! key, the dump files' content keys), so a run whose results are stored never exports.
//!
//! The rest of the capture stage: [`launch`] (the `run` command: the program's environment and
//! nsys options), [`nsys`] (finding `nsys`), [`projection`] (NVTX ranges projected onto the GPU
//! from an export), [`import_check`] (nsys import diagnostics), and [`compat`] (`nsys-jax`
//! command lines).

pub mod derive;
pub mod early;
pub mod embedded;
pub mod import_check;
pub mod launch;
pub mod nsys;
pub mod projection;
pub mod provenance;
pub mod python_hook;

use crate::engine::{Engine, Key};
use crate::formats::archive::{self, Archive, TRACE};
use crate::formats::archive_writer::Entry;
use anyhow::{Result, bail};
use derive::{Producer, derive_all, file_label, producer};
pub use derive::{
    derived_member, derived_member_key, derived_table, dump_xz, empty_trace, export_key,
};
use early::EarlyExport;
use nsys::Nsys;
use std::path::{Path, PathBuf};

/// A report and the dump folder that goes with it.
#[derive(Clone, Debug)]
pub struct CaptureInput {
    pub report: PathBuf,
    pub dump: Option<PathBuf>,
    /// How the dump folder was chosen, for the run output.
    pub dump_note: String,
    /// The run's record (`formats::run_metadata`), when `run` made the capture.
    pub metadata: Option<PathBuf>,
}

/// Whether `path` names an Nsight Systems report.
pub fn is_report(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e == "nsys-rep" || e == "qdrep")
}

/// The dump folder of `report`: `flag` when given, else beside the report `dump_<stem>/`,
/// `<stem>_dump/`, else the only `dump*/` folder there. No dump is not an error (the
/// analyses then lack HLO details, which the note says).
pub fn find_dump(report: &Path, flag: Option<&Path>) -> Result<CaptureInput> {
    let input = |dump: Option<PathBuf>, note: String| CaptureInput {
        report: report.to_path_buf(),
        dump,
        dump_note: note,
        metadata: None,
    };
    if let Some(d) = flag {
        if !d.is_dir() {
            bail!("{}: XLA dump folder not found (--dump)", d.display());
        }
        return Ok(input(
            Some(d.to_path_buf()),
            format!("{}: XLA dump {} (--dump)", report.display(), d.display()),
        ));
    }
    let dir = report
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let stem = report
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    for name in [format!("dump_{stem}"), format!("{stem}_dump")] {
        let d = dir.join(&name);
        if d.is_dir() {
            return Ok(input(
                Some(d.clone()),
                format!(
                    "{}: XLA dump {} (beside the report)",
                    report.display(),
                    d.display()
                ),
            ));
        }
    }
    let mut dumps: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| {
                    e.file_name().to_string_lossy().starts_with("dump") && e.path().is_dir()
                })
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    dumps.sort();
    match dumps.len() {
        1 => {
            let d = dumps.pop().expect("one");
            Ok(input(
                Some(d.clone()),
                format!(
                    "{}: XLA dump {} (the only dump folder beside the report)",
                    report.display(),
                    d.display()
                ),
            ))
        }
        0 => Ok(input(
            None,
            format!(
                "{}: no XLA dump folder beside the report (dump_{stem}/ or {stem}_dump/); without it there are no HLO details (collective sizes, source lines): pass --dump DIR",
                report.display()
            ),
        )),
        _ => bail!(
            "{}: several dump folders beside the report ({}) and none named dump_{stem}/ or {stem}_dump/: pass --dump DIR",
            report.display(),
            dumps
                .iter()
                .map(|d| d
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The Python source files named by HLO stack frames: those to archive and those left out.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Sources {
    /// Absolute paths of readable files.
    pub files: Vec<PathBuf>,
    /// `(name, why)` for names that are not files here (`<string>`, `<frozen ...>`, missing,
    /// unreadable).
    pub skipped: Vec<(String, String)>,
}

/// Sort the file names of HLO stack frames into files to archive and names to skip.
pub fn classify_sources<'a>(names: impl IntoIterator<Item = &'a str>) -> Sources {
    let mut names: Vec<&str> = names.into_iter().collect();
    names.sort_unstable();
    names.dedup();
    let mut out = Sources::default();
    let mut seen = std::collections::BTreeSet::new();
    for name in names {
        let normal = normalise(Path::new(name));
        let path = normal.as_path();
        if name.starts_with('<') {
            out.skipped
                .push((name.to_string(), "not a file (generated code)".into()));
        } else if !path.is_absolute() {
            out.skipped
                .push((name.to_string(), "relative path, location unknown".into()));
        } else if path.extension().is_none_or(|e| e != "py") {
            // Stack frames name Python files; anything else is not copied off the machine.
            out.skipped
                .push((name.to_string(), "not a Python source (.py)".into()));
        } else if !seen.insert(normal.clone()) {
            continue;
        } else {
            match std::fs::File::open(path) {
                Ok(f) if f.metadata().is_ok_and(|m| m.is_file()) => {
                    out.files.push(path.to_path_buf())
                }
                Ok(_) => out.skipped.push((name.to_string(), "not a file".into())),
                Err(e) => out.skipped.push((name.to_string(), archive::io_reason(&e))),
            }
        }
    }
    out
}

/// `path` with `.` and `..` components resolved as text (`/a/b/../c.py` → `/a/c.py`), the
/// form in which a source file is archived.
fn normalise(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// Gives the file names of a capture's HLO stack frames (the graph decodes the dump for them).
pub type SourceNames<'a> = Box<dyn FnOnce() -> Result<Vec<String>> + Send + 'a>;

/// What goes into the archive of a capture, and what the run output should say about it.
pub struct ArchiveContents {
    pub entries: Vec<Entry>,
    pub notes: Vec<String>,
}

/// The members of the nsys-jax archive of a capture (docs/design.md, "Archive layout"): the
/// report, the derived parquet files, `dump/<file>.xz` for each of `dumps` (member, file,
/// content key), the project's `protos/` and `sources/<absolute path>` for the Python files
/// `source_names` gives (the file names of the HLO stack frames). The export (with what is
/// built from it, see [`derive_all`]), the dump compression and `source_names` run in
/// parallel, unless `serial` (required inside a graph query, which must not fan out to
/// rayon's threads). The export is taken from `early` when that is it.
pub fn archive_contents(
    engine: &Engine,
    nsys: &Nsys,
    archive: &Archive,
    dumps: Vec<(String, PathBuf, Key)>,
    source_names: SourceNames<'_>,
    serial: bool,
    early: Option<EarlyExport>,
) -> Result<ArchiveContents> {
    use rayon::prelude::*;
    if !archive.is_capture() {
        bail!("{}: not a capture", archive.path.display());
    }
    let report_key = engine.file_key(&archive.path)?;
    let derived = || -> Result<Vec<Entry>> {
        let all = derive_all(engine, nsys, &archive.path, &report_key, early)?;
        Ok(archive::DERIVED
            .iter()
            .filter_map(|m| {
                let producer = Producer::of(m)?;
                let (_, d) = all.iter().find(|(p, _)| *p == producer)?;
                d.files.get(m).map(|b| Entry::stored(*m, b.clone()))
            })
            .collect())
    };
    // The report is deflated while nsys exports it.
    let report = || -> Result<Entry> {
        let bytes = std::fs::read(&archive.path).map_err(|e| {
            anyhow::anyhow!("{}: {}", archive.path.display(), archive::io_reason(&e))
        })?;
        Entry::deflated(file_label(&archive.path), bytes).pack()
    };
    let compress = || -> Result<Vec<Entry>> {
        let one = |(m, file, key): &(String, PathBuf, Key)| {
            let xz = dump_xz(engine, file, key)?;
            Ok(Entry::stored(format!("{m}.xz"), xz.0.clone()))
        };
        if serial {
            dumps.iter().map(one).collect()
        } else {
            dumps.par_iter().map(one).collect()
        }
    };
    let sources = move || -> Result<(Sources, Vec<Entry>)> {
        let names = source_names()?;
        let s = classify_sources(names.iter().map(String::as_str));
        let mut entries = Vec::new();
        let mut unreadable = Vec::new();
        for f in &s.files {
            match std::fs::read(f) {
                Ok(b) => entries.push(Entry::deflated(
                    format!("sources/{}", f.to_string_lossy().trim_start_matches('/')),
                    b,
                )),
                Err(e) => unreadable.push((f.display().to_string(), archive::io_reason(&e))),
            }
        }
        let mut s = s;
        s.files
            .retain(|f| !unreadable.iter().any(|(u, _)| Path::new(u) == f));
        s.skipped.extend(unreadable);
        Ok((s, entries))
    };
    let (derived, ((report, dump), sources)) = if serial {
        (derived(), ((report(), compress()), sources()))
    } else {
        rayon::join(derived, || {
            rayon::join(|| rayon::join(report, compress), sources)
        })
    };
    let (derived, report, dump) = (derived?, report?, dump?);
    let mut notes = Vec::new();
    let name = file_label(&archive.path);
    // Sources are a convenience: a dump that cannot be decoded costs them, not the archive.
    let (sources, source_entries) = sources.unwrap_or_else(|e| {
        notes.push(format!(
            "{name}: no source files archived: {}",
            crate::error::one_line(&e)
        ));
        (Sources::default(), vec![])
    });

    if !derived.iter().any(|e| e.name == TRACE) {
        notes.push(format!(
            "{name}: no GPU activity in the report (an NVTX-only capture): no {TRACE}; compile-time analyses only"
        ));
    }
    if !sources.skipped.is_empty() {
        notes.push(format!(
            "{name}: {} named by the HLO stack frames not archived: {}",
            crate::table::count(sources.skipped.len(), "source file", "source files"),
            sources
                .skipped
                .iter()
                .map(|(n, why)| format!("{n} ({why})"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let mut entries = vec![report];
    if archive.has(crate::formats::run_metadata::MEMBER) {
        entries.push(Entry::deflated(
            crate::formats::run_metadata::MEMBER,
            archive.read(crate::formats::run_metadata::MEMBER)?,
        ));
    }
    entries.extend(derived);
    entries.extend(dump);
    for (path, bytes) in crate::formats::hlo::builtin_proto_sources() {
        entries.push(Entry::deflated(format!("protos/{path}"), bytes));
    }
    entries.extend(source_entries);
    Ok(ArchiveContents { entries, notes })
}

/// Open a capture as an archive (see [`Archive::open_capture`]).
pub fn open(input: &CaptureInput) -> Result<Archive> {
    Archive::open_capture(
        &input.report,
        input.dump.as_deref(),
        input.metadata.as_deref(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_dump_beside_a_report() {
        let tmp = tempfile::tempdir().unwrap();
        let rep = tmp.path().join("rank0.nsys-rep");
        std::fs::write(&rep, b"x").unwrap();
        let c = find_dump(&rep, None).unwrap();
        assert!(c.dump.is_none() && c.dump_note.contains("--dump"), "{c:?}");

        std::fs::create_dir(tmp.path().join("dump_rank1")).unwrap();
        let c = find_dump(&rep, None).unwrap();
        assert_eq!(c.dump.unwrap(), tmp.path().join("dump_rank1"));
        std::fs::create_dir(tmp.path().join("dump_rank2")).unwrap();
        let e = find_dump(&rep, None).unwrap_err().to_string();
        assert!(e.contains("several") && e.contains("dump_rank2"), "{e}");
        std::fs::create_dir(tmp.path().join("rank0_dump")).unwrap();
        assert_eq!(
            find_dump(&rep, None).unwrap().dump.unwrap(),
            tmp.path().join("rank0_dump")
        );
        std::fs::create_dir(tmp.path().join("dump_rank0")).unwrap();
        assert_eq!(
            find_dump(&rep, None).unwrap().dump.unwrap(),
            tmp.path().join("dump_rank0")
        );
        let e = find_dump(&rep, Some(&tmp.path().join("nope")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("nope") && e.contains("not found"), "{e}");
    }

    #[test]
    fn sorts_source_names() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("train.py");
        std::fs::write(&f, b"print(1)").unwrap();
        let fs = f.to_string_lossy().into_owned();
        let s = classify_sources([
            fs.as_str(),
            "<string>",
            "<frozen runpy>",
            "/no/such/file.py",
            "rel.py",
            fs.as_str(),
        ]);
        assert_eq!(s.files, vec![f.clone()]);
        let why: Vec<&str> = s.skipped.iter().map(|(_, w)| w.as_str()).collect();
        assert_eq!(s.skipped.len(), 4, "{s:?}");
        assert!(why.contains(&"no such file or folder"), "{why:?}");

        // A path through `..` names the same file, archived once under its plain path; files
        // that are not Python sources are never copied.
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        let secret = tmp.path().join("common-password");
        std::fs::write(&secret, b"x").unwrap();
        let dotted = format!("{}/sub/../train.py", tmp.path().display());
        let s = classify_sources([dotted.as_str(), fs.as_str(), secret.to_str().unwrap()]);
        assert_eq!(s.files, vec![f.clone()]);
        assert_eq!(s.skipped.len(), 1, "{s:?}");
        assert_eq!(s.skipped[0].1, "not a Python source (.py)");
    }
}
