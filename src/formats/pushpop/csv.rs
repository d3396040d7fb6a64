//! The CSV variant of the push/pop trace, read as a stream. A record splitter of its own
//! ([`Records`]) finds each field with `memchr` (a quoted field's closing quote, an unquoted
//! one's comma or line end) instead of stepping a state machine over every byte, as general
//! CSV readers do: the trace is RFC 4180 text whose long fields (`Name`, `NameTree`) are most
//! of its bytes, which `memchr` crosses many bytes at a time (docs/design.md, "The cold
//! path").
//! Fields go straight into arrow builders, and only the columns the normalized schema uses
//! are converted; the rest are split and dropped. Fed from the xz decoder, the decompressed
//! text is never held whole: the splitter holds one buffer of whole records at a time.

use std::io::Read;
use std::ops::Range;
use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use arrow::array::{ArrayRef, Int64Builder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema};
use memchr::{memchr, memchr2};

use super::schema::{NAME, RANGE_STACK, normalized_name};

/// What becomes of one source column.
enum Column {
    Int(Int64Builder),
    Text(StringBuilder),
    Skip,
}

/// Reads the CSV from `input` (with its header line) into a batch of the source's own
/// column names: integer columns as Int64 (empty fields null), text columns as Utf8.
/// Errors name the column and line.
pub fn read(input: impl Read) -> Result<RecordBatch> {
    let mut records = Records::new(input);
    if !records.next_record()? {
        bail!("empty CSV (no header line)");
    }
    let header: Vec<String> = (0..records.len())
        .map(|i| {
            String::from_utf8_lossy(records.field(i))
                .trim_start_matches('\u{feff}')
                .to_string()
        })
        .collect();
    if header.iter().all(|h| h.trim().is_empty()) {
        bail!("empty CSV (no header line)");
    }
    let mut columns: Vec<Column> = header
        .iter()
        .map(|h| match normalized_name(h) {
            Some(NAME | RANGE_STACK | "Domain") => Column::Text(StringBuilder::new()),
            Some(_) => Column::Int(Int64Builder::new()),
            None => Column::Skip,
        })
        .collect();

    while records.next_record()? {
        if records.len() != header.len() {
            bail!(
                "bad CSV: line {} has {} fields, the header {}",
                records.line(),
                records.len(),
                header.len()
            );
        }
        for (i, (column, name)) in columns.iter_mut().zip(&header).enumerate() {
            let field = records.field(i);
            let at = || format!("column {name:?}, line {}", records.line());
            match column {
                Column::Int(b) if field.is_empty() => b.append_null(),
                Column::Int(b) => match parse_int(field) {
                    Some(v) => b.append_value(v),
                    None => bail!(
                        "{}: not an integer: {:?}",
                        at(),
                        String::from_utf8_lossy(&field[..field.len().min(40)])
                    ),
                },
                Column::Text(b) => match std::str::from_utf8(field) {
                    Ok(s) => b.append_value(s),
                    Err(e) => bail!("{}: not UTF-8 ({e})", at()),
                },
                Column::Skip => {}
            }
        }
    }

    let mut fields = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for (name, column) in header.iter().zip(columns) {
        let (data_type, array): (DataType, ArrayRef) = match column {
            Column::Int(mut b) => (DataType::Int64, Arc::new(b.finish())),
            Column::Text(mut b) => (DataType::Utf8, Arc::new(b.finish())),
            Column::Skip => continue,
        };
        fields.push(Field::new(name, data_type, true));
        arrays.push(array);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).map_err(|e| anyhow!("bad CSV: {e}"))
}

/// The message of a read error: the limit's own words for a decompression bomb, else the
/// decoder's.
fn bad_input(e: std::io::Error) -> anyhow::Error {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<crate::formats::limits::ExpandError>())
    {
        Some(limit) => anyhow!("{limit}"),
        None => anyhow!("bad xz stream ({e})"),
    }
}

/// Where one field of the current record is: in the input buffer, or (a quoted field with
/// doubled quotes) unescaped into the scratch buffer.
enum Span {
    Input(Range<usize>),
    Unescaped(Range<usize>),
}

/// How the split of the buffered text ended.
enum Split {
    /// A whole record: bytes used, line ends inside its quoted fields.
    Record(usize, u64),
    /// The buffer ends inside the record: more input is needed.
    Partial,
}

