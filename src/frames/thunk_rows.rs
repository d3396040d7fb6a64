//! The rows of a thunk frame while it is built: fixed-size records whose names are indices
//! into one table of the frame's distinct names, and whose program is an index into the
//! frame's table of programs (docs/design.md, "Bounded memory": a row per kernel, a few
//! hundred names and programs).

use crate::formats::hlo::HloModuleInfo;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// A name of the frame: an index into its [`Names`].
pub type Name = u32;

/// No name (a null in the frame).
pub const NO_NAME: Name = Name::MAX;

/// The distinct names of a frame being built, each stored once.
#[derive(Default)]
pub struct Names {
    index: FxHashMap<Arc<str>, Name>,
    list: Vec<Arc<str>>,
}

impl Names {
    /// The index of `name`, added if new.
    pub fn intern(&mut self, name: &str) -> Name {
        if let Some(&n) = self.index.get(name) {
            return n;
        }
        let n = Name::try_from(self.list.len())
            .ok()
            .filter(|&n| n != NO_NAME)
            .expect("fewer than 2^32 - 1 distinct names");
        let name: Arc<str> = Arc::from(name);
        self.list.push(name.clone());
        self.index.insert(name, n);
        n
    }

    /// The index of `name`, if it is one of the names.
    pub fn find(&self, name: &str) -> Option<Name> {
        self.index.get(name).copied()
    }

    pub fn get(&self, n: Name) -> &str {
        &self.list[n as usize]
    }

    /// The name, or None for [`NO_NAME`].
    pub fn opt(&self, n: Name) -> Option<&str> {
        (n != NO_NAME).then(|| self.get(n))
    }

    /// Every name, in the order of their indices.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.list.iter().map(|s| &**s)
    }
}

/// A program the frame's rows ran: its stable id (the fingerprint), its HLO module's name
/// and numeric id as the trace names them, and its HLO when the dump has it.
pub struct Program<'h> {
    pub stable: Arc<str>,
    pub hlo_module: String,
    pub numeric: Option<i64>,
    pub hlo: Option<&'h HloModuleInfo>,
    /// The rank of `stable` among the programs' stable ids (programs sort by it).
    pub rank: u32,
}

/// One row of the thunk frame being built (56 bytes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThunkRow {
    /// RangeId of the projected range it comes from.
    pub range: i64,
    pub start: i64,
    pub dur: i64,
    /// Position among the rows of one range (a command buffer's instructions).
    pub sub: u32,
    /// Its program: an index into the frame's [`Program`]s.
    pub prog: u32,
    pub exec: i32,
    pub dev: i32,
    /// The HLO instruction (or the command buffer) it runs.
    pub op: Name,
    pub op_name: Name,
    /// The command buffer it ran in ([`NO_NAME`] outside one).
    pub command_buffer: Name,
}

const _: () = assert!(std::mem::size_of::<ThunkRow>() == 56);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_stored_once_and_found_by_index() {
        let mut names = Names::default();
        let a = names.intern("fusion.1");
        let b = names.intern("all-gather.2");
        assert_eq!(names.intern("fusion.1"), a);
        assert_ne!(a, b);
        assert_eq!(names.get(b), "all-gather.2");
        assert_eq!(names.opt(NO_NAME), None);
        assert_eq!(names.opt(a), Some("fusion.1"));
        assert_eq!(names.find("all-gather.2"), Some(b));
        assert_eq!(names.find("x"), None);
        assert_eq!(
            names.iter().collect::<Vec<_>>(),
            ["fusion.1", "all-gather.2"]
        );
    }
}
