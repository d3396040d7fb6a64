//! What one source file says about the module graph: the modules it declares, the items it
//! defines, its `use` items, the paths its code names, its `impl` blocks and the files it
//! includes. Items under `#[cfg(test)]` are skipped.

use super::lex::{Tok, tokens};
use std::collections::{BTreeMap, BTreeSet};

/// A `use` binding: the absolute path it imports and the name it binds (`*` for a glob).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Use {
    pub path: Vec<String>,
    pub name: String,
    pub glob: bool,
}

/// An `impl` block's self type and trait, as absolute paths when they are the crate's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Impl {
    pub self_type: Option<Vec<String>>,
    pub trait_path: Option<Vec<String>>,
}

/// A path the file's code names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    pub path: Vec<String>,
    /// Whether a path naming a module stands for all of it (a glob import); otherwise a
    /// module named by a `use` only binds a name for the paths that go through it.
    pub module_whole: bool,
}

#[derive(Default, Debug)]
pub struct FileFacts {
    /// Modules declared inline (`mod name { … }`), as absolute paths.
    pub inline_modules: Vec<Vec<String>>,
    /// Modules declared (`mod name;` or inline) outside test code, as absolute paths.
    pub declared: Vec<Vec<String>>,
    /// (module, name) of every item the file defines (methods included: over-counting only
    /// makes a file reach more).
    defs: BTreeSet<(Vec<String>, String)>,
    /// The `use` bindings of each module the file holds.
    uses: BTreeMap<Vec<String>, Vec<Use>>,
    /// The absolute paths the file's code names.
    pub references: Vec<Reference>,
    /// The files it includes, relative to `src/`.
    pub includes: Vec<String>,
    pub impls: Vec<Impl>,
    /// External crates named in code.
    pub crates: BTreeSet<String>,
}

impl FileFacts {
    pub fn defines(&self, module: &[String], name: &str) -> bool {
        self.defs.contains(&(module.to_vec(), name.to_string()))
    }

    pub fn uses_in(&self, module: &[String]) -> &[Use] {
        self.uses.get(module).map_or(&[], Vec::as_slice)
    }
}

/// A path as written, with the module it was written in.
struct RawPath {
    module: Vec<String>,
    segs: Vec<String>,
}

struct RawUse {
    module: Vec<String>,
    segs: Vec<String>,
    alias: Option<String>,
    glob: bool,
}

struct RawImpl {
    module: Vec<String>,
    generics: BTreeSet<String>,
    self_type: Option<Vec<String>>,
    trait_path: Option<Vec<String>>,
}

