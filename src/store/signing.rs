//! Signed entries for shared caches (docs/design.md, "The shared cache"), on the model of
//! Nix's binary caches: the machines that write a shared cache (CI) hold a secret key and
//! sign every entry they upload; the machines that read it list the public keys they trust,
//! and take only entries signed by one of them. Anyone else who can write to the bucket can
//! then cause recomputation, never a wrong answer.
//!
//! Keys are Ed25519 (`ring`). A public key is written `NAME:HEX` (64 hex digits); a secret key
//! file holds `nsys-jax-pipe-secret-key NAME:HEX` (the PKCS#8 document). A signature covers the
//! entry's check hash (which binds its name and payload, [`super::entry`]) and rides after the
//! payload as a trailer: the key's name and the 64 signature bytes.

use anyhow::{Context, Result, anyhow, bail};
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};

const SECRET_TAG: &str = "nsys-jax-pipe-secret-key";
/// What a signature covers besides the entry's check hash.
const CONTEXT: &[u8] = b"nsys-jax-pipe signed entry 1\n";

/// A secret key that signs the entries a machine uploads.
pub struct SigningKey {
    name: String,
    pair: Ed25519KeyPair,
}

/// The public keys whose signatures a machine accepts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trust {
    keys: Vec<(String, Vec<u8>)>,
}

/// A new key named `name`: the secret key file's text and the public key.
pub fn keygen(name: &str) -> Result<(String, String)> {
    check_name(name)?;
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).map_err(|_| anyhow!("no randomness"))?;
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).map_err(|_| anyhow!("bad key"))?;
    let secret = format!("{SECRET_TAG} {name}:{}\n", hex(pkcs8.as_ref()));
    let public = format!("{name}:{}", hex(pair.public_key().as_ref()));
    Ok((secret, public))
}

fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if !ok {
        bail!("{name:?}: not a key name (letters, digits, . _ -; at most 64)");
    }
    Ok(())
}

impl SigningKey {
    /// The key in the secret key file `path`.
    pub fn load(path: &std::path::Path) -> Result<SigningKey> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read the signing key", path.display()))?;
        let bad = || {
            anyhow!(
                "{}: not a secret key file of `cache keygen`",
                path.display()
            )
        };
        let rest = text.trim().strip_prefix(SECRET_TAG).ok_or_else(bad)?;
        let (name, h) = rest.trim().split_once(':').ok_or_else(bad)?;
        let pkcs8 = unhex(h).ok_or_else(bad)?;
        let pair = Ed25519KeyPair::from_pkcs8(&pkcs8).map_err(|_| bad())?;
        check_name(name).map_err(|_| bad())?;
        Ok(SigningKey {
            name: name.to_string(),
            pair,
        })
    }

    /// The trailer that signs an entry whose check hash is `hash`.
    pub fn trailer(&self, hash: &[u8]) -> Vec<u8> {
        let sig = self.pair.sign(&[CONTEXT, hash].concat());
        super::entry::trailer(&self.name, sig.as_ref())
    }
}

impl Trust {
    /// Public keys `NAME:HEX`, separated by spaces or commas.
    pub fn parse(text: &str) -> Result<Trust> {
        let mut keys = Vec::new();
        for k in text.split([' ', ',', '\n']).filter(|k| !k.is_empty()) {
            let bad = || anyhow!("{k:?}: not a public key (NAME:HEX, as `cache keygen` prints)");
            let (name, h) = k.split_once(':').ok_or_else(bad)?;
            let key = unhex(h).filter(|k| k.len() == 32).ok_or_else(bad)?;
            check_name(name).map_err(|_| bad())?;
            keys.push((name.to_string(), key));
        }
        if keys.is_empty() {
            bail!("no trusted public key given");
        }
        Ok(Trust { keys })
    }

    /// Whether the entry `bytes` (its check already verified) carries a signature of its check
    /// hash by a trusted key.
    pub fn accepts(&self, bytes: &[u8]) -> bool {
        let Some((hash, name, sig)) = super::entry::signature(bytes) else {
            return false;
        };
        self.signed(hash, name, sig)
    }

    /// Whether `trailer` is a trusted key's signature of `hash` (a claim's check).
    pub fn accepts_trailer(&self, hash: &[u8], trailer: &[u8]) -> bool {
        super::entry::parse_trailer(trailer).is_some_and(|(name, sig)| self.signed(hash, name, sig))
    }

    fn signed(&self, hash: &[u8], name: &str, sig: &[u8]) -> bool {
        let msg = [CONTEXT, hash].concat();
        self.keys.iter().filter(|(n, _)| n == name).any(|(_, k)| {
            UnparsedPublicKey::new(&ED25519, k)
                .verify(&msg, sig)
                .is_ok()
        })
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::entry;
    use super::*;

    fn key(dir: &std::path::Path, name: &str) -> (SigningKey, String) {
        let (secret, public) = keygen(name).unwrap();
        let path = dir.join(format!("{name}.secret"));
        std::fs::write(&path, secret).unwrap();
        (SigningKey::load(&path).unwrap(), public)
    }

    fn signed(by: Option<&SigningKey>) -> Vec<u8> {
        let name = "objects/00.summary-partial";
        let mut e = entry::header(name, b"payload");
        e.extend_from_slice(b"payload");
        if let Some(k) = by {
            let t = k.trailer(entry::check_hash(&e).unwrap());
            e.extend_from_slice(&t);
        }
        assert!(entry::verify(name, &e).is_some());
        e
    }

    #[test]
    fn only_trusted_signatures_are_accepted_and_keys_rotate() {
        let tmp = tempfile::tempdir().unwrap();
        let (ci, ci_pub) = key(tmp.path(), "ci-2026");
        let (next, next_pub) = key(tmp.path(), "ci-2027");
        let (other, _) = key(tmp.path(), "laptop");
        let trust = Trust::parse(&ci_pub).unwrap();
        assert!(trust.accepts(&signed(Some(&ci))));
        assert!(!trust.accepts(&signed(None)), "unsigned");
        assert!(!trust.accepts(&signed(Some(&other))), "another key");
        assert!(!trust.accepts(&signed(Some(&next))), "not yet trusted");
        // Rotation: both keys trusted while entries of both exist.
        let both = Trust::parse(&format!("{ci_pub} {next_pub}")).unwrap();
        assert!(both.accepts(&signed(Some(&ci))) && both.accepts(&signed(Some(&next))));
        // A signature taken from another entry does not sign this one.
        let with = signed(Some(&ci));
        let name = "objects/01.summary-partial";
        let mut forged = entry::header(name, b"payload");
        forged.extend_from_slice(b"payload");
        forged.extend_from_slice(&with[entry::HEADER + 7..]);
        assert!(entry::verify(name, &forged).is_some());
        assert!(
            !trust.accepts(&forged),
            "a signature of another name's entry"
        );
    }

    #[test]
    fn bad_keys_are_said_in_one_line() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("k");
        std::fs::write(&p, "not a key").unwrap();
        let e = SigningKey::load(&p).err().unwrap().to_string();
        assert!(e.contains("not a secret key file"), "{e}");
        assert!(Trust::parse("ci:abcd").is_err());
        assert!(Trust::parse("").is_err());
        assert!(keygen("a b").is_err());
    }
}
