//! An archive's own report as the source of the members this project derives from reports
//! (docs/design.md, "Archives with their report"): nsys-jax keeps the `.nsys-rep` in its
//! archives but none of this project's members (the graph kernels, the copies, the user
//! ranges, the memory events), and an archive of an incomplete import says nothing of it.
//! The report is exported like a capture's, keyed by the member's content and the nsys
//! version, so a second analysis exports nothing; it is written to a scratch file only when
//! a node it feeds is not stored.

use std::path::PathBuf;

use anyhow::{Context, Result};

use super::nsys::Nsys;
use super::{derived_member, export_key, producer};
use crate::engine::{Engine, Key};
use crate::formats::archive::Archive;
use crate::tmpfiles::ScratchDir;

/// The report member of `archive` written to a scratch folder (kept while the folder is).
fn extract(archive: &Archive, member: &str) -> Result<(ScratchDir, PathBuf)> {
    let tmp = ScratchDir::new("export")?;
    let name = member.rsplit('/').next().unwrap_or(member);
    let path = tmp.path().join(name);
    let bytes = archive.read(member)?;
    std::fs::write(&path, bytes).with_context(|| format!("{}: cannot write", path.display()))?;
    Ok((tmp, path))
}

/// `f` of the report's path: only its name when the nodes it feeds are `stored` (they do not
/// read it), else a scratch copy. A stored entry that turns out unusable then fails `f`,
/// which its caller treats as a report that cannot be read.
pub fn with_report<T>(
    archive: &Archive,
    member: &str,
    stored: bool,
    f: impl Fn(&std::path::Path) -> Result<T>,
) -> Result<T> {
    if stored {
        return f(std::path::Path::new(member));
    }
    let (_tmp, path) = extract(archive, member)?;
    f(&path)
}

/// The bytes of `member` derived from the report `report` (content key `report_key`) held in
/// `archive` (None when the report has no such member).
pub fn derived(
    engine: &Engine,
    nsys: &Nsys,
    archive: &Archive,
    report: &str,
    report_key: &Key,
    member: &str,
) -> Result<Option<Vec<u8>>> {
    if producer(member, &export_key(report_key, nsys)).is_none() {
        anyhow::bail!("{member}: not a member derived from a report");
    }
    // Written out whenever the member is read: that is when a node built on it is computed,
    // and a stored entry that then turns out unusable (a shared cache's entry from an
    // untrusted writer) is recomputed from the file.
    let (_tmp, path) = extract(archive, report)?;
    derived_member(engine, nsys, &path, report_key, member)
}
