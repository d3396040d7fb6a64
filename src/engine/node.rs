//! Node kinds. Each kind of graph node is a type whose value is the node's key recipe — its
//! input keys and parameters — with its entry in the catalogue ([`super::kinds`]: its name
//! and the files whose reach is its version), its value type, and how its values are kept.
//! [`crate::engine::Engine::compute`] takes such a value.

use super::key::{Key, KeyBuilder};
use super::versions;

/// How the values of a node kind are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// In the persistent store, and shared within the process.
    Stored,
    /// In the persistent store, and in memory only while someone holds the value (large
    /// per-process frames: a run over many processes keeps only those in use).
    Volatile,
    /// In memory only: cheaper to recompute than to store and load (a decoded HLO module).
    Transient,
    /// In memory only, and only while someone holds the value: a large intermediate that the
    /// nodes computed from it need together and nothing needs after (a report's exported
    /// tables, once the members derived from them are made).
    Held,
}

/// A kind of node, as a key type with its value type.
pub trait Node {
    /// What the node computes.
    type Value: Send + Sync + 'static;
    /// How its values are kept.
    const KEEP: Keep;
    /// The kind's name.
    fn kind(&self) -> &str;
    /// The files implementing the kind (relative to `src/`): the version of all the code they
    /// reach is the kind's version, so an edit of any of it invalidates the kind's values.
    fn roots(&self) -> Vec<&'static str>;
    /// Feed the node's inputs and parameters to its key.
    fn recipe(&self, kb: KeyBuilder) -> KeyBuilder;

    /// The node's key: its kind, version, parameters and input keys.
    fn key(&self) -> Key {
        self.recipe(KeyBuilder::new(self.kind(), &versions::of(&self.roots())))
            .finish()
    }
}

/// Makes `Type` the key type of a kind of the catalogue:
/// `node_kind!(Type, kinds::NAME, Keep, Value)`, where `Type` has a method
/// `fn feed(&self, kb: KeyBuilder) -> KeyBuilder` (its key recipe).
macro_rules! node_kind {
    ($t:ty, $kind:path, $keep:ident, $value:ty) => {
        impl $crate::engine::Node for $t {
            type Value = $value;
            const KEEP: $crate::engine::Keep = $crate::engine::Keep::$keep;
            fn kind(&self) -> &str {
                $kind.name
            }
            fn roots(&self) -> Vec<&'static str> {
                $kind.roots.to_vec()
            }
            fn recipe(&self, kb: $crate::engine::KeyBuilder) -> $crate::engine::KeyBuilder {
                self.feed(kb)
            }
        }
    };
}
pub(crate) use node_kind;

#[cfg(test)]
mod tests {
    use super::*;

    struct Doubled(Key);
    impl Node for Doubled {
        type Value = u64;
        const KEEP: Keep = Keep::Transient;
        fn kind(&self) -> &str {
            "doubled"
        }
        fn roots(&self) -> Vec<&'static str> {
            vec!["engine/node.rs"]
        }
        fn recipe(&self, kb: KeyBuilder) -> KeyBuilder {
            kb.input(&self.0)
        }
    }

    #[test]
    fn key_follows_inputs() {
        let a = Doubled(Key::of_bytes(b"a")).key();
        assert_eq!(a, Doubled(Key::of_bytes(b"a")).key());
        assert_ne!(a, Doubled(Key::of_bytes(b"b")).key());
    }
}
