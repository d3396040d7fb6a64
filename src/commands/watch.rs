//! `analyze --watch`: one long-lived process keeps the query database and updates the outputs
//! whenever its inputs change — rank archives appearing in a folder while a job writes them, an
//! archive rewritten, an analysis script edited.
//!
//! The inputs are polled (twice a second; polling works the same on local disks and on the
//! network file systems jobs write to, where change notifications are not delivered). A file
//! is taken once its size and modification time have held still for a second, and never while
//! its name says it is being written (`.tmp`, `.part`, hidden); while an analysed input or a
//! script is being rewritten, no update starts (it would leave that file out). Each new or
//! changed input is registered with the database as a new salsa input and the run's process
//! list is set to a new revision, so that an update recomputes only the nodes of what changed
//! and the reduces;
//! the outputs are replaced one atomic rename each, as `analyze` writes them. An update that
//! fails (a damaged archive) is reported in one line and the watch goes on. Ctrl-C between
//! updates exits with 0; during one, as any interrupted command (nothing half-written).

use super::Ui;
use super::analyze::{AnalyzeRequest, Done, update};
use crate::engine::Engine;
use crate::graph::{self, InputArchive, Process};
use anyhow::{Result, bail};
use salsa::Setter;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

const POLL: Duration = Duration::from_millis(500);
/// How long a file's size and modification time must hold still before it is read.
const SETTLE: Duration = Duration::from_secs(1);

/// A file's (or folder's) size and modification time.
type Sig = (u64, SystemTime);

/// One update of a watch: its number (from 1), how many inputs it analysed, and what it did.
pub struct Update {
    pub number: u64,
    pub inputs: usize,
    pub done: Result<Done>,
}

