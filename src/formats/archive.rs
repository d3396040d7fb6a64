//! nsys-jax archives: a `.zip` or an extracted folder, holding one profiled process or several
//! (combined: a path whose content differed between inputs is a folder `path/<input stem>`).

use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub mod content_keys;

/// Where the GPU projection lives in an archive.
pub const TRACE: &str = "nvtx_gpu_proj_trace/trace.parquet";
pub const PUSHPOP_PARQUET: &str = "report_nvtx_pushpop_trace.parquet";
pub const PUSHPOP_CSV_XZ: &str = "report_nvtx_pushpop_trace.csv.xz";
pub const THREAD_METADATA: &str = "thread-metadata.parquet";
pub const SYSTEM_METADATA: &str = "system-metadata.parquet";
pub const DEVICE_METADATA: &str = "device-metadata.parquet";
/// The operations of CUDA graph launches (a member nsys-jax's readers ignore).
pub const GRAPH_OPS: &str = "nsys-jax-pipe/graph-ops.parquet";
/// The memory copies and sets outside CUDA graphs (a member nsys-jax's readers ignore).
pub const TRANSFERS: &str = "nsys-jax-pipe/gpu-transfers.parquet";

/// The program's own NVTX ranges and marks (a member nsys-jax's readers ignore).
pub const USER_NVTX: &str = "nsys-jax-pipe/nvtx-user.parquet";
/// Device memory allocations and frees over time (a member nsys-jax's readers ignore).
pub const MEMORY_USAGE: &str = "nsys-jax-pipe/gpu-memory-usage.parquet";

/// The members this project derives from a report that an archive holding its report without
/// them (one made by nsys-jax, or by an older version of this project) gets from that report
/// ([`Archive::derive_from_report`]).
pub const FROM_REPORT: [&str; 4] = [GRAPH_OPS, TRANSFERS, USER_NVTX, MEMORY_USAGE];

/// The members of an archive that are computed from the report (`nsys export` and what is
/// built from it) rather than copied.
pub const DERIVED: [&str; 9] = [
    TRACE,
    GRAPH_OPS,
    TRANSFERS,
    USER_NVTX,
    MEMORY_USAGE,
    PUSHPOP_PARQUET,
    THREAD_METADATA,
    SYSTEM_METADATA,
    DEVICE_METADATA,
];

enum Source {
    /// Read through a buffer: the central directory is read in small fields.
    Zip(Mutex<zip::ZipArchive<std::io::BufReader<fs::File>>>),
    Dir,
    /// A capture: the report, the XLA dump folder (if any) and the members derived from them.
    Capture {
        dump: Option<PathBuf>,
        /// The run's record (`run_metadata`), when `run` made the capture.
        metadata: Option<PathBuf>,
    },
}

/// Top-level folders of an extracted archive that are its reader's, not members:
/// `install.sh`'s virtual environment (nsys-jax's is `nsys_jax_venv`), the notebook's
/// output folder and JupyterLab's checkpoints.
pub const READERS_FOLDERS: &[&str] = &[
    "nsys_jax_pipe_venv",
    "nsys_jax_venv",
    "nsys-jax-pipe-out",
    ".ipynb_checkpoints",
];

pub struct Archive {
    pub path: PathBuf,
    source: Source,
    /// member path -> (declared uncompressed size, zip index, compressed size)
    members: BTreeMap<String, (u64, usize, u64)>,
    /// Member keys computed while the archive was keyed whole ([`content_keys::read_content_key`]).
    read_keys: std::sync::OnceLock<std::collections::BTreeMap<String, crate::engine::Key>>,
    /// Members of [`FROM_REPORT`] the archive lacks and its own report gives.
    from_report: std::collections::BTreeSet<String>,
}

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Archive({})", self.path.display())
    }
}

