//! The commands: what `run`, `archive`, `analyze` (and `--watch`), `combine`, `compare` and
//! `history` do,
//! as functions of plain request structs that return what they did. They open the query graph
//! ([`crate::graph`]), run it and write the outputs; they print nothing (what they have to say
//! goes through a [`Ui`]). The front-end ([`crate::cli`]) turns a command line into a
//! request and prints the result.
//!
//! Beside them: `pipeline` (pipeline files and analysis requests) and `labels` (named runs in
//! the cache). `compare` and `history` are thin commands over [`crate::compare`].

pub mod analyze;
pub mod archive;
pub mod cache;
pub mod combine;
pub mod compare;
pub mod history;
pub mod labels;
pub mod pipeline;
pub mod run;
pub mod run_analyses;
mod ui;
pub mod watch;

#[cfg(test)]
pub use ui::Recorded;
pub use ui::{Step, Ui, say_dump_notes};

use anyhow::{Result, bail};
use std::path::Path;

/// An existing output is replaced only when asked to.
pub fn refuse_existing(path: &Path, force: bool) -> Result<()> {
    if path.exists() && !force {
        bail!("{}: already exists (use -f to overwrite)", path.display());
    }
    Ok(())
}

/// A command's last lines: what it wrote, what its graph did and, when it wrote an HTML
/// report, where to open it.
pub fn wrote_line(what: &str, record: &crate::engine::RunRecord, page: Option<&Path>) -> String {
    let mut s = format!("wrote {what} ({})", graph_work(record));
    if let Some(p) = page {
        s.push_str(&format!("\nreport: {}", p.display()));
    }
    s
}

/// What a command's graph did, for its last line: "3 nodes executed, 1 reused, 12 ms".
pub fn graph_work(record: &crate::engine::RunRecord) -> String {
    let remote = match &record.remote {
        Some(r) => {
            let claimed = match r.counts.claimed {
                0 => String::new(),
                n => format!(
                    ", {} keyed unread",
                    crate::table::count(n as usize, "input", "inputs")
                ),
            };
            format!(
                ", remote cache: {} read, {} uploaded{claimed}",
                r.counts.hits, r.counts.uploads
            )
        }
        None => String::new(),
    };
    format!(
        "{} executed, {} reused{remote}, {:.0} ms",
        crate::table::count(record.executed, "node", "nodes"),
        record.reused,
        record.wall_ms
    )
}

/// Where the XLA dumps of the reports among the inputs are, and `nsys` if given: what
/// opening the inputs of a run needs besides their paths.
#[derive(Debug, Clone, Default)]
pub struct CaptureOptions {
    /// `--dump` folders (else each report's dump is found beside it).
    pub dumps: Vec<std::path::PathBuf>,
    /// The Nsight Systems CLI to export reports with (else found).
    pub nsys: Option<std::path::PathBuf>,
}