/// Watch the inputs of `req` and update its outputs whenever they change, handing each
/// update to `updated`; returns only on an error of `updated` (Ctrl-C ends the process).
pub fn watch(
    engine: Engine,
    req: &AnalyzeRequest,
    ui: &dyn Ui,
    updated: &mut dyn FnMut(Update) -> Result<()>,
) -> Result<()> {
    check(req)?;
    graph::input_paths_exist(&req.inputs)?;
    let scripts: Vec<PathBuf> = req
        .analyses
        .iter()
        .filter(|r| r.is_script())
        .map(|r| PathBuf::from(&r.name))
        .collect();
    let mut scanner = Scanner::new(req.inputs.clone(), scripts);
    let (mut db, run) = graph::open_run(engine, &[], req.capture.nsys.clone())?;
    let mut known: BTreeMap<PathBuf, (Sig, InputArchive, Vec<Option<String>>)> = BTreeMap::new();
    let mut refused: HashMap<PathBuf, Sig> = HashMap::new();
    let mut processes: HashMap<(InputArchive, Option<String>, u32), Process> = HashMap::new();
    let mut last: Option<Vec<(PathBuf, Sig)>> = None;
    // What the last update analysed: its inputs and scripts, with their signatures.
    let mut analysed: Vec<(PathBuf, Sig)> = Vec::new();
    let mut updates = 0u64;
    let waiting = match &req.output {
        Some(out) => format!(
            "stopped watching; {} holds the outputs of the last update",
            out.display()
        ),
        None => "stopped watching; the outputs are those of the last update".to_string(),
    };
    ui.say(&format!(
        "nsys-jax-pipe: watching {} (Ctrl-C stops)",
        req.inputs
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    crate::interrupt::idle(Some(waiting.clone()));
    loop {
        let (ready, moving) = scanner.poll();
        // No update while a script or an input of the last update is being written: it would
        // be left out, and a second update would follow once it settled.
        let unsettled = moving
            .iter()
            .any(|m| scanner.is_script(m) || analysed.iter().any(|(p, _)| p == m));
        if unsettled
            || last.as_ref() == Some(&ready)
            || ready.iter().all(|(p, _)| scanner.is_script(p))
        {
            std::thread::sleep(POLL);
            continue;
        }
        crate::interrupt::idle(None);
        // Register what is new or changed; an input that cannot be opened (yet) is said once
        // per version of it and left out.
        let mut inputs = Vec::new();
        for (path, sig) in ready.iter().filter(|(p, _)| !scanner.is_script(p)) {
            if known.get(path).is_none_or(|k| k.0 != *sig) {
                if refused.get(path) == Some(sig) {
                    continue;
                }
                let added = graph::classify_inputs(std::slice::from_ref(path), &[])
                    .and_then(|i| graph::add_input(&db, &i[0]));
                match added {
                    Ok((archive, stems)) => {
                        known.insert(path.clone(), (*sig, archive, stems));
                    }
                    Err(e) => {
                        ui.say(&format!(
                            "nsys-jax-pipe: error: {}; waiting for it to change",
                            crate::error::one_line(&e)
                        ));
                        refused.insert(path.clone(), *sig);
                        known.remove(path);
                        continue;
                    }
                }
            }
            inputs.push(path.clone());
        }
        let mut list = Vec::new();
        for path in &inputs {
            let (_, archive, stems) = &known[path];
            for stem in stems {
                let id = (*archive, stem.clone(), list.len() as u32);
                let p = *processes.entry(id).or_insert_with(|| {
                    Process::new(&db, *archive, stem.clone(), list.len() as u32)
                });
                list.push(p);
            }
        }
        let state: Vec<(PathBuf, Sig)> = ready
            .iter()
            .filter(|(p, _)| inputs.contains(p) || scanner.is_script(p))
            .cloned()
            .collect();
        last = Some(ready);
        if list.is_empty() || state == analysed {
            crate::interrupt::idle(Some(waiting.clone()));
            continue;
        }
        analysed = state;
        if run.processes(&db) != &list {
            run.set_processes(&mut db).to(list);
        }
        updates += 1;
        db.ctx.engine.restart();
        updated(Update {
            number: updates,
            inputs: inputs.len(),
            done: update(&db, run, req, &inputs, ui),
        })?;
        crate::interrupt::idle(Some(waiting.clone()));
    }
}

/// Which inputs are there and settled: the files of watched folders (`.zip`, `.nsys-rep`),
/// named archives and reports, and analysis scripts.
struct Scanner {
    /// Each watched path, and whether it is a folder of inputs (decided when the watch
    /// starts: an empty folder is one).
    roots: Vec<(PathBuf, bool)>,
    scripts: Vec<PathBuf>,
    /// Each candidate's signature and since when it has had it.
    seen: HashMap<PathBuf, (Sig, Instant)>,
}

impl Scanner {
    fn new(roots: Vec<PathBuf>, scripts: Vec<PathBuf>) -> Scanner {
        Scanner {
            roots: roots
                .into_iter()
                .map(|r| {
                    let folder = is_folder_of_inputs(&r);
                    (r, folder)
                })
                .collect(),
            scripts,
            seen: HashMap::new(),
        }
    }

    fn is_script(&self, p: &Path) -> bool {
        self.scripts.iter().any(|s| s == p)
    }

    /// The settled candidates, sorted (scripts last), with their signatures; and the
    /// candidates that changed within the last [`SETTLE`].
    fn poll(&mut self) -> (Vec<(PathBuf, Sig)>, Vec<PathBuf>) {
        let mut candidates = Vec::new();
        for (root, folder) in &self.roots {
            if *folder {
                let Ok(entries) = std::fs::read_dir(root) else {
                    continue;
                };
                let mut files: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| is_input_name(p) && p.is_file())
                    .collect();
                files.sort();
                candidates.extend(files);
            } else {
                candidates.push(root.clone());
            }
        }
        candidates.extend(self.scripts.iter().cloned());
        let now = Instant::now();
        let (mut ready, mut moving) = (Vec::new(), Vec::new());
        for c in candidates {
            let Some(sig) = signature(&c) else { continue };
            let since = match self.seen.get(&c) {
                Some((s, since)) if *s == sig => *since,
                _ => {
                    self.seen.insert(c.clone(), (sig, now));
                    now
                }
            };
            if now.duration_since(since) >= SETTLE {
                ready.push((c, sig));
            } else {
                moving.push(c);
            }
        }
        (ready, moving)
    }
}

/// A folder whose files are the inputs (rather than an extracted archive): one that is not an
/// archive layout.
fn is_folder_of_inputs(p: &Path) -> bool {
    p.is_dir()
        && crate::formats::archive::Archive::open(p)
            .and_then(|a| a.process_stems())
            .is_err()
}

/// A rank's archive or report, not one being written.
fn is_input_name(p: &Path) -> bool {
    let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    !name.starts_with('.') && (name.ends_with(".zip") || name.ends_with(".nsys-rep"))
}

/// Size and modification time: of a file, or summed and latest over a folder's files.
fn signature(p: &Path) -> Option<Sig> {
    let md = std::fs::metadata(p).ok()?;
    if md.is_file() {
        return Some((md.len(), md.modified().ok()?));
    }
    let mut size = 0;
    let mut latest = SystemTime::UNIX_EPOCH;
    for e in walkdir::WalkDir::new(p).into_iter().filter_map(|e| e.ok()) {
        if let Ok(md) = e.metadata()
            && md.is_file()
        {
            size += md.len();
            latest = latest.max(md.modified().unwrap_or(SystemTime::UNIX_EPOCH));
        }
    }
    Some((size, latest))
}

/// `analyze --watch` needs inputs that can grow: reports need their dump found beside them,
/// so explicit `--dump` folders cannot follow new inputs.
pub fn check(req: &AnalyzeRequest) -> Result<()> {
    if !req.capture.dumps.is_empty() {
        bail!("--watch finds each report's XLA dump beside it: it cannot go with --dump");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Moves every candidate's "unchanged since" back by more than [`SETTLE`].
    fn age(scanner: &mut Scanner) {
        for (_, since) in scanner.seen.values_mut() {
            *since -= SETTLE * 2;
        }
    }

    #[test]
    fn files_are_taken_once_settled_and_an_edited_one_is_moving_again() {
        let tmp = tempfile::tempdir().unwrap();
        let job = tmp.path().join("job");
        std::fs::create_dir(&job).unwrap();
        let script = tmp.path().join("count.py");
        std::fs::write(&script, "print(1)\n").unwrap();
        let mut scanner = Scanner::new(vec![job.clone()], vec![script.clone()]);
        std::fs::write(job.join("rank0.zip"), b"zip").unwrap();
        std::fs::write(job.join("rank1.zip.tmp"), b"half").unwrap();
        std::fs::write(job.join(".rank2.zip"), b"hidden").unwrap();
        let (ready, moving) = scanner.poll();
        assert!(ready.is_empty());
        assert_eq!(moving, vec![job.join("rank0.zip"), script.clone()]);
        age(&mut scanner);
        let (ready, moving) = scanner.poll();
        let names: Vec<&Path> = ready.iter().map(|(p, _)| p.as_path()).collect();
        assert_eq!(names, vec![job.join("rank0.zip").as_path(), &script]);
        assert!(moving.is_empty());
        // An edit makes the script move again: it leaves the ready list for a while.
        std::fs::write(&script, "print(2)  # edited\n").unwrap();
        let (ready, moving) = scanner.poll();
        assert_eq!(ready.len(), 1);
        assert_eq!(moving, vec![script.clone()]);
        age(&mut scanner);
        let (ready, moving) = scanner.poll();
        assert_eq!(ready.len(), 2);
        assert!(moving.is_empty());
    }
}