impl Archive {
    /// Open an archive file or folder. Errors name the path and say what is wrong.
    pub fn open(path: &Path) -> Result<Archive> {
        let md = fs::metadata(path)
            .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), io_reason(&e)))?;
        if md.is_dir() {
            let mut members = BTreeMap::new();
            // What a reader adds beside an extracted archive's members is not one of them:
            // the virtual environments `install.sh` makes (ours, and nsys-jax's), the
            // notebook's outputs and JupyterLab's checkpoints.
            let walk = walkdir::WalkDir::new(path).min_depth(1).into_iter();
            let walk = walk.filter_entry(|e| {
                e.depth() != 1
                    || !READERS_FOLDERS.contains(&e.file_name().to_string_lossy().as_ref())
            });
            for entry in walk {
                let entry =
                    entry.with_context(|| format!("{}: cannot list folder", path.display()))?;
                let rel = entry
                    .path()
                    .strip_prefix(path)
                    .expect("walked path is under its root")
                    .to_string_lossy()
                    .replace('\\', "/");
                let ft = entry.file_type();
                if ft.is_symlink() || !(ft.is_file() || ft.is_dir()) {
                    // Links may point anywhere, FIFOs block readers: neither is a member.
                    let what = if ft.is_symlink() {
                        "a symbolic link"
                    } else {
                        "not a regular file"
                    };
                    admit(path, &rel, Err(what))?;
                    continue;
                }
                if ft.is_file() {
                    let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
                    if admit(path, &rel, check_member_name(&rel))? {
                        members.insert(rel, (size, 0, size));
                    }
                }
            }
            return Ok(Archive {
                path: path.to_path_buf(),
                source: Source::Dir,
                members,
                read_keys: Default::default(),
                from_report: Default::default(),
            });
        }
        if !md.is_file() {
            ensure_regular(path, "an archive")?;
        }
        let mut f = fs::File::open(path)
            .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), io_reason(&e)))?;
        let mut magic = [0u8; 4];
        let n = f.read(&mut magic).unwrap_or(0);
        if path
            .extension()
            .is_some_and(|e| e == "nsys-rep" || e == "qdrep")
        {
            bail!(
                "{}: an Nsight Systems report, not an nsys-jax archive; reading reports directly is not supported by this version (archive it with nsys-jax first)",
                path.display()
            );
        }
        if n < 4 || (&magic != b"PK\x03\x04" && &magic != b"PK\x05\x06") {
            bail!(
                "{}: not a zip archive (nor an extracted nsys-jax folder)",
                path.display()
            );
        }
        let f = std::io::BufReader::new(fs::File::open(path)?);
        let zip = zip::ZipArchive::new(f).map_err(|e| {
            anyhow::anyhow!("{}: corrupt or truncated zip archive ({e})", path.display())
        })?;
        // Of two members of one name, which one a reader gets is not defined.
        if zip.has_duplicate_names() {
            let name = duplicate_name(path, zip.central_directory_start())
                .map_or_else(|| "two members".to_string(), |n| format!("member {n}"));
            bail!(
                "{}: {name} appears twice (a damaged or tampered zip archive)",
                path.display()
            );
        }
        let mut members = BTreeMap::new();
        // The central directory alone (no member's local header is read here: a damaged
        // one is found, and said, when that member is read).
        for i in 0..zip.len() {
            let entry = zip
                .by_index_data(i)
                .map_err(|e| anyhow::anyhow!("{}: corrupt zip entry #{i} ({e})", path.display()))?;
            let name = entry.name().map_err(|e| {
                anyhow::anyhow!("{}: bad member name in entry #{i} ({e})", path.display())
            })?;
            let name: &str = &name;
            if entry.is_symlink() {
                admit(path, name, Err("a symbolic link"))?;
            } else if entry.is_file() && admit(path, name, check_member_name(name))? {
                let name = name.to_string();
                members.insert(name, (entry.size(), i, entry.compressed_size()));
            }
        }
        Ok(Archive {
            path: path.to_path_buf(),
            source: Source::Zip(Mutex::new(zip)),
            members,
            read_keys: Default::default(),
            from_report: Default::default(),
        })
    }

    /// A capture: `report` (a `.nsys-rep`) and the XLA dump folder written beside it, seen
    /// as the archive it would make. Members: the report itself, `dump/<file>` for every
    /// `.pb`/`.pbtxt` of the dump (not compressed), and the [`DERIVED`] members, which the
    /// graph computes (reading them here is an error).
    pub fn open_capture(
        report: &Path,
        dump: Option<&Path>,
        metadata: Option<&Path>,
    ) -> Result<Archive> {
        let md = fs::metadata(report)
            .map_err(|e| anyhow::anyhow!("{}: {}", report.display(), io_reason(&e)))?;
        if !md.is_file() {
            bail!("{}: not a file", report.display());
        }
        let mut members = BTreeMap::new();
        let name = report
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "report.nsys-rep".into());
        members.insert(name, (md.len(), 0, md.len()));
        if let Some(dump) = dump {
            for (rel, size) in dump_folder_files(dump)? {
                members.insert(format!("dump/{rel}"), (size, 0, size));
            }
        }
        for d in DERIVED {
            members.insert(d.to_string(), (0, 0, 0));
        }
        if let Some(m) = metadata {
            let size = fs::metadata(m)
                .map_err(|e| anyhow::anyhow!("{}: {}", m.display(), io_reason(&e)))?
                .len();
            members.insert(super::run_metadata::MEMBER.to_string(), (size, 0, size));
        }
        Ok(Archive {
            path: report.to_path_buf(),
            source: Source::Capture {
                dump: dump.map(Path::to_path_buf),
                metadata: metadata.map(Path::to_path_buf),
            },
            members,
            read_keys: Default::default(),
            from_report: Default::default(),
        })
    }

    /// How the xz members this archive reads are checked: [`Archive::read`] of a zip member
    /// verifies its CRC-32, so their stream's own check is not needed.
    pub fn xz_check(&self) -> super::limits::Checked {
        match self.source {
            Source::Zip(_) => super::limits::Checked::ByContainer,
            _ => super::limits::Checked::No,
        }
    }

    pub fn is_zip(&self) -> bool {
        matches!(self.source, Source::Zip(_))
    }

    pub fn is_capture(&self) -> bool {
        matches!(self.source, Source::Capture { .. })
    }

    /// The dump folder of a capture.
    pub fn capture_dump(&self) -> Option<&Path> {
        match &self.source {
            Source::Capture { dump, .. } => dump.as_deref(),
            _ => None,
        }
    }

    /// Where a member of a capture or folder lives on disk (None for zip members and for
    /// members a capture derives).
    pub fn member_file(&self, member: &str) -> Option<PathBuf> {
        match &self.source {
            Source::Zip(_) => None,
            Source::Dir => Some(self.path.join(member)),
            Source::Capture { dump, metadata } => {
                if let Some(rel) = member.strip_prefix("dump/") {
                    dump.as_ref().map(|d| d.join(rel))
                } else if member == super::run_metadata::MEMBER {
                    metadata.clone()
                } else if DERIVED.contains(&member) {
                    None
                } else {
                    Some(self.path.clone())
                }
            }
        }
    }

    pub fn members(&self) -> impl Iterator<Item = &str> {
        self.members.keys().map(String::as_str)
    }

    /// Uncompressed size of a member (0 when absent).
    pub fn member_size(&self, member: &str) -> u64 {
        self.members.get(member).map(|m| m.0).unwrap_or(0)
    }

    pub fn has(&self, member: &str) -> bool {
        self.members.contains_key(member) || self.from_report.contains(member)
    }

    /// The report inside a one-process archive (nsys-jax keeps it): its only top-level
    /// `.nsys-rep` member, beside a GPU projection. None for captures and combined archives.
    pub fn embedded_report(&self) -> Option<&str> {
        if self.is_capture() || !self.members.contains_key(TRACE) {
            return None;
        }
        let mut reports = self
            .members
            .keys()
            .filter(|m| !m.contains('/') && (m.ends_with(".nsys-rep") || m.ends_with(".qdrep")));
        let only = reports.next()?;
        reports.next().is_none().then_some(only.as_str())
    }

    /// The members of [`FROM_REPORT`] this archive lacks although it holds its report, for
    /// an archive written by nsys-jax or by a version of this project older than the user
    /// ranges (every archive written since has [`USER_NVTX`], and the other members only
    /// where the report has such events).
    pub fn missing_from_report(&self) -> Vec<&'static str> {
        if self.members.contains_key(USER_NVTX) || self.embedded_report().is_none() {
            return Vec::new();
        }
        FROM_REPORT
            .into_iter()
            .filter(|m| !self.members.contains_key(*m))
            .collect()
    }

    /// Let the members of [`Archive::missing_from_report`] be derived from the archive's
    /// report (the graph exports it; [`Archive::read`] of them is an error).
    pub fn derive_from_report(&mut self) {
        self.from_report = self
            .missing_from_report()
            .into_iter()
            .map(str::to_string)
            .collect();
    }

    /// Whether `member` is derived from the archive's own report.
    pub fn is_from_report(&self, member: &str) -> bool {
        self.from_report.contains(member)
    }

    /// Members under `dir/` (one level or deeper).
    pub fn members_under<'a>(&'a self, dir: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let prefix = format!("{dir}/");
        self.members
            .range(prefix.clone()..)
            .take_while(move |(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| k.as_str())
    }

    /// The bytes of one member. Errors name the archive and the member.
    pub fn read(&self, member: &str) -> Result<Vec<u8>> {
        let &(size, index, compressed) = self
            .members
            .get(member)
            .with_context(|| format!("{}: has no member {member}", self.path.display()))?;
        match &self.source {
            Source::Dir => fs::read(self.path.join(member)).map_err(|e| {
                anyhow::anyhow!("{}/{member}: {}", self.path.display(), io_reason(&e))
            }),
            Source::Capture { .. } => {
                let Some(file) = self.member_file(member) else {
                    bail!(
                        "{}: {member} is computed from the report, not read",
                        self.path.display()
                    );
                };
                fs::read(&file)
                    .map_err(|e| anyhow::anyhow!("{}: {}", file.display(), io_reason(&e)))
            }
            Source::Zip(zip) => {
                let mut zip = zip.lock().unwrap();
                let entry = zip.by_index(index).map_err(|e| {
                    anyhow::anyhow!("{}: cannot read member {member} ({e})", self.path.display())
                })?;
                super::limits::read_capped(entry, compressed, size).map_err(|e| match e {
                    super::limits::ExpandError::Io(e) => anyhow::anyhow!(
                        "{}: member {member} is corrupt or truncated ({e})",
                        self.path.display()
                    ),
                    e => anyhow::anyhow!("{}: member {member} {e}", self.path.display()),
                })
            }
        }
    }

    /// Copy a member of a zip archive into `w` under `name`, its compressed bytes as they are
    /// (nothing is decompressed or held in memory).
    pub fn copy_raw<W: std::io::Write + std::io::Seek>(
        &self,
        member: &str,
        w: &mut zip::ZipWriter<W>,
        name: &str,
    ) -> Result<()> {
        let &(_, index, _) = self
            .members
            .get(member)
            .with_context(|| format!("{}: has no member {member}", self.path.display()))?;
        let Source::Zip(zip) = &self.source else {
            bail!("{}: not a zip archive", self.path.display());
        };
        let mut zip = zip.lock().unwrap();
        let entry = zip.by_index_raw(index).map_err(|e| {
            anyhow::anyhow!("{}: cannot read member {member} ({e})", self.path.display())
        })?;
        w.raw_copy_file_rename(entry, name)
            .map_err(|e| anyhow::anyhow!("cannot copy {member} of {} ({e})", self.path.display()))
    }

    /// The processes this archive holds: `None` for a per-process archive, else the stems of
    /// a combined one (sorted).
    pub fn process_stems(&self) -> Result<Vec<Option<String>>> {
        if self.has(TRACE) || self.is_capture() {
            return Ok(vec![None]);
        }
        let stems: Vec<String> = self
            .members_under(TRACE)
            .filter(|m| !m[TRACE.len() + 1..].contains('/'))
            .map(|m| m[TRACE.len() + 1..].to_string())
            .collect();
        if !stems.is_empty() {
            return Ok(stems.into_iter().map(Some).collect());
        }
        // NVTX-only captures have no GPU projection but still a push/pop trace.
        for p in [PUSHPOP_PARQUET, PUSHPOP_CSV_XZ] {
            if self.has(p) {
                return Ok(vec![None]);
            }
            let stems: Vec<String> = self
                .members_under(p)
                .map(|m| m[p.len() + 1..].to_string())
                .collect();
            if !stems.is_empty() {
                return Ok(stems.into_iter().map(Some).collect());
            }
        }
        // A folder holding a capture (a report and its dump) rather than an archive.
        let reports: Vec<&str> = self
            .members()
            .filter(|m| m.ends_with(".nsys-rep") && !m.contains('/'))
            .collect();
        if let [report] = reports.as_slice() {
            bail!(
                "{}: no {TRACE} and no push/pop trace: not an nsys-jax archive (it holds a report: pass {} instead)",
                self.path.display(),
                self.path.join(report).display()
            )
        }
        bail!(
            "{}: no {TRACE} and no push/pop trace: not an nsys-jax archive",
            self.path.display()
        )
    }

    /// Resolve `path` for one process: the member itself when it is shared by all processes,
    /// else `path/<stem>`.
    pub fn resolve(&self, path: &str, stem: Option<&str>) -> Option<String> {
        if self.has(path) {
            return Some(path.to_string());
        }
        let stem = stem?;
        let m = format!("{path}/{stem}");
        self.has(&m).then_some(m)
    }

    /// The dump files of one process: (file name, member path).
    pub fn dump_files(&self, stem: Option<&str>) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for m in self.members_under("dump") {
            let rest = &m["dump/".len()..];
            match rest.split_once('/') {
                None => out.push((rest.to_string(), m.to_string())),
                Some((file, s)) if Some(s) == stem => out.push((file.to_string(), m.to_string())),
                _ => {}
            }
        }
        out
    }
}

