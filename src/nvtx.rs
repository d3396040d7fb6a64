//! Parsers for XLA's NVTX range names (2024 and 2026 vocabularies).
//!
//! Values can contain commas, brackets, quotes and parentheses
//! (`name=jit(_psum)/jit(main)/reduce_sum[axes=(0,)]`, `name=p['w3']`), so known keys are
//! parsed from the right, never by splitting on `,`.

/// The text of a range name without its `TSL:` domain.
pub fn strip_tsl(name: &str) -> &str {
    name.strip_prefix("TSL:").unwrap_or(name)
}

/// The `key=value,...` body of `Kind:#body#`.
fn body<'a>(name: &'a str, kind: &str) -> Option<&'a str> {
    strip_tsl(name)
        .strip_prefix(kind)?
        .strip_prefix(":#")?
        .strip_suffix('#')
}

/// Split off a trailing `,key=value` (or a whole `key=value`) whose value satisfies `ok`.
/// Candidates are found from their `=` backwards (a byte search; called for every thunk).
fn split_last<'a>(
    body: &'a str,
    key: &str,
    ok: impl Fn(&str) -> bool,
) -> Option<(&'a str, &'a str)> {
    let bytes = body.as_bytes();
    let mut search_end = body.len();
    while let Some(eq) = memchr::memrchr(b'=', &bytes[..search_end]) {
        search_end = eq;
        let Some(pos) = eq.checked_sub(key.len()) else {
            break;
        };
        if &bytes[pos..eq] == key.as_bytes() && (pos == 0 || bytes[pos - 1] == b',') {
            let value = &body[eq + 1..];
            if ok(value) {
                let rest = if pos == 0 { "" } else { &body[..pos - 1] };
                return Some((rest, value));
            }
        }
    }
    None
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// An HLO identifier: module and instruction names (letters, digits, `.`, `_`, `-`; letters
/// beyond ASCII too, since JAX names a module after its Python function, `jit_résumé`).
fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() || c == '.' || c == '_' || c == '-')
}

/// `XlaModule:#[prefix=P,]hlo_module=NAME[,program_id=N]#`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleName<'a> {
    pub prefix: Option<&'a str>,
    pub hlo_module: &'a str,
    pub program_id: Option<i64>,
}

pub fn parse_module(name: &str) -> Option<ModuleName<'_>> {
    let b = body(name, "XlaModule")?;
    let (b, program_id) = match split_last(b, "program_id", is_digits) {
        Some((rest, v)) => (rest, Some(v.parse().ok()?)),
        None => (b, None),
    };
    let (rest, hlo_module) = split_last(b, "hlo_module", is_ident)?;
    let prefix = if rest.is_empty() {
        None
    } else {
        Some(rest.strip_prefix("prefix=")?)
    };
    Some(ModuleName {
        prefix,
        hlo_module,
        program_id,
    })
}

/// `Thunk:#[name=OPNAME,]hlo_op=INSTR[,unique_hlo_op_id=N]#`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThunkName<'a> {
    pub name: Option<&'a str>,
    pub hlo_op: &'a str,
    pub unique_hlo_op_id: Option<i64>,
}

pub fn parse_thunk(name: &str) -> Option<ThunkName<'_>> {
    let b = body(name, "Thunk")?;
    let (b, unique_hlo_op_id) = match split_last(b, "unique_hlo_op_id", is_digits) {
        Some((rest, v)) => (rest, Some(v.parse().ok()?)),
        None => (b, None),
    };
    let (rest, hlo_op) = split_last(b, "hlo_op", is_ident)?;
    let name = if rest.is_empty() {
        None
    } else {
        Some(rest.strip_prefix("name=")?)
    };
    Some(ThunkName {
        name,
        hlo_op,
        unique_hlo_op_id,
    })
}

/// `XlaLauncher:#global=G,local=L,process=P,partition=S#` (older: `slice=S`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launcher {
    pub global: i64,
    pub local: i64,
    pub process: i64,
    pub partition: i64,
}

