//! Archive members: their content keys (one node per zip archive; a capture's derived
//! members are keyed from its report and the nsys version, without exporting anything) and
//! their bytes.

use crate::capture;
use crate::engine::kinds::kind;
use crate::engine::{Key, KeyBuilder, node_kind};
use crate::error::Place;
use crate::formats::archive::content_keys::MemberKeys;
use crate::formats::archive::{self, Archive};
use anyhow::{Context, Result};
use std::sync::Arc;

use super::{Db, Graph, InputArchive, NodeError, NodeResult, Out, Process, fail};

kind!(
    /// The content keys of every member of a zip archive.
    MEMBER_KEYS = "member-keys"
);

kind!(
    /// The content key of the members a capture makes (a key, not a stored node).
    CAPTURE_MEMBERS = "capture-members"
);

/// The content keys of every member of a zip archive (a folder's members are keyed file by
/// file, without a node).
pub struct MemberKeysNode {
    pub file: Key,
}
node_kind!(MemberKeysNode, MEMBER_KEYS, Stored, MemberKeys);
impl MemberKeysNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.file)
    }
}

/// Content keys of every member of an archive.
#[salsa::tracked(returns(clone))]
pub fn member_keys(db: &dyn Graph, a: InputArchive) -> NodeResult<MemberKeys> {
    let db = db.db();
    let archive = db.ctx.archive(a.index(db));
    if archive.is_capture() {
        return capture_member_keys(db, &archive);
    }
    let node = MemberKeysNode {
        file: a.file_key(db),
    };
    let label = archive.path.display().to_string();
    let (key, value) = fail(db.engine().compute(&node, &label, || {
        if archive.is_zip() {
            MemberKeys::compute_zip(&archive)
        } else {
            let mut out = std::collections::BTreeMap::new();
            for m in archive.members() {
                out.insert(m.to_string(), db.engine().file_key(&archive.path.join(m))?);
            }
            Ok(MemberKeys(out))
        }
    }))?;
    let from_report: Vec<&str> = archive::FROM_REPORT
        .into_iter()
        .filter(|m| archive.is_from_report(m))
        .collect();
    if from_report.is_empty() {
        return Ok(Out { key, value });
    }
    // Members derived from the archive's own report: keyed from the report's key and the
    // nsys version, as a capture's are (nothing is exported here).
    let report = archive.embedded_report().expect("derived from the report");
    let nsys = fail(db.ctx.nsys())?;
    let export = capture::export_key(&fail(value.get(report))?, nsys);
    let mut keys = value.as_ref().clone();
    let mut kb = KeyBuilder::of(&CAPTURE_MEMBERS).input(&key);
    for m in from_report {
        let k = capture::derived_member_key(m, &export).expect("derived member");
        kb = kb.param(m, k.0);
        keys.0.insert(m.to_string(), k);
    }
    Ok(Out {
        key: kb.finish(),
        value: Arc::new(keys),
    })
}

/// Member keys of a capture: content keys of the report and dump files, and the keys of the
/// members derived from the report (from the report's key and the nsys version; nothing is
/// exported here).
fn capture_member_keys(db: &Db, archive: &Archive) -> NodeResult<MemberKeys> {
    let engine = db.engine();
    let mut out = std::collections::BTreeMap::new();
    let mut kb = KeyBuilder::of(&CAPTURE_MEMBERS);
    let report_key = fail(engine.file_key(&archive.path))?;
    let nsys = fail(db.ctx.nsys())?;
    let export = capture::export_key(&report_key, nsys);
    for m in archive.members() {
        let key = match archive.member_file(m) {
            Some(file) => fail(engine.file_key(&file))?,
            None => capture::derived_member_key(m, &export).expect("derived member"),
        };
        kb = kb.param(m, key.0);
        out.insert(m.to_string(), key);
    }
    Ok(Out {
        key: kb.finish(),
        value: Arc::new(MemberKeys(out)),
    })
}

pub(super) fn member_key(
    db: &Db,
    p: Process,
    path: &str,
) -> std::result::Result<Option<(String, Key)>, NodeError> {
    let Some(m) = p.resolve(db, path) else {
        return Ok(None);
    };
    let keys = member_keys(db, p.archive(db))?;
    Ok(Some((m.clone(), fail(keys.value.get(&m))?)))
}

pub(super) fn read_member(db: &Db, p: Process, member: &str) -> Result<Vec<u8>> {
    let archive = p.archive_ref(db);
    if archive.is_from_report(member) {
        let report = archive.embedded_report().expect("derived from the report");
        let keys = member_keys(db, p.archive(db)).map_err(anyhow::Error::from)?;
        let bytes = capture::embedded::derived(
            db.engine(),
            db.ctx.nsys()?,
            &archive,
            report,
            &keys.value.get(report)?,
            member,
        )?;
        return or_empty(member, bytes);
    }
    read_archive_member(db, &archive, member)
}

/// The bytes of a member of an input: read from the archive, or for a member a capture
/// derives from its report, computed by the capture's nodes.
pub fn read_archive_member(db: &Db, archive: &Archive, member: &str) -> Result<Vec<u8>> {
    if archive.is_capture() && archive.member_file(member).is_none() {
        return Ok(derived_member(db, archive, member)?.unwrap_or_default());
    }
    archive.read(member)
}

