//! Writing nsys-jax archives: a zip (or a folder) of named members. Compressed or already
//! compressed members (`dump/*.xz`, parquet) are stored, text and the report deflated, as
//! nsys-jax did.
//!
//! A zip is written to a temporary file in the destination's folder and renamed into place
//! when complete, so that readers never see a half-written archive and an interrupted or
//! failed write leaves the destination as it was.

use crate::engine::kinds::kind;
use anyhow::{Context, Result, bail};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use super::archive::Archive;

kind!(
    /// The content key of an archive the writer would make (a key).
    ARCHIVE = "archive"
);

/// One member of an archive.
#[derive(Clone, Debug)]
pub struct Entry {
    pub name: String,
    content: Content,
}

#[derive(Clone, Debug)]
enum Content {
    /// Bytes to deflate (true) or store (false), shared with whoever else holds them (a
    /// derived member's node value).
    Raw(bytes::Bytes, bool),
    /// The member already compressed: a one-member zip (see [`Entry::pack`]), and the
    /// blake3 hash of its uncompressed bytes.
    Packed(Vec<u8>, [u8; 32]),
    /// A member of a zip archive, copied from there as it is when written, and the blake3
    /// hash of its uncompressed bytes.
    InZip(Arc<Archive>, String, [u8; 32]),
}

impl Entry {
    pub fn stored(name: impl Into<String>, bytes: impl Into<bytes::Bytes>) -> Entry {
        Entry {
            name: name.into(),
            content: Content::Raw(bytes.into(), false),
        }
    }

    pub fn deflated(name: impl Into<String>, bytes: impl Into<bytes::Bytes>) -> Entry {
        Entry {
            name: name.into(),
            content: Content::Raw(bytes.into(), true),
        }
    }

    /// A member of a zip archive whose uncompressed bytes hash to `hash`: written by copying
    /// its compressed bytes, never read into memory.
    pub fn in_zip(
        name: impl Into<String>,
        archive: Arc<Archive>,
        member: impl Into<String>,
        hash: [u8; 32],
    ) -> Entry {
        Entry {
            name: name.into(),
            content: Content::InZip(archive, member.into(), hash),
        }
    }

    /// Compress the member now (e.g. on another thread while other work runs); writing it
    /// later only copies the compressed bytes.
    pub fn pack(self) -> Result<Entry> {
        let Content::Raw(bytes, deflate) = &self.content else {
            return Ok(self);
        };
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default()
            .large_file(bytes.len() as u64 >= u32::MAX as u64)
            .unix_permissions(0o644);
        let opts = if *deflate {
            opts.compression_method(zip::CompressionMethod::Deflated)
                .compression_level(Some(DEFLATE_LEVEL))
        } else {
            opts.compression_method(zip::CompressionMethod::Stored)
        };
        w.start_file(self.name.as_str(), opts)
            .with_context(|| format!("cannot add {}", self.name))?;
        w.write_all(bytes)
            .with_context(|| format!("cannot compress {}", self.name))?;
        let packed = w.finish()?.into_inner();
        let hash = *blake3::hash(bytes).as_bytes();
        Ok(Entry {
            name: self.name,
            content: Content::Packed(packed, hash),
        })
    }

    /// blake3 of the member's uncompressed bytes.
    pub fn content_hash(&self) -> [u8; 32] {
        match &self.content {
            Content::Raw(b, _) => *blake3::hash(b).as_bytes(),
            Content::Packed(_, h) | Content::InZip(_, _, h) => *h,
        }
    }

    /// The same content under another name.
    pub fn renamed(mut self, name: impl Into<String>) -> Entry {
        self.name = name.into();
        self
    }

    /// Stored or deflated by the name, as nsys-jax did: already compressed formats (`.xz`,
    /// `.parquet`, `.zip`, `.gz`) stored, everything else deflated.
    pub fn by_name(name: impl Into<String>, bytes: Vec<u8>) -> Entry {
        let name = name.into();
        let compressed = [".xz", ".parquet", ".zip", ".gz", ".zst"]
            .iter()
            .any(|e| name.ends_with(e));
        if compressed {
            Entry::stored(name, bytes)
        } else {
            Entry::deflated(name, bytes)
        }
    }
}

