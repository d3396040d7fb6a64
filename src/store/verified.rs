//! Which local entry files were verified as they are now: `name -> (size, mtime, inode,
//! device)`, so that a warm run reads an unchanged entry without hashing it again (hashing
//! the megabytes of an analysis's outputs was a third of a warm re-run). Any change to the
//! file — rewritten, truncated, replaced or renamed over by another entry (a new inode) —
//! changes the stamp, and the entry is verified in full again. The same trust as the input
//! files' key memo ([`super::filememo`]), with git's rule for racy timestamps: a file's
//! modification time comes from a clock that ticks every few milliseconds, so a stamp is
//! trusted only for a file last modified well before the stamp was taken (a change made after
//! it then shows a later time). Entries this process writes or marks used get a modification
//! time set explicitly a little in the past ([`backdated`]), so they are not racy.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// Size, modification time (ns), inode, device, and when the stamp was taken (ns).
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
struct Stamp(u64, i128, u64, u64, i128);

impl Stamp {
    fn of(md: &fs::Metadata, taken: i128) -> Stamp {
        Stamp(
            md.len(),
            super::filememo::mtime_ns(md),
            md.ino(),
            md.dev(),
            taken,
        )
    }

    /// Whether `md` is the file stamped, modified long enough before the stamp was taken.
    fn matches(&self, md: &fs::Metadata) -> bool {
        let now = Stamp::of(md, self.4);
        *self == now && self.1 + RACY_NS <= self.4
    }
}

/// Files modified less than this before a stamp was taken are not trusted by it.
const RACY_NS: i128 = 100_000_000;

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

/// A modification time for a file written or used now that a stamp taken now trusts: one
/// second ago (an explicit time, not the coarse clock's).
pub fn backdated() -> SystemTime {
    SystemTime::now() - Duration::from_secs(1)
}

pub struct Verified {
    file: PathBuf,
    stamps: Mutex<Option<HashMap<String, Stamp>>>,
    dirty: Mutex<bool>,
}

impl Verified {
    /// The memo kept in `file` (read when first asked).
    pub fn new(file: PathBuf) -> Verified {
        Verified {
            file,
            stamps: Mutex::new(None),
            dirty: Mutex::new(false),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut HashMap<String, Stamp>) -> R) -> R {
        let mut stamps = self.stamps.lock().unwrap();
        let stamps = stamps.get_or_insert_with(|| {
            fs::read(&self.file)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or_default()
        });
        f(stamps)
    }

    /// Whether the entry `name`, whose file's metadata is `md`, was verified as it is now.
    pub fn holds(&self, name: &str, md: &fs::Metadata) -> bool {
        self.with(|s| s.get(name).is_some_and(|st| st.matches(md)))
    }

    /// Record the entry `name` as verified with its file's metadata `md`.
    pub fn record(&self, name: &str, md: &fs::Metadata) {
        let stamp = Stamp::of(md, now_ns());
        self.with(|s| s.insert(name.to_string(), stamp));
        *self.dirty.lock().unwrap() = true;
    }

    /// Forget the entry `name` (removed or found damaged).
    pub fn forget(&self, name: &str) {
        if self.with(|s| s.remove(name).is_some()) {
            *self.dirty.lock().unwrap() = true;
        }
    }

    /// Write the memo back if it changed, merged with what other processes recorded
    /// meanwhile (theirs first: a stamp is only ever a claim about a file as it was). A
    /// failure costs only hashing again later.
    pub fn save(&self) {
        if !std::mem::take(&mut *self.dirty.lock().unwrap()) {
            return;
        }
        let Some(dir) = self.file.parent() else {
            return;
        };
        let mut merged: HashMap<String, Stamp> = fs::read(&self.file)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        self.with(|s| merged.extend(s.iter().map(|(k, v)| (k.clone(), *v))));
        // Names whose files are gone (removed by `gc` or by hand) are dropped.
        merged.retain(|name, _| dir.join(name).exists());
        if let Ok(bytes) = serde_json::to_vec(&merged)
            && let Ok(mut tmp) = crate::tmpfiles::TempFile::new_in(dir, crate::tmpfiles::SUFFIX)
            && std::io::Write::write_all(&mut tmp, &bytes).is_ok()
        {
            let _ = tmp.commit(&self.file, false);
        }
    }
}
