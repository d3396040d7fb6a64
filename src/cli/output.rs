//! How the commands' results are printed.

use anyhow::Result;
use std::io::Write;

/// How a command ends on the terminal: the analyses' texts (unless `quiet`), with `explain`
/// the node table, the import warnings (said again after the texts), then `wrote`, its
/// one-line account of what it wrote.
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
        // An analysis with nothing to say (`ranges` without user ranges) prints nothing.
        for (name, text) in texts.iter().filter(|(_, t)| !t.trim().is_empty()) {
            writeln!(out, "──── {name} ────\n{text}")?;
        }
    }
    if explain {
        writeln!(out, "──── pipeline ────\n{}", record.table())?;
    }
    for d in import {
        eprintln!("nsys-jax-pipe: warning: {}", d.warning());
    }
    writeln!(out, "{wrote}")?;
    Ok(())
}
