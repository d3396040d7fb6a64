//! The crate's module graph, read off its source text: for every source file, the files its
//! code can reach. A node kind's version is the hash of everything reachable from the files
//! that implement it (see `docs/design.md`, "Versions"), so no list of files is kept by hand.
//!
//! nsys-jax-pipe's build script derives the versions from it at build time, and its tests
//! (the layout rules among them) read the sources through it: one lexer for both. It uses
//! `std` and `blake3` only.
//!
//! What counts as "reaching": a file reaches the files that define the items its non-test
//! code names by path (`use` items whose name is used, `crate::`/`super::`/`self::` paths,
//! paths through a child module or an imported module), following re-exports to where an item
//! is defined; the files holding `impl` blocks of a type it reaches (an `impl` of a local trait
//! for a foreign or generic type counts as part of the trait's file); the files it includes
//! (`include_str!` and the like); and the external crates it names. Items under
//! `#[cfg(test)]` are left out. Whatever cannot be resolved falls back to the whole module
//! file that was named: the graph may say a file reaches more than it does, never less.

pub mod lex;
mod scan;

use std::collections::{BTreeMap, BTreeSet};

pub use scan::FileFacts;

/// One file of the crate: its path relative to `src/` (`"graph/frames.rs"`, or
/// `"../protos/x.proto"` for an included file outside `src/`) and its bytes.
pub struct SourceFile {
    pub path: String,
    pub bytes: Vec<u8>,
}

/// The module graph of a crate.
pub struct ModGraph {
    /// Every file, sorted by path (sources and included files).
    pub files: Vec<String>,
    /// The blake3 of each file's bytes.
    pub hashes: Vec<[u8; 32]>,
    /// The files each file reaches directly (indices into `files`).
    pub edges: Vec<BTreeSet<usize>>,
    /// The external crates each file names (as written in code: `serde_json`).
    pub crates: Vec<BTreeSet<String>>,
}

/// The module path of a source file (`graph/frames.rs` → `["graph", "frames"]`), None for a
/// file that is not a module of the library (a binary's root or an included file).
pub fn module_of(path: &str) -> Option<Vec<String>> {
    let stem = path.strip_suffix(".rs")?;
    if path.starts_with("../") || path == "main.rs" || path.starts_with("bin/") {
        return None;
    }
    if stem == "lib" {
        return Some(Vec::new());
    }
    let mut segs: Vec<String> = stem.split('/').map(str::to_string).collect();
    if segs.last().is_some_and(|s| s == "mod") {
        segs.pop();
    }
    Some(segs)
}

