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