/// The table of a capture's derived `member` as reading it gives it, while this process still
/// holds it (see [`capture::derived_table`]): its first reader takes it instead of decoding
/// the member's bytes. None for a member of any other input.
pub(super) fn derived_table(
    db: &Db,
    p: Process,
    member: &str,
) -> Result<Option<arrow::array::RecordBatch>> {
    let archive = p.archive_ref(db);
    if !archive.is_capture() || archive.member_file(member).is_some() {
        return Ok(None);
    }
    let engine = db.engine();
    let report_key = engine.file_key(&archive.path)?;
    capture::derived_table(engine, db.ctx.nsys()?, &archive.path, &report_key, member)
}

/// A member derived from a capture's report (None when the capture has none, e.g. no GPU
/// projection for an NVTX-only capture; reading the trace then gives an empty one).
pub fn derived_member(db: &Db, archive: &Archive, member: &str) -> Result<Option<Vec<u8>>> {
    let engine = db.engine();
    let report_key = engine.file_key(&archive.path)?;
    let bytes =
        capture::derived_member(engine, db.ctx.nsys()?, &archive.path, &report_key, member)?;
    or_empty_table(member, bytes)
}

/// A derived member's bytes, or for a report without it, what reading it gives: an empty
/// table (no graph kernels, copies, user ranges or memory events), or nothing.
fn or_empty(member: &str, bytes: Option<Vec<u8>>) -> Result<Vec<u8>> {
    Ok(or_empty_table(member, bytes)?.unwrap_or_default())
}

fn or_empty_table(member: &str, bytes: Option<Vec<u8>>) -> Result<Option<Vec<u8>>> {
    match (bytes, member) {
        (None, archive::TRACE) => Ok(Some(capture::empty_trace()?)),
        (None, archive::GRAPH_OPS) => Ok(Some(crate::formats::graph_ops::write(
            &arrow::array::RecordBatch::new_empty(crate::formats::graph_ops::SCHEMA.clone()),
        )?)),
        // A report without copy or set tables ran none.
        (None, archive::TRANSFERS) => Ok(Some(crate::formats::gpu_transfers::write(
            &arrow::array::RecordBatch::new_empty(crate::formats::gpu_transfers::SCHEMA.clone()),
        )?)),
        (None, archive::USER_NVTX) => Ok(Some(crate::formats::user_nvtx::write(
            &arrow::array::RecordBatch::new_empty(crate::formats::user_nvtx::SCHEMA.clone()),
        )?)),
        // A report without memory-usage events reads as an empty table: the analyses say how
        // to record them, as for an archive without the member.
        (None, archive::MEMORY_USAGE) => Ok(Some(crate::formats::memory_usage::write(
            &arrow::array::RecordBatch::new_empty(crate::formats::memory_usage::SCHEMA.clone()),
        )?)),
        (b, _) => Ok(b),
    }
}

/// Attach the archive path and member to an error.
pub(super) fn in_member<T>(db: &Db, p: Process, member: &str, r: Result<T>) -> Result<T> {
    r.context(Place::member(&p.archive_ref(db).path, member))
}

/// The optional members of an archive, what reading each checks, and what the analyses lose
/// when it cannot be read.
type Check = fn(Vec<u8>) -> Result<()>;
const OPTIONAL: [(&str, Check, &str); 3] = [
    (
        archive::DEVICE_METADATA,
        |b| crate::formats::metadata::device_facts(b).map(drop),
        "no GPU names or peaks: the roofline, MFU and the memory limit are skipped",
    ),
    (
        archive::SYSTEM_METADATA,
        |b| crate::formats::metadata::system_entries(b).map(drop),
        "the provenance lacks the host, driver and CUDA versions",
    ),
    (
        crate::formats::run_metadata::MEMBER,
        |b| crate::formats::run_metadata::read(&b).map(drop),
        "the provenance lacks how the profile was made",
    ),
];

/// One line for each optional member of the run's archives that is there but cannot be read
/// (a bad checksum, truncated, another table, retyped columns), naming the archive, the
/// member, the problem and what the analyses lose; the run goes on without it. Members a
/// capture derives from its report are this tool's own and not checked.
pub fn member_problems(db: &Db, run: super::Run) -> Vec<String> {
    let mut problems = Vec::new();
    for &p in run.processes(db).iter() {
        let archive = p.archive_ref(db);
        if archive.is_capture() {
            continue;
        }
        for (member, check, lost) in OPTIONAL {
            let Some(m) = p.resolve(db, member) else {
                continue;
            };
            if archive.is_from_report(&m) {
                continue;
            }
            if let Err(e) = read_member(db, p, &m).and_then(check) {
                // A reading error names the archive and the member already.
                let what = crate::error::one_line(&e);
                let path = archive.path.display().to_string();
                problems.push(match what.contains(&path) {
                    true => format!("{what}; {lost}"),
                    false => format!("{path}: {m}: {what}; {lost}"),
                });
            }
        }
    }
    problems
}