/// The crate's files as its version table covers them: every `.rs` file under `src` (paths
/// relative to it, sorted) and the files they include. Errors name the file.
pub fn read_crate(src: &std::path::Path) -> Result<Vec<SourceFile>, String> {
    fn collect(
        root: &std::path::Path,
        dir: &std::path::Path,
        out: &mut Vec<SourceFile>,
    ) -> Result<(), String> {
        let read = |p: &std::path::Path, e: std::io::Error| format!("{}: {e}", p.display());
        let mut entries = Vec::new();
        for e in std::fs::read_dir(dir).map_err(|e| read(dir, e))? {
            entries.push(e.map_err(|e| read(dir, e))?.path());
        }
        entries.sort();
        for path in entries {
            if path.is_dir() {
                collect(root, &path, out)?;
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).expect("below the root");
                let bytes = std::fs::read(&path).map_err(|e| read(&path, e))?;
                out.push(SourceFile {
                    path: rel.to_string_lossy().replace('\\', "/"),
                    bytes,
                });
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    collect(src, src, &mut files)?;
    // The files the sources include (styles, scripts, pipelines, `.proto` schemas).
    let mut included = BTreeSet::new();
    for f in &files {
        included.extend(includes(&f.path, &String::from_utf8_lossy(&f.bytes)));
    }
    for rel in included {
        if rel.ends_with(".rs") && files.iter().any(|f| f.path == rel) {
            continue;
        }
        let path = src.join(&rel);
        let bytes = std::fs::read(&path)
            .map_err(|e| format!("{}: included by the sources: {e}", path.display()))?;
        files.push(SourceFile { path: rel, bytes });
    }
    Ok(files)
}

/// The external crates `package`'s code can name: its dependencies in `lock` (as Rust names
/// them) and the standard library's crates.
pub fn externals(lock: &Lock, package: &str) -> BTreeSet<String> {
    let mut externals: BTreeSet<String> = lock
        .dependencies_of(package)
        .iter()
        .map(|d| d.split(' ').next().unwrap_or_default().replace('-', "_"))
        .collect();
    externals.extend(["std", "core", "alloc"].map(String::from));
    externals
}

/// The files a source file includes (`include_str!("…")` and the like), relative to `src/`.
pub fn includes(path: &str, text: &str) -> Vec<String> {
    scan::scan(path, text, &BTreeSet::new(), "").includes
}

impl ModGraph {
    /// The graph of `files`; `externals` are the names code may use for dependencies
    /// (`serde_json`, and `std`, `core`, `alloc`); `lib_name` is the library's own name as a
    /// binary names it (`nsys_jax_pipe`).
    pub fn build(files: &[SourceFile], externals: &BTreeSet<String>, lib_name: &str) -> ModGraph {
        let mut sorted: Vec<&SourceFile> = files.iter().collect();
        sorted.sort_by(|a, b| a.path.cmp(&b.path));
        let paths: Vec<String> = sorted.iter().map(|f| f.path.clone()).collect();
        let index: BTreeMap<&str, usize> = paths
            .iter()
            .enumerate()
            .map(|(i, p)| (p.as_str(), i))
            .collect();
        // Modules: path → the file that holds them (inline modules are added by the scan).
        let mut modules: BTreeMap<Vec<String>, usize> = BTreeMap::new();
        for (i, p) in paths.iter().enumerate() {
            if let Some(m) = module_of(p) {
                modules.insert(m, i);
            }
        }
        let mut facts: Vec<FileFacts> = sorted
            .iter()
            .map(|f| {
                if f.path.ends_with(".rs") {
                    let text = String::from_utf8_lossy(&f.bytes);
                    scan::scan(&f.path, &text, externals, lib_name)
                } else {
                    FileFacts::default()
                }
            })
            .collect();
        // A module file that no live module declares outside test code (`#[cfg(test)] mod
        // tests;`) is test code: it is kept as a file that reaches nothing and that nothing
        // resolves into.
        let declared: BTreeSet<Vec<String>> = facts
            .iter()
            .flat_map(|f| f.declared.iter().cloned())
            .collect();
        let live = |m: &[String]| (1..=m.len()).all(|n| declared.contains(&m[..n]));
        for (i, p) in paths.iter().enumerate() {
            if let Some(m) = module_of(p)
                && !live(&m)
            {
                modules.remove(&m);
                facts[i] = FileFacts::default();
            }
        }
        for (i, f) in facts.iter().enumerate() {
            for m in &f.inline_modules {
                modules.entry(m.clone()).or_insert(i);
            }
        }
        let r = Resolver {
            modules: &modules,
            facts: &facts,
        };
        let mut edges: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); paths.len()];
        for (i, f) in facts.iter().enumerate() {
            for reference in &f.references {
                if reference.module_whole || !modules.contains_key(&reference.path) {
                    edges[i].extend(r.resolve(&reference.path));
                }
            }
            for inc in &f.includes {
                if let Some(&j) = index.get(inc.as_str()) {
                    edges[i].insert(j);
                }
            }
        }
        // An impl block belongs to its type's file (or, for a foreign or generic type, to its
        // trait's file): whoever reaches that file reaches the block.
        for (i, f) in facts.iter().enumerate() {
            for imp in &f.impls {
                let mut owners = imp
                    .self_type
                    .as_ref()
                    .map(|t| r.resolve(t))
                    .unwrap_or_default();
                if owners.is_empty()
                    && let Some(t) = &imp.trait_path
                {
                    owners = r.resolve(t);
                }
                for o in owners {
                    if o != i {
                        edges[o].insert(i);
                    }
                }
            }
        }
        for (i, e) in edges.iter_mut().enumerate() {
            e.remove(&i);
        }
        ModGraph {
            hashes: sorted
                .iter()
                .map(|f| *blake3::hash(&f.bytes).as_bytes())
                .collect(),
            crates: facts.into_iter().map(|f| f.crates).collect(),
            files: paths,
            edges,
        }
    }

    pub fn index(&self, path: &str) -> Option<usize> {
        self.files.binary_search_by(|p| p.as_str().cmp(path)).ok()
    }

    /// Every file reachable from `roots` (the roots included), sorted.
    pub fn closure(&self, roots: &[usize]) -> BTreeSet<usize> {
        let mut seen: BTreeSet<usize> = BTreeSet::new();
        let mut todo: Vec<usize> = roots.to_vec();
        while let Some(f) = todo.pop() {
            if seen.insert(f) {
                todo.extend(self.edges[f].iter().copied().filter(|g| !seen.contains(g)));
            }
        }
        seen
    }

    /// The version of the code reachable from `roots`: blake3 over each reachable file's path
    /// and content, the resolved versions of the external crates they name (with everything
    /// those crates depend on, from `lock`), and `toolchain`; 16 hex digits.
    pub fn version(&self, roots: &[usize], lock: &Lock, toolchain: &str) -> String {
        let files = self.closure(roots);
        let mut h = blake3::Hasher::new();
        let mut crates: BTreeSet<&str> = BTreeSet::new();
        for &f in &files {
            h.update(self.files[f].as_bytes());
            h.update(&[0]);
            h.update(&self.hashes[f]);
            crates.extend(self.crates[f].iter().map(String::as_str));
        }
        for (name, version) in lock.resolved(crates) {
            h.update(name.as_bytes());
            h.update(&[b' ']);
            h.update(version.as_bytes());
            h.update(&[0]);
        }
        h.update(toolchain.as_bytes());
        h.finalize().to_hex()[..16].to_string()
    }

    /// The cycles between files: each strongly connected set of more than one file, sorted.
    pub fn cycles(&self) -> Vec<Vec<usize>> {
        // Tarjan's algorithm, iteratively.
        let n = self.files.len();
        let (mut index, mut low) = (vec![usize::MAX; n], vec![0; n]);
        let (mut on, mut stack, mut out) = (vec![false; n], Vec::new(), Vec::new());
        let mut next = 0;
        for start in 0..n {
            if index[start] != usize::MAX {
                continue;
            }
            let mut work: Vec<(usize, Vec<usize>)> = Vec::new();
            index[start] = next;
            low[start] = next;
            next += 1;
            stack.push(start);
            on[start] = true;
            work.push((start, self.edges[start].iter().copied().collect()));
            while let Some((v, rest)) = work.last_mut() {
                let v = *v;
                if let Some(w) = rest.pop() {
                    if index[w] == usize::MAX {
                        index[w] = next;
                        low[w] = next;
                        next += 1;
                        stack.push(w);
                        on[w] = true;
                        work.push((w, self.edges[w].iter().copied().collect()));
                    } else if on[w] {
                        low[v] = low[v].min(index[w]);
                    }
                    continue;
                }
                work.pop();
                if let Some((parent, _)) = work.last() {
                    low[*parent] = low[*parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut scc = Vec::new();
                    loop {
                        let w = stack.pop().expect("on the stack");
                        on[w] = false;
                        scc.push(w);
                        if w == v {
                            break;
                        }
                    }
                    if scc.len() > 1 {
                        scc.sort_unstable();
                        out.push(scc);
                    }
                }
            }
        }
        out.sort();
        out
    }
}

/// Resolves absolute paths (`["graph", "frames", "gpu_frames"]`) to the files defining them.
struct Resolver<'a> {
    modules: &'a BTreeMap<Vec<String>, usize>,
    facts: &'a [FileFacts],
}

