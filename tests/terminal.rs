//! What a newcomer reads: the terminal output of every analysis on the four pax archives,
//! pinned as a golden file, within 100 columns and with no number longer than 8 characters.

use crate::common::*;

/// Runs of digits (with `.` and `,`) longer than 8 characters; a version (two dots or more:
/// `470.141.03`) is not a number.
fn long_numbers(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() || (!cur.is_empty() && (c == '.' || c == ',')) {
            cur.push(c);
        } else {
            let n = cur.trim_end_matches(['.', ',']);
            if n.len() > 8 && n.matches('.').count() < 2 {
                out.push(n.to_string());
            }
            cur.clear();
        }
    }
    out
}

#[test]
#[cfg_attr(not(test_fixtures), ignore = "needs the shared fixtures")]
fn the_pax_terminal_output_fits_100_columns_with_short_numbers() {
    let Some(f) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mut args: Vec<&str> = Vec::new();
    for a in all_analyses() {
        args.extend(["--analysis", a]);
    }
    let o = analyze(
        &tmp.path().join("cache"),
        &tmp.path().join("out"),
        &args,
        &pax_archives(&f),
    );
    assert_ok(&o);
    let text = String::from_utf8_lossy(&o.stdout);
    let text: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("wrote ") && !l.starts_with("report: "))
        .collect();
    let wide: Vec<String> = text
        .iter()
        .filter(|l| l.chars().count() > 100)
        .map(|l| format!("{} columns: {l}", l.chars().count()))
        .collect();
    assert!(
        wide.is_empty(),
        "lines wider than 100 columns:\n{}",
        wide.join("\n")
    );
    // Fingerprints (hex with letters) are not numbers; the rest must be short.
    let long = long_numbers(&text.join("\n"));
    assert!(
        long.is_empty(),
        "numbers longer than 8 characters: {long:?}"
    );
    insta::assert_snapshot!("pax_analyze_stdout", text.join("\n"));
}

#[test]
fn long_numbers_are_found() {
    assert_eq!(
        long_numbers("a 123456789 b 1.5 c 0.000352573"),
        ["123456789", "0.000352573"]
    );
    assert!(long_numbers("6f8097e242d8 12.3 ms, 1,234").is_empty());
    assert!(long_numbers("driver 470.141.03, nsys 2023.4.4.54").is_empty());
}

/// Every `--help`, of the tool and of each command and subcommand (found from the help
/// itself), fits 100 columns with `COLUMNS=100`, as does nsys-jax's.
#[test]
fn every_help_fits_100_columns() {
    let help = |args: &[&str]| -> String {
        let o = std::process::Command::new(bin())
            .args(args)
            .arg("--help")
            .env("COLUMNS", "100")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // The commands a help lists (two-space indented names under "Commands:").
    let commands = |text: &str| -> Vec<String> {
        text.lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            // A name starts at two spaces; its description's wrapped lines start further in.
            .filter(|l| !l.starts_with("   "))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|c| *c != "help" && !c.starts_with('-'))
            .map(str::to_string)
            .collect()
    };
    let mut todo: Vec<Vec<String>> = vec![vec![], vec!["nsys-jax".into()]];
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let text = help(&args);
        seen += 1;
        for l in text.lines() {
            assert!(l.chars().count() <= 100, "{args:?} --help: {l}");
        }
        if path.first().map(String::as_str) != Some("nsys-jax") {
            for c in commands(&text) {
                let mut p = path.clone();
                p.push(c);
                todo.push(p);
            }
        }
    }
    assert!(seen >= 8, "{seen} helps read");
}

/// `compare` of two H200 captures (cuDNN attention against XLA's) and `analyze` of the
/// example fit the terminal: 100 columns by default, fewer when COLUMNS says so; numbers with
/// three significant figures and units; the HLO mark once on the module's row.
#[test]
fn compare_and_analyze_fit_the_terminal_width() {
    let tmp = tempfile::tempdir().unwrap();
    let pairs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pairs");
    let run = |args: &[&str], columns: &str| -> String {
        let o = std::process::Command::new(bin())
            .args(args)
            .env("COLUMNS", columns)
            .env("NSYS_JAX_PIPE_CACHE", tmp.path().join("cache"))
            .output()
            .unwrap();
        assert!(
            o.status.code().is_some_and(|c| c <= 1),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let base = pairs.join("gpt_cudnn.zip");
    let head = pairs.join("gpt_xla_attn.zip");
    let out = tmp.path().join("cmp");
    let compare = |columns: &str| {
        run(
            &[
                "compare",
                base.to_str().unwrap(),
                head.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
                "--alpha",
                "0.05",
            ],
            columns,
        )
    };
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip");
    let ex_out = tmp.path().join("ex");
    for columns in [100, 72] {
        for (what, text) in [
            ("compare", compare(&columns.to_string())),
            (
                "analyze",
                run(
                    &[
                        "analyze",
                        example.to_str().unwrap(),
                        "-o",
                        ex_out.to_str().unwrap(),
                    ],
                    &columns.to_string(),
                ),
            ),
        ] {
            let wide: Vec<&str> = text
                .lines()
                .filter(|l| l.chars().count() > columns)
                .collect();
            assert!(
                wide.is_empty(),
                "{what} at {columns} columns:\n{}",
                wide.join("\n")
            );
        }
    }
    let text = compare("100");
    let long = long_numbers(&text);
    assert!(
        long.is_empty(),
        "numbers longer than 8 characters: {long:?}\n{text}"
    );
    // The module's row carries the mark; the ops inside it do not repeat it.
    let marked: Vec<&str> = text.lines().filter(|l| l.contains('†')).collect();
    assert_eq!(marked.len(), 2, "{}", marked.join("\n"));
    assert!(
        marked[0].trim_start().starts_with("jit_step †"),
        "{}",
        marked[0]
    );
    assert!(marked[1].starts_with("† HLO changed"), "{}", marked[1]);
    // Values in their units: the step's median, its change, its interval.
    assert!(text.contains("30.3 ms  43.7 ms  +44.2 %"), "{text}");
}
