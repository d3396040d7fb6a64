//! Captures that Nsight Systems could not fully import.
//!
//! Nsight Systems turns the raw capture into a report once the program has ended. When the
//! capture holds CUDA calls it does not know (a CUDA newer than the Nsight Systems: CUDA 13
//! with Nsight Systems 2023.4 makes such calls while JAX starts and compiles), the import
//! stops processing that stream of events: nsys prints "Importer error status: Importation
//! succeeded with non-fatal errors", the report is written, and the GPU work after the
//! failing call is missing from it. The analyses then find few or no module executions,
//! which reads like a program that did nothing on the GPU.
//!
//! Where this is learnt:
//! - `run` reads nsys's own output (what it prints after the import);
//! - a report records the importer's diagnostics as events, which only `nsys export --type
//!   json` gives out. That export is as slow as the report is large, so it is read only for
//!   a capture in which no XLA module execution has GPU work (the visible symptom); its
//!   result is stored like any node;
//! - an archive written by `run` or `archive` carries what was found as [`MEMBER`], which
//!   `analyze`, `compare` and `combine` repeat.
//!
//! Not every message means lost events: the daemon's notice that "Sampling and/or context
//! switch data cannot be collected due to not enough system resources" (and others on CPU
//! sampling, counters, backtraces) comes with "Importation succeeded with non-fatal errors"
//! while the GPU work is whole. Such notices, and the importer's summary lines when every
//! specific message is one, are said once as a note and kept in the member; only the rest
//! warn ([`classify`]).

use crate::capture::nsys::Nsys;
use crate::engine::kinds::kind;
use crate::engine::value::Bytes;
use crate::engine::{Engine, Key, KeyBuilder, node_kind};
use crate::formats::archive::Archive;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::io::BufRead;
use std::path::Path;

kind!(
    /// The import errors a report records.
    IMPORT_DIAGNOSTICS = "import-diagnostics"
);

/// The import errors a report records (JSON list of strings), read by this nsys.
pub struct ImportDiagnosticsNode {
    pub report: Key,
    pub nsys_version: Key,
}
node_kind!(ImportDiagnosticsNode, IMPORT_DIAGNOSTICS, Stored, Bytes);
impl ImportDiagnosticsNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.param("nsys-version", self.nsys_version.0)
            .input(&self.report)
    }
}

/// The archive member recording an incomplete import (absent when none was found).
pub const MEMBER: &str = "import-diagnostics.json";

/// What is known of one capture's import.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportDiagnostics {
    /// The report's file name.
    pub report: String,
    /// Where the errors were read: "nsys output" or "report".
    pub source: String,
    /// The importer's errors that mean events were lost, one line each (empty: none found).
    pub errors: Vec<String>,
    /// Its notices that some optional data was not collected (CPU sampling, context
    /// switches, counters): said once, never a warning.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<String>,
}

/// Words of the importer's messages that say optional data was not collected, not that
/// events were lost: the daemon's "Sampling and/or context switch data cannot be collected
/// due to not enough system resources", CPU counters, backtraces, OS runtime tracing.
const NOTICE_WORDS: &[&str] = &[
    "sampling",
    "context switch",
    "not enough system resources",
    "cpu counter",
    "perf_event",
    "paranoid",
    "backtrace",
    "cpu frequency",
];

/// The importer's own summary lines, which say errors happened but not which.
const GENERIC: &[&str] = &[
    "importer status:",
    "errors occurred while processing the raw events",
];

/// Whether an importer message is a notice (see [`NOTICE_WORDS`]).
pub fn is_notice(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    NOTICE_WORDS.iter().any(|w| m.contains(w))
}

/// `messages` split into errors that mean events were lost and notices. The importer's
/// summary lines follow the messages they sum up: notices when every specific message is a
/// notice, errors otherwise (alone, they are errors: nothing says what was lost).
pub fn classify(messages: Vec<String>) -> (Vec<String>, Vec<String>) {
    let generic = |m: &str| {
        let l = m.to_ascii_lowercase();
        GENERIC.iter().any(|g| l.starts_with(g))
    };
    let specific: Vec<&String> = messages.iter().filter(|m| !generic(m)).collect();
    let only_notices = !specific.is_empty() && specific.iter().all(|m| is_notice(m));
    messages
        .into_iter()
        .partition(|m| !(is_notice(m) || (only_notices && generic(m))))
}

