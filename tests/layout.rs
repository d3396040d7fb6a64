//! Layering rules for `src/`, checked on the source text:
//!
//! 1. no source file has more than [`MAX_LINES`] lines outside its tests (the lines from a
//!    top-level `#[cfg(test)] mod tests {` on do not count; files named `tests.rs` or under a
//!    `tests/` folder are test code and do not count at all);
//! 2. the top-level modules of `src/` form no import cycle;
//! 3. no module imports one of a higher layer ([`LAYERS`]).
//!
//! Imports are read from `use crate::X` (grouped `use crate::{X, Y::z}` too) and `crate::X::`
//! paths of non-test code, on the tokens of `modgraph`'s lexer (the one the build script reads
//! the module graph with): comments and string literals are ignored, and so are items marked
//! `#[cfg(test)]`. `super::` paths are not followed (they stay inside a top-level module).
//!
//! Every violation is printed as `file:line: what`.

use modgraph::lex::Tok;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const MAX_LINES: usize = 800;

/// Top-level modules of `src/`, by layer, bottom to top. A module may import modules of its
/// own layer or of lower ones, never of a higher one.
///
/// - `base`: errors, tables, statistics, units, NVTX name parsing, temporary files,
///   interrupts, test helpers (compiled for tests only), and the binary's allocator (`alloc`,
///   a module of `main.rs`).
/// - `store`: the local store, the shared cache and the file-key memo, by content key.
/// - `engine`: node keys, node kinds and their versions, computing or loading a node.
/// - `formats`: readers and writers of file formats, and `report` (the HTML report's page,
///   tables and charts).
/// - `frames`: the data model built from the raw tables, and `capture` (a report and XLA dump
///   turned into archive members: a product the graph computes; it reads no analysis).
/// - `analyses`: the analyses.
/// - `graph`: the query graph that wires every node together.
/// - `compare`: comparing runs and histories of runs (the domain; its commands are thin).
/// - `commands`: `run`, `archive`, `analyze` (and `--watch`), `combine`, `compare` and
///   `history` as functions of request structs, with pipeline files and labels.
/// - `cli`: the front-end: arguments parsed into requests, results printed.
///
/// A top-level module missing here fails the test: place it in its layer.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "base",
        &[
            "alloc",
            "error",
            "interrupt",
            "nvtx",
            "stats",
            "table",
            "testutil",
            "tmpfiles",
            "units",
        ],
    ),
    ("store", &["store"]),
    ("engine", &["engine"]),
    ("formats", &["formats", "report"]),
    ("frames", &["frames", "capture"]),
    ("analyses", &["analyses"]),
    ("graph", &["graph"]),
    ("compare", &["compare"]),
    ("commands", &["commands"]),
    ("cli", &["cli"]),
];

/// Violations the tree still has, each as (what the violation starts with, what it
/// contains). The list only shrinks: a violation matching none of these fails
/// the test, and so does an entry that no violation matches any more (remove it).
const KNOWN: &[(&str, &str)] = &[];

#[test]
fn source_tree_is_layered() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    read_tree(&src, &src, &mut files);
    assert!(
        files.iter().any(|(p, _)| p == "lib.rs"),
        "no src/lib.rs under {}",
        src.display()
    );
    let all = violations(&files, LAYERS);
    let known = |v: &str, (start, has): &(&str, &str)| v.starts_with(start) && v.contains(has);
    let new: Vec<&String> = all
        .iter()
        .filter(|v| !KNOWN.iter().any(|k| known(v, k)))
        .collect();
    let stale: Vec<String> = KNOWN
        .iter()
        .filter(|k| !all.iter().any(|v| known(v, k)))
        .map(|k| format!("KNOWN entry {k:?} matches no violation any more: remove it"))
        .collect();
    assert!(
        new.is_empty() && stale.is_empty(),
        "{} new layout violation(s):\n{}\n{}\n(all violations:\n{})",
        new.len(),
        new.iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        stale.join("\n"),
        all.join("\n")
    );
}

