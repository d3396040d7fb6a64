//! How a program is profiled (the `run` command): the output name (`%q{VAR}` expansion, as
//! in Nsight Systems' `-o`), the environment it runs in (`XLA_FLAGS` with the dump redirected,
//! JAX settings; docs/design.md, "Profiling"), the `nsys profile` options (the user's
//! plus defaults), the `--condition` test, and what its exit status means.

use anyhow::{Context, Result, bail};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// Expand `%q{VAR}` with the value of `VAR` from `env`, and `%%` to `%`. An undefined
/// variable is left as written and named in the returned warnings.
pub fn expand_output_name(
    name: &str,
    env: impl Fn(&str) -> Option<String>,
) -> (String, Vec<String>) {
    let mut out = String::with_capacity(name.len());
    let mut warnings = Vec::new();
    let mut rest = name;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("%%") {
            out.push('%');
            rest = after;
        } else if let Some(var) = tail.strip_prefix("%q{")
            && let Some(end) = var.find('}')
        {
            let key = &var[..end];
            match env(key) {
                Some(v) => out.push_str(&v),
                None => {
                    warnings.push(format!(
                        "%q{{{key}}} in the output name: {key} is not set; left as is"
                    ));
                    out.push_str(&tail[..3 + end + 1]);
                }
            }
            rest = &var[end + 1..];
        } else {
            out.push('%');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    (out, warnings)
}

/// Split `XLA_FLAGS` into flags: whitespace separates them except inside single or double
/// quotes, which are kept as written (XLA parses them itself).
pub fn split_flags(flags: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    for c in flags.chars() {
        match quote {
            Some(q) => {
                cur.push(c);
                if c == q {
                    quote = None;
                }
            }
            None if c.is_whitespace() => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            None => {
                if c == '"' || c == '\'' {
                    quote = Some(c);
                }
                cur.push(c);
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The name of a flag (`--xla_dump_to` of `--xla_dump_to=/x`).
fn flag_name(flag: &str) -> &str {
    flag.split_once('=').map(|(n, _)| n).unwrap_or(flag)
}

/// `XLA_FLAGS` for a profiled run: the user's flags kept as written, except `--xla_dump_to`,
/// which is replaced by `dump_to` (with a warning when the user set another), and
/// `--xla_dump_hlo_as_proto`, added (`=true`) unless the user set it. Flags given twice are
/// kept (XLA takes the last) and warned about.
pub fn merge_xla_flags(user: Option<&str>, dump_to: &str) -> (String, Vec<String>) {
    let mut warnings = Vec::new();
    let flags = split_flags(user.unwrap_or(""));
    let mut seen = std::collections::BTreeSet::new();
    let mut out: Vec<String> = Vec::with_capacity(flags.len() + 2);
    let mut has_proto = false;
    for f in flags {
        let name = flag_name(&f).to_string();
        if !seen.insert(name.clone()) {
            warnings.push(format!(
                "XLA_FLAGS sets {name} more than once; XLA uses the last"
            ));
        }
        match name.as_str() {
            "--xla_dump_to" => {
                if f != format!("--xla_dump_to={dump_to}") {
                    warnings.push(format!(
                        "XLA_FLAGS: {f} replaced by --xla_dump_to={dump_to} (the dump is collected into the archive)"
                    ));
                }
            }
            "--xla_dump_hlo_as_proto" => {
                has_proto = true;
                out.push(f);
            }
            _ => out.push(f),
        }
    }
    out.push(format!("--xla_dump_to={dump_to}"));
    if !has_proto {
        out.push("--xla_dump_hlo_as_proto=true".into());
    }
    (out.join(" "), warnings)
}

/// Environment variables set for the profiled program, unless the user set them:
/// full Python tracebacks in HLO metadata (source lines) and no compilation cache (a cached
/// executable leaves no HLO dump).
pub const JAX_ENV_DEFAULTS: [(&str, &str); 2] = [
    ("JAX_TRACEBACK_IN_LOCATIONS_LIMIT", "-1"),
    ("JAX_ENABLE_COMPILATION_CACHE", "false"),
];

/// The variables to set for the profiled program, given the current environment (`get`),
/// and the warnings about the user's `XLA_FLAGS`.
pub fn program_env(
    get: impl Fn(&str) -> Option<String>,
    dump_to: &str,
) -> (Vec<(String, String)>, Vec<String>) {
    let (flags, warnings) = merge_xla_flags(get("XLA_FLAGS").as_deref(), dump_to);
    let mut vars = vec![("XLA_FLAGS".to_string(), flags)];
    for (k, v) in JAX_ENV_DEFAULTS {
        if get(k).is_none() {
            vars.push((k.to_string(), v.to_string()));
        }
    }
    (vars, warnings)
}

/// `nsys profile` defaults, each added unless the user gave that option: CUDA graphs traced
/// per node (XLA launches thunks as graph nodes; per-graph tracing would hide them), no CPU
/// context-switch trace (unused, and large), and the APIs whose GPU work the analyses
/// attribute (CUDA, NVTX for XLA's ranges, cuBLAS and cuDNN library calls).
pub const NSYS_DEFAULTS: [(&str, Option<char>, &str); 3] = [
    ("cuda-graph-trace", None, "node"),
    ("cpuctxsw", None, "none"),
    ("trace", Some('t'), "cuda,nvtx,cublas,cudnn"),
];

/// The `nsys profile` options the user gave, as (name, value) pairs: `--name=value`,
/// `--name value`, `-x value` (short names as written, without the dash).
#[derive(Debug, Clone, Default)]
pub struct NsysOptions {
    pub tokens: Vec<String>,
    parsed: Vec<(String, Option<String>)>,
}

impl NsysOptions {
    pub fn parse(tokens: &[String]) -> Result<NsysOptions> {
        let mut parsed = Vec::new();
        let mut i = 0;
        while i < tokens.len() {
            let t = &tokens[i];
            let Some(opt) = t.strip_prefix('-') else {
                bail!(
                    "{t:?}: not an nsys profile option (options come before `--`, the program after it)"
                );
            };
            let (name, value) = match opt.strip_prefix('-') {
                Some(long) => match long.split_once('=') {
                    Some((n, v)) => (n.to_string(), Some(v.to_string())),
                    None => (long.to_string(), None),
                },
                None => (opt.to_string(), None),
            };
            let value = match value {
                Some(v) => Some(v),
                None if tokens.get(i + 1).is_some_and(|n| !n.starts_with('-')) => {
                    i += 1;
                    Some(tokens[i].clone())
                }
                None => None,
            };
            parsed.push((name, value));
            i += 1;
        }
        Ok(NsysOptions {
            tokens: tokens.to_vec(),
            parsed,
        })
    }

    /// The last value given for the option `long` (or its short name).
    pub fn value(&self, long: &str, short: Option<char>) -> Option<&str> {
        self.parsed
            .iter()
            .rev()
            .find(|(n, _)| n == long || short.is_some_and(|s| n.len() == 1 && n.starts_with(s)))
            .and_then(|(_, v)| v.as_deref())
    }

    pub fn has(&self, long: &str, short: Option<char>) -> bool {
        self.parsed
            .iter()
            .any(|(n, _)| n == long || short.is_some_and(|s| n.len() == 1 && n.starts_with(s)))
    }

    /// The full `nsys profile` argument list: the user's options, the defaults they did not
    /// override, and the report's location. Also returns the defaults that were added.
    pub fn profile_args(&self, report_base: &Path) -> (Vec<OsString>, Vec<String>) {
        let mut args: Vec<OsString> = vec!["profile".into()];
        args.extend(self.tokens.iter().map(OsString::from));
        let mut added = Vec::new();
        for (long, short, value) in NSYS_DEFAULTS {
            if !self.has(long, short) {
                let a = format!("--{long}={value}");
                args.push(a.clone().into());
                added.push(a);
            }
        }
        let mut out = OsString::from("--output=");
        out.push(report_base.as_os_str());
        args.push(out);
        (args, added)
    }

    /// How the capture range ends: the `--capture-range-end` given, else Nsight Systems' own
    /// default when a capture range is set (`--capture-range`/`-c` other than `none`), else
    /// `None` (the whole program is captured). The second value says whether it is the
    /// default. Every Nsight Systems this tool accepts (2023.4 and later) ends a capture
    /// range by `stop-shutdown` unless told otherwise: it ends the program with its `--kill`
    /// signal after `cudaProfilerStop` (or the end of the NVTX range).
    pub fn capture_range_end(&self) -> Option<(&str, bool)> {
        if let Some(end) = self.value("capture-range-end", None) {
            return Some((end, false));
        }
        let range = self.value("capture-range", Some('c'))?;
        (range != "none").then_some((DEFAULT_CAPTURE_RANGE_END, true))
    }

    /// The signal Nsight Systems ends the program with once the capture is over, when it
    /// does (a capture range ending by `stop-shutdown` or `repeat-shutdown:N`, given or by
    /// default, or a `--duration`), per `--kill` (default SIGTERM; `none`: no signal). The
    /// program's death by that signal is the expected end of the run, not a failure.
    pub fn shutdown_signal(&self) -> Result<Option<i32>> {
        let ends_by_shutdown = self.capture_range_end().is_some_and(|(v, _)| {
            v.starts_with("stop-shutdown") || v.starts_with("repeat-shutdown")
        }) || self.has("duration", Some('d'));
        if !ends_by_shutdown {
            return Ok(None);
        }
        parse_kill(self.value("kill", None).unwrap_or("sigterm"))
    }
}

/// What Nsight Systems does at the end of a capture range when `--capture-range-end` is not
/// given (2023.4 and later).
pub const DEFAULT_CAPTURE_RANGE_END: &str = "stop-shutdown";

/// `--kill` values: `none`, a signal name (`sigterm`, `SIGKILL`, `int`, ...) or number.
pub fn parse_kill(v: &str) -> Result<Option<i32>> {
    let lower = v.to_ascii_lowercase();
    if lower == "none" {
        return Ok(None);
    }
    if let Ok(n) = lower.parse::<i32>() {
        return Ok(Some(n));
    }
    let name = lower.strip_prefix("sig").unwrap_or(&lower);
    let n = match name {
        "hup" => libc::SIGHUP,
        "int" => libc::SIGINT,
        "quit" => libc::SIGQUIT,
        "kill" => libc::SIGKILL,
        "usr1" => libc::SIGUSR1,
        "usr2" => libc::SIGUSR2,
        "term" => libc::SIGTERM,
        _ => bail!(
            "--kill {v}: not a signal Nsight Systems knows (none, sigterm, sigkill, or a number)"
        ),
    };
    Ok(Some(n))
}

/// The exit code a shell would report for `status`: the code, or 128 + the signal.
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// Whether `code` ends a successful run: 0, or death by the signal Nsight Systems sends on
/// shutdown.
pub fn run_succeeded(code: i32, shutdown_signal: Option<i32>) -> bool {
    code == 0 || shutdown_signal.is_some_and(|s| code == 128 + s)
}

/// Evaluate `--condition`: bash's `[[ EXPR ]]` in the current environment. True/false by its
/// exit status; an expression bash cannot evaluate is an error.
pub fn condition_holds(expr: &str) -> Result<bool> {
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!("[[ {expr} ]]"))
        .stdin(std::process::Stdio::null())
        .output()
        .context("--condition needs bash, which could not be started")?;
    // bash exits 0 on some syntax errors inside [[ ]]; what it prints says more.
    match out.status.code() {
        Some(0) if out.stderr.is_empty() => Ok(true),
        Some(1) if out.stderr.is_empty() => Ok(false),
        _ => bail!(
            "--condition {expr:?}: bash cannot evaluate [[ {expr} ]]: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    }
}

/// The executable `program` names: a path (with a `/`) or a name looked up on `PATH`.
pub fn find_program(program: &OsStr) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let p = Path::new(program);
    if program.as_encoded_bytes().contains(&b'/') {
        if executable(p) {
            return Ok(p.to_path_buf());
        }
        bail!("{}: program not found or not executable", p.display());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let c = dir.join(p);
        if executable(&c) {
            return Ok(c);
        }
    }
    bail!("{}: program not found on PATH", p.display())
}

/// The archive an explicit `-o NAME` designates: `.nsys-rep` / `.zip` dropped, `%q{VAR}`
/// expanded, `.zip` added.
pub fn output_archive(name: &str, env: impl Fn(&str) -> Option<String>) -> (PathBuf, Vec<String>) {
    let base = name.strip_suffix(".nsys-rep").unwrap_or(name);
    let base = base.strip_suffix(".zip").unwrap_or(base);
    let (expanded, warnings) = expand_output_name(base, env);
    (PathBuf::from(format!("{expanded}.zip")), warnings)
}

/// What a profiled run left behind.
/// Whether nsys said it could not turn the capture into a report for want of its importer
/// (a CLI unpacked without the host package): "Importer error status: The importer binary and
/// its dependencies were not found."
pub fn importer_missing(nsys_output: &str) -> bool {
    nsys_output.lines().any(|l| {
        l.starts_with("Importer error status:")
            && l.contains("importer binary")
            && l.contains("not found")
    })
}

pub struct Profiled {
    /// The report (it may be missing when nsys failed).
    pub report: PathBuf,
    /// The XLA dump folder, when the program wrote one.
    pub dump: Option<PathBuf>,
    /// The exit code of `nsys profile` (the program's, or 128 + the signal that ended it).
    pub exit_code: i32,
    /// Wall time from the start of nsys to its exit.
    pub wall: std::time::Duration,
    /// The end of what nsys and the program printed (both streams; see [`forward`]).
    pub output: String,
    /// The recorded variables (`formats::run_metadata::recorded_variable`) as the program
    /// was given them.
    pub environment: std::collections::BTreeMap<String, String>,
    /// When nsys started [s since the Unix epoch].
    pub started_unix_s: u64,
}

/// How much of the output is kept for reading nsys's messages (they come last).
const OUTPUT_KEPT: usize = 1 << 20;

/// Copy `from` to `to` as it comes, keeping the last [`OUTPUT_KEPT`] bytes in `kept`.
fn forward(
    mut from: impl std::io::Read,
    mut to: impl std::io::Write,
    kept: &std::sync::Mutex<Vec<u8>>,
) {
    let mut buf = [0u8; 8192];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 {
            break;
        }
        let _ = to.write_all(&buf[..n]);
        let _ = to.flush();
        let mut k = kept.lock().unwrap_or_else(|e| e.into_inner());
        k.extend_from_slice(&buf[..n]);
        if k.len() > 2 * OUTPUT_KEPT {
            let cut = k.len() - OUTPUT_KEPT;
            k.drain(..cut);
        }
    }
}

/// Run `program` under `nsys profile` with the report and the XLA dump in `work` (a local
/// temporary folder): the report is `work/<stem>.nsys-rep`, the dump `work/dump/`. The
/// program's output goes to the terminal. An interrupt while it runs ends nsys and the
/// program (see [`crate::interrupt`]) and is returned as [`crate::error::Interrupted`].
pub fn profile(
    nsys: &Path,
    options: &NsysOptions,
    program: &[OsString],
    work: &Path,
    stem: &str,
    python_hook: Option<(&Path, Vec<(String, String)>)>,
) -> Result<Profiled> {
    let dump = work.join("dump");
    let (mut vars, warnings) = program_env(|k| std::env::var(k).ok(), &dump.to_string_lossy());
    let mut environment: std::collections::BTreeMap<String, String> = std::env::vars()
        .filter(|(k, _)| crate::formats::run_metadata::recorded_variable(k))
        .collect();
    environment.extend(
        vars.iter()
            .filter(|(k, _)| crate::formats::run_metadata::recorded_variable(k))
            .cloned(),
    );
    if let Some((dir, hook_vars)) = python_hook {
        vars.push((
            "PYTHONPATH".into(),
            super::python_hook::python_path(dir, std::env::var("PYTHONPATH").ok().as_deref()),
        ));
        vars.extend(hook_vars);
    }
    for w in warnings {
        eprintln!("nsys-jax-pipe: warning: {w}");
    }
    let report_base = work.join(stem);
    let (args, added) = options.profile_args(&report_base);
    let shown: Vec<String> = added
        .iter()
        .cloned()
        .chain(options.tokens.iter().cloned())
        .chain(program.iter().map(|a| a.to_string_lossy().into_owned()))
        .collect();
    eprintln!("nsys-jax-pipe: profiling: nsys profile {}", shown.join(" "));
    let start = std::time::Instant::now();
    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    use std::os::unix::process::CommandExt;
    // nsys relays the program's output through pipes of its own (nsys-tee), so reading its
    // streams here changes nothing for the program; they are copied on at once.
    let mut child = crate::interrupt::spawn(
        std::process::Command::new(nsys)
            .args(&args)
            .args(program)
            .envs(vars)
            // A process group of its own: interrupts reach it once, through this process.
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    )
    .with_context(|| format!("{}: cannot start nsys", nsys.display()))?;
    let kept = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let out = child.stdout.take().expect("piped");
    let err = child.stderr.take().expect("piped");
    for (stream, to_stdout) in [
        (Box::new(out) as Box<dyn std::io::Read + Send>, true),
        (Box::new(err), false),
    ] {
        let (kept, done) = (kept.clone(), done_tx.clone());
        std::thread::spawn(move || {
            if to_stdout {
                forward(stream, std::io::stdout(), &kept);
            } else {
                forward(stream, std::io::stderr(), &kept);
            }
            let _ = done.send(());
        });
    }
    let status = {
        let _forward = crate::interrupt::forward_to(child.id());
        child
            .wait()
            .with_context(|| format!("{}: lost track of nsys", nsys.display()))?
    };
    let wall = start.elapsed();
    // A program that nsys left running (--kill none) may hold the streams open: read what
    // came until shortly after nsys's exit, and let the copying go on meanwhile.
    let grace = std::time::Instant::now() + std::time::Duration::from_secs(1);
    for _ in 0..2 {
        let left = grace.saturating_duration_since(std::time::Instant::now());
        if done_rx.recv_timeout(left).is_err() {
            break;
        }
    }
    let output =
        String::from_utf8_lossy(&kept.lock().unwrap_or_else(|e| e.into_inner())).into_owned();
    if let Some(signal) = crate::interrupt::received() {
        return Err(crate::error::Interrupted(signal).into());
    }
    let mut report = report_base.into_os_string();
    report.push(".nsys-rep");
    Ok(Profiled {
        report: PathBuf::from(report),
        dump: dump
            .read_dir()
            .is_ok_and(|mut d| d.next().is_some())
            .then_some(dump),
        exit_code: exit_code(status),
        wall,
        output,
        environment,
        started_unix_s,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_missing_importer_is_recognised() {
        let out = "Importer error status: The importer binary and its dependencies were not found.\nUnable to retrieve the importer version: skipping importation of the QDSTRM file.\n";
        assert!(importer_missing(out));
        assert!(!importer_missing(
            "Importer error status: Importation succeeded with non-fatal errors."
        ));
    }

    use super::*;
    use proptest::prelude::*;

    fn env(k: &str) -> Option<String> {
        match k {
            "RANK" => Some("3".into()),
            "SLURM_JOB_ID" => Some("777".into()),
            _ => None,
        }
    }

    #[test]
    fn output_names() {
        assert_eq!(expand_output_name("out/rank%q{RANK}", env).0, "out/rank3");
        assert_eq!(
            expand_output_name("j%q{SLURM_JOB_ID}-%q{RANK}", env).0,
            "j777-3"
        );
        assert_eq!(expand_output_name("100%%", env).0, "100%");
        let (n, w) = expand_output_name("x%q{NOPE}y", env);
        assert_eq!(n, "x%q{NOPE}y");
        assert!(w[0].contains("NOPE"), "{w:?}");
        assert_eq!(expand_output_name("a%q{RANK", env).0, "a%q{RANK");
        assert_eq!(expand_output_name("50%x", env).0, "50%x");
    }

    #[test]
    fn xla_flags() {
        let (f, w) = merge_xla_flags(None, "/tmp/d");
        assert_eq!(f, "--xla_dump_to=/tmp/d --xla_dump_hlo_as_proto=true");
        assert!(w.is_empty());
        let user = r#"--xla_gpu_enable_latency_hiding_scheduler=true --xla_dump_to=/mine --xla_dump_hlo_pass_re=.* --xla_gpu_autotune_level="4"  --xla_dump_hlo_as_proto=false"#;
        let (f, w) = merge_xla_flags(Some(user), "/tmp/d");
        assert_eq!(
            f,
            r#"--xla_gpu_enable_latency_hiding_scheduler=true --xla_dump_hlo_pass_re=.* --xla_gpu_autotune_level="4" --xla_dump_hlo_as_proto=false --xla_dump_to=/tmp/d"#
        );
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("--xla_dump_to=/mine"), "{w:?}");
        let (_, w) = merge_xla_flags(Some("--a=1 --a=2"), "/d");
        assert!(w[0].contains("--a more than once"), "{w:?}");
        assert_eq!(
            split_flags(r#"--x="a b" --y='c d'"#),
            vec![r#"--x="a b""#, "--y='c d'"]
        );
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn nsys_options_and_defaults() {
        let o = NsysOptions::parse(&strings(&[
            "--capture-range=cudaProfilerApi",
            "-t",
            "cuda,nvtx,osrt",
            "--capture-range-end",
            "stop-shutdown",
            "--stats=false",
        ]))
        .unwrap();
        assert_eq!(o.value("trace", Some('t')), Some("cuda,nvtx,osrt"));
        assert_eq!(o.value("capture-range-end", None), Some("stop-shutdown"));
        let (args, added) = o.profile_args(Path::new("/tmp/x/rep"));
        assert_eq!(added, ["--cuda-graph-trace=node", "--cpuctxsw=none"]);
        assert_eq!(args.last().unwrap(), "--output=/tmp/x/rep");
        assert_eq!(args[0], "profile");
        assert_eq!(o.shutdown_signal().unwrap(), Some(libc::SIGTERM));
        let none = NsysOptions::parse(&[]).unwrap();
        assert_eq!(none.profile_args(Path::new("r")).1.len(), 3);
        assert_eq!(none.shutdown_signal().unwrap(), None);
        let k = NsysOptions::parse(&strings(&[
            "--capture-range-end=repeat-shutdown:2",
            "--kill=sigkill",
        ]))
        .unwrap();
        assert_eq!(k.shutdown_signal().unwrap(), Some(9));
        let d = NsysOptions::parse(&strings(&["-d", "30", "--kill", "none"])).unwrap();
        assert_eq!(d.shutdown_signal().unwrap(), None);
        let s = NsysOptions::parse(&strings(&["--capture-range-end=stop"])).unwrap();
        assert_eq!(s.shutdown_signal().unwrap(), None);
        // A capture range without an end: Nsight Systems' default, stop-shutdown.
        for (args, end, signal) in [
            (
                &["--capture-range=cudaProfilerApi"][..],
                Some(("stop-shutdown", true)),
                Some(15),
            ),
            (
                &["-c", "nvtx", "--kill", "2"][..],
                Some(("stop-shutdown", true)),
                Some(2),
            ),
            (
                &["-c", "cudaProfilerApi", "--kill=none"][..],
                Some(("stop-shutdown", true)),
                None,
            ),
            (&["--capture-range=none"][..], None, None),
            (&[][..], None, None),
            (
                &[
                    "--capture-range=cudaProfilerApi",
                    "--capture-range-end",
                    "stop",
                ][..],
                Some(("stop", false)),
                None,
            ),
        ] {
            let o = NsysOptions::parse(&strings(args)).unwrap();
            assert_eq!(o.capture_range_end(), end, "{args:?}");
            assert_eq!(o.shutdown_signal().unwrap(), signal, "{args:?}");
        }
        assert!(NsysOptions::parse(&strings(&["python"])).is_err());
        assert!(parse_kill("sigfoo").is_err());
        assert_eq!(parse_kill("2").unwrap(), Some(2));
        assert!(run_succeeded(143, Some(15)));
        assert!(!run_succeeded(143, None));
        assert!(!run_succeeded(3, Some(15)));
    }

    #[test]
    fn environment_defaults() {
        let (vars, _) = program_env(
            |k| (k == "JAX_ENABLE_COMPILATION_CACHE").then(|| "true".into()),
            "/d",
        );
        assert_eq!(
            vars,
            vec![
                (
                    "XLA_FLAGS".to_string(),
                    "--xla_dump_to=/d --xla_dump_hlo_as_proto=true".to_string()
                ),
                (
                    "JAX_TRACEBACK_IN_LOCATIONS_LIMIT".to_string(),
                    "-1".to_string()
                ),
            ]
        );
    }

    #[test]
    fn output_archives_and_conditions() {
        assert_eq!(
            output_archive("out/rank%q{RANK}.nsys-rep", env).0,
            PathBuf::from("out/rank3.zip")
        );
        assert_eq!(output_archive("a.zip", env).0, PathBuf::from("a.zip"));
        assert_eq!(output_archive("a.b", env).0, PathBuf::from("a.b.zip"));
        assert!(condition_holds("1 == 1").unwrap());
        assert!(!condition_holds("a == b").unwrap());
        assert!(condition_holds("1 -eq ").is_err());
        assert!(find_program(OsStr::new("sh")).is_ok());
        assert!(find_program(OsStr::new("no-such-program-xyz")).is_err());
        assert!(find_program(OsStr::new("./no/such")).is_err());
    }

    proptest! {
        #[test]
        fn names_without_percent_are_unchanged(s in "[a-zA-Z0-9_./{}-]{0,40}") {
            prop_assert_eq!(expand_output_name(&s, env).0, s);
        }

        #[test]
        fn other_flags_survive(flags in prop::collection::vec("--xla_[a-z_]{1,12}=[a-z0-9.*]{1,8}", 0..6)) {
            let user = flags.join(" ");
            let (merged, _) = merge_xla_flags(Some(&user), "/dump");
            let parts = split_flags(&merged);
            for f in &flags {
                if !f.starts_with("--xla_dump_to=") && !f.starts_with("--xla_dump_hlo_as_proto=") {
                    prop_assert!(parts.contains(f));
                }
            }
            prop_assert_eq!(parts.iter().filter(|p| p.starts_with("--xla_dump_to=")).count(), 1);
            prop_assert!(parts.contains(&"--xla_dump_to=/dump".to_string()));
        }
    }
}
