//! Content keys of an archive and of its members.
//!
//! A zip archive's key is the blake3 hash of the whole file; each member's key is the hash of
//! its bytes as stored (compression method, sizes and compressed bytes), so that nothing is
//! decompressed to key it and the same member copied between archives (as `combine` does)
//! keeps its key. An archive of at most [`READ_WHOLE`] bytes is read once for both: the file's
//! key from the bytes read, and each member's from its slice of them, found through its local
//! header (docs/design.md, "The cold path"). A larger one is hashed as it is read, and its
//! members are read from the zip when their keys are asked for.

use super::{Archive, Source};
use crate::engine::Key;
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::io::Read;

/// The largest archive read whole to be keyed (a rank's archive is a few megabytes).
pub const READ_WHOLE: u64 = 16 << 20;

/// Content keys of an archive's members: for a zip, blake3 of each member's bytes as stored
/// (computed once per archive content and cached by the caller); for a folder, each file's
/// key.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
pub struct MemberKeys(pub BTreeMap<String, Key>);

impl crate::engine::value::JsonValue for MemberKeys {}

/// The hash of a member's stored bytes, begun with what else describes them.
fn member_hasher(method: zip::CompressionMethod, size: u64, compressed: u64) -> blake3::Hasher {
    let mut h = blake3::Hasher::new();
    h.update(b"zip-member\0");
    h.update(format!("{method:?}").as_bytes());
    h.update(&size.to_le_bytes());
    h.update(&compressed.to_le_bytes());
    h
}

/// The content key of one stored zip member (as [`MemberKeys::compute_zip`] keys it).
fn zip_member_key<R: std::io::Read + std::io::Seek>(
    archive: &Archive,
    zip: &mut zip::ZipArchive<R>,
    name: &str,
    size: u64,
    index: usize,
    compressed: u64,
) -> Result<Key> {
    let mut entry = zip.by_index_raw(index).map_err(|e| {
        anyhow::anyhow!(
            "{}: cannot read member {name} ({e})",
            archive.path.display()
        )
    })?;
    let mut h = member_hasher(entry.compression(), size, compressed);
    let n = std::io::copy(&mut (&mut entry).take(compressed), &mut h).map_err(|e| {
        anyhow::anyhow!(
            "{}: member {name} is corrupt or truncated ({e})",
            archive.path.display()
        )
    })?;
    if n != compressed {
        bail!(
            "{}: member {name} is truncated ({n} of {compressed} bytes)",
            archive.path.display()
        );
    }
    Ok(Key(*h.finalize().as_bytes()))
}

/// The content key of one member of a zip or folder archive, as the member keys of the whole
/// archive have it.
pub fn member_key(engine: &crate::engine::Engine, archive: &Archive, name: &str) -> Result<Key> {
    if let Some(k) = archive.read_keys.get().and_then(|k| k.get(name)) {
        return Ok(*k);
    }
    match &archive.source {
        Source::Zip(zip) => {
            let &(size, index, compressed) = archive
                .members
                .get(name)
                .with_context(|| format!("{}: has no member {name}", archive.path.display()))?;
            let mut zip = zip.lock().unwrap();
            zip_member_key(archive, &mut zip, name, size, index, compressed)
        }
        _ => engine.file_key(&archive.path.join(name)),
    }
}

impl MemberKeys {
    /// Keys of a zip's members: those computed when the archive was keyed from its bytes in
    /// memory, else each member's stored bytes streamed through the hash.
    pub fn compute_zip(archive: &Archive) -> Result<MemberKeys> {
        let Source::Zip(zip) = &archive.source else {
            bail!("{}: not a zip archive", archive.path.display());
        };
        if let Some(keys) = archive.read_keys.get() {
            return Ok(MemberKeys(keys.clone()));
        }
        let mut zip = zip.lock().unwrap();
        let mut out = BTreeMap::new();
        for (name, &(size, index, compressed)) in &archive.members {
            let key = zip_member_key(archive, &mut zip, name, size, index, compressed)?;
            out.insert(name.clone(), key);
        }
        Ok(MemberKeys(out))
    }