impl ImportDiagnostics {
    /// What `messages` of `report`, read from `source`, say (see [`classify`]).
    pub fn of(report: String, source: &str, messages: Vec<String>) -> ImportDiagnostics {
        let (errors, notices) = classify(messages);
        ImportDiagnostics {
            report,
            source: source.to_string(),
            errors,
            notices,
        }
    }

    /// The notices, as one note (None without any).
    pub fn note(&self) -> Option<String> {
        (!self.notices.is_empty()).then(|| {
            format!(
                "{}: Nsight Systems noted: {} (optional data not collected; the GPU work was \
                 imported)",
                self.report,
                self.notices.join("; ")
            )
        })
    }

    pub fn is_incomplete(&self) -> bool {
        !self.errors.is_empty()
    }

    /// The warning, with the cause and the remedy (several lines).
    pub fn warning(&self) -> String {
        format!(
            "{}: Nsight Systems could not fully import this capture ({}: {}). GPU work after \
             the failing call is missing from the report, so the analyses find too few module \
             executions, or none. Likely cause: the CUDA driver is newer than this Nsight \
             Systems knows (CUDA 13 with Nsight Systems 2023.4 makes such calls while JAX \
             starts and while XLA autotunes). Remedy: start the capture after compilation \
             (--capture-range=cudaProfilerApi and cudaProfilerStart() after the first steps), \
             compile without autotuning (XLA_FLAGS=--xla_gpu_autotune_level=0) when \
             compilation must be in the capture, or profile with a newer Nsight Systems.",
            self.report,
            self.source,
            self.errors.join("; ")
        )
    }

    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("serialisable")
    }

    /// A stored record, its messages classified again (a record written before notices were
    /// told apart holds them among its errors).
    pub fn from_json(bytes: &[u8], what: &str) -> Result<ImportDiagnostics> {
        let d: ImportDiagnostics =
            serde_json::from_slice(bytes).with_context(|| format!("{what}: not valid {MEMBER}"))?;
        let mut all = d.errors;
        all.extend(d.notices);
        Ok(ImportDiagnostics::of(d.report, &d.source, all))
    }
}

/// The import errors in what `nsys profile` printed (both streams, in any order).
pub fn from_nsys_output(text: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let mut push = |e: String| {
        if !errors.contains(&e) {
            errors.push(e);
        }
    };
    for line in text.split(['\n', '\r']).map(str::trim) {
        if let Some(status) = line.strip_prefix("Importer error status:") {
            let status = status.trim().trim_end_matches('.');
            if !status.eq_ignore_ascii_case("Importation succeeded") {
                push(format!("importer status: {status}"));
            }
        } else if let Some(s) = line.strip_prefix("Status:")
            && s.trim() == "TargetProfilingFailed"
        {
            push("analysis failed: TargetProfilingFailed".into());
        } else if line.contains("Errors occurred while processing the raw events") {
            push("errors occurred while processing the raw events".into());
        }
        if let Some(m) = tagged_message(line) {
            push(m);
        }
    }
    errors
}

/// The message of a Nsight Systems exception (`[QuadDCommon::tag_message*] = MESSAGE`).
fn tagged_message(text: &str) -> Option<String> {
    let (_, m) = text.split_once("tag_message*] = ")?;
    let m = m.split(['\n', '"', '\\']).next()?.trim();
    (!m.is_empty()).then(|| m.to_string())
}

