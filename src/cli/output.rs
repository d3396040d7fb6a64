//! What the commands share in printing results and progress and in writing outputs.

use anyhow::{Result, bail};
use std::io::Write;
use std::path::Path;

/// The analyses' terminal texts (unless `quiet`) and, with `explain`, the node table.
pub(super) fn print_results(
    out: &mut impl Write,
    texts: &[(String, String)],
    quiet: bool,
    explain: bool,
    record: &crate::engine::RunRecord,
) -> Result<()> {
    if !quiet {
        for (name, text) in texts {
            writeln!(out, "──── {name} ────\n{text}")?;
        }
    }
    if explain {
        writeln!(out, "──── pipeline ────\n{}", record.table())?;
    }
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
    format!(
        "{} executed, {} reused, {:.0} ms",
        crate::table::count(record.executed, "node", "nodes"),
        record.reused,
        record.wall_ms
    )
}