    /// Keys of a zip's members from the whole file's `bytes`: each member's stored bytes are
    /// the slice after its local header. None where the bytes do not hold what the central
    /// directory says (a local header missing or out of place, a member past the end): then
    /// [`MemberKeys::compute_zip`] reads the members and says what is wrong.
    fn from_file_bytes(archive: &Archive, bytes: &[u8]) -> Option<MemberKeys> {
        const LOCAL_HEADER: usize = 30;
        let Source::Zip(zip) = &archive.source else {
            return None;
        };
        let zip = zip.lock().unwrap();
        let mut out = BTreeMap::new();
        for (name, &(size, index, compressed)) in &archive.members {
            let entry = zip.by_index_data(index).ok()?;
            let start = usize::try_from(entry.header_start()).ok()?;
            let header = bytes.get(start..start.checked_add(LOCAL_HEADER)?)?;
            if header[..4] != *b"PK\x03\x04" {
                return None;
            }
            let name_len = usize::from(u16::from_le_bytes([header[26], header[27]]));
            let extra_len = usize::from(u16::from_le_bytes([header[28], header[29]]));
            let data = start + LOCAL_HEADER + name_len + extra_len;
            let stored = bytes.get(data..data.checked_add(usize::try_from(compressed).ok()?)?)?;
            let mut h = member_hasher(entry.compression(), size, compressed);
            h.update(stored);
            out.insert(name.clone(), Key(*h.finalize().as_bytes()));
        }
        Some(MemberKeys(out))
    }

    pub fn get(&self, member: &str) -> Result<Key> {
        self.0
            .get(member)
            .copied()
            .with_context(|| format!("no member {member}"))
    }
}

/// The content key of a zip archive of at most [`READ_WHOLE`] bytes, read whole once
/// (never more than that, whatever its size said), with its members' keys computed from
/// the same bytes and kept for [`MemberKeys::compute_zip`]. None for a larger archive or a
/// folder or capture, which are keyed file by file.
pub fn read_content_key(archive: &Archive) -> Result<Option<Key>> {
    if !archive.is_zip() {
        return Ok(None);
    }
    let cannot =
        |e: std::io::Error| anyhow::anyhow!("{}: read error ({})", archive.path.display(), e);
    let f = std::fs::File::open(&archive.path).map_err(cannot)?;
    let len = f.metadata().map_err(cannot)?.len();
    if len > READ_WHOLE {
        return Ok(None);
    }
    // Sized once (the size read is within the bound): a buffer doubling as it is read
    // touches fresh memory at each step.
    let mut bytes = Vec::with_capacity(len as usize + 1);
    f.take(READ_WHOLE + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > READ_WHOLE {
        // It grew while being read: hashed as it is read instead.
        return Ok(None);
    }
    let mut h = blake3::Hasher::new();
    h.update(&bytes);
    if let Some(keys) = MemberKeys::from_file_bytes(archive, &bytes) {
        let _ = archive.read_keys.set(keys.0);
    }
    Ok(Some(Key(*h.finalize().as_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn zip_of(members: &[(&str, &[u8], zip::CompressionMethod)]) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for (name, bytes, method) in members {
            let options = zip::write::SimpleFileOptions::default().compression_method(*method);
            w.start_file(*name, options).unwrap();
            w.write_all(bytes).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    #[test]
    fn keys_read_whole_are_those_read_member_by_member() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.zip");
        let text: Vec<u8> = (0..20_000u32).flat_map(|i| i.to_le_bytes()).collect();
        std::fs::write(
            &path,
            zip_of(&[
                (
                    "report_nvtx_pushpop_trace.csv.xz",
                    b"stored",
                    zip::CompressionMethod::Stored,
                ),
                ("sources/a.py", &text, zip::CompressionMethod::Deflated),
                ("empty", b"", zip::CompressionMethod::Stored),
            ]),
        )
        .unwrap();
        let streamed = MemberKeys::compute_zip(&Archive::open(&path).unwrap()).unwrap();
        let archive = Archive::open(&path).unwrap();
        let key = read_content_key(&archive).unwrap().unwrap();
        assert_eq!(key, Key::of_bytes(&std::fs::read(&path).unwrap()));
        assert_eq!(archive.read_keys.get(), Some(&streamed.0));
        assert_eq!(MemberKeys::compute_zip(&archive).unwrap(), streamed);
        assert_eq!(streamed.0.len(), 3);
    }

    #[test]
    fn a_local_header_out_of_place_leaves_the_members_to_be_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.zip");
        let mut bytes = zip_of(&[("m", b"member bytes", zip::CompressionMethod::Stored)]);
        std::fs::write(&path, &bytes).unwrap();
        let archive = Archive::open(&path).unwrap();
        // The local header's signature damaged after the central directory was read.
        bytes[0] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let key = read_content_key(&archive).unwrap().unwrap();
        assert_eq!(key, Key::of_bytes(&bytes));
        assert!(archive.read_keys.get().is_none());
        let err = MemberKeys::compute_zip(&archive).unwrap_err().to_string();
        assert!(err.contains("a.zip: cannot read member m"), "{err}");
    }
}
