//! Content keys: 256-bit blake3 hashes, of a file's bytes or of a node's key fields.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A 256-bit content key.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct Key(pub [u8; 32]);

impl Key {
    /// Key of raw bytes (the content key of a file).
    pub fn of_bytes(bytes: &[u8]) -> Key {
        Key(*blake3::hash(bytes).as_bytes())
    }

    pub fn hex(&self) -> String {
        blake3::Hash::from_bytes(self.0).to_hex().to_string()
    }

    /// The first 12 hex digits, for tables.
    pub fn short(&self) -> String {
        self.hex()[..12].to_string()
    }

    pub fn from_hex(s: &str) -> Option<Key> {
        blake3::Hash::from_hex(s).ok().map(|h| Key(*h.as_bytes()))
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({})", self.short())
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

impl From<Key> for String {
    fn from(k: Key) -> String {
        k.hex()
    }
}

impl TryFrom<String> for Key {
    type Error = String;
    fn try_from(s: String) -> Result<Key, String> {
        Key::from_hex(&s).ok_or_else(|| format!("not a content key: {s}"))
    }
}
