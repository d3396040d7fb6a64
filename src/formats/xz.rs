//! xz decoding with one liblzma decoder per thread, re-initialised for each stream.
//!
//! A liblzma decoder decodes into a dictionary of its own (8 MiB for the streams nsys-jax
//! writes) and copies out of it. A fresh decoder per member (what the `liblzma` crate's
//! readers give) makes the kernel map and zero every dictionary page again for each member,
//! about a tenth of a cold run's xz time; re-initialising the same `lzma_stream` keeps its
//! dictionary (liblzma reuses it when the size matches), so a thread faults its pages in once
//! (docs/design.md, "The cold path").
//!
//! Every output is bounded by the member's limit ([`super::limits`]): a stream that would
//! produce more stops with [`ExpandError::TooLarge`] as soon as it passes it.

use std::cell::RefCell;
use std::io::Read;

use liblzma_sys as sys;

use super::limits::{self, Checked, ExpandError};

/// A liblzma stream, ended on drop.
struct Decoder {
    raw: sys::lzma_stream,
}

// SAFETY: the stream's state is owned by it alone (no thread-local or shared state in
// liblzma); it is used by one thread at a time (taken out of its slot while in use).
unsafe impl Send for Decoder {}

impl Drop for Decoder {
    fn drop(&mut self) {
        // SAFETY: `raw` was zeroed (LZMA_STREAM_INIT) and then only used through liblzma.
        unsafe { sys::lzma_end(&mut self.raw) }
    }
}

thread_local! {
    /// The thread's idle decoder, if it has one.
    static IDLE: RefCell<Option<Decoder>> = const { RefCell::new(None) };
}

impl Decoder {
    /// The thread's decoder (or a new one), initialised for a new stream.
    fn take(checked: Checked) -> std::io::Result<Decoder> {
        let mut d = IDLE
            .with(|slot| slot.borrow_mut().take())
            .unwrap_or_else(|| Decoder {
                // SAFETY: an all-zero lzma_stream is LZMA_STREAM_INIT.
                raw: unsafe { std::mem::zeroed() },
            });
        let mut flags = sys::LZMA_CONCATENATED;
        if checked == Checked::ByContainer {
            flags |= sys::LZMA_IGNORE_CHECK;
        }
        // SAFETY: `raw` is a valid stream (initial or previously initialised).
        let ret = unsafe { sys::lzma_stream_decoder(&mut d.raw, u64::MAX, flags) };
        match ret {
            sys::LZMA_OK => Ok(d),
            other => Err(error(other)),
        }
    }

    /// Give the decoder back to the thread for its next stream.
    fn put_back(self) {
        IDLE.with(|slot| {
            let mut slot = slot.borrow_mut();
            if slot.is_none() {
                *slot = Some(self);
            }
        });
    }

    /// Decode from `input` into `out` (all of `input` is given: `LZMA_FINISH`). Returns the
    /// bytes consumed, the bytes produced and whether the stream (all streams) ended.
    fn step(&mut self, input: &[u8], out: &mut [std::mem::MaybeUninit<u8>]) -> Step {
        self.raw.next_in = input.as_ptr();
        self.raw.avail_in = input.len();
        self.raw.next_out = out.as_mut_ptr().cast();
        self.raw.avail_out = out.len();
        // SAFETY: the pointers and lengths describe live buffers for the call's duration.
        let ret = unsafe { sys::lzma_code(&mut self.raw, sys::LZMA_FINISH) };
        let used = input.len() - self.raw.avail_in;
        let made = out.len() - self.raw.avail_out;
        self.raw.next_in = std::ptr::null();
        self.raw.next_out = std::ptr::null_mut();
        let status = match ret {
            sys::LZMA_STREAM_END => Status::End,
            sys::LZMA_OK => Status::More,
            // No progress was possible: the input ended inside the stream.
            sys::LZMA_BUF_ERROR if made == 0 && used == 0 && self.raw.avail_out > 0 => {
                Status::Failed(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the stream is truncated",
                ))
            }
            sys::LZMA_BUF_ERROR => Status::More,
            other => Status::Failed(error(other)),
        };
        Step { used, made, status }
    }
}

