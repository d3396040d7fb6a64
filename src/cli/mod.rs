//! The command-line front-end: parses arguments (`args`), turns them into the commands'
//! requests and prints what the commands did (`commands`, `output`); the commands themselves
//! live in [`crate::commands`]. `terminal` draws their progress on stderr.

mod args;
mod cache;
mod compat;
mod dispatch;
mod output;
mod terminal;

pub use cache::{parse_age, parse_size};

use crate::error::{EXIT_INPUT, EXIT_INTERNAL, one_line};
use anyhow::Result;
use args::{
    AnalyzeArgs, ArchiveArgs, COMPARE_AFTER_HELP, CacheCommand, CombineArgs, CompareArgs,
    HISTORY_AFTER_HELP, HistoryArgs, RUN_AFTER_HELP, RunArgs, WhatIfArgs, analysis_plan,
};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "nsys-jax-pipe",
    version,
    about = "Profile JAX programs with Nsight Systems and turn the profiles into answers, incrementally."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Analyse profiles: nsys-jax archives (zip files or extracted folders) or Nsight Systems
    /// reports with their XLA dumps. Several inputs are the processes of one run, analysed
    /// like their combined archive.
    #[command(alias = "analyse")]
    Analyze(AnalyzeArgs),
    /// Turn an Nsight Systems report and its XLA dump into an nsys-jax archive.
    Archive(ArchiveArgs),
    /// Profile a program with Nsight Systems, write its nsys-jax archive and analyse it
    /// (as `nsys-jax`; also `nsys-jax-pipe nsys-jax ...` or a link named nsys-jax).
    #[command(
        override_usage = "nsys-jax-pipe run [OPTIONS] [NSYS PROFILE OPTIONS] -- PROGRAM [ARGS]...\n       nsys-jax-pipe run [OPTIONS] PROGRAM [ARGS]...",
        after_help = RUN_AFTER_HELP
    )]
    Run(RunArgs),
    /// Combine the per-process archives (or reports) of one run into one nsys-jax archive
    /// (as `nsys-jax-combine`; also a link named nsys-jax-combine).
    Combine(CombineArgs),
    /// Compare two profiled runs (e.g. the base and head commits of a pull request) with
    /// statistics, and fail on a significant regression.
    #[command(after_help = COMPARE_AFTER_HELP)]
    Compare(CompareArgs),
    /// Follow labelled runs over time: one series per metric, change points (E-Divisive means
    /// with a t-test), the commits and ops at each.
    #[command(after_help = HISTORY_AFTER_HELP)]
    History(HistoryArgs),
    /// Predict the step with a change of your own (an op at a share of its roof, a host
    /// range done ahead, a device on time) and with each problem the profile shows fixed,
    /// from the profile alone (docs/whatif.md).
    #[command(name = "what-if")]
    WhatIf(WhatIfArgs),
    /// Inspect or trim the on-disk cache.
    Cache {
        #[command(subcommand)]
        command: CacheCommand,
    },
}

/// Entry point: returns the process exit code. Errors are printed as one line.
pub fn main() -> i32 {
    main_with(std::env::args_os().collect())
}

/// [`main`] on the command line `argv` (the program name first).
pub fn main_with(argv: Vec<std::ffi::OsString>) -> i32 {
    if let Some(help) = compat::nsys_jax_help(&argv) {
        print!("{}", output::fitted(&help));
        return 0;
    }
    let argv = match compat::rewrite(argv, &run_options()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("nsys-jax-pipe: error: {}", one_line(&e));
            return EXIT_INPUT;
        }
    };
    let parsed = command()
        .try_get_matches_from(argv)
        .and_then(|m| Cli::from_arg_matches(&m).map(|c| (c, m)));
    let (mut cli, matches) = match parsed {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_INPUT } else { 0 };
        }
    };
    // The analyses' order and arguments are read off the matches into the typed arguments.
    match matches.subcommand().map(|(_, m)| analysis_plan(m)) {
        Some(Err(e)) => {
            eprintln!("nsys-jax-pipe: error: {}", one_line(&e));
            return EXIT_INPUT;
        }
        Some(Ok(plan)) => {
            if let Some(selection) = cli.command.analysis_selection() {
                selection.plan = plan;
            }
        }
        None => {}
    }
    match crate::formats::limits::Limits::from_env() {
        Ok(l) => crate::formats::limits::set(l),
        Err(e) => {
            eprintln!("nsys-jax-pipe: error: {e}");
            return EXIT_INPUT;
        }
    }
    crate::interrupt::install();
    // Set once per process (a second command in the same process keeps the first).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NSYS_JAX_PIPE_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .without_time()
        .with_target(false)
        .try_init();
    std::panic::set_hook(Box::new(|info| {
        eprintln!("nsys-jax-pipe: internal error: {info}");
        if std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0") {
            eprintln!("{}", std::backtrace::Backtrace::force_capture());
        }
    }));
    match std::panic::catch_unwind(|| dispatch(cli)) {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            // A reader that stopped early (`| head`) is not an error.
            let broken_pipe = e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            });
            if broken_pipe {
                return 0;
            }
            eprintln!("nsys-jax-pipe: error: {}", one_line(&e));
            crate::error::exit_code(&e)
        }
        Err(_) => EXIT_INTERNAL,
    }
}