/// A content key of the archive `entries` would make: their names, contents and
/// compression, in order, and the writer's version.
pub fn archive_key(entries: &[Entry]) -> crate::engine::Key {
    let mut kb = crate::engine::KeyBuilder::of(&ARCHIVE);
    for e in entries {
        let how: &[u8] = match &e.content {
            Content::Raw(_, true) => b"deflated",
            Content::Raw(_, false) => b"stored",
            Content::Packed(..) => b"packed",
            Content::InZip(..) => b"copied",
        };
        kb = kb.param(&e.name, [how, &e.content_hash()[..]].concat());
    }
    kb.finish()
}

/// Deflate level: fast, since the largest deflated member, the report, is itself mostly
/// compressed (level 6 gains ~3 % on it at twice the time).
const DEFLATE_LEVEL: i64 = 1;

/// The size of the pieces an archive is written in.
const WRITE_BUFFER: usize = 4 << 20;

/// Write `entries` as the zip `dest`, in order. An existing `dest` is replaced only with
/// `force`. Members are compressed in parallel.
pub fn write_zip(entries: Vec<Entry>, dest: &Path, force: bool) -> Result<()> {
    use rayon::prelude::*;
    check_names(&entries)?;
    if dest.exists() && !force {
        bail!("{}: already exists (use -f to overwrite)", dest.display());
    }
    if dest.is_dir() {
        bail!("{}: is a folder", dest.display());
    }
    let dir = dest
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .with_context(|| format!("{}: cannot create folder", dir.display()))?;
    let tmp = crate::tmpfiles::TempFile::new_in(dir, ".zip.tmp")
        .with_context(|| format!("{}: cannot write", dir.display()))?;
    let packed: Vec<Entry> = entries
        .into_par_iter()
        .map(Entry::pack)
        .collect::<Result<_>>()?;
    let mut out = Sticky::new(tmp.file());
    // Written in large pieces: a write that covers part of a page cache folio makes the
    // file system clear the rest of it first, and with 8 KiB pieces (the default) at the
    // unaligned offsets of zip members that clearing cost as much as the copying.
    let mut zip = zip::ZipWriter::new(std::io::BufWriter::with_capacity(WRITE_BUFFER, &mut out));
    if let Err(e) = add_members(&mut zip, packed, dest) {
        // An unfinished ZipWriter prints to stderr when dropped (it tries to finish the
        // archive): forgotten instead, its buffers leak; the temporary file goes with `tmp`.
        std::mem::forget(zip);
        return Err(e);
    }
    // I/O errors are held by `out` (so that the zip writer never fails, nor prints, on them)
    // and reported here.
    let finished = zip
        .finish()
        .map(|_| ())
        .with_context(|| format!("{}: cannot finish the zip", dest.display()));
    if let Some(e) = out.error.take() {
        return Err(e).with_context(|| format!("{}: cannot write", dest.display()));
    }
    finished?;
    tmp.commit(dest, true).with_context(|| {
        format!(
            "{}: cannot move the finished archive into place",
            dest.display()
        )
    })?;
    Ok(())
}

fn add_members<W: Write + std::io::Seek>(
    zip: &mut zip::ZipWriter<W>,
    packed: Vec<Entry>,
    dest: &Path,
) -> Result<()> {
    for e in packed {
        match e.content {
            Content::Packed(bytes, _) => {
                let mut part = zip::ZipArchive::new(std::io::Cursor::new(bytes))?;
                let member = part.by_index_raw(0)?;
                // The packed member may carry an older name (see `renamed`).
                zip.raw_copy_file_rename(member, e.name.as_str())
                    .with_context(|| format!("{}: cannot write {}", dest.display(), e.name))?;
            }
            Content::InZip(archive, member, _) => archive
                .copy_raw(&member, zip, &e.name)
                .with_context(|| format!("{}: cannot write {}", dest.display(), e.name))?,
            Content::Raw(..) => unreachable!("packed above"),
        }
    }
    Ok(())
}

/// A file that holds its first I/O error and, after it, pretends to succeed (keeping track
/// of the position the writer expects): what is written no longer matters, the file is
/// discarded.
struct Sticky<'a> {
    file: &'a std::fs::File,
    pos: u64,
    end: u64,
    error: Option<std::io::Error>,
}