/// Scans the file at `path` (relative to `src/`).
pub fn scan(path: &str, text: &str, externals: &BTreeSet<String>, lib_name: &str) -> FileFacts {
    let toks = without_test_items(tokens(text));
    let base = super::module_of(path);
    let in_lib = base.is_some();
    let base = base.unwrap_or_else(|| vec![format!("#{path}")]);
    let mut facts = FileFacts::default();
    let mut children: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    let mut raw_uses: Vec<RawUse> = Vec::new();
    let mut raw_paths: Vec<RawPath> = Vec::new();
    let mut raw_impls: Vec<RawImpl> = Vec::new();
    let mut used: BTreeSet<&str> = BTreeSet::new();
    // (module path, the brace depth inside its block)
    let mut stack: Vec<(Vec<String>, usize)> = vec![(base.clone(), 0)];
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let module = stack.last().expect("the file's module").0.clone();
        match &toks[i] {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if stack.len() > 1 && stack.last().is_some_and(|(_, d)| *d == depth) {
                    stack.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Ident(w) if w == "use" && !prev_is(&toks, i, &[Tok::PathSep]) => {
                let end = until_semicolon(&toks, i + 1);
                let mut entries = Vec::new();
                use_tree(&toks[i + 1..end], Vec::new(), &mut entries);
                for (segs, alias, glob) in entries {
                    raw_uses.push(RawUse {
                        module: module.clone(),
                        segs,
                        alias,
                        glob,
                    });
                }
                i = end + 1;
                continue;
            }
            Tok::Ident(w) if w == "mod" => {
                if let Some(Tok::Ident(name)) = toks.get(i + 1) {
                    facts.defs.insert((module.clone(), name.clone()));
                    children
                        .entry(module.clone())
                        .or_default()
                        .insert(name.clone());
                    let mut declared = module.clone();
                    declared.push(name.clone());
                    facts.declared.push(declared);
                    if toks.get(i + 2) == Some(&Tok::Punct('{')) {
                        let mut m = module.clone();
                        m.push(name.clone());
                        facts.inline_modules.push(m.clone());
                        depth += 1;
                        stack.push((m, depth));
                        i += 3;
                        continue;
                    }
                }
            }
            Tok::Ident(w)
                if matches!(
                    w.as_str(),
                    "fn" | "struct" | "enum" | "trait" | "type" | "const" | "static" | "union"
                ) =>
            {
                if let Some(Tok::Ident(name)) = toks.get(i + 1) {
                    facts.defs.insert((module.clone(), name.clone()));
                }
            }
            Tok::Ident(w) if w == "macro_rules" => {
                if let (Some(Tok::Punct('!')), Some(Tok::Ident(name))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    facts.defs.insert((module.clone(), name.clone()));
                }
            }
            Tok::Ident(w) if matches!(w.as_str(), "include" | "include_str" | "include_bytes") => {
                if let (Some(Tok::Punct('!')), Some(Tok::Punct('(')), Some(Tok::Str(s))) =
                    (toks.get(i + 1), toks.get(i + 2), toks.get(i + 3))
                {
                    facts.includes.push(relative_to(path, s));
                }
            }
            Tok::Ident(w) if w == "impl" && impl_item_starts(&toks, i) => {
                if let Some(imp) = impl_header(&toks, i + 1, &module) {
                    raw_impls.push(imp);
                }
            }
            _ => {}
        }
        // Paths: a run of `ident :: ident …` that no `::` precedes.
        if let Some(first) = path_start(&toks, i) {
            let mut segs = vec![first];
            let mut j = i + 1 + usize::from(toks.get(i) == Some(&Tok::Punct('$')));
            while toks.get(j) == Some(&Tok::PathSep) {
                match toks.get(j + 1) {
                    Some(Tok::Ident(s)) => {
                        segs.push(s.clone());
                        j += 2;
                    }
                    _ => break,
                }
            }
            if segs.len() > 1 {
                raw_paths.push(RawPath {
                    module: module.clone(),
                    segs,
                });
            }
        }
        // A name after one `.` is a field or a method (`.find(..)`), never a binding's use
        // (after `..`, struct update syntax or a range, it may be).
        let dot = |k: usize| matches!(toks.get(k), Some(Tok::Punct('.')));
        let after_dot = i > 0 && dot(i - 1) && !(i > 1 && dot(i - 2));
        if let Tok::Ident(w) = &toks[i]
            && !after_dot
        {
            used.insert(w.as_str());
        }
        i += 1;
    }

    // Make paths absolute, now that every module's children and uses are known.
    let cx = Context {
        children: &children,
        uses: &raw_uses,
        externals,
        lib_name,
        in_lib,
    };
    for u in &raw_uses {
        let name = match (&u.alias, u.glob) {
            (Some(a), _) => a.clone(),
            (None, true) => "*".to_string(),
            (None, false) => u.segs.last().cloned().unwrap_or_default(),
        };
        // A binding the file's own code uses is a reference; an unused one only re-exports.
        let is_used = u.glob || used.contains(name.as_str());
        let mut crates = BTreeSet::new();
        let abs = cx.absolute(&u.module, &u.segs, &mut crates, false);
        if is_used {
            facts.crates.extend(crates);
        }
        let Some(abs) = abs else { continue };
        if is_used {
            facts.references.push(Reference {
                path: abs.clone(),
                module_whole: u.glob,
            });
        }
        facts.uses.entry(u.module.clone()).or_default().push(Use {
            path: abs,
            name,
            glob: u.glob,
        });
    }
    for p in &raw_paths {
        if let Some(abs) = cx.absolute(&p.module, &p.segs, &mut facts.crates, true) {
            facts.references.push(Reference {
                path: abs,
                module_whole: false,
            });
        }
    }
    for imp in raw_impls {
        let mut none = BTreeSet::new();
        let abs = |segs: &Option<Vec<String>>, none: &mut BTreeSet<String>| {
            segs.as_ref()
                .filter(|s| !(s.len() == 1 && imp.generics.contains(&s[0])))
                .and_then(|s| {
                    cx.absolute(&imp.module, s, none, true)
                        .or_else(|| local(&imp.module, s, &facts.defs))
                })
        };
        let self_type = abs(&imp.self_type, &mut none);
        let trait_path = abs(&imp.trait_path, &mut none);
        facts.impls.push(Impl {
            self_type,
            trait_path,
        });
    }
    facts
}