impl Resolver<'_> {
    fn resolve(&self, path: &[String]) -> BTreeSet<usize> {
        let mut out = BTreeSet::new();
        let mut seen = BTreeSet::new();
        self.resolve_into(path, &mut out, &mut seen);
        out
    }

    fn resolve_into(
        &self,
        path: &[String],
        out: &mut BTreeSet<usize>,
        seen: &mut BTreeSet<Vec<String>>,
    ) {
        if !seen.insert(path.to_vec()) {
            return;
        }
        let mut module: Vec<String> = Vec::new();
        for (i, seg) in path.iter().enumerate() {
            module.push(seg.clone());
            if self.modules.contains_key(&module) {
                continue;
            }
            module.pop();
            let Some(&file) = self.modules.get(&module) else {
                return;
            };
            // `seg` is an item of `module`: where is it defined?
            let facts = &self.facts[file];
            let before = out.len();
            if facts.defines(&module, seg) {
                out.insert(file);
            }
            let mut found_elsewhere = false;
            for u in facts.uses_in(&module) {
                if u.glob {
                    if self.modules.contains_key(&u.path) {
                        let mut p = u.path.clone();
                        p.extend(path[i..].iter().cloned());
                        let n = out.len();
                        self.resolve_into(&p, out, seen);
                        found_elsewhere |= out.len() > n;
                    }
                } else if u.name == *seg {
                    let mut p = u.path.clone();
                    p.extend(path[i + 1..].iter().cloned());
                    let n = out.len();
                    self.resolve_into(&p, out, seen);
                    found_elsewhere |= out.len() > n;
                }
            }
            if out.len() == before && !found_elsewhere {
                // Not found (made by a macro, say): the module's file as a whole.
                out.insert(file);
            }
            return;
        }
        // The path names a module: its file.
        if let Some(&file) = self.modules.get(&module) {
            out.insert(file);
        }
    }
}