pub fn parse_launcher(name: &str) -> Option<Launcher> {
    let b = body(name, "XlaLauncher")?;
    let (b, partition) =
        split_last(b, "partition", is_digits).or_else(|| split_last(b, "slice", is_digits))?;
    let (b, process) = split_last(b, "process", is_digits)?;
    let (b, local) = split_last(b, "local", is_digits)?;
    let (b, global) = split_last(b, "global", is_digits)?;
    if !b.is_empty() {
        return None;
    }
    Some(Launcher {
        global: global.parse().ok()?,
        local: local.parse().ok()?,
        process: process.parse().ok()?,
        partition: partition.parse().ok()?,
    })
}

/// Compilation ranges: `XlaCompile:#module=NAME[,program_id=N]#`,
/// `XlaCompileBackend:#module=NAME,program_id=N#`, `XlaPass:#name=PASS,module=NAME,program_id=N#`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileName<'a> {
    pub kind: &'a str,
    pub name: Option<&'a str>,
    pub module: Option<&'a str>,
    pub program_id: Option<i64>,
}

pub fn parse_compile(name: &str) -> Option<CompileName<'_>> {
    let t = strip_tsl(name);
    let (kind, _) = t.split_once(":#")?;
    if !kind.starts_with("Xla") {
        return None;
    }
    let b = body(t, kind)?;
    let (b, program_id) = match split_last(b, "program_id", is_digits) {
        Some((rest, v)) => (rest, Some(v.parse().ok()?)),
        None => (b, None),
    };
    let (b, module) = match split_last(b, "module", is_ident) {
        Some((rest, v)) => (rest, Some(v)),
        None => (b, None),
    };
    let name = if b.is_empty() {
        None
    } else {
        Some(b.strip_prefix("name=").unwrap_or(b))
    };
    Some(CompileName {
        kind,
        name,
        module,
        program_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn modules() {
        assert_eq!(
            parse_module("TSL:XlaModule:#hlo_module=jit__psum,program_id=1#"),
            Some(ModuleName {
                prefix: None,
                hlo_module: "jit__psum",
                program_id: Some(1)
            })
        );
        assert_eq!(
            parse_module("XlaModule:#prefix=jit(f)/jit(main),hlo_module=jit_f,program_id=11#"),
            Some(ModuleName {
                prefix: Some("jit(f)/jit(main)"),
                hlo_module: "jit_f",
                program_id: Some(11)
            })
        );
        assert_eq!(
            parse_module("TSL:XlaModule:#hlo_module=gemm_fusion_dot.572#"),
            Some(ModuleName {
                prefix: None,
                hlo_module: "gemm_fusion_dot.572",
                program_id: None
            })
        );
        assert_eq!(parse_module("TSL:Thunk:#hlo_op=x#"), None);
        assert_eq!(parse_module("TSL:XlaModule:#program_id=1#"), None);
    }

    #[test]
    fn module_names_beyond_ascii_and_overflowing_ids() {
        let m = parse_module("XlaModule:#hlo_module=jit_résumé,program_id=7#").unwrap();
        assert_eq!((m.hlo_module, m.program_id), ("jit_résumé", Some(7)));
        // An id that does not fit is not read as another number.
        assert_eq!(
            parse_module("XlaModule:#hlo_module=jit_f,program_id=99999999999999999999#"),
            None
        );
        assert_eq!(parse_module("XlaModule:hlo_module=jit_f"), None);
    }

    #[test]
    fn thunks() {
        let t = parse_thunk(
            "TSL:Thunk:#name=jit(_psum)/jit(main)/reduce_sum[axes=(0,)],hlo_op=all-reduce-start#",
        )
        .unwrap();
        assert_eq!(t.name, Some("jit(_psum)/jit(main)/reduce_sum[axes=(0,)]"));
        assert_eq!(t.hlo_op, "all-reduce-start");
        let t =
            parse_thunk("Thunk:#name=p['w1'],hlo_op=all-gather.8,unique_hlo_op_id=34359738460#")
                .unwrap();
        assert_eq!(t.name, Some("p['w1']"));
        assert_eq!(t.hlo_op, "all-gather.8");
        assert_eq!(t.unique_hlo_op_id, Some(34359738460));
        // A value that itself contains ",hlo_op=" text.
        let t = parse_thunk("Thunk:#name=a,hlo_op=b c,hlo_op=fusion.1#").unwrap();
        assert_eq!((t.name, t.hlo_op), (Some("a,hlo_op=b c"), "fusion.1"));
    }

    #[test]
    fn launchers_and_compile() {
        assert_eq!(
            parse_launcher("XlaLauncher:#global=1,local=1,process=0,partition=0#"),
            Some(Launcher {
                global: 1,
                local: 1,
                process: 0,
                partition: 0
            })
        );
        assert_eq!(
            parse_launcher("XlaLauncher:#global=0,local=0,process=0,slice=0#").map(|l| l.global),
            Some(0)
        );
        assert_eq!(parse_launcher("python"), None);
        let c =
            parse_compile("TSL:XlaPass:#name=priority-fusion,module=jit_f,program_id=19#").unwrap();
        assert_eq!(
            (c.kind, c.name, c.module, c.program_id),
            ("XlaPass", Some("priority-fusion"), Some("jit_f"), Some(19))
        );
        let c = parse_compile("XlaCompile:#module=jit_f#").unwrap();
        assert_eq!(
            (c.kind, c.module, c.program_id),
            ("XlaCompile", Some("jit_f"), None)
        );
    }

    fn ident() -> impl Strategy<Value = String> {
        "[a-zé0-9_][a-zA-Zéü中0-9._-]{0,20}"
    }
    fn free_text() -> impl Strategy<Value = String> {
        // Op names and prefixes: anything printable, commas, quotes, brackets, '=' and '#'.
        "[ -~]{0,40}"
    }

    proptest! {
        #[test]
        fn module_round_trip(prefix in proptest::option::of(free_text()), m in ident(), id in proptest::option::of(0i64..1_000_000), tsl in any::<bool>()) {
            let mut s = String::from(if tsl { "TSL:XlaModule:#" } else { "XlaModule:#" });
            if let Some(p) = &prefix { s.push_str(&format!("prefix={p},")); }
            s.push_str(&format!("hlo_module={m}"));
            if let Some(id) = id { s.push_str(&format!(",program_id={id}")); }
            s.push('#');
            let parsed = parse_module(&s).unwrap();
            prop_assert_eq!(parsed.hlo_module, m.as_str());
            prop_assert_eq!(parsed.program_id, id);
            prop_assert_eq!(parsed.prefix, prefix.as_deref());
        }

        #[test]
        fn thunk_round_trip(name in proptest::option::of(free_text()), op in ident(), uid in proptest::option::of(0i64..i64::MAX)) {
            let mut s = String::from("TSL:Thunk:#");
            if let Some(n) = &name { s.push_str(&format!("name={n},")); }
            s.push_str(&format!("hlo_op={op}"));
            if let Some(u) = uid { s.push_str(&format!(",unique_hlo_op_id={u}")); }
            s.push('#');
            let parsed = parse_thunk(&s).unwrap();
            prop_assert_eq!(parsed.hlo_op, op.as_str());
            prop_assert_eq!(parsed.unique_hlo_op_id, uid);
            prop_assert_eq!(parsed.name, name.as_deref());
        }

        #[test]
        fn parsers_never_panic(s in "\\PC{0,80}") {
            let _ = parse_module(&s);
            let _ = parse_thunk(&s);
            let _ = parse_launcher(&s);
            let _ = parse_compile(&s);
        }
    }
}