/// A one-segment path naming an item this file defines in `module`.
fn local(
    module: &[String],
    segs: &[String],
    defs: &BTreeSet<(Vec<String>, String)>,
) -> Option<Vec<String>> {
    (segs.len() == 1 && defs.contains(&(module.to_vec(), segs[0].clone()))).then(|| {
        let mut p = module.to_vec();
        p.push(segs[0].clone());
        p
    })
}

struct Context<'a> {
    children: &'a BTreeMap<Vec<String>, BTreeSet<String>>,
    uses: &'a [RawUse],
    externals: &'a BTreeSet<String>,
    lib_name: &'a str,
    in_lib: bool,
}

impl Context<'_> {
    /// `segs` written in `module`, as an absolute path of the crate (None for an external
    /// crate's path, recorded in `crates`, or for a name that is not a path of the crate).
    fn absolute(
        &self,
        module: &[String],
        segs: &[String],
        crates: &mut BTreeSet<String>,
        follow_uses: bool,
    ) -> Option<Vec<String>> {
        let (first, rest) = segs.split_first()?;
        let mut out: Vec<String>;
        match first.as_str() {
            "crate" if self.in_lib => out = Vec::new(),
            "self" if self.in_lib => out = module.to_vec(),
            "super" if self.in_lib => {
                out = module.to_vec();
                out.pop();
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    out.pop();
                    rest = &rest[1..];
                }
                out.extend(rest.iter().cloned());
                return Some(out);
            }
            "crate" | "self" | "super" | "Self" => return None,
            f if f == self.lib_name => out = Vec::new(),
            f if self.children.get(module).is_some_and(|c| c.contains(f)) => {
                out = module.to_vec();
                out.push(f.to_string());
            }
            f => {
                if follow_uses
                    && let Some(u) = self
                        .uses
                        .iter()
                        .find(|u| u.module == module && !u.glob && u.bound_name() == Some(f))
                {
                    let mut p = self.absolute(&u.module, &u.segs, crates, false)?;
                    p.extend(rest.iter().cloned());
                    return Some(p);
                }
                if self.externals.contains(f) {
                    crates.insert(f.to_string());
                }
                return None;
            }
        }
        out.extend(rest.iter().cloned());
        Some(out)
    }
}

impl RawUse {
    fn bound_name(&self) -> Option<&str> {
        self.alias
            .as_deref()
            .or_else(|| self.segs.last().map(String::as_str))
    }
}

fn prev_is(toks: &[Tok], i: usize, what: &[Tok]) -> bool {
    i > 0 && what.contains(&toks[i - 1])
}

/// The first segment of a path starting at `i` (`$crate` counts as `crate`).
fn path_start(toks: &[Tok], i: usize) -> Option<String> {
    if prev_is(toks, i, &[Tok::PathSep]) {
        return None;
    }
    match (&toks[i], toks.get(i + 1), toks.get(i + 2)) {
        (Tok::Punct('$'), Some(Tok::Ident(c)), Some(Tok::PathSep)) if c == "crate" => {
            Some("crate".into())
        }
        (Tok::Ident(w), Some(Tok::PathSep), Some(Tok::Ident(_))) if w != "use" => Some(w.clone()),
        _ => None,
    }
}