/// The resolved packages of a `Cargo.lock`: name → versions, and each package's dependencies.
#[derive(Default)]
pub struct Lock {
    /// (name, version) → dependencies as written (`"name"` or `"name version"`).
    packages: BTreeMap<(String, String), Vec<String>>,
}

impl Lock {
    /// Reads the `[[package]]` tables of a lock file (name, version, dependencies).
    pub fn parse(text: &str) -> Lock {
        let mut lock = Lock::default();
        let mut cur: Option<(String, String, Vec<String>)> = None;
        let mut in_deps = false;
        let flush = |lock: &mut Lock, cur: &mut Option<(String, String, Vec<String>)>| {
            if let Some((n, v, d)) = cur.take() {
                lock.packages.insert((n, v), d);
            }
        };
        for line in text.lines() {
            let line = line.trim();
            if line == "[[package]]" {
                flush(&mut lock, &mut cur);
                cur = Some(Default::default());
                in_deps = false;
                continue;
            }
            let Some(p) = cur.as_mut() else { continue };
            if in_deps {
                if line.starts_with(']') {
                    in_deps = false;
                } else if let Some(d) = unquote(line.trim_end_matches(',')) {
                    p.2.push(d);
                }
            } else if let Some(v) = line.strip_prefix("name = ").and_then(unquote) {
                p.0 = v;
            } else if let Some(v) = line.strip_prefix("version = ").and_then(unquote) {
                p.1 = v;
            } else if line.starts_with("dependencies = [") {
                in_deps = !line.ends_with(']');
            }
        }
        flush(&mut lock, &mut cur);
        lock
    }

    /// The dependencies of the package `name` as written in its `dependencies` list.
    pub fn dependencies_of(&self, name: &str) -> Vec<String> {
        self.find(name).map(|(_, d)| d.clone()).unwrap_or_default()
    }

    fn find(&self, spec: &str) -> Option<(&(String, String), &Vec<String>)> {
        let (name, version) = match spec.split_once(' ') {
            Some((n, v)) => (n, Some(v)),
            None => (spec, None),
        };
        self.packages
            .range((name.to_string(), String::new())..)
            .take_while(|((n, _), _)| n == name)
            .find(|((_, v), _)| version.is_none_or(|want| want == v))
    }

    /// Every package reachable from the crates named in code (`serde_json` finds
    /// `serde_json`, `tikv_jemallocator` finds `tikv-jemallocator`), as (name, version).
    pub fn resolved<'a>(
        &self,
        crates: impl IntoIterator<Item = &'a str>,
    ) -> BTreeSet<(&str, &str)> {
        let mut out: BTreeSet<(&str, &str)> = BTreeSet::new();
        let mut todo: Vec<String> = Vec::new();
        for c in crates {
            let dashed = c.replace('_', "-");
            todo.push(if self.find(c).is_some() {
                c.to_string()
            } else {
                dashed
            });
        }
        while let Some(spec) = todo.pop() {
            if let Some(((n, v), deps)) = self.find(&spec)
                && out.insert((n.as_str(), v.as_str()))
            {
                todo.extend(deps.iter().cloned());
            }
        }
        out
    }
}

fn unquote(s: &str) -> Option<String> {
    Some(s.strip_prefix('"')?.strip_suffix('"')?.to_string())
}

#[cfg(test)]
mod tests;
