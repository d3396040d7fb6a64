//! Node keys: blake3 over a node's kind, version, parameters and input keys.

pub use crate::store::Key;

/// Builds a node key. Every field is length-prefixed so that distinct field sequences never
/// collide.
pub struct KeyBuilder(blake3::Hasher);

impl KeyBuilder {
    /// Start the key of a node of `kind` whose code has `version`.
    pub fn new(kind: &str, version: &str) -> KeyBuilder {
        let mut b = KeyBuilder(blake3::Hasher::new());
        b.field(b"nsys-jax-pipe node");
        b.field(kind.as_bytes());
        b.field(version.as_bytes());
        b
    }

    /// Start a key of the catalogue's `kind`, at its version.
    pub fn of(kind: &super::kinds::Kind) -> KeyBuilder {
        KeyBuilder::new(kind.name, &kind.version())
    }

    fn field(&mut self, bytes: &[u8]) {
        self.0.update(&(bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
    }

    /// A named parameter.
    pub fn param(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        self.field(b"param");
        self.field(name.as_bytes());
        self.field(value.as_ref());
        self
    }

    /// The key of one input.
    pub fn input(mut self, key: &Key) -> Self {
        self.field(b"input");
        self.field(&key.0);
        self
    }

    /// The keys of an ordered list of inputs.
    pub fn inputs<'a>(mut self, keys: impl IntoIterator<Item = &'a Key>) -> Self {
        self.field(b"inputs");
        let mut n = 0u64;
        for k in keys {
            self.0.update(&k.0);
            n += 1;
        }
        self.field(&n.to_le_bytes());
        self
    }

    pub fn finish(self) -> Key {
        Key(*self.0.finalize().as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_depend_on_every_field() {
        let a = Key::of_bytes(b"a");
        let b = Key::of_bytes(b"b");
        let base = || KeyBuilder::new("k", "v1").param("p", "1").input(&a);
        let k0 = base().finish();
        assert_eq!(k0, base().finish());
        assert_ne!(
            k0,
            KeyBuilder::new("k", "v2")
                .param("p", "1")
                .input(&a)
                .finish()
        );
        assert_ne!(
            k0,
            KeyBuilder::new("j", "v1")
                .param("p", "1")
                .input(&a)
                .finish()
        );
        assert_ne!(
            k0,
            KeyBuilder::new("k", "v1")
                .param("p", "2")
                .input(&a)
                .finish()
        );
        assert_ne!(
            k0,
            KeyBuilder::new("k", "v1")
                .param("p", "1")
                .input(&b)
                .finish()
        );
        // field boundaries matter
        assert_ne!(
            KeyBuilder::new("k", "v").param("ab", "c").finish(),
            KeyBuilder::new("k", "v").param("a", "bc").finish()
        );
    }

    #[test]
    fn hex_round_trip() {
        let k = Key::of_bytes(b"hello");
        assert_eq!(Key::from_hex(&k.hex()), Some(k));
        let s = serde_json::to_string(&k).unwrap();
        assert_eq!(serde_json::from_str::<Key>(&s).unwrap(), k);
    }
}
