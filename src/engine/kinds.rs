//! What a kind of node is: its name (the suffix of its store entries, the name `--explain` and
//! `pipeline-run.json` show) and the files that implement it. A kind's version is the version
//! of all the code those files reach ([`super::versions`], derived from the module graph at
//! build time): no list of source files is kept by hand, and the engine checks, each time it
//! computes a node, that the file computing it is reached from the kind's files
//! ([`super::Engine::compute`]).
//!
//! A kind is declared in the file that computes it, beside its key type, value type and
//! compute ([`kind!`]): that file is the kind's. Kinds named per analysis, share or
//! comparison family are [`Family`]s ([`family!`]): the analysis's or share's own file is
//! added to the family's. The build script lists every declaration it finds (`DECLARED`, for
//! the tests): this module names no file.

use super::versions;

/// A kind of node.
#[derive(Debug)]
pub struct Kind {
    pub name: &'static str,
    /// The files implementing it, relative to `src/`.
    pub roots: &'static [&'static str],
}

impl Kind {
    /// The version of the kind's code.
    pub fn version(&self) -> String {
        versions::of(self.roots)
    }
}

/// Kinds named `<prefix><name>` (an analysis, a share, a comparison family), implemented by
/// the family's files and, where it has one, the member's own file.
#[derive(Debug)]
pub struct Family {
    pub prefix: &'static str,
    pub roots: &'static [&'static str],
}

impl Family {
    /// The kind of the family's member `name`.
    pub fn kind(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The family's files with `more` (as `file!()` gives them, or relative to `src/`).
    pub fn roots_with(&self, more: &[&'static str]) -> Vec<&'static str> {
        let all = self.roots.iter().chain(more);
        let mut r: Vec<&'static str> = all.map(|f| f.strip_prefix("src/").unwrap_or(f)).collect();
        r.sort_unstable();
        r.dedup();
        r
    }
}

/// Declares a kind of node computed in this file: `kind!(/** doc */ NAME = "name");` makes
/// the constant `NAME`, whose version is that of all the code this file reaches. A file that
/// is not the crate's (a typo cannot happen with `file!()`, but a file left out of the module
/// tree can) fails the build.
macro_rules! kind {
    ($(#[$doc:meta])* $id:ident = $name:literal) => {
        $(#[$doc])*
        pub const $id: $crate::engine::kinds::Kind =
            $crate::engine::kinds::Kind { name: $name, roots: &[file!()] };
        const _: () = assert!($crate::engine::versions::has(file!()), "not a file of the crate");
    };
}

/// Declares a family of kinds named `<prefix><member>` whose code is this file and, where the
/// member has one, the member's own file: `family!(/** doc */ NAME = "prefix:");`.
macro_rules! family {
    ($(#[$doc:meta])* $id:ident = $prefix:literal) => {
        $(#[$doc])*
        pub const $id: $crate::engine::kinds::Family =
            $crate::engine::kinds::Family { prefix: $prefix, roots: &[file!()] };
        const _: () = assert!($crate::engine::versions::has(file!()), "not a file of the crate");
    };
}
pub(crate) use {family, kind};

/// Every `kind!` and `family!` of the crate's code, as the build script found them:
/// (name or prefix, file relative to `src/`, whether a family).
#[cfg(test)]
pub mod declared {
    include!(concat!(env!("OUT_DIR"), "/kinds.rs"));
}

#[cfg(test)]
mod tests {
    use super::declared::DECLARED;

    #[test]
    fn fixed_names_are_unique_and_apart_from_the_families() {
        let kinds: Vec<&str> = DECLARED.iter().filter(|d| !d.2).map(|d| d.0).collect();
        assert!(kinds.len() >= 20, "{kinds:?}");
        let mut names = kinds.clone();
        names.sort_unstable();
        names.dedup();
        assert_eq!(
            names.len(),
            kinds.len(),
            "a kind name is declared twice: {kinds:?}"
        );
        for k in &kinds {
            for (prefix, file, _) in DECLARED.iter().filter(|d| d.2 && !d.0.is_empty()) {
                assert!(
                    !k.starts_with(prefix),
                    "{k} looks like a member of {prefix} ({file})"
                );
            }
            assert!(!k.is_empty() && !k.contains(['/', ' ']), "{k:?}");
        }
        assert!(DECLARED.iter().all(|d| super::versions::has(d.1)));
    }
}