impl Command {
    /// The analyses a command runs, where it runs some.
    fn analysis_selection(&mut self) -> Option<&mut args::AnalysisSelection> {
        match self {
            Command::Analyze(a) => Some(&mut a.analyses),
            Command::Archive(a) => Some(&mut a.analyses),
            Command::Run(a) => Some(&mut a.analyses),
            Command::Combine(a) => Some(&mut a.analyses),
            Command::Compare(_)
            | Command::History(_)
            | Command::WhatIf(_)
            | Command::Cache { .. } => None,
        }
    }
}

fn dispatch(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Analyze(a) => dispatch::analyze(a),
        Command::Archive(a) => dispatch::archive(a),
        Command::Run(a) => dispatch::run(a),
        Command::Combine(a) => dispatch::combine(a),
        Command::Compare(a) => dispatch::compare(a),
        Command::History(a) => dispatch::history(a),
        Command::WhatIf(a) => dispatch::what_if(a),
        Command::Cache { command } => cache::cache(command).map(|()| 0),
    }
}

/// The command line, with the analyses of the registry named in the help of `--analysis`.
fn command() -> clap::Command {
    let names = crate::analyses::builtin_names();
    let mut cmd = Cli::command().term_width(output::columns());
    let with_analysis: Vec<String> = cmd
        .get_subcommands()
        .filter(|sc| sc.get_arguments().any(|a| a.get_id() == "analyses"))
        .map(|sc| sc.get_name().to_string())
        .collect();
    for name in with_analysis {
        cmd = cmd.mut_subcommand(name, |sc| {
            sc.mut_arg("analyses", |a| {
                let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                a.help(help.replace("{analyses}", &names))
            })
        });
    }
    cmd
}

/// `run`'s options, for splitting its command line (see [`crate::capture::compat`]).
fn run_options() -> Vec<compat::OptionSpec> {
    let cmd = Cli::command();
    let Some(run) = cmd.find_subcommand("run") else {
        return vec![];
    };
    let mut specs: Vec<compat::OptionSpec> = run
        .get_arguments()
        .filter(|a| !a.is_positional())
        .map(|a| compat::OptionSpec {
            longs: a
                .get_long()
                .into_iter()
                .chain(a.get_all_aliases().unwrap_or_default())
                .map(str::to_string)
                .collect(),
            short: a.get_short(),
            takes_value: a.get_action().takes_values(),
        })
        .collect();
    // clap's own --help / -h.
    specs.push(compat::OptionSpec {
        longs: vec!["help".into()],
        short: Some('h'),
        takes_value: false,
    });
    specs
}

#[cfg(test)]
mod tests {
    #[test]
    fn analysis_help_names_every_registered_analysis() {
        let mut cmd = super::command();
        for sub in ["analyze", "archive", "run", "combine"] {
            let help = cmd
                .find_subcommand_mut(sub)
                .unwrap()
                .render_long_help()
                .to_string();
            for a in crate::analyses::REGISTRY {
                assert!(help.contains(a.name()), "{sub} --help lacks {}", a.name());
            }
            assert!(!help.contains("{analyses}"), "{sub}");
        }
        assert_eq!(
            cmd.find_subcommand("analyse").map(|c| c.get_name()),
            Some("analyze"),
            "British spelling accepted"
        );
    }
}
