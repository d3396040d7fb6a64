//! Test helpers shared by the unit and integration tests.
use std::path::PathBuf;

/// The shared fixture folder: `$NSYS_JAX_PIPE_FIXTURES`, else `../shared/fixtures` beside the
/// checkout. Returns `None` (and prints a loud notice) when it is absent, so tests that need it
/// can skip.
pub fn fixtures_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("NSYS_JAX_PIPE_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures"));
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "\n!!! SKIPPING: shared fixtures not found at {} (set NSYS_JAX_PIPE_FIXTURES) !!!\n",
            dir.display()
        );
        None
    }
}
