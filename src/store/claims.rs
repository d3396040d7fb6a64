//! Content keys of large input files, shared through the remote tier (docs/design.md, "The
//! shared cache", content keys without reading).
//!
//! A process that hashes a large input file (an archive written where its rank ran) records a
//! *claim* in the remote tier: the file's content key under a fingerprint of the file as it
//! is on disk: its size, modification time (ns), inode and its last [`TAIL`] bytes (for a zip,
//! the central directory, with every member's CRC and sizes). A process on another machine of
//! the same shared file system that opens the same file computes the fingerprint (a `stat` and
//! one short read) and takes the claimed key instead of reading the whole file. The path is
//! left out (mount points differ between machines); a file copied elsewhere (a new inode) or
//! changed in any way that touches its size, mtime or tail is hashed again. A claim is trusted
//! as the remote tier's entries are: whoever can write the bucket can already store a wrong
//! result under a right key.

use super::filememo::mtime_ns;
use super::key::Key;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Files smaller than this are hashed (faster than asking the remote tier).
pub const MIN_SIZE: u64 = 1 << 20;
/// How much of the end of the file the fingerprint reads.
pub const TAIL: u64 = 64 << 10;

const MAGIC: &[u8] = b"nsys-jax-pipe claim 1\n";
/// The start of a claim object (its key and the check that binds it to its name follow).
const CLAIM: &[u8] = b"nsys-jax-pipe claim 2\n";

/// The fingerprint of the file at `path` whose metadata is `md` (None when it cannot be read).
pub fn fingerprint(path: &Path, md: &fs::Metadata) -> Option<Key> {
    let mut f = fs::File::open(path).ok()?;
    let len = md.len();
    let start = len.saturating_sub(TAIL);
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut tail = Vec::with_capacity((len - start) as usize);
    f.take(len - start).read_to_end(&mut tail).ok()?;
    if tail.len() as u64 != len - start {
        return None;
    }
    let mut h = blake3::Hasher::new();
    h.update(MAGIC);
    h.update(&len.to_le_bytes());
    h.update(&mtime_ns(md).to_le_bytes());
    h.update(&md.ino().to_le_bytes());
    h.update(&tail);
    Some(Key(*h.finalize().as_bytes()))
}

/// The remote object that holds the claim for fingerprint `fp`.
pub fn object_name(fp: &Key) -> String {
    let hex = fp.hex();
    format!("claims/{}/{hex}", &hex[..2])
}

/// What binds the claim of `key` to the object `name` (a claim copied to another name, as
/// another file's, is refused).
fn check(name: &str, key: &Key) -> blake3::Hash {
    let mut h = blake3::Hasher::new_derive_key("nsys-jax-pipe claim 2");
    h.update(&(name.len() as u64).to_le_bytes());
    h.update(name.as_bytes());
    h.update(&key.0);
    h.finalize()
}

/// The claim object `name` holding `key`.
pub fn encode(name: &str, key: &Key) -> Vec<u8> {
    [CLAIM, &key.0[..], check(name, key).as_bytes()].concat()
}

/// The key the claim object `name` holds (None when it is not one, or is another name's: the
/// file is then hashed and the claim rewritten). A signature after it is checked apart
/// ([`split`]).
pub fn decode(name: &str, bytes: &[u8]) -> Option<Key> {
    let (claim, _) = split(bytes)?;
    let rest = &claim[CLAIM.len()..];
    let key = Key(rest[..32].try_into().ok()?);
    (check(name, &key).as_bytes()[..] == rest[32..]).then_some(key)
}

/// A claim object as the claim (magic, key, check) and what follows it (a signature trailer
/// of the check, or nothing).
pub fn split(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    bytes.strip_prefix(CLAIM)?;
    (bytes.len() >= CLAIM.len() + 64).then(|| bytes.split_at(CLAIM.len() + 64))
}

/// The check of a claim (what a signature of it signs).
pub fn check_of(claim: &[u8]) -> &[u8] {
    &claim[claim.len() - 32..]
}

