//! Temporary files and folders that survive no one: every file this tool writes (outputs,
//! archives, cache entries, labels) is written to a temporary file beside its destination and
//! renamed into place; every scratch folder it makes lies in `$TMPDIR`.
//!
//! - A temporary file is named `.nsys-jax-pipe-PID-XXXXXX.tmp` (`.zip.tmp` for an archive) and a
//!   scratch folder `$TMPDIR/nsys-jax-pipe-KIND-XXXXXX` (KIND: `run`, `export`, `script`).
//! - Its writer holds an advisory lock (`flock`, exclusive) on the file, or on the folder's
//!   `.lock` file, for its whole life, and writes into the file (or its pid into `.lock`) only
//!   once it holds the lock. The lock goes with the process, however it ends (even SIGKILL).
//! - So a temporary file or folder whose lock can be taken, and that holds anything, is a
//!   leftover of a dead process: [`clean_files`] and [`clean_scratch`] remove those, and only
//!   those. An empty, unlocked one may be in the instant between its creation and its lock:
//!   it is removed only when the writer named in it has exited, or when older than
//!   [`GRACE`] (a writer that finds its file removed before it locked it takes another).
//! - A committed file gets the modes `open(2)` would give it (`0666 & !umask`), not the 0600
//!   of a temporary file, and is renamed through [`crate::interrupt::commit`], so that an
//!   interrupt never lands between a rename and the report of what was written.
//!
//! Cleaning is cheap: a folder is listed at most once per process ([`clean_once`]), and only
//! folders where temporary files can be: a destination's folder when writing there, the cache's
//! root (where the store's temporary files lie), `$TMPDIR` when making a scratch folder.

use anyhow::{Context, Result};
use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// Name prefix and suffix of temporary files.
pub const PREFIX: &str = ".nsys-jax-pipe-";
pub const SUFFIX: &str = ".tmp";
/// Name prefix of scratch folders in `$TMPDIR`, and the kinds that follow it.
const SCRATCH_PREFIX: &str = "nsys-jax-pipe-";
const SCRATCH_KINDS: [&str; 3] = ["run", "export", "script"];
/// The lock file of a scratch folder.
const LOCK_FILE: &str = ".lock";
/// How old an empty, unlocked temporary file (or a scratch folder without a pid in its lock
/// file) must be before it counts as a leftover.
pub const GRACE: Duration = Duration::from_secs(3600);

/// The process's umask, read once (from `/proc/self/status`, which does not change it; else
/// by setting and restoring it).
pub fn umask() -> u32 {
    static UMASK: OnceLock<u32> = OnceLock::new();
    *UMASK.get_or_init(|| {
        let from_proc = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Umask:"))
                    .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            });
        from_proc.unwrap_or_else(|| {
            // SAFETY: umask(2) cannot fail; the old value is put back at once.
            unsafe {
                let old = libc::umask(0o022);
                libc::umask(old);
                old as u32
            }
        })
    })
}

/// The modes of a new file: what `open(2)` with 0666 gives under the umask.
pub fn file_mode() -> u32 {
    0o666 & !umask()
}

/// Take the exclusive lock on `file`: waiting (`wait`) or not. False when held elsewhere.
fn lock(file: &File, wait: bool) -> std::io::Result<bool> {
    let op = libc::LOCK_EX | if wait { 0 } else { libc::LOCK_NB };
    loop {
        // SAFETY: flock(2) on an open file descriptor.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) if !wait => return Ok(false),
            _ => return Err(e),
        }
    }
}

/// Whether `file` (open at `path`) is still the file at `path`.
fn still_at(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
        _ => false,
    }
}

/// A locked temporary file beside its destination, removed unless committed.
pub struct TempFile {
    file: File,
    path: PathBuf,
    committed: bool,
    _interrupt: crate::interrupt::Guard,
}