fn until_semicolon(toks: &[Tok], mut i: usize) -> usize {
    while i < toks.len() && toks[i] != Tok::Punct(';') {
        i += 1;
    }
    i
}

/// The bindings of a use tree: (segments, alias, glob).
fn use_tree(toks: &[Tok], prefix: Vec<String>, out: &mut Vec<(Vec<String>, Option<String>, bool)>) {
    let mut segs = prefix;
    let mut i = 0;
    // A leading `::` names an external crate: drop it, the first segment then says which.
    if toks.first() == Some(&Tok::PathSep) {
        i = 1;
    }
    while i < toks.len() {
        match &toks[i] {
            Tok::Ident(w) if w == "as" => {
                if let Some(Tok::Ident(a)) = toks.get(i + 1) {
                    out.push((segs, Some(a.clone()), false));
                }
                return;
            }
            Tok::Ident(w) if w == "self" && !segs.is_empty() => {}
            Tok::Ident(w) => segs.push(w.clone()),
            Tok::Punct('$') => {}
            Tok::PathSep => {}
            Tok::Punct('*') => {
                out.push((segs, None, true));
                return;
            }
            Tok::Punct('{') => {
                // Each comma-separated tree of the group, up to the matching brace.
                let mut depth = 0;
                let mut start = i + 1;
                for j in i..toks.len() {
                    match toks[j] {
                        Tok::Punct('{') => depth += 1,
                        Tok::Punct('}') => {
                            depth -= 1;
                            if depth == 0 {
                                if start < j {
                                    use_tree(&toks[start..j], segs.clone(), out);
                                }
                                return;
                            }
                        }
                        Tok::Punct(',') if depth == 1 => {
                            if start < j {
                                use_tree(&toks[start..j], segs.clone(), out);
                            }
                            start = j + 1;
                        }
                        _ => {}
                    }
                }
                return;
            }
            _ => {}
        }
        i += 1;
    }
    if !segs.is_empty() {
        out.push((segs, None, false));
    }
}

/// Whether the `impl` at `i` starts an item (not `impl Trait` in a type).
fn impl_item_starts(toks: &[Tok], i: usize) -> bool {
    if i == 0 {
        return true;
    }
    match &toks[i - 1] {
        Tok::Punct('}' | ';' | '{' | ']') => true,
        Tok::Ident(w) => matches!(w.as_str(), "unsafe" | "default"),
        _ => false,
    }
}

/// The header of an impl block starting after `impl` at `i`.
fn impl_header(toks: &[Tok], mut i: usize, module: &[String]) -> Option<RawImpl> {
    let mut generics = BTreeSet::new();
    if toks.get(i) == Some(&Tok::Punct('<')) {
        let end = angle_end(toks, i)?;
        // Generic parameters: an identifier right after `<` or `,` at the top level.
        let mut depth = 0;
        for j in i..end {
            match &toks[j] {
                Tok::Punct('<') => depth += 1,
                Tok::Punct('>') if !prev_is(toks, j, &[Tok::Punct('-')]) => depth -= 1,
                Tok::Ident(w)
                    if depth == 1 && prev_is(toks, j, &[Tok::Punct('<'), Tok::Punct(',')]) =>
                {
                    generics.insert(w.clone());
                }
                _ => {}
            }
        }
        i = end + 1;
    }
    // The header up to the block (or a `where` clause).
    let mut end = i;
    let mut depth = 0i32;
    let mut for_at = None;
    while end < toks.len() {
        match &toks[end] {
            Tok::Punct('<') => depth += 1,
            Tok::Punct('>') if !prev_is(toks, end, &[Tok::Punct('-')]) => depth -= 1,
            Tok::Punct('{' | ';') if depth <= 0 => break,
            Tok::Ident(w) if w == "where" && depth <= 0 => break,
            Tok::Ident(w) if w == "for" && depth <= 0 => for_at = Some(end),
            _ => {}
        }
        end += 1;
    }
    let (trait_toks, self_toks) = match for_at {
        Some(f) => (Some(&toks[i..f]), &toks[f + 1..end]),
        None => (None, &toks[i..end]),
    };
    Some(RawImpl {
        module: module.to_vec(),
        generics,
        self_type: head_path(self_toks),
        trait_path: trait_toks.and_then(head_path),
    })
}

