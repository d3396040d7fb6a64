//! A stored entry's bytes: a header (magic, payload length, blake3 of the payload), then the
//! payload. The same bytes are a file of the local store, a slice of a pack and an object of
//! a shared cache; [`verify`] is what every reader checks before using one.

const MAGIC: &[u8; 8] = b"NJPSTOR1";
/// The header's length.
pub const HEADER: usize = 8 + 8 + 32;

/// The header of an entry holding `payload`.
pub fn header(payload: &[u8]) -> Vec<u8> {
    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    header.extend_from_slice(blake3::hash(payload).as_bytes());
    header
}

/// Whether `bytes` is a whole entry: its header, then the payload it describes.
pub fn verify(bytes: &[u8]) -> Option<()> {
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return None;
    }
    let len = u64::from_le_bytes(bytes[8..16].try_into().ok()?) as usize;
    if bytes.len() != HEADER + len {
        return None;
    }
    let payload = &bytes[HEADER..];
    (blake3::hash(payload).as_bytes() == &bytes[16..48]).then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_verifies_and_any_change_fails() {
        let payload = b"the payload";
        let mut e = header(payload);
        e.extend_from_slice(payload);
        assert!(verify(&e).is_some());
        for i in 0..e.len() {
            let mut bad = e.clone();
            bad[i] ^= 1;
            assert!(verify(&bad).is_none(), "byte {i} flipped");
        }
        assert!(verify(&e[..e.len() - 1]).is_none());
        assert!(verify(&e[..HEADER - 1]).is_none());
    }
}