/// Whether the file is worth a claim (large and a regular file).
pub fn wanted(md: &fs::Metadata) -> bool {
    md.is_file() && md.len() >= MIN_SIZE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(path: &Path) -> Key {
        fingerprint(path, &fs::metadata(path).unwrap()).unwrap()
    }

    #[test]
    fn fingerprints_follow_size_mtime_inode_and_tail() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.zip");
        let mut bytes = vec![7u8; (MIN_SIZE + TAIL) as usize];
        fs::write(&a, &bytes).unwrap();
        let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let set_mtime = |p: &Path| {
            fs::File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(t)
                .unwrap()
        };
        set_mtime(&a);
        let first = fp(&a);
        assert_eq!(fp(&a), first, "same file, same fingerprint");
        // A byte changed in the tail, same size and mtime: another fingerprint.
        *bytes.last_mut().unwrap() = 8;
        fs::write(&a, &bytes).unwrap();
        set_mtime(&a);
        let tail_changed = fp(&a);
        assert_ne!(tail_changed, first);
        // A byte changed before the tail: only the mtime tells (here it moves).
        bytes[0] = 9;
        fs::write(&a, &bytes).unwrap();
        assert_ne!(fp(&a), tail_changed);
        // The same bytes and mtime in another file (another inode): another fingerprint.
        let b = dir.path().join("b.zip");
        fs::copy(&a, &b).unwrap();
        set_mtime(&a);
        set_mtime(&b);
        assert_ne!(fp(&a), fp(&b));
    }

    #[test]
    fn a_key_hashed_on_one_machine_is_taken_on_another_until_the_file_changes() {
        use crate::engine::Engine;
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().join("bucket").display());
        std::fs::create_dir_all(dir.path().join("bucket")).unwrap();
        let (big, small) = (dir.path().join("rank0.zip"), dir.path().join("small.zip"));
        fs::write(&big, vec![3u8; MIN_SIZE as usize + 10]).unwrap();
        fs::write(&small, b"small").unwrap();
        let engine = |name: &str| Engine::tiered(Some(&dir.path().join(name)), Some(&url)).unwrap();
        let flushed = |e: &Engine| e.store().unwrap().remote().unwrap().flush();
        // Where the rank ran: both files hashed; only the large one claimed.
        let node = engine("node-cache");
        let key = node.file_key(&big).unwrap();
        node.file_key(&small).unwrap();
        // Keying writes nothing; the run's publishing step does.
        assert_eq!(flushed(&node).uploads, 0);
        assert_eq!(node.publish_claims(), 1);
        flushed(&node);
        let claims = walkdir::WalkDir::new(dir.path().join("bucket/claims"))
            .into_iter()
            .filter(|e| e.as_ref().unwrap().file_type().is_file())
            .count();
        assert_eq!(claims, 1);
        // Elsewhere: the claim is taken (and the key is the file's).
        let login = engine("login-cache");
        login.claim_file_keys(&[big.as_path(), small.as_path()]);
        assert_eq!(flushed(&login).claimed, 1);
        assert_eq!(login.file_key(&big).unwrap(), key);
        assert_eq!(key, super::super::filememo::hash_file(&big).unwrap());
        // The file rewritten (same size, another mtime and tail): no claim fits; hashed.
        let mut bytes = vec![3u8; MIN_SIZE as usize + 10];
        *bytes.last_mut().unwrap() = 4;
        std::thread::sleep(std::time::Duration::from_millis(10));
        fs::write(&big, &bytes).unwrap();
        let again = engine("another-cache");
        again.claim_file_keys(&[big.as_path()]);
        assert_eq!(flushed(&again).claimed, 0);
        assert_eq!(again.file_key(&big).unwrap(), Key::of_bytes(&bytes));
    }

    #[test]
    fn claims_round_trip_and_reject_other_objects() {
        let key = Key::of_bytes(b"archive");
        let name = object_name(&key);
        let other = object_name(&Key::of_bytes(b"another archive"));
        assert_eq!(decode(&name, &encode(&name, &key)), Some(key));
        // Swapped: another file's claim copied here.
        assert_eq!(decode(&name, &encode(&other, &key)), None);
        assert_eq!(decode(&name, b"nsys-jax-pipe claim 2\nshort"), None);
        assert_eq!(decode(&name, &key.0), None);
        assert!(
            name.starts_with("claims/") && name.ends_with(&key.hex()),
            "{name}"
        );
    }
}
