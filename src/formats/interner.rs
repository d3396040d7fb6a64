//! Names stored once each and referred to by a 32-bit index: the tables built a row per
//! kernel (the thunk rows, a read table's name dictionary, the stragglers' arrivals) hold the
//! index, and the few hundred distinct names are kept here (docs/design.md, "Bounded memory").

use rustc_hash::FxHashMap;
use std::sync::Arc;

/// The distinct names, in the order they were first seen.
#[derive(Default, Debug, Clone)]
pub struct Interner {
    index: FxHashMap<Arc<str>, u32>,
    list: Vec<Arc<str>>,
}

impl Interner {
    /// The index of `name`, added if new.
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&n) = self.index.get(name) {
            return n;
        }
        let n = u32::try_from(self.list.len())
            .ok()
            .filter(|&n| n != u32::MAX)
            .expect("fewer than 2^32 - 1 distinct names");
        let name: Arc<str> = Arc::from(name);
        self.list.push(name.clone());
        self.index.insert(name, n);
        n
    }

    /// The index of `name`, if it is one of the names.
    pub fn find(&self, name: &str) -> Option<u32> {
        self.index.get(name).copied()
    }

    /// Name `n` (an index this interner gave).
    pub fn get(&self, n: u32) -> &str {
        &self.list[n as usize]
    }

    /// Every name, in the order of their indices.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> {
        self.list.iter().map(|s| &**s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_stored_once_and_found_by_index() {
        let mut names = Interner::default();
        let a = names.intern("fusion.1");
        let b = names.intern("all-gather.2");
        assert_eq!(names.intern("fusion.1"), a);
        assert_ne!(a, b);
        assert_eq!(names.get(b), "all-gather.2");
        assert_eq!(names.find("all-gather.2"), Some(b));
        assert_eq!(names.find("x"), None);
        assert_eq!(
            names.iter().collect::<Vec<_>>(),
            ["fusion.1", "all-gather.2"]
        );
    }
}