/// The records of a CSV stream (RFC 4180: fields separated by commas, quoted with `"`, a
/// quote inside a quoted field doubled; records end with `\n` or `\r\n`; blank lines are
/// skipped). Fields are byte slices of the current record.
pub struct Records<R> {
    input: R,
    buf: Vec<u8>,
    /// `buf[pos..len]` is read and not yet split.
    pos: usize,
    len: usize,
    eof: bool,
    /// The current record's fields; offsets of `Input` spans are from `record`.
    spans: Vec<Span>,
    record: usize,
    unescaped: Vec<u8>,
    /// The line the current record starts on, and the line the next one does.
    line: u64,
    next_line: u64,
}

const CHUNK: usize = 256 << 10;

impl<R: Read> Records<R> {
    pub fn new(input: R) -> Self {
        Records {
            input,
            buf: vec![0; CHUNK],
            pos: 0,
            len: 0,
            eof: false,
            spans: Vec::new(),
            record: 0,
            unescaped: Vec::new(),
            line: 0,
            next_line: 1,
        }
    }

    /// The number of fields of the current record.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// The line the current record starts on (1-based).
    pub fn line(&self) -> u64 {
        self.line
    }

    /// Field `i` of the current record, unquoted.
    pub fn field(&self, i: usize) -> &[u8] {
        match &self.spans[i] {
            Span::Input(r) => &self.buf[self.record + r.start..self.record + r.end],
            Span::Unescaped(r) => &self.unescaped[r.clone()],
        }
    }

    /// Moves to the next record; false at the end of the input.
    pub fn next_record(&mut self) -> Result<bool> {
        loop {
            if self.pos == self.len && self.eof {
                return Ok(false);
            }
            let data = &self.buf[self.pos..self.len];
            match split(data, self.eof, &mut self.spans, &mut self.unescaped)
                .map_err(|e| anyhow!("bad CSV: line {}: {e}", self.next_line))?
            {
                Split::Record(used, newlines) => {
                    let blank = data[0] != b'"'
                        && matches!(self.spans[..], [Span::Input(ref r)] if r.is_empty());
                    self.record = self.pos;
                    self.pos += used;
                    self.line = self.next_line;
                    self.next_line += 1 + newlines;
                    if !blank {
                        return Ok(true);
                    }
                }
                Split::Partial => self.fill()?,
            }
        }
    }