impl TempFile {
    /// A new temporary file in `dir` (created if needed) named `PREFIX…suffix`; leftovers of
    /// dead processes in `dir` are removed first (once per process).
    pub fn new_in(dir: &Path, suffix: &str) -> std::io::Result<TempFile> {
        std::fs::create_dir_all(dir)?;
        clean_once(dir);
        loop {
            let ((file, path), interrupt) = crate::interrupt::create_removed_on_interrupt(|| {
                // The writer's pid in the name tells a cleaner whether an empty, unlocked
                // file (its writer between creating and locking it) has a live writer.
                let (file, path) = tempfile::Builder::new()
                    .prefix(&format!("{PREFIX}{}-", std::process::id()))
                    .suffix(suffix)
                    .tempfile_in(dir)?
                    .into_parts();
                let path = path.keep().map_err(|e| e.error)?;
                Ok(((file, path.clone()), path))
            })?;
            lock(&file, true)?;
            // A cleaner may have taken it for a leftover in the instant before the lock (only
            // when the clock is far off: see GRACE); then take another name.
            if still_at(&file, &path) {
                return Ok(TempFile {
                    _interrupt: interrupt,
                    file,
                    path,
                    committed: false,
                });
            }
        }
    }

    #[cfg(test)]
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    /// Give the file the umask's modes and rename it to `dest`. `report`: the file is an output
    /// the user asked for, named in the message of an interrupt that comes after it.
    pub fn commit(mut self, dest: &Path, report: bool) -> std::io::Result<()> {
        self.file
            .set_permissions(std::fs::Permissions::from_mode(file_mode()))?;
        crate::interrupt::commit(dest, report, || std::fs::rename(&self.path, dest))?;
        self.committed = true;
        Ok(())
        // Dropped here: the lock goes with the file descriptor; the file, now `dest`, stays.
    }
}

impl Write for TempFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Write `bytes` to `path` through a temporary file in its folder and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = TempFile::new_in(dir, SUFFIX)
        .with_context(|| format!("{}: cannot write", dir.display()))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.commit(path, true))
        .with_context(|| format!("{}: cannot write", path.display()))
}

