//! What the commands share in printing results and progress and in writing outputs.

use anyhow::{Result, bail};
use std::io::Write;
use std::path::Path;

/// How a command ends on the terminal: the analyses' texts (unless `quiet`), with `explain`
/// the node table, the import warnings, then `wrote`, its one-line account of what it wrote.
pub(super) fn finish(
    texts: &[(String, String)],
    quiet: bool,
    explain: bool,
    record: &crate::engine::RunRecord,
    import: &[crate::capture::import_check::ImportDiagnostics],
    wrote: &str,
) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if !quiet {
        for (name, text) in texts {
            writeln!(out, "──── {name} ────\n{text}")?;
        }
    }
    if explain {
        writeln!(out, "──── pipeline ────\n{}", record.table())?;
    }
    crate::capture::import_check::warn(import);
    writeln!(out, "{wrote}")?;
    Ok(())
}

/// An existing output is replaced only when asked to.
pub(super) fn refuse_existing(path: &Path, force: bool) -> Result<()> {
    if path.exists() && !force {
        bail!("{}: already exists (use -f to overwrite)", path.display());
    }
    Ok(())
}

/// A spinner saying what is being done, and for how long.
pub(super) fn spinner(what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new_spinner().with_style(
        indicatif::ProgressStyle::with_template(&format!("{{spinner}} {what} [{{elapsed}}]"))
            .expect("valid template"),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

/// The progress of loading `n` processes' profiles.
pub(super) fn loading_bar(n: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(n).with_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} loading profiles {pos}/{len} [{elapsed}]",
        )
        .expect("valid template"),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

/// What a command's graph did, for its last line: "3 nodes executed, 1 reused, 12 ms".
pub(super) fn graph_work(record: &crate::engine::RunRecord) -> String {
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