/// The first name that appears twice in the central directory that starts at `start` of
/// the zip archive `path` (None when the directory cannot be walked: then the error names no
/// member). Each header: its signature, 42 bytes of fields, then the name, the extra field and
/// the comment, whose lengths are at offsets 28, 30 and 32 (APPNOTE 4.3.12).
fn duplicate_name(path: &Path, start: u64) -> Option<String> {
    use std::io::{Seek, SeekFrom};
    let mut f = std::io::BufReader::new(fs::File::open(path).ok()?);
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut seen = std::collections::HashSet::new();
    loop {
        let mut h = [0u8; 46];
        f.read_exact(&mut h).ok()?;
        if h[..4] != *b"PK\x01\x02" {
            return None;
        }
        let len = |at: usize| u16::from_le_bytes([h[at], h[at + 1]]);
        let mut name = vec![0; len(28) as usize];
        f.read_exact(&mut name).ok()?;
        f.seek_relative(i64::from(len(30)) + i64::from(len(32)))
            .ok()?;
        let name = String::from_utf8_lossy(&name).into_owned();
        if !seen.insert(name.clone()) {
            return Some(name);
        }
    }
}

/// Whether `name` may name a member: a relative path in `/`-separated components, none of
/// them empty, `.` or `..`, without NUL or backslash. Anything else could escape the folder
/// the archive is laid out in.
pub fn check_member_name(name: &str) -> std::result::Result<(), &'static str> {
    if name.is_empty() {
        return Err("an empty name");
    }
    if name.starts_with('/') {
        return Err("an absolute path");
    }
    if name.contains('\0') || name.contains('\\') {
        return Err("a name with a NUL or backslash");
    }
    if name.split('/').any(|c| c == "..") {
        return Err("a path with `..`");
    }
    if name.split('/').any(|c| c.is_empty() || c == ".") {
        return Err("a path with an empty or `.` component");
    }
    Ok(())
}

