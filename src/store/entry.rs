//! A stored entry's bytes: a header (magic, payload length, a hash), then the payload. The
//! same bytes are a file of the local store, a slice of a pack and an object of a shared
//! cache; [`verify`] is what every reader checks before using one.
//!
//! The hash covers the entry's *name* (`objects/<key>.<kind>`: the node's key and kind) as well
//! as the payload: an entry copied, moved or swapped to another name is refused like a damaged
//! one, so a well-formed entry of another node can never be taken for this one's.

const MAGIC: &[u8; 8] = b"NJPSTOR2";
/// The header's length.
pub const HEADER: usize = 8 + 8 + 32;

/// The hash an entry named `name` holding `payload` carries.
fn hash(name: &str, payload: &[u8]) -> blake3::Hash {
    let mut h = blake3::Hasher::new_derive_key("nsys-jax-pipe cache entry 2");
    h.update(&(name.len() as u64).to_le_bytes());
    h.update(name.as_bytes());
    h.update(payload);
    h.finalize()
}

/// The header of the entry named `name` holding `payload`.
pub fn header(name: &str, payload: &[u8]) -> Vec<u8> {
    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    header.extend_from_slice(hash(name, payload).as_bytes());
    header
}

/// The start of a signature trailer ([`super::signing`]): the key's name (its length in one
/// byte, then the name) and 64 signature bytes follow.
const SIGNED: &[u8; 8] = b"NJPSIGN1";
const SIGNATURE: usize = 64;

/// The trailer of an entry signed by key `key` with signature `sig`.
pub fn trailer(key: &str, sig: &[u8]) -> Vec<u8> {
    let name = &key.as_bytes()[..key.len().min(255)];
    [SIGNED, &[name.len() as u8][..], name, sig].concat()
}

/// The payload's end, and whether what follows it is a well-formed trailer (or nothing).
fn payload_end(bytes: &[u8]) -> Option<usize> {
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return None;
    }
    let len = u64::from_le_bytes(bytes[8..16].try_into().ok()?) as usize;
    let end = HEADER.checked_add(len)?;
    let rest = bytes.get(end..)?;
    if rest.is_empty() {
        return Some(end);
    }
    let after = rest.strip_prefix(SIGNED)?;
    let (&n, after) = after.split_first()?;
    (after.len() == usize::from(n) + SIGNATURE).then_some(end)
}

/// The payload of a whole entry, without copying it.
pub fn payload(entry: Vec<u8>) -> bytes::Bytes {
    let end = payload_end(&entry).unwrap_or(entry.len());
    bytes::Bytes::from(entry).slice(HEADER..end)
}

/// The check hash of an entry (what a signature signs).
pub fn check_hash(bytes: &[u8]) -> Option<&[u8]> {
    payload_end(bytes).map(|_| &bytes[16..48])
}

/// An entry's signature: the check hash it signs, the key's name and the signature bytes.
pub fn signature(bytes: &[u8]) -> Option<(&[u8], &str, &[u8])> {
    let end = payload_end(bytes)?;
    let (name, sig) = parse_trailer(&bytes[end..])?;
    Some((&bytes[16..48], name, sig))
}

/// The key's name and the signature of a whole trailer.
pub fn parse_trailer(t: &[u8]) -> Option<(&str, &[u8])> {
    let rest = t.strip_prefix(SIGNED)?;
    let (&n, rest) = rest.split_first()?;
    if rest.len() != usize::from(n) + SIGNATURE {
        return None;
    }
    let (name, sig) = rest.split_at(usize::from(n));
    Some((std::str::from_utf8(name).ok()?, sig))
}

/// Whether `bytes` is the whole entry named `name`: its header, then the payload it
/// describes, hashed with that name (then perhaps a signature, checked by
/// [`super::signing::Trust`] where one is asked for).
pub fn verify(name: &str, bytes: &[u8]) -> Option<()> {
    let end = payload_end(bytes)?;
    (hash(name, &bytes[HEADER..end]).as_bytes() == &bytes[16..48]).then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME: &str = "objects/00ff.analysis_summary";

    #[test]
    fn an_entry_verifies_and_any_change_fails() {
        let payload = b"the payload";
        let mut e = header(NAME, payload);
        e.extend_from_slice(payload);
        assert!(verify(NAME, &e).is_some());
        for i in 0..e.len() {
            let mut bad = e.clone();
            bad[i] ^= 1;
            assert!(verify(NAME, &bad).is_none(), "byte {i} flipped");
        }
        assert!(verify(NAME, &e[..e.len() - 1]).is_none());
        assert!(verify(NAME, &e[..HEADER - 1]).is_none());
    }

    /// A whole, well-formed entry under another name (another key, another kind) is refused,
    /// and so is one whose header was rewritten to match a changed payload without the name.
    #[test]
    fn an_entry_is_bound_to_its_name() {
        let payload = b"proc0's summary share";
        let mut e = header(NAME, payload);
        e.extend_from_slice(payload);
        for other in [
            "objects/00fe.analysis_summary",
            "objects/00ff.analysis_ops",
            "",
        ] {
            assert!(verify(other, &e).is_none(), "{other}");
        }
        let mut forged = e.clone();
        forged[HEADER] ^= 1;
        let plain = blake3::hash(&forged[HEADER..]);
        forged[16..48].copy_from_slice(plain.as_bytes());
        assert!(verify(NAME, &forged).is_none());
    }
}