    /// Keeps the unsplit bytes, at the front, and reads after them until the buffer is full
    /// or the input ends (doubling the buffer when one record fills it, so that a record is
    /// split again only as often as the buffer doubles).
    fn fill(&mut self) -> Result<()> {
        self.buf.copy_within(self.pos..self.len, 0);
        self.len -= self.pos;
        self.pos = 0;
        if self.len == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        while self.len < self.buf.len() {
            match self.input.read(&mut self.buf[self.len..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => self.len += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(bad_input(e)),
            }
        }
        Ok(())
    }
}

/// Splits the record at the start of `data` into `spans` (offsets from the start of `data`).
/// Without `eof`, a record that may go on past `data` is [`Split::Partial`].
fn split(
    data: &[u8],
    eof: bool,
    spans: &mut Vec<Span>,
    unescaped: &mut Vec<u8>,
) -> Result<Split, String> {
    spans.clear();
    unescaped.clear();
    let mut newlines = 0;
    let mut i = 0;
    loop {
        if data.get(i) != Some(&b'"') {
            // Unquoted: up to the next comma or line end.
            let Some(k) = memchr2(b',', b'\n', &data[i..]) else {
                if !eof {
                    return Ok(Split::Partial);
                }
                let end = data.len() - usize::from(data.ends_with(b"\r"));
                spans.push(Span::Input(i..end.max(i)));
                return Ok(Split::Record(data.len(), newlines));
            };
            let e = i + k;
            if data[e] == b',' {
                spans.push(Span::Input(i..e));
                i = e + 1;
                continue;
            }
            let end = if e > i && data[e - 1] == b'\r' {
                e - 1
            } else {
                e
            };
            spans.push(Span::Input(i..end));
            return Ok(Split::Record(e + 1, newlines));
        }
        // Quoted: up to the quote not doubled.
        let open = i + 1;
        let mut j = open;
        let mut doubled = false;
        let close = loop {
            let Some(k) = memchr2(b'"', b'\n', &data[j..]) else {
                return if eof {
                    Err("a quoted field is not closed".into())
                } else {
                    Ok(Split::Partial)
                };
            };
            let q = j + k;
            if data[q] == b'\n' {
                newlines += 1;
                j = q + 1;
                continue;
            }
            match data.get(q + 1) {
                Some(b'"') => {
                    doubled = true;
                    j = q + 2;
                }
                None if !eof => return Ok(Split::Partial),
                _ => break q,
            }
        };
        let text = &data[open..close];
        if doubled {
            let from = unescaped.len();
            let mut rest = text;
            while let Some(q) = memchr(b'"', rest) {
                unescaped.extend_from_slice(&rest[..=q]);
                rest = &rest[q + 2..];
            }
            unescaped.extend_from_slice(rest);
            spans.push(Span::Unescaped(from..unescaped.len()));
        } else {
            spans.push(Span::Input(open..close));
        }
        let after = close + 1;
        match (data.get(after), data.get(after + 1)) {
            (Some(b','), _) => i = after + 1,
            (Some(b'\n'), _) => return Ok(Split::Record(after + 1, newlines)),
            (Some(b'\r'), Some(b'\n')) => return Ok(Split::Record(after + 2, newlines)),
            (Some(b'\r'), None) if !eof => return Ok(Split::Partial),
            (Some(b'\r'), None) | (None, _) if eof => {
                return Ok(Split::Record(data.len(), newlines));
            }
            (None, _) => return Ok(Split::Partial),
            (Some(&c), _) => {
                return Err(format!(
                    "{:?} after the closing quote of a field",
                    char::from(c)
                ));
            }
        }
    }
}

/// An integer as nsys writes it (`-12`), or as pandas writes an integer held in a float
/// column (`25205.0`, `2.5e+04`); None for anything else, fractions included.
pub fn parse_int(field: &[u8]) -> Option<i64> {
    let (negative, digits) = match field.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, field),
    };
    // Up to 18 digits cannot overflow: one pass without checks (the usual case: every
    // time stamp and id of a trace).
    if !digits.is_empty() && digits.len() <= 18 {
        let (mut value, mut all_digits) = (0i64, true);
        for &d in digits {
            let x = d.wrapping_sub(b'0');
            all_digits &= x < 10;
            value = value.wrapping_mul(10).wrapping_add(i64::from(x));
        }
        if all_digits {
            return Some(if negative { -value } else { value });
        }
    }
    let mut value: i64 = 0;
    let mut rest = digits;
    while let Some((&d, tail)) = rest.split_first() {
        if !d.is_ascii_digit() {
            break;
        }
        value = value.checked_mul(10)?.checked_sub(i64::from(d - b'0'))?;
        rest = tail;
    }
    if rest.is_empty() && rest.len() < digits.len() {
        return if negative {
            Some(value)
        } else {
            value.checked_neg()
        };
    }
    // `123.0`, `123.`, exponents: through f64, kept only when whole and in range.
    let x: f64 = std::str::from_utf8(field).ok()?.trim().parse().ok()?;
    (x.is_finite() && x.fract() == 0.0 && x.abs() < 9.2e18).then_some(x as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn integers_as_nsys_and_pandas_write_them() {
        assert_eq!(parse_int(b"25205"), Some(25205));
        assert_eq!(parse_int(b"-7"), Some(-7));
        assert_eq!(parse_int(b"25205.0"), Some(25205));
        assert_eq!(parse_int(b"2.5e+04"), Some(25000));
        assert_eq!(parse_int(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_int(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_int(b"12.5"), None);
        assert_eq!(parse_int(b"x"), None);
        assert_eq!(parse_int(b"-"), None);
        assert_eq!(parse_int(b"99999999999999999999"), None);
        assert_eq!(parse_int(b"NaN"), None);
        assert_eq!(parse_int(b"inf"), None);
        assert_eq!(parse_int(b"12a"), None);
        assert_eq!(parse_int(b"-0"), Some(0));
    }

    proptest! {
        /// Digits alone (signed, zero-padded, of any length to 20) read as the standard
        /// library reads them: the unchecked pass for up to 18 digits and the checked one
        /// beyond agree with it, overflow included.
        #[test]
        fn digit_strings_read_as_the_standard_library_reads_them(s in "-?[0-9]{1,20}") {
            prop_assert_eq!(parse_int(s.as_bytes()), s.parse::<i64>().ok());
        }

        /// Any integer, as written and zero-padded.
        #[test]
        fn integers_read_back(n in any::<i64>(), pad in 0usize..4) {
            let digits = format!("{}{}", "0".repeat(pad), n.unsigned_abs());
            let text = if n < 0 { format!("-{digits}") } else { digits };
            prop_assert_eq!(parse_int(text.as_bytes()), Some(n));
        }
    }

    #[test]
    fn errors_name_the_column_and_line() {
        let e = read(&b"Start (ns),Name\n1,a\nx,b\n"[..])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"Start (ns)\", line 3") && e.contains("\"x\""),
            "{e}"
        );
        let e = read(&b"Start (ns),Name\n1,\xff\n"[..])
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"Name\", line 2") && e.contains("UTF-8"), "{e}");
        let e = read(&b"Start (ns),Name\n1,a,extra\n"[..])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bad CSV"), "{e}");
        let e = read(&b"\n\n"[..]).unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
        // Lines are counted through quoted line ends and blank lines.
        let e = read(&b"Start (ns),Name\n1,\"a\nb\"\n\n2,c,d\n"[..])
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 5 has 3 fields, the header 2"), "{e}");
        let e = read(&b"Start (ns),Name\n1,\"a"[..])
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2: a quoted field is not closed"), "{e}");
        let e = read(&b"Start (ns),Name\n1,\"a\"b\n"[..])
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2: 'b' after the closing quote"), "{e}");
    }

    /// A reader handing out at most `step` bytes per call, so that records and quotes fall
    /// across the splitter's reads.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.data.len().min(self.step).min(buf.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn split_all(input: impl Read) -> Vec<Vec<Vec<u8>>> {
        let mut records = Records::new(input);
        let mut out = Vec::new();
        while records.next_record().unwrap() {
            out.push(
                (0..records.len())
                    .map(|i| records.field(i).to_vec())
                    .collect(),
            );
        }
        out
    }

    #[test]
    fn records_longer_than_the_buffer() {
        let long = "x\"y,".repeat(CHUNK);
        let text = format!("a,b\r\n\"{}\",2\r\n3,4", long.replace('"', "\"\""));
        let records = split_all(text.as_bytes());
        assert_eq!(records.len(), 3);
        assert_eq!(records[1][0], long.as_bytes());
        assert_eq!(records[2], [b"3".to_vec(), b"4".to_vec()]);
    }

    #[test]
    fn a_byte_order_mark_and_quoted_fields() {
        let b = read(&b"\xEF\xBB\xBFStart (ns),Name,Other\n1,\"a,\"\"b\"\"\nc\",z\n,d,z\n"[..])
            .unwrap();
        assert_eq!(b.schema().field(0).name(), "Start (ns)");
        assert_eq!(b.num_columns(), 2, "the unknown column is dropped");
        let names = b
            .column(1)
            .as_any()
            .downcast_ref::<arrow::array::StringArray>();
        assert_eq!(names.unwrap().value(0), "a,\"b\"\nc");
        assert!(arrow::array::Array::is_null(b.column(0), 1));
    }

    proptest! {
        /// Whatever the `csv` crate writes, the splitter reads back as the `csv` crate does,
        /// however the input is cut into reads.
        #[test]
        fn splits_as_the_csv_crate_does(
            rows in proptest::collection::vec(
                proptest::collection::vec("[a-z,\"\\r\\n ]{0,6}|\\PC{0,3}", 1..5), 0..6),
            step in 1usize..9,
            crlf in any::<bool>(),
        ) {
            let terminator = if crlf {
                ::csv::Terminator::CRLF
            } else {
                ::csv::Terminator::Any(b'\n')
            };
            let mut writer = ::csv::WriterBuilder::new()
                .flexible(true)
                .terminator(terminator)
                .from_writer(Vec::new());
            for row in &rows {
                writer.write_record(row).unwrap();
            }
            let text = writer.into_inner().unwrap();
            let mut reader = ::csv::ReaderBuilder::new()
                .has_headers(false)
                .flexible(true)
                .from_reader(&text[..]);
            let expected: Vec<Vec<Vec<u8>>> = reader
                .byte_records()
                .map(|r| r.unwrap().iter().map(<[u8]>::to_vec).collect())
                .collect();
            prop_assert_eq!(split_all(Trickle { data: &text, step }), expected);
        }

        #[test]
        fn any_integer_round_trips(v in any::<i64>()) {
            prop_assert_eq!(parse_int(v.to_string().as_bytes()), Some(v));
        }

        #[test]
        fn any_bytes_are_an_answer_not_a_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let _ = parse_int(&bytes);
            let _ = read(&bytes[..]);
        }
    }
}
