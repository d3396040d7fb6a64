//! Program ids for people: fingerprints (32 hex digits) shortened for tables.

use crate::units::fit;

/// A program in a narrow column: a fingerprint's first 8 characters (else the id, cut).
pub fn tiny_id(id: &str) -> String {
    if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        id[..8].to_string()
    } else {
        fit(id, 8)
    }
}

/// Fingerprints are long; tables show their first 12 characters.
pub fn short_id(id: &str) -> String {
    if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        id[..12].to_string()
    } else {
        id.to_string()
    }
}
