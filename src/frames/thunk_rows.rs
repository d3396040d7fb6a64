//! The rows of a thunk frame while it is built: fixed-size records whose names are indices
//! into one table of the frame's distinct names, and whose program is an index into the
//! frame's table of programs (docs/design.md, "Bounded memory": a row per kernel, a few
//! hundred names and programs).

use crate::formats::hlo::HloModuleInfo;
use crate::formats::interner::Interner;
use std::sync::Arc;

/// A name of the frame: an index into its [`Names`].
pub type Name = u32;

/// No name (a null in the frame).
pub const NO_NAME: Name = Name::MAX;

/// The distinct names of a frame being built, each stored once; [`NO_NAME`] is none.
#[derive(Default)]
pub struct Names(Interner);

impl Names {
    /// The index of `name`, added if new.
    pub fn intern(&mut self, name: &str) -> Name {
        self.0.intern(name)
    }

    /// The index of `name`, if it is one of the names.
    pub fn find(&self, name: &str) -> Option<Name> {
        self.0.find(name)
    }

    pub fn get(&self, n: Name) -> &str {
        self.0.get(n)
    }

    /// The name, or None for [`NO_NAME`].
    pub fn opt(&self, n: Name) -> Option<&str> {
        (n != NO_NAME).then(|| self.get(n))
    }

    /// Every name, in the order of their indices.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter()
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
    fn no_name_is_none() {
        let mut names = Names::default();
        let a = names.intern("fusion.1");
        assert_eq!(names.opt(NO_NAME), None);
        assert_eq!(names.opt(a), Some("fusion.1"));
    }
}
