//! The command line before it is parsed: `run`'s mix of its own options, `nsys profile`
//! options and the program, and the compatibility names `nsys-jax` (a link named so, or
//! `nsys-jax-pipe nsys-jax ...`, → `run`) and `nsys-jax-combine` (a link, or
//! `nsys-jax-pipe nsys-jax-combine ...`, → `combine`).
//!
//! `run [OPTIONS] [NSYS PROFILE OPTIONS] -- PROGRAM [ARGS]...` is rewritten into a form the
//! argument parser checks strictly: the options `run` knows stay as they are, every other
//! option before `--` becomes `--nsys-arg=OPTION` (passed on to `nsys profile`), and the
//! program follows `--`. Without `--`, the program starts at the first word that is not an
//! option, and an option `run` does not know is an error (it cannot tell nsys options from
//! the program's).

use anyhow::{Result, bail};
use std::ffi::OsString;
use std::path::Path;

/// An option of the `run` command, as the parser declares it.
#[derive(Debug, Clone)]
pub struct OptionSpec {
    pub longs: Vec<String>,
    pub short: Option<char>,
    pub takes_value: bool,
}

/// Which front-end the command line is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Run,
    NsysJax,
}

/// nsys-jax's own option names and their `run` equivalents.
const NSYS_JAX_OPTIONS: [(&str, &str); 3] = [
    ("nsys-jax-analysis", "analysis"),
    ("nsys-jax-analysis-arg", "analysis-arg"),
    ("nsys-jax-condition", "condition"),
];

/// Options of `run` that `nsys-jax` also has (the others go to `nsys profile`, as there).
const NSYS_JAX_SHARED: [&str; 5] = [
    "output",
    "force-overwrite",
    "help",
    "analysis",
    "analysis-arg",
];

/// The hidden `run` flag that selects nsys-jax's behaviour (no default analyses).
pub const NSYS_JAX_FLAG: &str = "--nsys-jax-compat";