struct Step {
    used: usize,
    made: usize,
    status: Status,
}

enum Status {
    More,
    End,
    Failed(std::io::Error),
}

/// liblzma's failure codes in words.
fn error(ret: sys::lzma_ret) -> std::io::Error {
    use std::io::ErrorKind::{InvalidData, Other};
    let (kind, what) = match ret {
        sys::LZMA_FORMAT_ERROR => (InvalidData, "not an xz stream"),
        sys::LZMA_DATA_ERROR => (InvalidData, "corrupt data"),
        sys::LZMA_OPTIONS_ERROR => (InvalidData, "unsupported options"),
        sys::LZMA_UNSUPPORTED_CHECK => (InvalidData, "unsupported integrity check"),
        sys::LZMA_MEM_ERROR => (Other, "out of memory"),
        sys::LZMA_MEMLIMIT_ERROR => (Other, "memory limit reached"),
        _ => (Other, "liblzma internal error"),
    };
    std::io::Error::new(kind, what)
}

/// The uncompressed size an xz stream's index states, when `bytes` is exactly one stream
/// (a hint only: the decoder's output is what counts). The index lies just before the
/// 12-byte footer, whose "backward size" gives its length.
pub fn stated_size(bytes: &[u8]) -> Option<u64> {
    let n = bytes.len();
    if n < 12 + 12 + 8 || &bytes[..6] != b"\xfd7zXZ\0" || &bytes[n - 2..] != b"YZ" {
        return None;
    }
    let backward = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().ok()?);
    let index_len = (u64::from(backward) + 1) * 4;
    let index_start = (n as u64 - 12).checked_sub(index_len)?;
    let index = &bytes[index_start as usize..n - 12];
    let mut at = 1;
    if index.first() != Some(&0) {
        return None;
    }
    let mut vli = || -> Option<u64> {
        let mut v = 0u64;
        for i in 0..9 {
            let b = *index.get(at)?;
            at += 1;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    };
    let records = vli()?;
    let (mut blocks, mut total) = (0u64, 0u64);
    for _ in 0..records.min(1 << 20) {
        let unpadded = vli()?;
        blocks = blocks.checked_add(unpadded.checked_add(3)? & !3)?;
        total = total.checked_add(vli()?)?;
    }
    // One stream exactly: header, blocks, index, footer.
    (12u64.checked_add(blocks)?.checked_add(index_len)? + 12 == n as u64).then_some(total)
}

/// Decompress an xz stream (one or several concatenated), within the limit of its size.
/// Errors say what is wrong in one line; the caller adds the member's name.
pub fn decompress_member(bytes: &[u8], checked: Checked) -> anyhow::Result<Vec<u8>> {
    let limit = limits::get().for_member(bytes.len() as u64);
    decompress(bytes, checked, limit).map_err(|e| match e {
        ExpandError::Io(e) => anyhow::anyhow!("bad xz stream ({e})"),
        e => anyhow::anyhow!("{e}"),
    })
}

/// A streaming xz decoder over `bytes` (one or several concatenated streams), capped at the
/// member's limit: it fails (with [`ExpandError::TooLarge`] inside the `io::Error`) as soon
/// as it has produced more.
pub fn member_reader(bytes: &[u8], checked: Checked) -> Reader<'_> {
    Reader::new(bytes, checked, limits::get().for_member(bytes.len() as u64))
}

