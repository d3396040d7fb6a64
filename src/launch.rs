//! How a profiled program is prepared: the output name (`%q{VAR}` expansion, as in Nsight
//! Systems' `-o`) and the `XLA_FLAGS` it runs with (DESIGN §10, nsys-jax's behaviour).

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

#[cfg(test)]
mod tests {
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