impl<'a> Sticky<'a> {
    fn new(file: &'a std::fs::File) -> Sticky<'a> {
        Sticky {
            file,
            pos: 0,
            end: 0,
            error: None,
        }
    }
}

impl Write for Sticky<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.error.is_none()
            && let Err(e) = self.file.write_all(buf)
        {
            self.error = Some(e);
        }
        self.pos += buf.len() as u64;
        self.end = self.end.max(self.pos);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl std::io::Seek for Sticky<'_> {
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        use std::io::SeekFrom;
        let target = match pos {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
            SeekFrom::End(d) => self.end.checked_add_signed(d),
        };
        let Some(target) = target else {
            return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
        };
        if self.error.is_none()
            && let Err(e) = self.file.seek(SeekFrom::Start(target))
        {
            self.error = Some(e);
        }
        self.pos = target;
        Ok(target)
    }
}

/// Write `entries` as files under the folder `dest` (an extracted archive).
pub fn write_dir(entries: &[Entry], dest: &Path) -> Result<()> {
    use std::io::Read;
    check_names(entries)?;
    for e in entries {
        let path = dest.join(&e.name);
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d)
                .with_context(|| format!("{}: cannot create folder", d.display()))?;
        }
        let bytes = match &e.content {
            Content::Raw(b, _) => b.to_vec(),
            Content::InZip(archive, member, _) => archive.read(member)?,
            Content::Packed(z, _) => {
                let mut part = zip::ZipArchive::new(std::io::Cursor::new(z.as_slice()))?;
                let mut f = part.by_index(0)?;
                let mut out = Vec::new();
                f.read_to_end(&mut out)?;
                out
            }
        };
        std::fs::write(&path, &bytes)
            .with_context(|| format!("{}: cannot write", path.display()))?;
    }
    Ok(())
}

/// Member names are relative paths without `..`, each used once.
fn check_names(entries: &[Entry]) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for e in entries {
        if e.name.is_empty()
            || e.name.starts_with('/')
            || e.name.split('/').any(|c| c == ".." || c.is_empty())
        {
            bail!("bad archive member name {:?}", e.name);
        }
        if !seen.insert(e.name.as_str()) {
            bail!("archive member {:?} given twice", e.name);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn writes_atomically_and_refuses_to_overwrite() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("out/a.zip");
        let entries = vec![
            Entry::deflated("a.txt", b"hello hello hello".to_vec()),
            Entry::stored("dump/x.pb.xz", vec![1, 2, 3]),
        ];
        write_zip(entries.clone(), &dest, false).unwrap();
        let mut z = zip::ZipArchive::new(std::fs::File::open(&dest).unwrap()).unwrap();
        assert_eq!(z.len(), 2);
        let mut s = String::new();
        z.by_name("a.txt").unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello hello hello");
        assert_eq!(
            z.by_name("dump/x.pb.xz").unwrap().compression(),
            zip::CompressionMethod::Stored
        );
        let e = write_zip(entries[..1].to_vec(), &dest, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("already exists") && e.contains("-f"), "{e}");
        write_zip(vec![entries[0].clone().pack().unwrap()], &dest, true).unwrap();
        let z = zip::ZipArchive::new(std::fs::File::open(&dest).unwrap()).unwrap();
        assert_eq!(z.len(), 1);
        // A failed write leaves neither a temporary file nor a changed archive.
        let bad = vec![Entry::stored("../evil", vec![])];
        assert!(write_zip(bad, &dest, true).is_err());
        let names: Vec<String> = std::fs::read_dir(tmp.path().join("out"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["a.zip".to_string()]);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dest).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, crate::tmpfiles::file_mode());

        let folder = tmp.path().join("dir");
        write_dir(
            &[entries[0].clone().pack().unwrap(), entries[1].clone()],
            &folder,
        )
        .unwrap();
        assert_eq!(
            std::fs::read(folder.join("a.txt")).unwrap(),
            b"hello hello hello"
        );
        assert_eq!(
            std::fs::read(folder.join("dump/x.pb.xz")).unwrap(),
            vec![1, 2, 3]
        );
    }
}