/// An analysis is one file: its name (`const NAME: &'static str = "..."` in
/// `src/analyses/<file>.rs`) is spelled, as a string, in no source file outside
/// `src/analyses/` (tests aside): the graph, the commands and the front-end run analyses
/// through the registry. (Inside `src/analyses/` an analysis may use a word that another
/// analysis is named after, e.g. a "communication" category.)
#[test]
fn analysis_names_live_in_their_own_file() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    read_tree(&src, &src, &mut files);
    let marker = "const NAME: &'static str = \"";
    let mut names: Vec<(String, &str)> = Vec::new();
    for (path, text) in &files {
        if path.starts_with("analyses/") {
            for line in text.lines() {
                if let Some(rest) = line.trim().strip_prefix(marker) {
                    let name = rest.split('"').next().unwrap();
                    names.push((format!("\"{name}\""), path.as_str()));
                }
            }
        }
    }
    assert!(names.len() >= 4, "analyses found: {names:?}");
    let mut found = Vec::new();
    for (path, text) in &files {
        if is_test_file(path) || path.starts_with("analyses/") {
            continue;
        }
        let cut = test_module_start(&toks(text)).unwrap_or(usize::MAX);
        for (i, line) in text.lines().enumerate() {
            if i + 1 >= cut {
                break;
            }
            if line.trim_start().starts_with("//") {
                continue;
            }
            for (name, home) in &names {
                if path != home && line.contains(name.as_str()) {
                    found.push(format!(
                        "src/{path}:{}: {name} (defined in src/{home})",
                        i + 1
                    ));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "analysis names spelled outside their file:\n{}",
        found.join("\n")
    );
}

/// Every `.rs` file under `dir`, as (path relative to `root` with `/`, content), sorted.
fn read_tree(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            read_tree(root, &p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let rel = p.strip_prefix(root).unwrap();
            let rel: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            out.push((rel.join("/"), text));
        }
    }
}

/// The violations of the three rules in `files` (paths relative to `src/`).
fn violations(files: &[(String, String)], layers: &[(&str, &[&str])]) -> Vec<String> {
    let mut out = Vec::new();
    let rank: BTreeMap<&str, (usize, &str)> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, (layer, mods))| mods.iter().map(move |m| (*m, (i, *layer))))
        .collect();
    let order = layers
        .iter()
        .map(|(l, _)| *l)
        .collect::<Vec<_>>()
        .join(" < ");

    // Modules: declared in lib.rs, or owning a file.
    let mut modules: BTreeMap<String, String> = BTreeMap::new(); // name -> where
    if let Some((_, lib)) = files.iter().find(|(p, _)| p == "lib.rs") {
        for (line, name) in declared_modules(lib) {
            modules.insert(name, format!("src/lib.rs:{line}"));
        }
    }
    for (path, _) in files {
        if let Some(m) = top_module(path) {
            modules
                .entry(m.to_string())
                .or_insert_with(|| format!("src/{path}:1"));
        }
    }
    for (m, at) in &modules {
        if !rank.contains_key(m.as_str()) {
            out.push(format!(
                "{at}: top-level module `{m}` has no layer: place it in LAYERS (tests/layout.rs)"
            ));
        }
    }
    for m in rank.keys() {
        if !modules.contains_key(*m) {
            out.push(format!(
                "tests/layout.rs: LAYERS names `{m}`, which is not a top-level module of src/: remove it"
            ));
        }
    }

    // Rule 1: size, and the references for rules 2 and 3.
    let mut refs: Vec<(String, usize, &str, String)> = Vec::new(); // (file, line, from, to)
    for (path, text) in files {
        if is_test_file(path) {
            continue;
        }
        let code = toks(text);
        let cut = test_module_start(&code);
        let counted = cut.map_or_else(|| text.lines().count(), |c| c - 1);
        if counted > MAX_LINES {
            out.push(format!(
                "src/{path}:1: {counted} lines outside its tests (limit {MAX_LINES})"
            ));
        }
        let Some(from) = top_module(path) else {
            continue;
        };
        let test = test_lines(&code);
        for (line, to) in crate_refs(&code) {
            if to != from
                && modules.contains_key(&to)
                && !test.contains(&line)
                && cut.is_none_or(|c| line < c)
            {
                refs.push((path.clone(), line, from, to));
            }
        }
    }
    refs.sort();
    refs.dedup();

    // Rule 2: cycles, one strongly connected component at a time.
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (_, _, from, to) in &refs {
        edges.entry(from).or_default().insert(to.as_str());
    }
    for scc in cycles(&edges) {
        let members = scc.iter().copied().collect::<Vec<_>>().join(", ");
        let path = cycle_path(&edges, &scc).join(" -> ");
        out.push(format!("import cycle among {members} (e.g. {path})"));
        for (file, line, from, to) in &refs {
            if scc.contains(from) && scc.contains(to.as_str()) {
                out.push(format!(
                    "src/{file}:{line}: `{from}` uses `crate::{to}` (cycle among {members})"
                ));
            }
        }
    }

    // Rule 3: layers.
    for (file, line, from, to) in &refs {
        if let (Some((rf, lf)), Some((rt, lt))) = (rank.get(from), rank.get(to.as_str()))
            && rf < rt
        {
            out.push(format!(
                "src/{file}:{line}: `{from}` (layer {lf}) uses `crate::{to}` (layer {lt}), a higher layer ({order})"
            ));
        }
    }
    out
}

