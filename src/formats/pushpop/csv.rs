//! The CSV variant of the push/pop trace, read as a stream: records come from the `csv`
//! crate's byte-record reader (one reused record, no per-field allocation) straight into
//! arrow builders, and only the columns the normalized schema uses are converted; the rest
//! (`NameTree`, ...) are tokenised and dropped. Fed from the xz decoder, the decompressed
//! text is never held whole (docs/design.md, "Push/pop trace").

use std::io::Read;
use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use arrow::array::{ArrayRef, Int64Builder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema};

use super::{NAME, RANGE_STACK, normalized_name};

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
    let mut reader = ::csv::ReaderBuilder::new()
        .has_headers(true)
        .buffer_capacity(256 << 10)
        .from_reader(input);
    let header = reader.byte_headers().map_err(bad_csv)?.clone();
    let header: Vec<String> = header
        .iter()
        .map(|h| {
            String::from_utf8_lossy(h)
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

    let mut record = ::csv::ByteRecord::new();
    while reader.read_byte_record(&mut record).map_err(bad_csv)? {
        for ((field, column), name) in record.iter().zip(&mut columns).zip(&header) {
            let at = || {
                let line = record.position().map_or(0, |p| p.line());
                format!("column {name:?}, line {line}")
            };
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

/// The message of a reader error: the limit's own words for a decompression bomb, else
/// what the reader says.
fn bad_csv(e: ::csv::Error) -> anyhow::Error {
    match e.kind() {
        ::csv::ErrorKind::Io(io) => match io
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<crate::formats::limits::ExpandError>())
        {
            Some(limit) => anyhow!("{limit}"),
            None => anyhow!("bad xz stream ({io})"),
        },
        _ => anyhow!("bad CSV: {e}"),
    }
}

/// An integer as nsys writes it (`-12`), or as pandas writes an integer held in a float
/// column (`25205.0`, `2.5e+04`); None for anything else, fractions included.
pub fn parse_int(field: &[u8]) -> Option<i64> {
    let (negative, digits) = match field.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, field),
    };
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
        #[test]
        fn any_integer_round_trips(v in any::<i64>()) {
            prop_assert_eq!(parse_int(v.to_string().as_bytes()), Some(v));
        }

        #[test]
        fn any_bytes_are_an_answer_not_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_int(&bytes);
            let _ = read(&bytes[..]);
        }
    }
}
