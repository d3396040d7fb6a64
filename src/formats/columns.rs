//! Checked columns of the members this project writes: readers take a column by name and
//! type, with or without nulls, and say in one line what is wrong (the caller names the file).

use anyhow::{Result, bail};
use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Int64Type};

/// A 64-bit integer column; without nulls unless `nullable`.
pub fn int64(b: &RecordBatch, name: &str, nullable: bool) -> Result<Int64Array> {
    let Some(a) = b.column_by_name(name) else {
        bail!("no column {name:?}");
    };
    let Some(a) = a.as_primitive_opt::<Int64Type>() else {
        bail!("column {name:?} is {}, not int64", a.data_type());
    };
    if !nullable && a.null_count() > 0 {
        bail!("column {name:?} has nulls");
    }
    Ok(a.clone())
}

/// A column of names without nulls, as a dictionary: each row a key into the distinct names.
#[derive(Debug, Clone)]
pub struct Names {
    keys: arrow::array::Int32Array,
    values: StringArray,
}

impl Names {
    /// Row `i`'s name.
    pub fn value(&self, i: usize) -> &str {
        self.values.value(self.keys.value(i) as usize)
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// The type of a column of names stored once each: a dictionary of 32-bit keys.
/// A column of numbers: integers, floating point (pandas writes integer columns with nulls
/// so), or nulls only. Text is another column or a damaged one, and is never parsed.
pub fn ensure_numbers(a: &dyn Array, name: &str) -> Result<()> {
    let t = a.data_type();
    if t.is_integer() || t.is_floating() || *t == DataType::Null {
        Ok(())
    } else {
        bail!("column {name:?} holds {t}, not numbers")
    }
}

/// A column of text: strings of any width, dictionary-encoded strings, or nulls only.
/// Numbers are another column or a damaged one, and are never printed as text.
pub fn ensure_text(a: &dyn Array, name: &str) -> Result<()> {
    let text = |t: &DataType| {
        matches!(
            t,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
        )
    };
    let ok = match a.data_type() {
        DataType::Dictionary(_, v) => text(v),
        t => text(t),
    };
    if ok {
        Ok(())
    } else {
        bail!("column {name:?} holds {}, not text", a.data_type())
    }
}

pub fn dictionary_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// A column of names without nulls, plain or a dictionary of 32-bit keys, as [`Names`].
pub fn names(b: &RecordBatch, name: &str) -> Result<Names> {
    let dictionary = dictionary_type();
    let a = match b.column_by_name(name) {
        Some(a) if a.null_count() > 0 => bail!("column {name:?} has nulls"),
        Some(a) if a.data_type() == &dictionary => a.clone(),
        Some(a) if a.data_type() == &DataType::Utf8 => arrow::compute::cast(a, &dictionary)?,
        Some(a) => bail!("column {name:?} is not utf8 ({})", a.data_type()),
        None => bail!("no column {name:?}"),
    };
    let d = a.as_dictionary::<arrow::datatypes::Int32Type>();
    let values = d.values().as_string::<i32>().clone();
    if values.null_count() > 0 {
        bail!("column {name:?} has nulls");
    }
    Ok(Names {
        keys: d.keys().clone(),
        values,
    })
}

/// A UTF-8 column without nulls.
pub fn utf8(b: &RecordBatch, name: &str) -> Result<StringArray> {
    match b.column_by_name(name) {
        Some(a) if a.data_type() == &DataType::Utf8 && a.null_count() == 0 => {
            Ok(a.as_string::<i32>().clone())
        }
        Some(a) => bail!("column {name:?} is not non-null utf8 ({})", a.data_type()),
        None => bail!("no column {name:?}"),
    }
}