/// Files that are test code as a whole: `tests.rs`, or under a `tests/` folder.
fn is_test_file(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    parts.last() == Some(&"tests.rs") || parts[..parts.len() - 1].contains(&"tests")
}

/// The top-level module a file belongs to (`frames/gpu.rs` → `frames`, `cli.rs` → `cli`);
/// None for the crate roots `lib.rs`, `main.rs` and the binaries under `bin/`.
fn top_module(path: &str) -> Option<&str> {
    match path.split_once('/') {
        Some(("bin", _)) => None,
        Some((dir, _)) => Some(dir),
        None => match path.strip_suffix(".rs")? {
            "lib" | "main" => None,
            m => Some(m),
        },
    }
}

/// A source file as tokens, each with its 1-based line (`modgraph`'s lexer, the one the
/// build script reads the module graph with: comments and literals are never code).
type Toks = Vec<(Tok, usize)>;

fn toks(text: &str) -> Toks {
    modgraph::lex::tokens_with_lines(text)
}

fn punct(t: Option<&(Tok, usize)>, c: char) -> bool {
    matches!(t, Some((Tok::Punct(p), _)) if *p == c)
}

fn ident(t: Option<&(Tok, usize)>, w: &str) -> bool {
    matches!(t, Some((Tok::Ident(i), _)) if i == w)
}