/// Writes `parts` one after another from the file's current position, in as few system
/// calls as the kernel allows (one, usually): a file written in one piece from its start
/// covers its page cache folios whole, where a small first piece makes the file system clear
/// the rest of the folio it starts, and then again for the piece after it.
pub fn write_parts(mut file: &File, parts: &[&[u8]]) -> std::io::Result<()> {
    use std::io::IoSlice;
    let mut slices: Vec<IoSlice> = parts.iter().map(|p| IoSlice::new(p)).collect();
    let mut rest = &mut slices[..];
    IoSlice::advance_slices(&mut rest, 0);
    while !rest.is_empty() {
        match file.write_vectored(rest) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A scratch folder `$TMPDIR/nsys-jax-pipe-KIND-XXXXXX/work`, locked (by `.lock` beside
/// `work`) for its life, removed when dropped or on an interrupt.
pub struct ScratchDir {
    // Fields drop in order: the folder goes while its lock is still held.
    _dir: tempfile::TempDir,
    work: PathBuf,
    _lock: File,
    _interrupt: crate::interrupt::Guard,
}

impl ScratchDir {
    pub fn new(kind: &str) -> Result<ScratchDir> {
        debug_assert!(SCRATCH_KINDS.contains(&kind), "{kind}: not a scratch kind");
        let tmpdir = std::env::temp_dir();
        static CLEANED: OnceLock<()> = OnceLock::new();
        CLEANED.get_or_init(|| {
            clean_scratch(&tmpdir);
        });
        let what = || format!("{}: cannot create a temporary folder", tmpdir.display());
        let (dir, _interrupt) = crate::interrupt::create_removed_on_interrupt(|| {
            let dir = tempfile::Builder::new()
                .prefix(&format!("{SCRATCH_PREFIX}{kind}-"))
                .tempdir_in(&tmpdir)?;
            let path = dir.path().to_path_buf();
            Ok((dir, path))
        })
        .with_context(what)?;
        let mut lock_file = File::options()
            .write(true)
            .create_new(true)
            .open(dir.path().join(LOCK_FILE))
            .with_context(what)?;
        lock(&lock_file, true).with_context(what)?;
        writeln!(lock_file, "{}", std::process::id()).with_context(what)?;
        let work = dir.path().join("work");
        std::fs::create_dir(&work).with_context(what)?;
        Ok(ScratchDir {
            _dir: dir,
            work,
            _lock: lock_file,
            _interrupt,
        })
    }

    /// The folder to work in (empty when made).
    pub fn path(&self) -> &Path {
        &self.work
    }
}

/// What [`clean_files`] and [`clean_scratch`] removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Cleaned {
    pub items: u64,
    pub bytes: u64,
}

fn age(md: &std::fs::Metadata) -> Duration {
    let mtime = md.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    SystemTime::now().duration_since(mtime).unwrap_or_default()
}

/// Whether the file at `path`, unlocked, is a leftover: its lock can be taken (by this call,
/// `None` when it cannot be opened) and it holds something or is older than [`GRACE`].
/// `also_empty`: empty files count as leftovers whatever their age.
fn is_dead(path: &Path, also_empty: bool) -> Option<(File, u64)> {
    let file = File::open(path).ok()?;
    if !lock(&file, false).ok()? {
        return None;
    }
    let md = file.metadata().ok()?;
    let writer_gone = || writer_pid(path).is_some_and(|pid| !alive(pid));
    (md.len() > 0 || also_empty || age(&md) > GRACE || writer_gone()).then_some((file, md.len()))
}

/// The pid a temporary file's name records (`PREFIX<pid>-…`), if any.
fn writer_pid(path: &Path) -> Option<i32> {
    let name = path.file_name()?.to_str()?;
    let (pid, _) = name.strip_prefix(PREFIX)?.split_once('-')?;
    pid.parse().ok()
}

/// Whether a process `pid` exists (a reused pid reads as alive: the file then waits for
/// [`GRACE`]).
fn alive(pid: i32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Remove the leftover temporary files (`PREFIX…SUFFIX`) of dead processes in `dir`.
pub fn clean_files(dir: &Path) -> Cleaned {
    let mut c = Cleaned::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return c;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with(PREFIX) && name.ends_with(SUFFIX)) {
            continue;
        }
        if !e.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        // Removed while locked, so that no one can take it for live meanwhile.
        if let Some((_locked, len)) = is_dead(&e.path(), false)
            && std::fs::remove_file(e.path()).is_ok()
        {
            c.items += 1;
            c.bytes += len;
        }
    }
    c
}

/// Remove the scratch folders of dead processes in `tmpdir`: those whose `.lock` can be
/// locked and holds a pid (or, older than [`GRACE`], whatever it holds, or none).
pub fn clean_scratch(tmpdir: &Path) -> Cleaned {
    let mut c = Cleaned::default();
    let Ok(entries) = std::fs::read_dir(tmpdir) else {
        return c;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        let ours = name.strip_prefix(SCRATCH_PREFIX).is_some_and(|rest| {
            SCRATCH_KINDS
                .iter()
                .any(|k| rest.strip_prefix(k).is_some_and(|r| r.starts_with('-')))
        });
        if !ours || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = e.path();
        let old = e.metadata().is_ok_and(|md| age(&md) > GRACE);
        let lock_path = path.join(LOCK_FILE);
        let dead = if lock_path.exists() {
            is_dead(&lock_path, old).map(|(f, _)| f)
        } else {
            None
        };
        if (dead.is_some() || (old && !lock_path.exists()))
            && std::fs::remove_dir_all(&path).is_ok()
        {
            c.items += 1;
        }
    }
    c
}

/// [`clean_files`] in `dir`, at most once per process and folder (nothing cleaned the
/// second time).
pub fn clean_once(dir: &Path) -> Cleaned {
    static DONE: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let key = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let first = DONE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashSet::new)
        .insert(key);
    if first {
        clean_files(dir)
    } else {
        Cleaned::default()
    }
}

#[cfg(test)]
mod tests;