/// `nsys-jax --help` (before any `--`): nsys-jax's own options, which `run --help` does not
/// show under their nsys-jax names. `None` for any other command line.
pub fn nsys_jax_help(argv: &[OsString]) -> Option<String> {
    let invoked_as = Path::new(argv.first()?)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let rest = match (invoked_as.as_str(), argv.get(1).and_then(|a| a.to_str())) {
        ("nsys-jax", _) => &argv[1..],
        (_, Some("nsys-jax")) => &argv[2..],
        _ => return None,
    };
    // Only up to the program: a program's own --help is the program's. Before a `--`
    // everything is an option; without one, the program is the first word that is neither an
    // option nor the value of one of nsys-jax's own options.
    let has_separator = rest.iter().any(|a| a == "--");
    let takes_value = [
        "-o",
        "--output",
        "--nsys-jax-analysis",
        "--nsys-jax-analysis-arg",
    ];
    let mut asked = false;
    let mut value_next = false;
    for a in rest.iter().take_while(|a| *a != "--") {
        let a = a.to_str().unwrap_or("");
        if value_next {
            value_next = false;
            continue;
        }
        match a {
            "-h" | "--help" => asked = true,
            o if takes_value.contains(&o) || o == "--nsys-jax-condition" => value_next = true,
            o if o.starts_with('-') => {}
            _ if has_separator => {}
            _ => break,
        }
    }
    asked.then(|| {
        format!(
            "Profile a program with Nsight Systems and write its nsys-jax archive, as NVIDIA's
nsys-jax does (nsys-jax-pipe's `run`, without default analyses)

Usage: nsys-jax [OPTIONS] [NSYS PROFILE OPTIONS] -- PROGRAM [ARGS]...

Options:
  -o, --output <NAME>                The archive to write, NAME.zip (%q{{VAR}}: the environment
                                     variable VAR). Default: a new nsys-jax-report-XXXXXX.zip
  -f, --force-overwrite              Replace an existing archive
      --nsys-jax-analysis <NAME>     An analysis to run on the profile and store in the
                                     archive: a built-in one (below) or the path of a script.
                                     Repeatable
      --nsys-jax-analysis-arg <ARG>  An argument of the --nsys-jax-analysis before it
                                     (KEY=VALUE for a built-in one). Repeatable
      --nsys-jax-condition <EXPR>    Profile only when this bash test holds ([[ EXPR ]], e.g.
                                     '$SLURM_LOCALID == 0'); else run the program unprofiled
  -h, --help                         Print help

{}

Every other option before `--` goes to `nsys profile` as given; `nsys-jax-pipe run`'s own
options are accepted too (see `nsys-jax-pipe run --help`).
",
            wrapped(
                &format!("Built-in analyses: {}.", crate::analyses::builtin_names()),
                92
            )
        )
    })
}

/// `text` wrapped at spaces into lines of at most `width` characters (a longer word keeps
/// its own line).
fn wrapped(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    for word in text.split_whitespace() {
        let n = word.chars().count();
        if line > 0 && line + 1 + n > width {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += n;
    }
    out
}

/// Rewrite `argv` (see the module documentation). `run_options` are `run`'s options.
pub fn rewrite(argv: Vec<OsString>, run_options: &[OptionSpec]) -> Result<Vec<OsString>> {
    let Some(argv0) = argv.first() else {
        return Ok(argv);
    };
    let invoked_as = Path::new(argv0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut rest: Vec<OsString> = argv[1..].to_vec();
    let first = rest.first().map(|s| s.to_string_lossy().into_owned());
    let mode = match (invoked_as.as_str(), first.as_deref()) {
        ("nsys-jax", _) => Mode::NsysJax,
        ("nsys-jax-combine", _) => {
            // Its options are a subset of `combine`'s, with the same meaning.
            let mut out = vec![argv0.clone(), "combine".into()];
            out.extend(rest);
            return Ok(out);
        }
        (_, Some("nsys-jax-combine")) => {
            rest[0] = "combine".into();
            let mut out = vec![argv0.clone()];
            out.extend(rest);
            return Ok(out);
        }
        (_, Some("nsys-jax")) => {
            rest.remove(0);
            Mode::NsysJax
        }
        (_, Some("run")) => {
            rest.remove(0);
            Mode::Run
        }
        _ => return Ok(argv),
    };
    let mut out: Vec<OsString> = vec![argv0.clone(), "run".into()];
    if mode == Mode::NsysJax {
        out.push(NSYS_JAX_FLAG.into());
    }
    let (ours, nsys, program) = split(&rest, run_options, mode)?;
    out.extend(ours);
    out.extend(nsys.into_iter().map(|t| {
        let mut a = OsString::from("--nsys-arg=");
        a.push(t);
        a
    }));
    out.push("--".into());
    out.extend(program);
    Ok(out)
}

/// Split `run`'s arguments into its own options, nsys options and the program.
fn split(
    args: &[OsString],
    run_options: &[OptionSpec],
    mode: Mode,
) -> Result<(Vec<OsString>, Vec<OsString>, Vec<OsString>)> {
    let separator = args.iter().position(|a| a == "--");
    let mut ours = Vec::new();
    let mut nsys = Vec::new();
    let mut i = 0;
    let end = separator.unwrap_or(args.len());
    while i < end {
        let token = args[i].to_string_lossy().into_owned();
        if !token.starts_with('-') || token == "-" {
            if separator.is_some() {
                // A word before `--` is the value of the preceding nsys option.
                nsys.push(args[i].clone());
                i += 1;
                continue;
            }
            break;
        }
        let (token, renamed) = rename(&token, mode);
        match classify(&token, run_options, mode) {
            Some(takes_value) => {
                ours.push(if renamed {
                    OsString::from(&token)
                } else {
                    args[i].clone()
                });
                if takes_value && i + 1 < end {
                    ours.push(args[i + 1].clone());
                    i += 1;
                }
            }
            None if separator.is_some() => nsys.push(args[i].clone()),
            None => bail!(
                "{token}: not an option of `run`; nsys profile options go before `--` and the program after it: run [OPTIONS] [NSYS OPTIONS] -- PROGRAM [ARGS]..."
            ),
        }
        i += 1;
    }
    let program = match separator {
        Some(s) => args[s + 1..].to_vec(),
        None => args[i..].to_vec(),
    };
    Ok((ours, nsys, program))
}

/// nsys-jax's option names in `run`'s terms.
fn rename(token: &str, mode: Mode) -> (String, bool) {
    if mode == Mode::NsysJax {
        for (old, new) in NSYS_JAX_OPTIONS {
            let old = format!("--{old}");
            if token == old {
                return (format!("--{new}"), true);
            }
            if let Some(v) = token.strip_prefix(&format!("{old}=")) {
                return (format!("--{new}={v}"), true);
            }
        }
    }
    (token.to_string(), false)
}

/// Whether `token` is one of `run`'s options (`Some(needs the next word as its value)`).
fn classify(token: &str, run_options: &[OptionSpec], mode: Mode) -> Option<bool> {
    let allowed = |o: &OptionSpec| {
        mode == Mode::Run
            || o.longs
                .iter()
                .any(|l| NSYS_JAX_SHARED.contains(&l.as_str()))
            || o.longs.iter().any(|l| l == "condition")
    };
    if let Some(long) = token.strip_prefix("--") {
        let (name, inline) = match long.split_once('=') {
            Some((n, _)) => (n, true),
            None => (long, false),
        };
        let o = run_options
            .iter()
            .find(|o| o.longs.iter().any(|l| l == name))
            .filter(|o| allowed(o))?;
        return Some(o.takes_value && !inline);
    }
    let shorts: Vec<char> = token[1..].chars().collect();
    let spec = |c: char| {
        run_options
            .iter()
            .find(|o| o.short == Some(c))
            .filter(|o| allowed(o))
    };
    let first = spec(*shorts.first()?)?;
    if first.takes_value {
        // `-o NAME` or `-oNAME`.
        return Some(shorts.len() == 1);
    }
    // A bundle of flags (`-fq`) is ours only if every letter is.
    shorts
        .iter()
        .all(|c| spec(*c).is_some_and(|o| !o.takes_value))
        .then_some(false)
}

#[cfg(test)]
mod tests {
    #[test]
    fn nsys_jax_help_shows_its_own_options() {
        let argv = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let help = nsys_jax_help(&argv(&["/usr/bin/nsys-jax", "--help"])).unwrap();
        for o in [
            "--nsys-jax-analysis <NAME>",
            "--nsys-jax-condition",
            "-o, --output",
        ] {
            assert!(help.contains(o), "{o}: {help}");
        }
        assert!(help.contains("stragglers"), "{help}");
        assert!(nsys_jax_help(&argv(&["nsys-jax-pipe", "nsys-jax", "-o", "x", "-h"])).is_some());
        // The program's own --help, or run's, is not nsys-jax's.
        assert!(nsys_jax_help(&argv(&["nsys-jax", "--", "python3", "--help"])).is_none());
        assert!(nsys_jax_help(&argv(&["nsys-jax", "python3", "--help"])).is_none());
        assert!(nsys_jax_help(&argv(&["nsys-jax-pipe", "run", "--help"])).is_none());
    }

    use super::*;

    fn specs() -> Vec<OptionSpec> {
        let o = |l: &[&str], s: Option<char>, v: bool| OptionSpec {
            longs: l.iter().map(|x| x.to_string()).collect(),
            short: s,
            takes_value: v,
        };
        vec![
            o(&["output"], Some('o'), true),
            o(&["force-overwrite", "force"], Some('f'), false),
            o(&["quiet"], Some('q'), false),
            o(&["help"], Some('h'), false),
            o(&["analysis"], None, true),
            o(&["analysis-arg"], None, true),
            o(&["condition"], None, true),
            o(&["pipeline"], None, true),
        ]
    }

    fn rw(args: &[&str]) -> Result<Vec<String>> {
        let argv = args.iter().map(OsString::from).collect();
        Ok(rewrite(argv, &specs())?
            .into_iter()
            .map(|s| s.into_string().unwrap())
            .collect())
    }

    #[test]
    fn run_lines() {
        assert_eq!(
            rw(&[
                "nsys-jax-pipe",
                "run",
                "-o",
                "x",
                "python",
                "t.py",
                "-o",
                "y"
            ])
            .unwrap(),
            [
                "nsys-jax-pipe",
                "run",
                "-o",
                "x",
                "--",
                "python",
                "t.py",
                "-o",
                "y"
            ]
        );
        assert_eq!(
            rw(&[
                "nsys-jax-pipe",
                "run",
                "--capture-range=cudaProfilerApi",
                "-fq",
                "-t",
                "cuda",
                "--analysis-arg",
                "--x=1",
                "--",
                "python",
                "--",
                "a"
            ])
            .unwrap(),
            [
                "nsys-jax-pipe",
                "run",
                "-fq",
                "--analysis-arg",
                "--x=1",
                "--nsys-arg=--capture-range=cudaProfilerApi",
                "--nsys-arg=-t",
                "--nsys-arg=cuda",
                "--",
                "python",
                "--",
                "a"
            ]
        );
        let e = rw(&["nsys-jax-pipe", "run", "--trace=cuda", "python"]).unwrap_err();
        assert!(e.to_string().contains("--trace=cuda"), "{e}");
        assert_eq!(
            rw(&["nsys-jax-pipe", "analyze", "a.zip"]).unwrap(),
            ["nsys-jax-pipe", "analyze", "a.zip"]
        );
    }

    #[test]
    fn nsys_jax_lines() {
        let want = [
            "/usr/bin/nsys-jax",
            "run",
            NSYS_JAX_FLAG,
            "--analysis",
            "summary",
            "--condition=$RANK == 0",
            "-f",
            "--nsys-arg=--pipeline",
            "--nsys-arg=p",
            "--",
            "python",
        ];
        assert_eq!(
            rw(&[
                "/usr/bin/nsys-jax",
                "--nsys-jax-analysis",
                "summary",
                "--nsys-jax-condition=$RANK == 0",
                "-f",
                "--pipeline",
                "p",
                "--",
                "python"
            ])
            .unwrap(),
            want
        );
        let mut via_sub = rw(&[
            "/usr/bin/nsys-jax-pipe",
            "nsys-jax",
            "--nsys-jax-analysis",
            "summary",
            "--nsys-jax-condition=$RANK == 0",
            "-f",
            "--pipeline",
            "p",
            "--",
            "python",
        ])
        .unwrap();
        via_sub[0] = want[0].into();
        assert_eq!(via_sub, want);
        assert_eq!(
            rw(&["nsys-jax-combine", "-o", "x.zip", "a.zip"]).unwrap(),
            ["nsys-jax-combine", "combine", "-o", "x.zip", "a.zip"]
        );
        assert_eq!(
            rw(&["nsys-jax-pipe", "nsys-jax-combine", "a.zip"]).unwrap(),
            ["nsys-jax-pipe", "combine", "a.zip"]
        );
    }
}
