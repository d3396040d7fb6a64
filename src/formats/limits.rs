//! How far an untrusted member may expand when decompressed.
//!
//! Archives come from other people's jobs; a member's declared size and its compression
//! ratio are both under the author's control. Every decompression of archive content goes
//! through [`read_capped`] (or [`super::xz::decompress_member`], [`super::xz::member_reader`]), which stops as soon as the
//! output passes the member's limit, so a decompression bomb costs at most the limit in memory
//! and the time to produce it, and declared sizes never size an allocation beyond the limit.
//!
//! The limit of a member whose compressed form has `c` bytes is `max(floor, ratio × c)`,
//! never above `cap` (see docs/hostile-inputs.md). Real nsys-jax members expand at
//! most about 31× (xz of HLO protos); the default ratio leaves a wide margin. Both can be
//! set with environment variables, for genuine data beyond them:
//! `NSYS_JAX_PIPE_MAX_EXPANSION` (the ratio) and `NSYS_JAX_PIPE_MAX_MEMBER_SIZE` (the cap,
//! bytes with an optional `K`/`M`/`G`/`T` binary suffix).

use std::io::Read;
use std::sync::OnceLock;

pub const ENV_RATIO: &str = "NSYS_JAX_PIPE_MAX_EXPANSION";
pub const ENV_CAP: &str = "NSYS_JAX_PIPE_MAX_MEMBER_SIZE";

const DEFAULT_RATIO: u64 = 100;
const FLOOR: u64 = 64 << 20;
const DEFAULT_CAP: u64 = 16 << 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub ratio: u64,
    pub floor: u64,
    pub cap: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            ratio: DEFAULT_RATIO,
            floor: FLOOR,
            cap: DEFAULT_CAP,
        }
    }
}

impl Limits {
    /// The limits the environment asks for. A value that is not understood is an error
    /// naming the variable.
    pub fn from_env() -> Result<Limits, String> {
        let mut l = Limits::default();
        if let Ok(v) = std::env::var(ENV_RATIO) {
            l.ratio = v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|&r| r >= 1)
                .ok_or_else(|| format!("{ENV_RATIO}={v:?}: not a whole number of at least 1"))?;
        }
        if let Ok(v) = std::env::var(ENV_CAP) {
            l.cap = parse_size(&v).filter(|&c| c > 0).ok_or_else(|| {
                format!("{ENV_CAP}={v:?}: not a size (bytes, or a number with K, M, G or T)")
            })?;
            l.floor = l.floor.min(l.cap);
        }
        Ok(l)
    }

    /// The most bytes a member of `compressed` bytes may expand to.
    pub fn for_member(&self, compressed: u64) -> u64 {
        compressed
            .saturating_mul(self.ratio)
            .max(self.floor)
            .min(self.cap)
    }
}

static LIMITS: OnceLock<Limits> = OnceLock::new();

/// Set the process's limits (once, at start-up; later calls are ignored).
pub fn set(l: Limits) {
    let _ = LIMITS.set(l);
}

/// The process's limits (the defaults unless [`set`] was called).
pub fn get() -> Limits {
    *LIMITS.get_or_init(Limits::default)
}

/// `123`, `64K`, `512M`, `16G`, `1T` (binary units; `B`/`iB` suffixes accepted).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s
        .strip_suffix("iB")
        .or_else(|| s.strip_suffix('B'))
        .unwrap_or(s);
    let (num, shift) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 10),
        'M' | 'm' => (&s[..s.len() - 1], 20),
        'G' | 'g' => (&s[..s.len() - 1], 30),
        'T' | 't' => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    let num = num.trim();
    if let Ok(n) = num.parse::<u64>() {
        return n.checked_mul(1u64 << shift);
    }
    // `1.5G`
    let x: f64 = num.parse().ok()?;
    let v = x * (1u64 << shift) as f64;
    (x.is_finite() && x >= 0.0 && v < u64::MAX as f64).then_some(v as u64)
}

