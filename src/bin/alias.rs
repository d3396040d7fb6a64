// `nsys-jax` and `nsys-jax-combine`: nsys-jax's command names as small programs of their own,
// for installs that cannot make links (a wheel's scripts, `cargo install`). Each runs the
// `nsys-jax-pipe` beside it (else the first on `PATH`) under its own name, which makes
// `nsys-jax-pipe` behave as that command does (`src/cli/compat.rs`).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

const MAIN: &str = "nsys-jax-pipe";

fn main() {
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_default();
    let exe = std::env::current_exe().ok();
    // The command's name: the file it was started from (a link to it keeps the link's name).
    let name = Path::new(&argv0)
        .file_name()
        .or_else(|| exe.as_deref().and_then(Path::file_name))
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let beside = exe
        .as_deref()
        .and_then(Path::parent)
        .map(|d| d.join(MAIN))
        .filter(|p| p.is_file());
    let target = beside.unwrap_or_else(|| PathBuf::from(MAIN));
    let err = std::process::Command::new(&target)
        .arg0(&name)
        .args(args)
        .exec();
    eprintln!("{name}: cannot run {}: {err}", target.display());
    std::process::exit(2);
}
