//! String columns of the frames, plain or dictionary-encoded. The thunk frame has a row per
//! kernel and a few hundred distinct names: its program ids, instructions, op names,
//! collectives and command buffers are dictionaries (4 bytes a row, not the name again;
//! docs/design.md, "Bounded memory"), and readers take either through [`strings`].

use arrow::array::{Array, ArrayRef, AsArray, DictionaryArray, Int32Array, StringArray};
use arrow::datatypes::{DataType, Int32Type};

/// A string column as readers see it.
#[derive(Clone, Copy)]
pub enum Strings<'a> {
    Plain(&'a StringArray),
    Dictionary {
        keys: &'a Int32Array,
        values: &'a StringArray,
    },
}

/// The dictionary type of the frames' encoded string columns.
pub use crate::formats::columns::dictionary_type;

/// A string column, plain or a dictionary of strings. Panics on another type, as arrow's
/// `as_string` does (frames are built here, with their schemas).
pub fn strings(a: &ArrayRef) -> Strings<'_> {
    match a.data_type() {
        DataType::Dictionary(_, _) => {
            let d: &DictionaryArray<Int32Type> = a.as_dictionary();
            Strings::Dictionary {
                keys: d.keys(),
                values: d.values().as_string::<i32>(),
            }
        }
        _ => Strings::Plain(a.as_string::<i32>()),
    }
}

impl<'a> Strings<'a> {
    pub fn is_null(&self, i: usize) -> bool {
        match self {
            Strings::Plain(s) => s.is_null(i),
            Strings::Dictionary { keys, values } => {
                keys.is_null(i) || values.is_null(keys.value(i) as usize)
            }
        }
    }

    pub fn is_valid(&self, i: usize) -> bool {
        !self.is_null(i)
    }

    /// Row `i`'s string ("" when null, as arrow's string arrays give it).
    pub fn value(&self, i: usize) -> &'a str {
        match self {
            Strings::Plain(s) => s.value(i),
            Strings::Dictionary { keys, values } => {
                if keys.is_null(i) {
                    ""
                } else {
                    values.value(keys.value(i) as usize)
                }
            }
        }
    }
}

/// A dictionary column of strings from rows' values in order (the dictionary in order of
/// first appearance).
pub fn dictionary<'s>(values: impl Iterator<Item = Option<&'s str>>) -> ArrayRef {
    let mut b = arrow::array::StringDictionaryBuilder::<Int32Type>::new();
    for v in values {
        b.append_option(v);
    }
    std::sync::Arc::new(b.finish())
}

/// A frame with its dictionary columns as plain strings (for readers outside this tool:
/// pandas would read a dictionary as a categorical).
pub fn plain(
    batch: &arrow::record_batch::RecordBatch,
) -> anyhow::Result<arrow::record_batch::RecordBatch> {
    if !batch
        .schema()
        .fields()
        .iter()
        .any(|f| matches!(f.data_type(), DataType::Dictionary(_, _)))
    {
        return Ok(batch.clone());
    }
    let mut fields = Vec::new();
    let mut columns = Vec::new();
    for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
        if matches!(f.data_type(), DataType::Dictionary(_, _)) {
            columns.push(arrow::compute::cast(c, &DataType::Utf8)?);
            fields.push(f.as_ref().clone().with_data_type(DataType::Utf8));
        } else {
            columns.push(c.clone());
            fields.push(f.as_ref().clone());
        }
    }
    let schema = std::sync::Arc::new(arrow::datatypes::Schema::new_with_metadata(
        fields,
        batch.schema().metadata().clone(),
    ));
    Ok(arrow::record_batch::RecordBatch::try_new(schema, columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_dictionary_read_alike() {
        let rows = [Some("a"), None, Some("b"), Some("a"), Some("")];
        let plain_col: ArrayRef = std::sync::Arc::new(StringArray::from(rows.to_vec()));
        let dict_col = dictionary(rows.iter().copied());
        assert!(matches!(dict_col.data_type(), DataType::Dictionary(_, _)));
        for col in [&plain_col, &dict_col] {
            let s = strings(col);
            let read: Vec<Option<&str>> =
                (0..5).map(|i| s.is_valid(i).then(|| s.value(i))).collect();
            assert_eq!(read, rows.to_vec());
            assert_eq!(s.value(1), "");
            assert!(s.is_null(1) && s.is_valid(4));
        }
        let batch = arrow::record_batch::RecordBatch::try_from_iter([("x", dict_col)]).unwrap();
        let p = plain(&batch).unwrap();
        assert_eq!(p.column(0).data_type(), &DataType::Utf8);
        assert_eq!(p.column(0).as_ref(), plain_col.as_ref());
    }
}
