//! How the commands' results are printed.

use anyhow::Result;
use std::io::Write;

/// The columns printed lines take at most: `COLUMNS` when set, else the terminal's width
/// when stdout is one, else [`crate::table::WIDTH`].
pub(super) fn columns() -> usize {
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n >= 20)
    {
        return n;
    }
    match terminal_size::terminal_size_of(std::io::stdout()) {
        Some((terminal_size::Width(w), _)) if w >= 20 => w as usize,
        _ => crate::table::WIDTH,
    }
}

/// `text` fitted to the terminal ([`columns`]).
pub(super) fn fitted(text: &str) -> String {
    crate::table::fit_lines(text, columns())
}

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
            writeln!(out, "{}", fitted(&format!("──── {name} ────\n{text}")))?;
        }
    }
    if explain {
        writeln!(
            out,
            "{}",
            fitted(&format!("──── pipeline ────\n{}", record.table()))
        )?;
    }
    for d in import {
        eprintln!("nsys-jax-pipe: warning: {}", d.warning());
    }
    writeln!(out, "{}", fitted(wrote))?;
    Ok(())
}