/// The index after the bracketed group opening at `open` (`(`, `[` or `{`), or the end.
fn group_end(t: &[(Tok, usize)], open: usize) -> usize {
    let mut depth = 0i64;
    for (k, (tok, _)) in t.iter().enumerate().skip(open) {
        match tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    t.len()
}

/// Whether the tokens at `i` are the attribute `#[cfg(test)]`.
fn cfg_test_at(t: &[(Tok, usize)], i: usize) -> bool {
    punct(t.get(i), '#')
        && punct(t.get(i + 1), '[')
        && ident(t.get(i + 2), "cfg")
        && punct(t.get(i + 3), '(')
        && ident(t.get(i + 4), "test")
        && punct(t.get(i + 5), ')')
        && punct(t.get(i + 6), ']')
}

/// The index after the attributes and visibility starting at `i`.
fn item_start(t: &[(Tok, usize)], mut i: usize) -> usize {
    while punct(t.get(i), '#') && punct(t.get(i + 1), '[') {
        i = group_end(t, i + 1);
    }
    if ident(t.get(i), "pub") {
        i += 1;
        if punct(t.get(i), '(') {
            i = group_end(t, i);
        }
    }
    i
}

/// The modules `lib.rs` declares (`mod x;`, `pub mod x;`), with their lines.
fn declared_modules(lib: &str) -> Vec<(usize, String)> {
    let t = toks(lib);
    let mut out = Vec::new();
    let mut depth = 0i64;
    let mut i = 0;
    while i < t.len() {
        match &t[i].0 {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => depth -= 1,
            Tok::Ident(w) if w == "mod" && depth == 0 => {
                if let (Some((Tok::Ident(name), line)), true) =
                    (t.get(i + 1), punct(t.get(i + 2), ';'))
                {
                    out.push((*line, name.clone()));
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The 1-based line where a top-level `#[cfg(test)]` attribute introduces `mod tests { ... }`;
/// the file's non-test part is the lines before it.
fn test_module_start(t: &[(Tok, usize)]) -> Option<usize> {
    let mut depth = 0i64;
    for (i, (tok, line)) in t.iter().enumerate() {
        match tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => depth -= 1,
            Tok::Punct('#') if depth == 0 && cfg_test_at(t, i) => {
                let k = item_start(t, i);
                if ident(t.get(k), "mod")
                    && ident(t.get(k + 1), "tests")
                    && punct(t.get(k + 2), '{')
                {
                    return Some(*line);
                }
            }
            _ => {}
        }
    }
    None
}

/// The 1-based lines of items marked `#[cfg(test)]` (at any depth), attribute to end.
fn test_lines(t: &[(Tok, usize)]) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    for i in 0..t.len() {
        if !cfg_test_at(t, i) {
            continue;
        }
        // The item ends at its first `;` outside brackets, or at the end of its body.
        let mut k = item_start(t, i);
        let end = loop {
            match t.get(k) {
                None => break t.len() - 1,
                Some((Tok::Punct(';'), _)) => break k,
                Some((Tok::Punct('{'), _)) => break group_end(t, k) - 1,
                Some((Tok::Punct('(' | '['), _)) => k = group_end(t, k),
                _ => k += 1,
            }
        };
        out.extend(t[i].1..=t[end.min(t.len() - 1)].1);
    }
    out
}

/// The modules named right after `crate::` (`crate::x::y`, `$crate::x`, `use crate::x;`,
/// `use crate::{x, y::{z, w}}` → x and y), with their 1-based lines.
fn crate_refs(t: &[(Tok, usize)]) -> Vec<(usize, String)> {
    refs_after(t, "crate")
}

/// The paths written in `t` (`a::b::c`), with their lines.
fn paths(t: &[(Tok, usize)]) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if let (Tok::Ident(first), line) = &t[i] {
            let mut p = first.clone();
            i += 1;
            while let (Some((Tok::PathSep, _)), Some((Tok::Ident(next), _))) =
                (t.get(i), t.get(i + 1))
            {
                p.push_str("::");
                p.push_str(next);
                i += 2;
            }
            out.push((*line, p));
        } else {
            i += 1;
        }
    }
    out
}

/// Strongly connected components of more than one module (Tarjan), each sorted.
fn cycles<'a>(edges: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<BTreeSet<&'a str>> {
    struct T<'a, 'e> {
        edges: &'e BTreeMap<&'a str, BTreeSet<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<BTreeSet<&'a str>>,
    }
    fn visit<'a>(t: &mut T<'a, '_>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        for &w in t.edges.get(v).into_iter().flatten() {
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = BTreeSet::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                scc.insert(w);
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                t.out.push(scc);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for &v in edges.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out.sort();
    t.out
}

/// A shortest cycle through the first module of `scc`, inside `scc`: `[a, b, a]`.
fn cycle_path<'a>(
    edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
    scc: &BTreeSet<&'a str>,
) -> Vec<&'a str> {
    let start = *scc.iter().next().unwrap();
    let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in edges.get(v).into_iter().flatten() {
            if w == start {
                let mut path = vec![start, v];
                let mut x = v;
                while x != start {
                    x = prev[x];
                    path.push(x);
                }
                path.reverse();
                return path;
            }
            if scc.contains(w) && !prev.contains_key(w) {
                prev.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    unreachable!("a strongly connected component has a cycle through each of its modules")
}

#[cfg(test)]
mod helpers {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    }

    const LIB: &str = "pub mod a;\npub mod b;\nmod c;\n";
    const L: &[(&str, &[&str])] = &[("low", &["a"]), ("mid", &["b"]), ("high", &["c"])];

    #[test]
    fn comments_and_literals_are_not_code() {
        let s = "use crate::a; // crate::b\nlet x = \"crate::c\"; /* crate::d\n */ let y = '\"';\nlet r = r#\"crate::e \"# ; fn f<'a>(x: &'a str) -> char { '\\'' }";
        let code = toks(s);
        let refs: Vec<String> = crate_refs(&code).into_iter().map(|(_, m)| m).collect();
        assert_eq!(refs, ["a"]);
        // Lines survive comments and literals spanning lines.
        assert_eq!(code.last().unwrap().1, 4);
        assert!(
            code.iter()
                .any(|(t, l)| *t == Tok::Ident("f".into()) && *l == 4)
        );
    }

    #[test]
    fn crate_refs_reads_paths_and_groups() {
        let code = "use crate::a::{x, y};\nuse crate::{\n    b::{self, z},\n    c,\n};\nfn f() { crate::d::g(); pub(crate) fn h() {} }\nlet v = $crate::e::m;\nmycrate::f::n;";
        let got = crate_refs(&toks(code));
        assert_eq!(
            got,
            [
                (1, "a".to_string()),
                (3, "b".to_string()),
                (4, "c".to_string()),
                (6, "d".to_string()),
                (7, "e".to_string()),
            ]
        );
    }

    #[test]
    fn test_module_start_is_the_top_level_cfg_test_mod_tests() {
        let code = "fn a() {}\n#[cfg(test)]\npub(crate) mod testing {\n}\nimpl X {\n    #[cfg(test)]\n    mod tests {}\n}\n#[cfg(test)]\n#[allow(unused)]\nmod tests {\n    fn t() {}\n}\n";
        assert_eq!(test_module_start(&toks(code)), Some(9));
        assert_eq!(
            test_module_start(&toks("#[cfg(test)] mod tests;\nfn a() {}\n")),
            None
        );
        assert_eq!(
            test_module_start(&toks("fn a() {}\n#[cfg( test )] mod tests { }\n")),
            Some(2)
        );
    }

    #[test]
    fn test_lines_cover_cfg_test_items() {
        let code = "#[cfg(test)]\nuse crate::b;\nfn f() {}\n#[cfg(test)]\nmod testing {\n    use crate::c;\n}\nfn g() {}\n";
        assert_eq!(test_lines(&toks(code)), BTreeSet::from([1, 2, 4, 5, 6, 7]));
    }

    #[test]
    fn module_of_a_file() {
        assert_eq!(top_module("frames/gpu.rs"), Some("frames"));
        assert_eq!(top_module("cli.rs"), Some("cli"));
        assert_eq!(top_module("lib.rs"), None);
        assert_eq!(top_module("main.rs"), None);
        assert_eq!(top_module("bin/alias.rs"), None);
        assert!(is_test_file("formats/hlo/tests.rs"));
        assert!(is_test_file("graph/tests/cases.rs"));
        assert!(!is_test_file("tests_util.rs"));
        assert_eq!(
            declared_modules(
                "//! doc\npub mod a;\nmod b;\npub(crate) mod c;\n#[cfg(test)]\nmod t {}\n"
            ),
            [
                (2, "a".to_string()),
                (3, "b".to_string()),
                (4, "c".to_string())
            ]
        );
    }

    #[test]
    fn a_clean_tree_passes() {
        let f = files(&[
            ("lib.rs", LIB),
            ("a.rs", "pub fn f() {}\n"),
            ("b/mod.rs", "use crate::a;\nmod x;\n"),
            ("b/x.rs", "use crate::{a::f, b};\n"),
            (
                "c.rs",
                "use crate::{a, b};\n#[cfg(test)]\nmod tests {\n    use crate::c;\n}\n",
            ),
        ]);
        assert_eq!(violations(&f, L), Vec::<String>::new());
    }

    #[test]
    fn long_files_count_only_code_before_tests() {
        let body = "fn f() {}\n".repeat(MAX_LINES);
        let tests = format!("{body}#[cfg(test)]\nmod tests {{\n{body}}}\n");
        let long = format!("{body}fn g() {{}}\n");
        let f = files(&[
            ("lib.rs", LIB),
            ("a.rs", &tests),
            ("b.rs", &long),
            ("c/tests.rs", &long),
        ]);
        assert_eq!(
            violations(&f, L),
            [format!(
                "src/b.rs:1: {} lines outside its tests (limit {MAX_LINES})",
                MAX_LINES + 1
            )]
        );
    }

    #[test]
    fn cycles_and_upward_imports_are_reported_with_their_lines() {
        let f = files(&[
            ("lib.rs", LIB),
            (
                "a.rs",
                "fn f() {\n    crate::c::g();\n}\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\n",
            ),
            ("b.rs", "// crate::c\n"),
            ("c.rs", "use crate::a;\n"),
        ]);
        assert_eq!(
            violations(&f, L),
            [
                "import cycle among a, c (e.g. a -> c -> a)",
                "src/a.rs:2: `a` uses `crate::c` (cycle among a, c)",
                "src/c.rs:1: `c` uses `crate::a` (cycle among a, c)",
                "src/a.rs:2: `a` (layer low) uses `crate::c` (layer high), a higher layer (low < mid < high)",
            ]
        );
    }

    #[test]
    fn unknown_and_stale_modules_are_reported() {
        let f = files(&[("lib.rs", "pub mod a;\npub mod b;\npub mod z;\n")]);
        assert_eq!(
            violations(&f, L),
            [
                "src/lib.rs:3: top-level module `z` has no layer: place it in LAYERS (tests/layout.rs)",
                "tests/layout.rs: LAYERS names `c`, which is not a top-level module of src/: remove it",
            ]
        );
    }

    #[test]
    fn a_longer_cycle_is_named_in_order() {
        let e: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::from([
            ("a", BTreeSet::from(["b"])),
            ("b", BTreeSet::from(["c"])),
            ("c", BTreeSet::from(["a", "d"])),
            ("d", BTreeSet::new()),
        ]);
        let s = cycles(&e);
        assert_eq!(s, [BTreeSet::from(["a", "b", "c"])]);
        assert_eq!(cycle_path(&e, &s[0]), ["a", "b", "c", "a"]);
    }
}

/// The front-end holds no workflow: no file of `src/cli/` names the query graph, the capture
/// stage's workflow parts or the analyses' computations; it turns arguments into the requests
/// of [`commands`](../src/commands/mod.rs) and prints their results.
#[test]
fn the_front_end_runs_commands_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    read_tree(&src, &src, &mut files);
    let forbidden = [
        "crate::graph",
        "crate::capture::launch",
        "crate::formats::archive_writer",
    ];
    let mut found = Vec::new();
    for (path, text) in files.iter().filter(|(p, _)| p.starts_with("cli/")) {
        let code = toks(text);
        let cut = test_module_start(&code).unwrap_or(usize::MAX);
        for (line, p) in paths(&code).into_iter().filter(|(l, _)| *l < cut) {
            for f in forbidden.into_iter().filter(|f| p.starts_with(f)) {
                found.push(format!("src/{path}:{line}: {f}"));
            }
        }
    }
    assert!(
        files.iter().any(|(p, _)| p.starts_with("cli/"))
            && files.iter().any(|(p, _)| p.starts_with("commands/")),
        "no src/cli/ or src/commands/"
    );
    assert!(
        found.is_empty(),
        "workflow in the front-end:\n{}",
        found.join("\n")
    );
}

