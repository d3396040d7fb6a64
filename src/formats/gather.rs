//! A table read in batches, gathered into one batch as the batches come (docs/design.md,
//! "Bounded memory"): what is held is the table's columns and one batch of the file, rather
//! than every batch and then their concatenation. Columns are 64-bit integers, or names as
//! dictionaries of 32-bit keys, each batch's dictionary merged into the table's one.

use super::interner::Interner;
use anyhow::{Result, bail};
use arrow::array::{
    Array, ArrayRef, AsArray, DictionaryArray, Int32Builder, Int64Builder, RecordBatch, StringArray,
};
use arrow::datatypes::{DataType, Int32Type, Int64Type, SchemaRef};
use std::sync::Arc;

/// Rows reserved up front at most, whatever a file declares (a declared size is not
/// trusted: the columns grow past it as rows come).
const RESERVE_AT_MOST: usize = 1 << 24;

enum Column {
    Int64(Int64Builder),
    Names {
        keys: Int32Builder,
        values: Interner,
    },
}

/// Batches of `schema` appended into one.
pub struct Gather {
    schema: SchemaRef,
    columns: Vec<Column>,
}

impl Gather {
    /// A gatherer of batches of `schema` (64-bit integer and name-dictionary columns only),
    /// with room for `rows` rows (capped).
    pub fn new(schema: SchemaRef, rows: usize) -> Result<Self> {
        let rows = rows.min(RESERVE_AT_MOST);
        let columns = schema
            .fields()
            .iter()
            .map(|f| match f.data_type() {
                DataType::Int64 => Ok(Column::Int64(Int64Builder::with_capacity(rows))),
                t if *t == super::columns::dictionary_type() => Ok(Column::Names {
                    keys: Int32Builder::with_capacity(rows),
                    values: Interner::default(),
                }),
                t => bail!("column {:?}: cannot gather {t}", f.name()),
            })
            .collect::<Result<_>>()?;
        Ok(Self { schema, columns })
    }

    /// Append `batch`, which has the schema's columns (by name; others are left).
    pub fn push(&mut self, batch: &RecordBatch) -> Result<()> {
        for (column, field) in self.columns.iter_mut().zip(self.schema.fields()) {
            let Some(a) = batch.column_by_name(field.name()) else {
                bail!("no column {:?}", field.name());
            };
            match column {
                Column::Int64(b) => match a.as_primitive_opt::<Int64Type>() {
                    Some(a) => b.append_array(a),
                    None => bail!("column {:?} is {}, not int64", field.name(), a.data_type()),
                },
                Column::Names { keys, values } => {
                    let Some(d) = a.as_dictionary_opt::<Int32Type>() else {
                        bail!("column {:?} is {}, not names", field.name(), a.data_type());
                    };
                    let Some(names) = d.values().as_string_opt::<i32>() else {
                        bail!(
                            "column {:?} holds {}, not text",
                            field.name(),
                            d.values().data_type()
                        );
                    };
                    // Each of the batch's names once: its key in the table's dictionary.
                    let mut to_table = Vec::with_capacity(names.len());
                    for i in 0..names.len() {
                        let name = if names.is_null(i) { "" } else { names.value(i) };
                        to_table.push(i32::try_from(values.intern(name))?);
                    }
                    for k in d.keys().iter() {
                        match k.map(|k| to_table.get(usize::try_from(k).ok()?).copied()) {
                            Some(Some(k)) => keys.append_value(k),
                            Some(None) => {
                                bail!("column {:?}: a key beyond its dictionary", field.name())
                            }
                            None => keys.append_null(),
                        }
                    }
                }
            }
        }
        Ok(())
    }

    pub fn finish(self) -> Result<RecordBatch> {
        let columns: Vec<ArrayRef> = self
            .columns
            .into_iter()
            .map(|c| -> Result<ArrayRef> {
                Ok(match c {
                    Column::Int64(mut b) => Arc::new(b.finish()),
                    Column::Names { mut keys, values } => {
                        let values = StringArray::from_iter_values(values.iter());
                        Arc::new(DictionaryArray::<Int32Type>::try_new(
                            keys.finish(),
                            Arc::new(values),
                        )?)
                    }
                })
            })
            .collect::<Result<_>>()?;
        Ok(RecordBatch::try_new(self.schema, columns)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, Schema};

    fn batch(schema: &SchemaRef, names: &[&str], ids: &[Option<i64>]) -> RecordBatch {
        let names: DictionaryArray<Int32Type> = names.iter().copied().collect();
        let ids: arrow::array::Int64Array = ids.iter().copied().collect();
        RecordBatch::try_new(schema.clone(), vec![Arc::new(names), Arc::new(ids)]).unwrap()
    }

    #[test]
    fn batches_gather_into_one_with_one_dictionary() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("Name", super::super::columns::dictionary_type(), false),
            Field::new("Id", DataType::Int64, true),
        ]));
        let mut g = Gather::new(schema.clone(), 2).unwrap();
        g.push(&batch(&schema, &["b", "a", "b"], &[Some(1), None, Some(3)]))
            .unwrap();
        g.push(&batch(&schema, &["c", "a"], &[Some(4), Some(5)]))
            .unwrap();
        let out = g.finish().unwrap();
        let names = super::super::columns::names(&out, "Name").unwrap();
        let got: Vec<&str> = (0..out.num_rows()).map(|i| names.value(i)).collect();
        assert_eq!(got, ["b", "a", "b", "c", "a"]);
        let d = out.column(0).as_dictionary::<Int32Type>();
        assert_eq!(d.values().len(), 3, "each name once");
        let ids = out.column(1).as_primitive::<Int64Type>();
        assert_eq!(
            ids.iter().collect::<Vec<_>>(),
            [Some(1), None, Some(3), Some(4), Some(5)]
        );
        // A batch without the columns is refused, not misread.
        let mut g = Gather::new(schema.clone(), 0).unwrap();
        let other = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)])),
            vec![Arc::new(arrow::array::Int64Array::from(vec![1]))],
        )
        .unwrap();
        assert!(g.push(&other).is_err());
    }
}