/// Decide about a member named `name` of the archive at `path` whose name check gave `ok`:
/// `true` to keep it; a bad name under `sources/` (files kept for people to read, used by no
/// analysis) is skipped with a warning; any other bad name is an input error.
fn admit(path: &Path, name: &str, ok: std::result::Result<(), &'static str>) -> Result<bool> {
    match ok {
        Ok(()) => Ok(true),
        Err(why) if name.starts_with("sources/") => {
            crate::error::warn(&format!(
                "{}: skipped member {name:?} ({why})",
                path.display()
            ));
            Ok(false)
        }
        Err(why) => bail!(
            "{}: refused member {name:?}: {why} (a hostile or broken archive)",
            path.display()
        ),
    }
}

/// The `.pb` and `.pbtxt` files of an XLA dump folder (subfolders included), as paths
/// relative to it, with their sizes, sorted.
pub fn dump_folder_files(dump: &Path) -> Result<Vec<(String, u64)>> {
    if !dump.is_dir() {
        bail!("{}: XLA dump folder not found", dump.display());
    }
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(dump).min_depth(1).sort_by_file_name() {
        let entry = entry.with_context(|| format!("{}: cannot list folder", dump.display()))?;
        let name = entry.file_name().to_string_lossy();
        if entry.file_type().is_file() && (name.ends_with(".pb") || name.ends_with(".pbtxt")) {
            let rel = entry
                .path()
                .strip_prefix(dump)
                .expect("walked path is under its root")
                .to_string_lossy()
                .replace('\\', "/");
            out.push((rel, entry.metadata().map(|m| m.len()).unwrap_or(0)));
        }
    }
    Ok(out)
}