/// The engine is the memo engine only: the store and the shared cache live in `store/`
/// below it, and no engine file names a file of a higher layer (a node kind is declared in
/// the file that computes it, with `kind!`, not in a table of the engine).
#[test]
fn the_engine_names_no_file_above_it_and_keeps_no_store() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    read_tree(&src, &src, &mut files);
    let engine_rank = LAYERS.iter().position(|(l, _)| *l == "engine").unwrap();
    let higher: BTreeSet<&str> = LAYERS[engine_rank + 1..]
        .iter()
        .flat_map(|(_, mods)| mods.iter().copied())
        .collect();
    let mut found = Vec::new();
    for (path, text) in files.iter().filter(|(p, _)| p.starts_with("engine/")) {
        let stem = path.rsplit('/').next().unwrap().trim_end_matches(".rs");
        if [
            "store",
            "remote",
            "remote_store",
            "claims",
            "packs",
            "signing",
            "filememo",
            "verified",
        ]
        .contains(&stem)
        {
            found.push(format!(
                "src/{path}: a store or shared-cache file in the engine"
            ));
        }
        let code = toks(text);
        let cut = test_module_start(&code).unwrap_or(usize::MAX);
        let test = test_lines(&code);
        for (tok, line) in code.iter().filter(|(_, l)| *l < cut && !test.contains(l)) {
            if let Tok::Str(s) = tok
                && s.ends_with(".rs")
                && higher.contains(s.trim_start_matches("src/").split('/').next().unwrap())
            {
                found.push(format!(
                    "src/{path}:{line}: names {s:?}, a file of a higher layer"
                ));
            }
        }
    }
    assert!(
        files.iter().any(|(p, _)| p.starts_with("store/")),
        "no src/store/"
    );
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The modules named right after `head ::` in `t` (`head::x::y`, `head::{x, y::z}` → x and y),
/// with their lines: `crate_refs` for another path head (`super`, `analyses`).
fn refs_after(t: &[(Tok, usize)], head: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for i in 0..t.len() {
        if !ident(t.get(i), head) || !matches!(t.get(i + 1), Some((Tok::PathSep, _))) {
            continue;
        }
        match t.get(i + 2) {
            Some((Tok::Ident(name), line)) => out.push((*line, name.clone())),
            Some((Tok::Punct('{'), _)) => {
                let end = group_end(t, i + 2);
                let (mut depth, mut first) = (0, true);
                for (tok, line) in &t[i + 2..end] {
                    match tok {
                        Tok::Punct('{') => {
                            depth += 1;
                            first = depth == 1;
                        }
                        Tok::Punct('}') => depth -= 1,
                        Tok::Punct(',') if depth == 1 => first = true,
                        Tok::Ident(name) if first && depth == 1 => {
                            out.push((*line, name.clone()));
                            first = false;
                        }
                        _ => first = false,
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Analyses are siblings: no analysis file imports another analysis's file (shared shares,
/// table views and ids live in files that are no analysis, or below the analyses). Only the
/// registry, which lists them, and the readers of their results (`diagnose`, `whatif`, the
/// headline) name them.
#[test]
fn no_analysis_imports_another() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    read_tree(&src, &src, &mut files);
    let marker = "const NAME: &'static str = \"";
    let analyses: BTreeSet<String> = files
        .iter()
        .filter(|(p, t)| {
            p.starts_with("analyses/") && p.matches('/').count() == 1 && t.contains(marker)
        })
        .map(|(p, _)| p["analyses/".len()..].trim_end_matches(".rs").to_string())
        .filter(|m| m != "mod")
        .collect();
    assert!(
        analyses.contains("ops") && analyses.contains("summary"),
        "{analyses:?}"
    );
    let readers = [
        "analyses/diagnose.rs",
        "analyses/whatif.rs",
        "analyses/whatif_scenarios.rs",
        "analyses/headline.rs",
        "analyses/registry.rs",
        "analyses/mod.rs",
    ];
    let mut found = Vec::new();
    for (path, text) in files.iter().filter(|(p, _)| {
        p.starts_with("analyses/") && p.matches('/').count() == 1 && !readers.contains(&p.as_str())
    }) {
        let own = path["analyses/".len()..].trim_end_matches(".rs");
        let code = toks(text);
        let cut = test_module_start(&code).unwrap_or(usize::MAX);
        let test = test_lines(&code);
        for (line, m) in refs_after(&code, "analyses")
            .into_iter()
            .chain(refs_after(&code, "super"))
        {
            if line < cut && !test.contains(&line) && m != own && analyses.contains(&m) {
                found.push(format!("src/{path}:{line}: imports the analysis `{m}`"));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn refs_after_reads_paths_and_groups_after_a_head() {
    let code = toks(
        "use crate::analyses::ops::modules;\nuse super::{summary, roofline_model::Params};\nlet x = \"super::ops\"; // super::pgle\nsuper::memory::f();",
    );
    let got: Vec<(usize, String)> = refs_after(&code, "analyses")
        .into_iter()
        .chain(refs_after(&code, "super"))
        .collect();
    let want: Vec<(usize, String)> = [
        (1, "ops"),
        (2, "summary"),
        (2, "roofline_model"),
        (4, "memory"),
    ]
    .iter()
    .map(|(l, m)| (*l, m.to_string()))
    .collect();
    assert_eq!(got, want);
}