/// The import errors among the diagnostic events of `nsys export --type json` (one JSON
/// object per line): the analysis' "Error when processing events" and every error-level
/// event. Other lines are skipped unparsed.
pub fn from_json_export(reader: impl BufRead) -> Result<Vec<String>> {
    let mut errors = Vec::new();
    for line in reader.lines() {
        let line = line.context("reading nsys's JSON export")?;
        if !line.contains("\"DiagnosticEvent\"") {
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_str(&line).context("a diagnostic event of nsys's JSON export")?;
        let e = &v["DiagnosticEvent"];
        let text = e["Text"].as_str().unwrap_or_default();
        let failed = text.starts_with("Error when processing events");
        if !(failed || e["Level"] == "Error" || e["Level"] == "Fatal") {
            continue;
        }
        let one = tagged_message(text).unwrap_or_else(|| {
            text.lines()
                .next()
                .unwrap_or_default()
                .trim_end_matches(':')
                .to_string()
        });
        let one = format!("{}: {one}", e["Source"].as_str().unwrap_or("nsys"));
        if !errors.contains(&one) {
            errors.push(one);
        }
    }
    Ok(errors)
}

/// The import errors a report records (a stored node: `nsys export --type json`, read line
/// by line and not kept).
pub fn from_report(
    engine: &Engine,
    nsys: &Nsys,
    report: &Path,
    report_key: &Key,
) -> Result<Vec<String>> {
    let node = ImportDiagnosticsNode {
        report: *report_key,
        nsys_version: nsys.version_key,
    };
    let label = report
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (_, stored) = engine.compute(&node, &label, || {
        let tmp = tempfile::Builder::new()
            .prefix("nsys-jax-pipe-diagnostics-")
            .tempdir()
            .context("cannot create a temporary folder for nsys export")?;
        let _cleanup = crate::interrupt::remove_on_interrupt(tmp.path());
        let out = tmp.path().join("events.json");
        let child = crate::interrupt::spawn(
            std::process::Command::new(&nsys.path)
                .args([
                    "export",
                    "--type",
                    "json",
                    "--force-overwrite",
                    "true",
                    "--quiet",
                    "true",
                ])
                .arg("--output")
                .arg(&out)
                .arg(report)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped()),
        )
        .with_context(|| format!("cannot run {}", nsys.path.display()))?;
        let done = {
            let _stop = crate::interrupt::stop_on_interrupt(child.id());
            child.wait_with_output()?
        };
        if !done.status.success() {
            anyhow::bail!(
                "nsys export --type json of {} failed ({}): {}",
                report.display(),
                done.status,
                String::from_utf8_lossy(&done.stderr).trim()
            );
        }
        let f = std::fs::File::open(&out)
            .with_context(|| format!("nsys export wrote no {}", out.display()))?;
        let errors = from_json_export(std::io::BufReader::new(f))?;
        Ok(Bytes(serde_json::to_vec(&errors)?))
    })?;
    Ok(serde_json::from_slice(&stored.0)?)
}

/// Whether any XLA module execution of the capture (a top-level `XlaModule` range of a
/// program) has GPU work projected onto it (false without GPU activity at all).
fn has_module_gpu_work(
    engine: &Engine,
    nsys: &Nsys,
    report: &Path,
    report_key: &Key,
) -> Result<bool> {
    use crate::formats::trace;
    use arrow::array::{Array, ArrayRef, AsArray};
    use arrow::datatypes::DataType;
    let bytes = crate::capture::derived_member(
        engine,
        nsys,
        report,
        report_key,
        crate::formats::archive::TRACE,
    )?;
    let Some(bytes) = bytes else {
        return Ok(false);
    };
    // The capture's trace is written by this project in the classic layout: only the three
    // columns needed are read.
    let t = crate::formats::read_parquet_columns(
        bytes,
        &[trace::NAME, trace::NUM_GPU_OPS, trace::LVL],
    )?;
    let column = |name: &str, to: &DataType| -> Result<ArrayRef> {
        let c = t
            .column_by_name(name)
            .with_context(|| format!("trace without {name}"))?;
        Ok(arrow::compute::cast(c, to)?)
    };
    let names = column(trace::NAME, &DataType::Utf8)?;
    let names = names.as_string::<i32>();
    let ops = column(trace::NUM_GPU_OPS, &DataType::Int64)?;
    let ops = ops.as_primitive::<arrow::datatypes::Int64Type>();
    let levels = column(trace::LVL, &DataType::Int64)?;
    let levels = levels.as_primitive::<arrow::datatypes::Int64Type>();
    // The autotuner's executions during compilation are nested in other ranges, or name a
    // module without a program id.
    Ok((0..t.num_rows()).any(|i| {
        let name = names.value(i);
        let name = name.strip_prefix("TSL:").unwrap_or(name);
        name.starts_with("XlaModule:#")
            && name.contains("program_id=")
            && levels.is_valid(i)
            && levels.value(i) == 0
            && ops.is_valid(i)
            && ops.value(i) > 0
    }))
}