/// Refuse, before opening it, a path that is not a regular file (a FIFO would block the
/// reader forever; a device or socket is never an input).
pub fn ensure_regular(path: &Path, what: &str) -> Result<()> {
    let md =
        fs::metadata(path).map_err(|e| anyhow::anyhow!("{}: {}", path.display(), io_reason(&e)))?;
    if !md.is_file() {
        bail!("{}: not a regular file, cannot be {what}", path.display());
    }
    Ok(())
}

pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or folder".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_readers_virtual_environment_beside_the_members_is_not_read() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("device-metadata.parquet"), b"x").unwrap();
        // install.sh's environment has links (lib64 -> lib): not members, not refused.
        let venv = d.path().join("nsys_jax_pipe_venv");
        fs::create_dir_all(venv.join("lib")).unwrap();
        std::os::unix::fs::symlink("lib", venv.join("lib64")).unwrap();
        fs::create_dir_all(d.path().join("nsys-jax-pipe-out")).unwrap();
        fs::write(d.path().join("nsys-jax-pipe-out/summary.json"), b"{}").unwrap();
        let a = Archive::open(d.path()).unwrap();
        assert_eq!(a.members().collect::<Vec<_>>(), ["device-metadata.parquet"]);
        // A link anywhere else is still refused.
        fs::create_dir_all(d.path().join("dump")).unwrap();
        std::os::unix::fs::symlink("../device-metadata.parquet", d.path().join("dump/x.pb"))
            .unwrap();
        let e = Archive::open(d.path()).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
    }
}