/// Decompress `bytes` (one or several concatenated xz streams), within `limit` bytes of
/// output. The first allocation is the size the index states (never beyond the limit nor
/// 64 MiB), so a well-formed member is decoded into a buffer of its size.
pub fn decompress(bytes: &[u8], checked: Checked, limit: u64) -> Result<Vec<u8>, ExpandError> {
    let hint = stated_size(bytes).unwrap_or(0).min(limit).min(64 << 20);
    let mut out: Vec<u8> = Vec::with_capacity(hint as usize + 1);
    let mut d = Decoder::take(checked)?;
    let mut input = bytes;
    loop {
        if out.len() == out.capacity() {
            if out.len() as u64 > limit {
                return Err(too_large(limit, bytes.len() as u64));
            }
            out.reserve((out.len() / 2).max(64 << 10));
        }
        // Never more than one byte past the limit.
        let room =
            (limit.saturating_add(1) - out.len() as u64).min((out.capacity() - out.len()) as u64);
        let spare = out.spare_capacity_mut();
        let step = d.step(input, &mut spare[..room as usize]);
        input = &input[step.used..];
        // SAFETY: liblzma wrote `made` bytes at the start of the spare capacity.
        unsafe { out.set_len(out.len() + step.made) };
        if out.len() as u64 > limit {
            return Err(too_large(limit, bytes.len() as u64));
        }
        match step.status {
            Status::End => break,
            Status::More => {}
            Status::Failed(e) => return Err(e.into()),
        }
    }
    d.put_back();
    Ok(out)
}

fn too_large(limit: u64, compressed: u64) -> ExpandError {
    ExpandError::TooLarge {
        limit,
        compressed,
        ratio: limits::get().ratio,
    }
}

/// A streaming decoder of `bytes` (one or several concatenated xz streams) that fails, with
/// [`ExpandError::TooLarge`] inside the `io::Error`, as soon as it has produced more than
/// `limit` bytes: for consumers that parse as they decompress.
pub struct Reader<'a> {
    decoder: Option<Decoder>,
    input: &'a [u8],
    left: u64,
    limit: u64,
    compressed: u64,
    checked: Checked,
    ended: bool,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8], checked: Checked, limit: u64) -> Self {
        Reader {
            decoder: None,
            input: bytes,
            left: limit,
            limit,
            compressed: bytes.len() as u64,
            checked,
            ended: false,
        }
    }
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        if let Some(d) = self.decoder.take() {
            d.put_back();
        }
    }
}

