//! Node kinds. Each kind of graph node is a type whose value is the node's key recipe — its
//! input keys and parameters — and which declares, in one place, the kind's name (the store's
//! folder, the name in `--explain` and `pipeline-run.json`), the source files its version is
//! derived from, its value type, and how its values are kept. [`crate::engine::Engine::compute`]
//! takes such a value.

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
}

/// A kind of node, as a key type with its value type.
pub trait Node {
    /// What the node computes.
    type Value: Send + Sync + 'static;
    /// How its values are kept.
    const KEEP: Keep;
    /// The kind's name.
    fn kind(&self) -> &str;
    /// The source files (relative to `src/`, a folder ending in `/`) whose content is the
    /// kind's version: editing one of them invalidates the kind's stored values.
    fn sources(&self) -> &[&'static str];
    /// Feed the node's inputs and parameters to its key.
    fn recipe(&self, kb: KeyBuilder) -> KeyBuilder;

    /// The node's key: its kind, version, parameters and input keys.
    fn key(&self) -> Key {
        self.recipe(KeyBuilder::new(self.kind(), &versions::of(self.sources())))
            .finish()
    }
}

/// Declares a node kind whose name and sources are fixed:
/// `node_kind!(Type, "name", ["source.rs", ...], Keep, Value)`, where `Type` has a method
/// `fn feed(&self, kb: KeyBuilder) -> KeyBuilder` (its key recipe).
macro_rules! node_kind {
    ($t:ty, $name:literal, [$($src:literal),*], $keep:ident, $value:ty) => {
        impl $crate::engine::Node for $t {
            type Value = $value;
            const KEEP: $crate::engine::Keep = $crate::engine::Keep::$keep;
            fn kind(&self) -> &str {
                $name
            }
            fn sources(&self) -> &[&'static str] {
                &[$($src),*]
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
        fn sources(&self) -> &[&'static str] {
            &["engine/node.rs"]
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