/// The import errors of a report in which no XLA module execution has GPU work (None when
/// some has).
pub fn of_report(
    engine: &Engine,
    nsys: &Nsys,
    report: &Path,
    report_key: &Key,
) -> Result<Option<Vec<String>>> {
    if has_module_gpu_work(engine, nsys, report, report_key)? {
        return Ok(None);
    }
    Ok(Some(from_report(engine, nsys, report, report_key)?))
}

/// The report member of an archive whose members derived from reports are derived from it
/// ([`Archive::derive_from_report`]), with its content key.
fn embedded_report_key(engine: &Engine, archive: &Archive) -> Result<Option<(String, Key)>> {
    let Some(report) = archive.embedded_report() else {
        return Ok(None);
    };
    if !crate::formats::archive::FROM_REPORT
        .iter()
        .any(|m| archive.is_from_report(m))
    {
        return Ok(None);
    }
    let key = crate::formats::archive::content_keys::member_key(engine, archive, report)?;
    Ok(Some((report.to_string(), key)))
}

/// What is known of an incomplete import of each of `processes` (archive, stem): the
/// [`MEMBER`] of an archive, or, for a report in which no XLA module execution has GPU work,
/// what the report records. Processes found complete are left out, and so are repeats.
pub fn of_processes(
    engine: &Engine,
    nsys: &dyn Fn() -> Result<Nsys>,
    processes: &[(std::sync::Arc<Archive>, Option<String>)],
) -> Result<Vec<ImportDiagnostics>> {
    let mut out: Vec<ImportDiagnostics> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (archive, stem) in processes {
        if !seen.insert((archive.path.clone(), stem.clone())) {
            continue;
        }
        let found = if archive.is_capture() {
            let nsys = nsys()?;
            let key = engine.file_key(&archive.path)?;
            of_report(engine, &nsys, &archive.path, &key)?.map(|errors| {
                ImportDiagnostics::of(
                    archive
                        .path
                        .file_name()
                        .map(|f| f.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    "report",
                    errors,
                )
            })
        } else if let Some(m) = archive.resolve(MEMBER, stem.as_deref()) {
            let what = format!("{}: {m}", archive.path.display());
            Some(ImportDiagnostics::from_json(&archive.read(&m)?, &what)?)
        } else if let Some((report, key)) = embedded_report_key(engine, archive)? {
            // An archive with its report but none of this project's members (nsys-jax's):
            // the report says, as a capture's does.
            let nsys = nsys()?;
            let trace = super::producer(
                crate::formats::archive::TRACE,
                &super::export_key(&key, &nsys),
            )
            .expect("the trace is derived");
            let diagnostics = ImportDiagnosticsNode {
                report: key,
                nsys_version: nsys.version_key,
            };
            let stored = engine.is_stored(&trace) && engine.is_stored(&diagnostics);
            let errors = super::embedded::with_report(archive, &report, stored, |path| {
                of_report(engine, &nsys, path, &key)
            });
            match errors {
                Ok(errors) => errors.map(|errors| ImportDiagnostics::of(report, "report", errors)),
                // A damaged report costs what it would tell (the frames say what is lost);
                // the analyses go on.
                Err(e) => {
                    tracing::warn!(
                        "{}: the report inside ({report}) could not be read ({}): whether Nsight Systems imported the capture whole is not known",
                        archive.path.display(),
                        crate::error::one_line(&e)
                    );
                    None
                }
            }
        } else {
            None
        };
        out.extend(found.filter(ImportDiagnostics::is_incomplete));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Nsight Systems 2023.4 printed after a whole-program capture of a JAX program on
    /// CUDA 13 (abridged: the exception's source location is shortened).
    const NSYS_OUTPUT: &str = "Generated:\n    /opt/njp/whole.nsys-rep\nImporter error status: Importation succeeded with non-fatal errors.\n**** Analysis failed with:\nStatus: TargetProfilingFailed\nProps {\n  Items {\n    Type: DeviceId\n    Value: \"Local (CLI)\"\n  }\n}\nError {\n  Type: RuntimeError\n  SubError {\n    Type: ProcessEventsError\n    Props {\n      Items {\n        Type: ErrorText\n        Value: \"TraceProcessEvent.cpp(45): Throw in function GetAPICallbackName\\nstd::exception::what: InvalidArgumentException\\n[QuadDCommon::tag_message*] = Unknown driver API function index: 780\\n\"\n      }\n    }\n  }\n}\n\n**** Errors occurred while processing the raw events. ****\n";

    #[test]
    fn reads_nsys_output() {
        assert_eq!(
            from_nsys_output(NSYS_OUTPUT),
            [
                "importer status: Importation succeeded with non-fatal errors",
                "analysis failed: TargetProfilingFailed",
                "Unknown driver API function index: 780",
                "errors occurred while processing the raw events",
            ]
        );
        let clean = "Generating '/tmp/nsys-report-ca5a.qdstrm'\n[1/1] [====100%] rep.nsys-rep\rGenerated:\n    /tmp/rep.nsys-rep\n";
        assert!(from_nsys_output(clean).is_empty());
    }

    /// Notices (sampling, context switches) lose no GPU work: alone, with the importer's
    /// summary lines, they are notes; beside an error that loses events, that error warns.
    #[test]
    fn notices_are_told_from_lost_events() {
        let notice = "Sampling and/or context switch data cannot be collected due to not enough system resources";
        let status = "importer status: Importation succeeded with non-fatal errors";
        let raw = "errors occurred while processing the raw events";
        let lost = "Unknown driver API function index: 780";
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            classify(s(&[status, notice, raw])),
            (vec![], s(&[status, notice, raw]))
        );
        assert_eq!(
            classify(s(&[status, notice, lost, raw])),
            (s(&[status, lost, raw]), s(&[notice]))
        );
        // Alone, the summary lines say nothing of what was lost: errors.
        assert_eq!(classify(s(&[status])), (s(&[status]), vec![]));
        let d = ImportDiagnostics::of("rep.nsys-rep".into(), "nsys output", s(&[status, notice]));
        assert!(!d.is_incomplete());
        assert!(d.note().unwrap().contains("not enough system resources"));
        // A record written before notices were told apart is classified again.
        let old = format!(
            r#"{{"report":"rep.nsys-rep","source":"nsys output","errors":["{status}","{notice}"]}}"#
        );
        let d = ImportDiagnostics::from_json(old.as_bytes(), "x").unwrap();
        assert!(!d.is_incomplete() && d.notices.len() == 2, "{d:?}");
        // From the report's diagnostic events: an error-level notice is a notice.
        let line = format!(
            r#"{{"Type":49,"DiagnosticEvent":{{"Source":"Daemon","Level":"Error","Text":"{notice}"}}}}"#
        );
        let (errors, notices) = classify(from_json_export(line.as_bytes()).unwrap());
        assert!(errors.is_empty() && notices.len() == 1, "{notices:?}");
    }

    #[test]
    fn reads_diagnostic_events() {
        let lines = [
            r#"{"Type":49,"DiagnosticEvent":{"Source":"Analysis","Level":"Info","Text":"Profiling has started."}}"#,
            r#"{"Type":49,"DiagnosticEvent":{"Source":"Injection","Level":"Warning","Text":"Installed CUDA driver version (13.0) is not supported by this build of Nsight Systems."}}"#,
            r#"{"Type":47,"TraceProcessEvent":{"startNs":"1"}}"#,
            r#"{"Type":49,"DiagnosticEvent":{"Source":"Analysis","Level":"Warning","Text":"Error when processing events: Source ID=\nType=ErrorInformation (18)\n ErrorText (100)=x.cpp(45)\n[QuadDCommon::tag_message*] = Unknown driver API function index: 780\n"}}"#,
        ]
        .join("\n");
        assert_eq!(
            from_json_export(lines.as_bytes()).unwrap(),
            ["Analysis: Unknown driver API function index: 780"]
        );
        assert!(
            from_json_export(&lines.as_bytes()[..lines.find("\n{\"Type\":47").unwrap()])
                .unwrap()
                .is_empty()
        );
        let d = ImportDiagnostics {
            report: "whole.nsys-rep".into(),
            source: "report".into(),
            errors: vec!["Analysis: Unknown driver API function index: 780".into()],
            notices: vec![],
        };
        let w = d.warning();
        assert!(
            w.contains("could not fully import")
                && w.contains("780")
                && w.contains("newer Nsight Systems"),
            "{w}"
        );
        assert_eq!(ImportDiagnostics::from_json(&d.to_json(), "x").unwrap(), d);
        assert!(
            ImportDiagnostics::from_json(b"{", "a.zip")
                .unwrap_err()
                .to_string()
                .contains("a.zip")
        );
    }
}