fn angle_end(toks: &[Tok], start: usize) -> Option<usize> {
    let mut depth = 0;
    for (j, t) in toks.iter().enumerate().skip(start) {
        match t {
            Tok::Punct('<') => depth += 1,
            Tok::Punct('>') if !prev_is(toks, j, &[Tok::Punct('-')]) => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

/// The first path of a type (`&'a mut foo::Bar<T>` → `foo::Bar`).
fn head_path(toks: &[Tok]) -> Option<Vec<String>> {
    let mut i = 0;
    while let Some(t) = toks.get(i) {
        match t {
            Tok::Punct('&' | '(' | '[' | '*' | '!' | '\'') => i += 1,
            Tok::Ident(w) if matches!(w.as_str(), "mut" | "dyn" | "const") => i += 1,
            _ => break,
        }
    }
    let mut segs = Vec::new();
    if toks.get(i) == Some(&Tok::PathSep) {
        i += 1;
    }
    while let Some(Tok::Ident(w)) = toks.get(i) {
        segs.push(w.clone());
        if toks.get(i + 1) == Some(&Tok::PathSep) {
            i += 2;
        } else {
            break;
        }
    }
    (!segs.is_empty()).then_some(segs)
}

/// `target` as written in an `include…!` of `file`, relative to `src/`.
fn relative_to(file: &str, target: &str) -> String {
    let mut parts: Vec<&str> = file.split('/').collect();
    parts.pop();
    for p in target.split('/') {
        match p {
            "." | "" => {}
            ".." => {
                if parts.last().is_none_or(|l| *l == "..") {
                    parts.push("..");
                } else {
                    parts.pop();
                }
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

/// The tokens without the items marked `#[cfg(test)]` (and without a file marked
/// `#![cfg(test)]`).
fn without_test_items(toks: Vec<Tok>) -> Vec<Tok> {
    let is_cfg_test = |i: usize| -> Option<usize> {
        // `#` [`!`] `[` cfg ( test ) `]`
        let mut j = i + 1;
        let inner = toks.get(j) == Some(&Tok::Punct('!'));
        if inner {
            j += 1;
        }
        let want = [
            Tok::Punct('['),
            Tok::Ident("cfg".into()),
            Tok::Punct('('),
            Tok::Ident("test".into()),
            Tok::Punct(')'),
            Tok::Punct(']'),
        ];
        (toks.get(j..j + want.len()) == Some(&want[..])).then_some(j + want.len())
    };
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        if toks[i] == Tok::Punct('#')
            && let Some(after) = is_cfg_test(i)
        {
            if toks.get(i + 1) == Some(&Tok::Punct('!')) {
                return Vec::new();
            }
            i = item_end(&toks, after);
            continue;
        }
        out.push(toks[i].clone());
        i += 1;
    }
    out
}

/// The index after the item starting at `i` (its further attributes included): after its `;`,
/// its block's closing brace, or up to a `,` or a closing bracket of what encloses it.
fn item_end(toks: &[Tok], mut i: usize) -> usize {
    let mut depth = 0i32;
    while i < toks.len() {
        match toks[i] {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth < 0 {
                    return i;
                }
                if depth == 0 && toks[i] == Tok::Punct('}') {
                    return i + 1;
                }
            }
            Tok::Punct(';') if depth == 0 => return i + 1,
            Tok::Punct(',') if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}