/// A decompression went past its limit, or failed.
#[derive(Debug, thiserror::Error)]
pub enum ExpandError {
    #[error(
        "expands beyond {} (over {ratio}x its {} compressed): a decompression bomb or a corrupt member (raise {ENV_RATIO} or {ENV_CAP} if it is genuine)",
        human(*limit), human(*compressed)
    )]
    TooLarge {
        limit: u64,
        compressed: u64,
        ratio: u64,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

fn human(b: u64) -> String {
    crate::table::human_bytes(b)
}

/// Read all of `r`, a decompressing reader over `compressed` bytes, refusing to produce more
/// than the member's limit. `declared` (a size the container claims) only sizes the first
/// allocation, and only up to the limit.
pub fn read_capped<R: Read>(r: R, compressed: u64, declared: u64) -> Result<Vec<u8>, ExpandError> {
    let limits = get();
    let limit = limits.for_member(compressed);
    // A declared size is a hint, never trusted beyond the limit nor for more than 64 MiB up
    // front.
    let mut out = Vec::with_capacity(declared.min(limit).min(64 << 20) as usize);
    let n = r.take(limit.saturating_add(1)).read_to_end(&mut out)?;
    if n as u64 > limit {
        return Err(ExpandError::TooLarge {
            limit,
            compressed,
            ratio: limits.ratio,
        });
    }
    Ok(out)
}

/// Whether the bytes of an xz stream were already verified by their container.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checked {
    /// A zip member, whose CRC-32 the zip reader verifies as it reads the member to its end:
    /// the stream's own check (CRC-64 or SHA-256 of the output, about a tenth of the decoding
    /// time) is skipped. A damaged member is refused by the zip reader instead.
    ByContainer,
    /// A file read as it is (an extracted archive, a capture's dump): the stream's check is
    /// verified.
    No,
}

#[cfg(test)]
mod tests {
    use super::super::xz::{decompress_member as xz_decompress, member_reader as xz_reader};
    use super::*;
    use std::io::Write;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("123"), Some(123));
        assert_eq!(parse_size("64K"), Some(64 << 10));
        assert_eq!(parse_size("16G"), Some(16 << 30));
        assert_eq!(parse_size("2GiB"), Some(2 << 30));
        assert_eq!(parse_size("1t"), Some(1 << 40));
        assert_eq!(parse_size("0"), Some(0));
        assert_eq!(parse_size("1.5K"), Some(1536));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("99999999999T"), None);
    }

    #[test]
    fn member_limit_scales_with_the_compressed_size_between_floor_and_cap() {
        let l = Limits::default();
        assert_eq!(l.for_member(0), FLOOR);
        assert_eq!(l.for_member(10 << 20), 1000 << 20);
        assert_eq!(l.for_member(u64::MAX), DEFAULT_CAP);
    }

    #[test]
    fn an_xz_bomb_stops_at_the_limit() {
        // 80 MiB of zeros compress to a few KiB: far over 100x, and over the 64 MiB floor.
        let mut enc = liblzma::write::XzEncoder::new(Vec::new(), 1);
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..80 {
            enc.write_all(&zeros).unwrap();
        }
        let bomb = enc.finish().unwrap();
        let e = xz_decompress(&bomb, Checked::No).unwrap_err().to_string();
        assert!(
            e.contains("decompression bomb") && e.contains("64.0 MiB"),
            "{e}"
        );
        // Honest data passes.
        let mut enc = liblzma::write::XzEncoder::new(Vec::new(), 1);
        enc.write_all(b"hello").unwrap();
        assert_eq!(
            xz_decompress(&enc.finish().unwrap(), Checked::No).unwrap(),
            b"hello"
        );
        // The streaming reader stops at the same limit, with the same message.
        let mut sink = std::io::sink();
        let e = std::io::copy(&mut xz_reader(&bomb, Checked::ByContainer), &mut sink).unwrap_err();
        assert!(e.to_string().contains("decompression bomb"), "{e}");
        let mut enc = liblzma::write::XzEncoder::new(Vec::new(), 1);
        enc.write_all(b"hello").unwrap();
        let mut out = Vec::new();
        xz_reader(&enc.finish().unwrap(), Checked::No)
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, b"hello");
    }

    #[test]
    fn the_stream_check_is_skipped_only_for_bytes_the_container_verified() {
        let text: Vec<u8> = (0..4000u32).flat_map(|i| i.to_le_bytes()).collect();
        let mut enc = liblzma::write::XzEncoder::new(Vec::new(), 1);
        enc.write_all(&text).unwrap();
        let good = enc.finish().unwrap();
        // Some byte is the block's check (CRC-64 of the output): damaged, the output is the
        // same, and only the check tells.
        let check_only = (0..good.len()).find(|&i| {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            xz_decompress(&bad, Checked::No).is_err()
                && xz_decompress(&bad, Checked::ByContainer).ok().as_deref() == Some(&text[..])
        });
        assert!(
            check_only.is_some(),
            "no byte of the stream is its check alone"
        );
        // Damage to the compressed data is found either way.
        let mut bad = good.clone();
        bad[good.len() / 3] ^= 0x40;
        for checked in [Checked::No, Checked::ByContainer] {
            assert_ne!(
                xz_decompress(&bad, checked).ok().as_deref(),
                Some(&text[..])
            );
        }
    }

    #[test]
    fn a_lying_declared_size_sizes_no_allocation() {
        let v = read_capped(&b"abc"[..], 3, u64::MAX).unwrap();
        assert_eq!(v, b"abc");
        assert!(v.capacity() <= 64 << 20);
    }
}
