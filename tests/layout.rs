//! Layering rules for `src/`, checked on the source text:
//!
//! 1. no source file has more than [`MAX_LINES`] lines outside its tests (the lines from a
//!    top-level `#[cfg(test)] mod tests {` on do not count; files named `tests.rs` or under a
//!    `tests/` folder are test code and do not count at all);
//! 2. the top-level modules of `src/` form no import cycle;
//! 3. no module imports one of a higher layer ([`LAYERS`]).
//!
//! Imports are read from `use crate::X` (grouped `use crate::{X, Y::z}` too) and `crate::X::`
//! paths of non-test code: comments and string literals are ignored, and so are items marked
//! `#[cfg(test)]`. `super::` paths are not followed (they stay inside a top-level module).
//!
//! Every violation is printed as `file:line: what`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const MAX_LINES: usize = 800;

/// Top-level modules of `src/`, by layer, bottom to top. A module may import modules of its
/// own layer or of lower ones, never of a higher one.
///
/// - `engine`: the graph engine and the utilities everything may use: errors, tables,
///   statistics, units, NVTX name parsing, temporary files, interrupts, test helpers (compiled
///   for tests only), and the binary's allocator (`alloc`, a module of `main.rs`).
/// - `formats`: readers and writers of file formats, and `report` (the HTML report's page,
///   tables and charts).
/// - `frames`: the data model built from the raw tables.
/// - `analyses`: the analyses, and `capture` (a report and XLA dump turned into archive
///   members: a product the graph computes, so it sits below the graph).
/// - `graph`: the query graph that wires every node together.
/// - `commands`: `run`, `archive`, `analyze` (and `--watch`), `combine` and `compare` as
///   functions of request structs, with pipeline files, labels and the comparison itself.
/// - `cli`: the front-end: arguments parsed into requests, results printed.
///
/// A top-level module missing here fails the test: place it in its layer.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "engine",
        &[
            "alloc",
            "engine",
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
    ("formats", &["formats", "report"]),
    ("frames", &["frames"]),
    ("analyses", &["analyses", "capture"]),
    ("graph", &["graph"]),
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
        let cut = test_module_start(&strip(text)).unwrap_or(usize::MAX);
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
        let code = strip(text);
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

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
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

/// `text` with comments and the contents of string and char literals blanked (newlines
/// kept, so line numbers and offsets are unchanged).
fn strip(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < c.len() {
        let prev_ident = i > 0 && is_ident(c[i - 1]);
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (!prev_ident || (i >= 1 && c[i - 1] == 'b' && !(i >= 2 && is_ident(c[i - 2]))))
            && {
                let mut j = i + 1;
                while c.get(j) == Some(&'#') {
                    j += 1;
                }
                c.get(j) == Some(&'"')
            }
        {
            // Raw string r#"..."#.
            out.push('r');
            i += 1;
            let mut hashes = 0;
            while c[i] == '#' {
                out.push('#');
                hashes += 1;
                i += 1;
            }
            out.push('"');
            i += 1;
            while i < c.len() {
                if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
                    out.push('"');
                    out.extend(std::iter::repeat_n('#', hashes));
                    i += 1 + hashes;
                    break;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '"' {
            out.push('"');
            i += 1;
            while i < c.len() {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    if let Some(&n) = c.get(i + 1) {
                        blank(&mut out, n);
                    }
                    i += 2;
                } else if c[i] == '"' {
                    out.push('"');
                    i += 1;
                    break;
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == '\'' && c.get(i + 1) == Some(&'\\') {
            // Escaped char literal: '\n', '\'', '\u{..}'.
            out.push('\'');
            i += 1;
            blank(&mut out, c[i]);
            blank(&mut out, c[i + 1]);
            i += 2;
            while i < c.len() && c[i] != '\'' {
                blank(&mut out, c[i]);
                i += 1;
            }
            out.push('\'');
            i += 1;
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            // Char literal 'x' (a lifetime never has a quote two characters on).
            out.push('\'');
            blank(&mut out, c[i + 1]);
            out.push('\'');
            i += 3;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// 1-based line of each byte offset.
fn line_of(code: &str, pos: usize) -> usize {
    code[..pos].matches('\n').count() + 1
}

/// The modules `lib.rs` declares (`mod x;`, `pub mod x;`), with their lines.
fn declared_modules(lib: &str) -> Vec<(usize, String)> {
    let code = strip(lib);
    let mut out = Vec::new();
    for (i, line) in code.lines().enumerate() {
        let mut words = line.split_whitespace().peekable();
        if words
            .peek()
            .is_some_and(|w| *w == "pub" || w.starts_with("pub("))
        {
            words.next();
        }
        if words.next() == Some("mod")
            && let Some(name) = words.next()
            && let Some(name) = name.strip_suffix(';')
        {
            out.push((i + 1, name.to_string()));
        }
    }
    out
}

/// The 1-based line where a top-level `#[cfg(test)]` attribute introduces `mod tests { ... }`;
/// the file's non-test part is the lines before it.
fn test_module_start(code: &str) -> Option<usize> {
    let mut depth = 0i64;
    let mut pos = 0;
    for line in code.split_inclusive('\n') {
        if depth == 0 && squeeze(line).starts_with("#[cfg(test)]") {
            let attr = pos + line.find('#').unwrap();
            let rest = &code[attr + code[attr..].find(']').unwrap() + 1..];
            if item_is_mod_tests(rest) {
                return Some(line_of(code, pos));
            }
        }
        for ch in line.chars() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
        }
        pos += line.len();
    }
    None
}

/// Whether the item at the start of `rest` (after more attributes) is `mod tests {`.
fn item_is_mod_tests(rest: &str) -> bool {
    let mut s = rest.trim_start();
    while s.starts_with("#[") {
        match s.find(']') {
            Some(e) => s = s[e + 1..].trim_start(),
            None => return false,
        }
    }
    if let Some(r) = s.strip_prefix("pub") {
        s = r.trim_start();
        if s.starts_with('(') {
            match s.find(')') {
                Some(e) => s = s[e + 1..].trim_start(),
                None => return false,
            }
        }
    }
    let Some(r) = s.strip_prefix("mod") else {
        return false;
    };
    if !r.starts_with(char::is_whitespace) {
        return false;
    }
    let Some(r) = r.trim_start().strip_prefix("tests") else {
        return false;
    };
    r.trim_start().starts_with('{')
}

fn squeeze(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// The 1-based lines of items marked `#[cfg(test)]` (at any depth), attribute to end.
fn test_lines(code: &str) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(off) = code[from..].find("#[") {
        let start = from + off;
        let Some(close) = code[start..].find(']') else {
            break;
        };
        let attr_end = start + close + 1;
        from = attr_end;
        if squeeze(&code[start..attr_end]) != "#[cfg(test)]" {
            continue;
        }
        // The item ends at its first `;` outside brackets, or at the `}` closing its body.
        let mut depth = 0i64;
        let mut end = code.len();
        for (k, &b) in bytes.iter().enumerate().skip(attr_end) {
            match b {
                b'{' | b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = k;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    end = k;
                    break;
                }
                _ => {}
            }
        }
        out.extend(line_of(code, start)..=line_of(code, end.min(code.len())));
    }
    out
}

/// The modules named right after `crate::` (`crate::x::y`, `use crate::x;`,
/// `use crate::{x, y::{z, w}}` → x and y), with their 1-based lines. `code` is stripped.
fn crate_refs(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(off) = code[from..].find("crate::") {
        let at = from + off;
        from = at + "crate::".len();
        if code[..at].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let rest = &code[from..];
        let lead = rest.len() - rest.trim_start().len();
        if rest[lead..].starts_with('{') {
            // A group: the first name of every item at the group's top level.
            let mut depth = 0;
            let mut item_start = true;
            for (k, ch) in rest.char_indices().skip(lead) {
                match ch {
                    '{' => {
                        depth += 1;
                        item_start = depth == 1;
                    }
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => item_start = true,
                    c if item_start && depth == 1 && is_ident(c) => {
                        let name: String = rest[k..].chars().take_while(|&c| is_ident(c)).collect();
                        out.push((line_of(code, from + k), name));
                        item_start = false;
                    }
                    c if item_start && !c.is_whitespace() => item_start = false,
                    _ => {}
                }
            }
        } else {
            let name: String = rest[lead..].chars().take_while(|&c| is_ident(c)).collect();
            if !name.is_empty() {
                out.push((line_of(code, from + lead), name));
            }
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
    fn strip_blanks_comments_and_literals_only() {
        let s = "use crate::a; // crate::b\nlet x = \"crate::c\"; /* crate::d\n */ let y = '\"';\nlet r = r#\"crate::e \"# ; fn f<'a>(x: &'a str) -> char { '\\'' }";
        let code = strip(s);
        assert_eq!(code.len(), s.len());
        assert_eq!(code.lines().count(), s.lines().count());
        let refs: Vec<String> = crate_refs(&code).into_iter().map(|(_, m)| m).collect();
        assert_eq!(refs, ["a"]);
        assert!(code.contains("fn f<'a>(x: &'a str)"), "{code}");
    }

    #[test]
    fn crate_refs_reads_paths_and_groups() {
        let code = "use crate::a::{x, y};\nuse crate::{\n    b::{self, z},\n    c,\n};\nfn f() { crate::d::g(); pub(crate) fn h() {} }\nlet v = $crate::e::m;\nmycrate::f::n;";
        let got = crate_refs(code);
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
        assert_eq!(test_module_start(code), Some(9));
        assert_eq!(
            test_module_start("#[cfg(test)] mod tests;\nfn a() {}\n"),
            None
        );
        assert_eq!(
            test_module_start("fn a() {}\n#[cfg( test )] mod tests { }\n"),
            Some(2)
        );
    }

    #[test]
    fn test_lines_cover_cfg_test_items() {
        let code = "#[cfg(test)]\nuse crate::b;\nfn f() {}\n#[cfg(test)]\nmod testing {\n    use crate::c;\n}\nfn g() {}\n";
        assert_eq!(test_lines(code), BTreeSet::from([1, 2, 4, 5, 6, 7]));
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
        let code = strip(text);
        let cut = test_module_start(&code).unwrap_or(usize::MAX);
        for (i, line) in code.lines().enumerate().take_while(|(i, _)| i + 1 < cut) {
            for f in forbidden {
                if line.contains(f) {
                    found.push(format!("src/{path}:{}: {f}", i + 1));
                }
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
