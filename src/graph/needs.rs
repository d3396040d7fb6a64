//! The shares a run's per-process work computes.

use crate::analyses::{self, Reads, ShareUse};
use anyhow::Result;

/// The shares that per-process work computes: those the requested analyses read (or that
/// `compare` reads), each once.
#[derive(Default)]
pub struct Needs(Vec<ShareUse>);

impl Needs {
    pub fn new(uses: impl IntoIterator<Item = ShareUse>) -> Needs {
        let mut out: Vec<ShareUse> = Vec::new();
        for u in uses {
            if !out
                .iter()
                .any(|o| o.share.kind() == u.share.kind() && o.param == u.param)
            {
                out.push(u);
            }
        }
        Needs(out)
    }

    /// The shares of the registered analyses among `requests` (name, canonical parameters);
    /// scripts read the archives themselves.
    pub fn of<'a>(requests: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Needs> {
        let mut uses = Vec::new();
        for (name, params) in requests {
            if let Some(a) = analyses::find(name) {
                uses.extend(a.shares(params)?);
            }
        }
        Ok(Needs::new(uses))
    }

    /// Every share named.
    pub(super) fn uses(&self) -> impl Iterator<Item = &ShareUse> {
        self.0.iter()
    }

    pub(super) fn reading(&self, reads: Reads) -> impl Iterator<Item = &ShareUse> {
        self.0.iter().filter(move |u| u.share.reads() == reads)
    }
}
