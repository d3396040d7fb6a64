//! The versions of the crate's code, derived at build time from its module graph (`build.rs`,
//! the `modgraph` crate): each source file's version covers every file its code can reach, the
//! locked versions of the crates that code names, and the toolchain. A node kind's version is
//! that of the files implementing it ([`super::kinds`]).

mod generated {
    include!(concat!(env!("OUT_DIR"), "/versions.rs"));
}

use generated::FILES;
#[cfg(test)]
pub use generated::TOOLCHAIN;

/// `file` as the table names it: relative to `src/` (`file!()` gives `src/graph/frames.rs`,
/// or an absolute path when the crate is built as another's dependency).
fn relative(file: &str) -> &str {
    let file = file
        .strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .map_or(file, |f| f.trim_start_matches('/'));
    file.strip_prefix("src/").unwrap_or(file)
}

fn index(file: &str) -> Option<usize> {
    let f = relative(file);
    FILES.binary_search_by(|(p, _, _)| (*p).cmp(f)).ok()
}

fn entry(file: &str) -> Option<&'static (&'static str, &'static str, &'static [u16])> {
    index(file).map(|i| &FILES[i])
}

/// Whether `file` (relative to `src/`) is a file of the crate; usable in constants, so that a
/// kind naming a file that does not exist fails to build.
pub const fn has(file: &str) -> bool {
    // `file!()` gives `src/…` (an absolute path when built as another crate's dependency,
    // which the table cannot check).
    let file = match file.as_bytes() {
        [b'/', ..] => return true,
        [b's', b'r', b'c', b'/', rest @ ..] => match std::str::from_utf8(rest) {
            Ok(r) => r,
            Err(_) => return false,
        },
        _ => file,
    };
    let mut i = 0;
    while i < FILES.len() {
        if str_eq(FILES[i].0, file) {
            return true;
        }
        i += 1;
    }
    false
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The version of the code reachable from the files `roots` (relative to `src/`): 16 hex
/// digits. Panics on a file that is not the crate's (the catalogue's entries are checked
/// when the crate is built).
pub fn of(roots: &[&str]) -> String {
    if let [one] = roots {
        return version_of(one).to_string();
    }
    let mut vs: Vec<&str> = roots.iter().map(|r| version_of(r)).collect();
    vs.sort_unstable();
    vs.dedup();
    if let [one] = vs[..] {
        return one.to_string();
    }
    let mut h = blake3::Hasher::new();
    for v in vs {
        h.update(v.as_bytes());
    }
    h.finalize().to_hex()[..16].to_string()
}

fn version_of(file: &str) -> &'static str {
    entry(file)
        .unwrap_or_else(|| panic!("{file} is not a source file of this crate"))
        .1
}

/// Whether the code of `root` reaches `file` (both relative to `src/`, or as `file!()` gives
/// them).
pub fn reaches(root: &str, file: &str) -> bool {
    let (Some(r), Some(f)) = (entry(root), index(file)) else {
        return false;
    };
    r.2.binary_search(&(f as u16)).is_ok()
}

#[cfg(test)]
/// The files `root` reaches, itself included.
pub fn reached_from(root: &str) -> Vec<&'static str> {
    entry(root)
        .map(|r| r.2.iter().map(|&i| FILES[i as usize].0).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_knows_the_crate() {
        assert!(has("engine/versions.rs") && !has("engine/nope.rs"));
        // A file reaches itself and what it names; the lexer reaches nothing of the graph.
        assert!(reaches("engine/versions.rs", "src/engine/versions.rs"));
        assert!(reaches("engine/mod.rs", "store/local.rs"));
        assert!(!reaches("store/pace.rs", "graph/frames.rs"));
        assert_eq!(of(&["engine/key.rs"]).len(), 16);
        assert_eq!(
            of(&["engine/key.rs", "src/engine/key.rs"]),
            of(&["engine/key.rs"])
        );
        assert_ne!(
            of(&["engine/key.rs", "store/local.rs"]),
            of(&["engine/key.rs"])
        );
        assert!(reached_from("report/page.rs").contains(&"report/page.css"));
    }
}