impl Read for Reader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.ended || buf.is_empty() {
            return Ok(0);
        }
        let d = match &mut self.decoder {
            Some(d) => d,
            none => none.insert(Decoder::take(self.checked)?),
        };
        loop {
            // SAFETY: initialised bytes viewed as possibly uninitialised ones.
            let out = unsafe { &mut *(buf as *mut [u8] as *mut [std::mem::MaybeUninit<u8>]) };
            let step = d.step(self.input, out);
            self.input = &self.input[step.used..];
            match step.status {
                Status::Failed(e) => return Err(e),
                Status::End => {
                    self.ended = true;
                    if let Some(d) = self.decoder.take() {
                        d.put_back();
                    }
                }
                Status::More if step.made == 0 => continue,
                Status::More => {}
            }
            return match self.left.checked_sub(step.made as u64) {
                Some(left) => {
                    self.left = left;
                    Ok(step.made)
                }
                None => Err(std::io::Error::other(too_large(
                    self.limit,
                    self.compressed,
                ))),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn xz(data: &[u8], preset: u32) -> Vec<u8> {
        let mut enc = liblzma::write::XzEncoder::new(Vec::new(), preset);
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    fn text(n: u32) -> Vec<u8> {
        (0..n)
            .flat_map(|i| format!("{i},{}\n", i * 7).into_bytes())
            .collect()
    }

    #[test]
    fn the_index_states_the_size_of_one_stream_only() {
        let data = text(20_000);
        let one = xz(&data, 6);
        assert_eq!(stated_size(&one), Some(data.len() as u64));
        let mut two = one.clone();
        two.extend_from_slice(&xz(b"more", 1));
        assert_eq!(stated_size(&two), None);
        assert_eq!(stated_size(&one[..one.len() - 1]), None);
        assert_eq!(stated_size(b"not xz at all, not even close"), None);
        // A damaged backward size points anywhere: no hint, never a panic.
        for i in one.len() - 12..one.len() {
            let mut bad = one.clone();
            bad[i] ^= 0xff;
            let _ = stated_size(&bad);
        }
    }

    #[test]
    fn one_decoder_per_thread_decodes_stream_after_stream() {
        let a = text(50_000);
        let b = text(3);
        let (xa, xb) = (xz(&a, 6), xz(&b, 0));
        for _ in 0..3 {
            for (x, want) in [(&xa, &a), (&xb, &b)] {
                assert_eq!(&decompress(x, Checked::No, 1 << 30).unwrap(), want);
                let mut got = Vec::new();
                Reader::new(x, Checked::ByContainer, 1 << 30)
                    .read_to_end(&mut got)
                    .unwrap();
                assert_eq!(&got, want);
            }
        }
        // Concatenated streams decode as one, and a failed one leaves the next unharmed.
        let mut both = xa.clone();
        both.extend_from_slice(&xb);
        let mut want = a.clone();
        want.extend_from_slice(&b);
        assert_eq!(decompress(&both, Checked::No, 1 << 30).unwrap(), want);
        assert!(decompress(&xa[..xa.len() / 2], Checked::No, 1 << 30).is_err());
        assert_eq!(decompress(&xb, Checked::No, 1 << 30).unwrap(), b);
    }

    #[test]
    fn the_limit_stops_both_at_one_byte_past_it() {
        let data = text(10_000);
        let x = xz(&data, 1);
        let n = data.len() as u64;
        assert!(decompress(&x, Checked::No, n).is_ok());
        let e = decompress(&x, Checked::No, n - 1).unwrap_err();
        assert!(
            matches!(e, ExpandError::TooLarge { limit, .. } if limit == n - 1),
            "{e}"
        );
        let mut sink = Vec::new();
        let e = Reader::new(&x, Checked::No, n - 1)
            .read_to_end(&mut sink)
            .unwrap_err();
        assert!(e.to_string().contains("decompression bomb"), "{e}");
        assert!(sink.len() as u64 <= n);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Any data, in one stream or two, read whole or in reads of any size, comes back as
        /// it went in; damaged, it is an error or other bytes, never a panic.
        #[test]
        fn round_trips(
            data in proptest::collection::vec(0u8..4, 0..20_000),
            split in 0usize..20_000,
            read in 1usize..5000,
            damage in proptest::option::of((0usize..1 << 20, 1u8..=255)),
        ) {
            let split = split.min(data.len());
            let mut x = xz(&data[..split], 1);
            x.extend(xz(&data[split..], 6));
            if let Some((at, flip)) = damage {
                let at = at % x.len();
                x[at] ^= flip;
                let _ = decompress(&x, Checked::No, 1 << 30);
                let _ = Reader::new(&x, Checked::ByContainer, 1 << 30).read_to_end(&mut Vec::new());
                return Ok(());
            }
            let whole = decompress(&x, Checked::ByContainer, 1 << 30).unwrap();
            proptest::prop_assert_eq!(&whole, &data);
            let mut r = Reader::new(&x, Checked::No, 1 << 30);
            let (mut got, mut buf) = (Vec::new(), vec![0u8; read]);
            loop {
                let n = r.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            proptest::prop_assert_eq!(got, data);
        }
    }

    #[test]
    fn truncated_and_foreign_input_are_errors() {
        let x = xz(&text(1000), 6);
        for cut in [0, 5, 12, x.len() / 2, x.len() - 1] {
            assert!(
                decompress(&x[..cut], Checked::No, 1 << 30).is_err(),
                "cut {cut}"
            );
            let mut sink = Vec::new();
            assert!(
                Reader::new(&x[..cut], Checked::No, 1 << 30)
                    .read_to_end(&mut sink)
                    .is_err(),
                "cut {cut}"
            );
        }
        assert!(decompress(b"plain text", Checked::No, 1 << 30).is_err());
    }
}
