//! How node values are stored: Arrow IPC for tables, JSON for everything else.

use anyhow::{Context, Result, bail, ensure};
use arrow::array::RecordBatch;
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// A value that a node can store.
pub trait Value: Sized + Send + Sync + 'static {
    fn encode(&self) -> Result<Vec<u8>>;
    fn decode(bytes: &[u8]) -> Result<Self>;
    /// [`Value::decode`] of a stored payload the value may keep parts of instead of copying
    /// them (large texts: see [`Text`]).
    fn decode_shared(bytes: bytes::Bytes) -> Result<Self> {
        Self::decode(&bytes)
    }
    /// [`Value::encode`] of a value not used after: its stored bytes and the value to keep,
    /// which may be the value read back from them ([`Value::decode_shared`]) so that a large
    /// value and its stored form are not both held ([`Tables`] lets each column go once it
    /// is written).
    fn encode_owned(self) -> Result<(bytes::Bytes, Self)> {
        let bytes = self.encode()?;
        Ok((bytes.into(), self))
    }
}

/// UTF-8 text that can share the bytes it was read from (a stored value's payload) rather
/// than copy them: an analysis's output files are megabytes, read back on every warm run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Text(bytes::Bytes);

impl Text {
    /// The text in `bytes`, checked to be UTF-8.
    pub fn from_shared(bytes: bytes::Bytes) -> Result<Text> {
        std::str::from_utf8(&bytes)?;
        Ok(Text(bytes))
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("checked when made")
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The bytes, shared.
    pub fn bytes(&self) -> bytes::Bytes {
        self.0.clone()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text(bytes::Bytes::from(s))
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        Text(bytes::Bytes::copy_from_slice(s.as_bytes()))
    }
}

impl Serialize for Text {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Text, D::Error> {
        String::deserialize(d).map(Text::from)
    }
}

/// Marker for values stored as JSON.
pub trait JsonValue: Serialize + DeserializeOwned + Send + Sync + 'static {}

impl<T: JsonValue> Value for T {
    fn encode(&self) -> Result<Vec<u8>> {
        Ok(serde_json::to_vec(self)?)
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        Ok(serde_json::from_slice(bytes)?)
    }
}

impl JsonValue for String {}
impl JsonValue for bool {}
impl JsonValue for Vec<String> {}
impl JsonValue for serde_json::Value {}

/// Named Arrow tables, stored as one length-prefixed Arrow IPC stream each.
#[derive(Clone, Debug, Default)]
pub struct Tables(pub Vec<(String, RecordBatch)>);

impl Tables {
    pub fn get(&self, name: &str) -> Option<&RecordBatch> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, b)| b)
    }
}

#[cfg(test)]
pub fn batch_to_ipc(batch: &RecordBatch) -> Result<Vec<u8>> {
    write_ipc(batch, Default::default())
}

/// [`batch_to_ipc`] with LZ4-compressed buffers (read back by [`batch_from_ipc`]): for large
/// tables of repetitive strings that travel through the shared cache.
pub fn batch_to_ipc_lz4(batch: &RecordBatch) -> Result<Vec<u8>> {
    use arrow::ipc::{CompressionType, writer::IpcWriteOptions};
    let options =
        IpcWriteOptions::default().try_with_compression(Some(CompressionType::LZ4_FRAME))?;
    write_ipc(batch, options)
}

fn write_ipc(batch: &RecordBatch, options: arrow::ipc::writer::IpcWriteOptions) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    write_ipc_into(&mut buf, batch, options)?;
    Ok(buf)
}

fn write_ipc_into(
    out: &mut Vec<u8>,
    batch: &RecordBatch,
    options: arrow::ipc::writer::IpcWriteOptions,
) -> Result<()> {
    let mut w = StreamWriter::try_new_with_options(out, &batch.schema(), options)?;
    w.write(batch)?;
    w.finish()?;
    Ok(())
}

/// `batches` as one batch: the batch itself when there is one, else their concatenation.
pub fn one_batch(
    schema: &arrow::datatypes::SchemaRef,
    mut batches: Vec<RecordBatch>,
) -> Result<RecordBatch, arrow::error::ArrowError> {
    match batches.len() {
        1 => Ok(batches.pop().expect("one batch")),
        _ => arrow::compute::concat_batches(schema, &batches),
    }
}

pub fn batch_from_ipc(bytes: &[u8]) -> Result<RecordBatch> {
    let mut r = StreamReader::try_new(bytes, None)?;
    let schema = r.schema();
    let batches: Vec<RecordBatch> = r.by_ref().collect::<Result<_, _>>()?;
    Ok(one_batch(&schema, batches)?)
}

impl Value for Tables {
    fn encode(&self) -> Result<Vec<u8>> {
        encode_tables(self.0.clone())
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        Self::decode_shared(bytes::Bytes::copy_from_slice(bytes))
    }

    /// The tables written column by column, each column let go once written, and read back
    /// from the stored bytes.
    fn encode_owned(self) -> Result<(bytes::Bytes, Self)> {
        let bytes = bytes::Bytes::from(encode_tables(self.0)?);
        let tables = Self::decode_shared(bytes.clone())?;
        Ok((bytes, tables))
    }

    /// The tables' columns are the payload's own bytes, not copies (a process's frames are
    /// most of a run's memory: docs/design.md, "Bounded memory"); a buffer that does not lie
    /// at a multiple of its alignment in memory is copied.
    fn decode_shared(bytes: bytes::Bytes) -> Result<Self> {
        let mut pos = 0usize;
        let take = |pos: &mut usize, n: usize| -> Result<bytes::Bytes> {
            let end = pos.checked_add(n).context("bad length")?;
            ensure!(end <= bytes.len(), "truncated entry");
            let s = bytes.slice(*pos..end);
            *pos = end;
            Ok(s)
        };
        let u32_at = |pos: &mut usize| -> Result<u32> {
            Ok(u32::from_le_bytes(take(pos, 4)?[..].try_into()?))
        };
        let u64_at = |pos: &mut usize| -> Result<u64> {
            Ok(u64::from_le_bytes(take(pos, 8)?[..].try_into()?))
        };
        let stream = |pos: &mut usize| -> Result<RecordBatch> {
            let pad = pos.next_multiple_of(8) - *pos;
            take(pos, pad)?;
            let len = usize::try_from(u64_at(pos)?)?;
            batch_from_ipc_buffer(take(pos, len)?.into())
        };
        let count = u32_at(&mut pos)? as usize;
        let mut tables = Vec::with_capacity(count.min(1 << 16));
        for _ in 0..count {
            let nlen = u32_at(&mut pos)? as usize;
            let name = String::from_utf8(take(&mut pos, nlen)?.to_vec())?;
            let rows = usize::try_from(u64_at(&mut pos)?)?;
            let schema = stream(&mut pos)?.schema();
            let mut columns = Vec::with_capacity(schema.fields().len());
            for field in schema.fields() {
                let column = stream(&mut pos)?;
                ensure!(
                    column.num_columns() == 1 && column.schema().field(0) == field.as_ref(),
                    "a stored column is not its table's"
                );
                columns.push(column.column(0).clone());
            }
            let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(rows));
            let table = RecordBatch::try_new_with_options(schema, columns, &options)?;
            tables.push((name, table));
        }
        ensure!(pos == bytes.len(), "trailing bytes in entry");
        Ok(Tables(tables))
    }
}

/// The layout [`Tables::decode_shared`] reads: the number of tables, then each table's name,
/// row count, schema (an IPC stream of no rows) and each column as an IPC stream of its own,
/// so that a table is written a column at a time (when the tables are owned, a column's
/// memory goes as its bytes are written). Each stream starts at a multiple of 8 bytes of the
/// entry, its length before it, so that its buffers can be used where they lie when read
/// back. Written in place into one buffer sized from the tables' memory, not grown.
fn encode_tables(tables: Vec<(String, RecordBatch)>) -> Result<Vec<u8>> {
    const SLACK: usize = 4096;
    let size: usize = tables
        .iter()
        .map(|(name, batch)| {
            16 + name.len() + batch.get_array_memory_size() + SLACK * (2 + batch.num_columns())
        })
        .sum();
    let mut out = Vec::with_capacity(4 + size);
    let stream = |out: &mut Vec<u8>, batch: &RecordBatch| -> Result<()> {
        out.resize(out.len().next_multiple_of(8), 0);
        let at = out.len();
        out.extend_from_slice(&0u64.to_le_bytes());
        write_ipc_into(out, batch, Default::default())?;
        let len = (out.len() - at - 8) as u64;
        out[at..at + 8].copy_from_slice(&len.to_le_bytes());
        Ok(())
    };
    out.extend_from_slice(&(tables.len() as u32).to_le_bytes());
    for (name, batch) in tables {
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        let (schema, columns, rows) = batch.into_parts();
        out.extend_from_slice(&(rows as u64).to_le_bytes());
        stream(&mut out, &RecordBatch::new_empty(schema.clone()))?;
        for (field, column) in schema.fields().iter().zip(columns) {
            let one = arrow::datatypes::Schema::new(vec![field.clone()]);
            stream(&mut out, &RecordBatch::try_new(one.into(), vec![column])?)?;
        }
    }
    Ok(out)
}

/// The batches of an IPC stream held in `buffer`, as one batch whose columns slice the buffer.
fn batch_from_ipc_buffer(mut buffer: arrow::buffer::Buffer) -> Result<RecordBatch> {
    let mut decoder = arrow::ipc::reader::StreamDecoder::new();
    let mut batches = Vec::new();
    let mut schema = None;
    while !buffer.is_empty() {
        if let Some(b) = decoder.decode(&mut buffer)? {
            schema.get_or_insert_with(|| b.schema());
            batches.push(b);
        }
    }
    decoder.finish()?;
    match schema {
        Some(schema) => Ok(one_batch(&schema, batches)?),
        // A stream of no batches: its schema alone.
        None => bail!("a stored table without a batch"),
    }
}

/// Named files (e.g. the parquet members of an archive), stored as they are. The bytes are
/// shared: with the archive entries written from them, and with the stored payload they
/// were read from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Files(pub Vec<(String, bytes::Bytes)>);

impl Files {
    pub fn get(&self, name: &str) -> Option<&bytes::Bytes> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, b)| b)
    }
}

impl Value for Files {
    fn encode(&self) -> Result<Vec<u8>> {
        Ok(encode_named(
            self.0.iter().map(|(n, b)| (n.as_str(), &b[..])),
        ))
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        Self::decode_shared(bytes::Bytes::copy_from_slice(bytes))
    }

    fn decode_shared(bytes: bytes::Bytes) -> Result<Self> {
        Ok(Files(
            decode_named(&bytes)?
                .into_iter()
                .map(|(n, b)| (n, bytes.slice_ref(b)))
                .collect(),
        ))
    }

    /// The files kept are those of the stored bytes: the two are not both held.
    fn encode_owned(self) -> Result<(bytes::Bytes, Self)> {
        let bytes = bytes::Bytes::from(self.encode()?);
        drop(self);
        Ok((bytes.clone(), Files::decode_shared(bytes)?))
    }
}

/// `count, (name length, name, blob length, blob)*`, little-endian.
fn encode_named<'a>(items: impl ExactSizeIterator<Item = (&'a str, &'a [u8])>) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(items.len() as u32).to_le_bytes());
    for (name, blob) in items {
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(blob.len() as u64).to_le_bytes());
        out.extend_from_slice(blob);
    }
    out
}

fn decode_named(bytes: &[u8]) -> Result<Vec<(String, &[u8])>> {
    let mut pos = 0usize;
    let mut take = |n: usize| -> Result<&[u8]> {
        let s = bytes
            .get(pos..pos.checked_add(n).context("bad length")?)
            .context("truncated entry")?;
        pos += n;
        Ok(s)
    };
    let count = u32::from_le_bytes(take(4)?.try_into()?) as usize;
    let mut out = Vec::with_capacity(count.min(1 << 16));
    for _ in 0..count {
        let nlen = u32::from_le_bytes(take(4)?.try_into()?) as usize;
        let name = String::from_utf8(take(nlen)?.to_vec())?;
        let blen = u64::from_le_bytes(take(8)?.try_into()?) as usize;
        out.push((name, take(blen)?));
    }
    if pos != bytes.len() {
        bail!("trailing bytes in entry");
    }
    Ok(out)
}

/// Raw bytes (e.g. a compiled descriptor set).
#[derive(Clone, Debug)]
pub struct Bytes(pub Vec<u8>);

impl Value for Bytes {
    fn encode(&self) -> Result<Vec<u8>> {
        Ok(self.0.clone())
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        Ok(Bytes(bytes.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use std::sync::Arc;

    #[test]
    fn tables_round_trip() {
        let b = RecordBatch::try_from_iter(vec![
            ("a", Arc::new(Int64Array::from(vec![1, 2])) as _),
            ("s", Arc::new(StringArray::from(vec!["x", "y"])) as _),
        ])
        .unwrap();
        let t = Tables(vec![
            ("one".into(), b.clone()),
            ("two".into(), b.slice(1, 1)),
        ]);
        let back = Tables::decode(&t.encode().unwrap()).unwrap();
        assert_eq!(back.get("one").unwrap(), &b);
        assert_eq!(back.get("two").unwrap().num_rows(), 1);
        let enc = t.encode().unwrap();
        assert!(Tables::decode(&enc[..enc.len() - 3]).is_err());
        // Written in place, the bytes are: the count, then each table's name, row count, and
        // its schema and each of its columns as IPC streams, each at a multiple of 8 bytes
        // with its length before it.
        let mut named = (t.0.len() as u32).to_le_bytes().to_vec();
        let stream = |named: &mut Vec<u8>, b: &RecordBatch| {
            named.resize(named.len().next_multiple_of(8), 0);
            let ipc = batch_to_ipc(b).unwrap();
            named.extend_from_slice(&(ipc.len() as u64).to_le_bytes());
            named.extend_from_slice(&ipc);
        };
        for (n, b) in &t.0 {
            named.extend_from_slice(&(n.len() as u32).to_le_bytes());
            named.extend_from_slice(n.as_bytes());
            named.extend_from_slice(&(b.num_rows() as u64).to_le_bytes());
            stream(&mut named, &RecordBatch::new_empty(b.schema()));
            for i in 0..b.num_columns() {
                stream(&mut named, &b.project(&[i]).unwrap());
            }
        }
        assert_eq!(enc, named);
        // Kept after storing, the tables are the ones read back from the stored bytes.
        let (stored, kept) = t.clone().encode_owned().unwrap();
        assert_eq!(stored, enc);
        assert_eq!(kept.get("one").unwrap(), &b);
        let values = kept.get("one").unwrap().column(0).to_data().buffers()[0].as_ptr() as usize;
        let range = stored.as_ptr() as usize..stored.as_ptr() as usize + stored.len();
        assert!(range.contains(&values), "a kept column was copied");
        // A table of no columns keeps its rows.
        let empty = RecordBatch::try_new_with_options(
            Arc::new(arrow::datatypes::Schema::empty()),
            vec![],
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(3)),
        )
        .unwrap();
        let back = Tables::decode(&Tables(vec![("e".into(), empty)]).encode().unwrap()).unwrap();
        assert_eq!(back.get("e").unwrap().num_rows(), 3);
        // Read back from stored bytes, the columns are those bytes, not copies.
        let stored = bytes::Bytes::from(enc);
        let back = Tables::decode_shared(stored.clone()).unwrap();
        let values = back.get("one").unwrap().column(0).to_data().buffers()[0].as_ptr() as usize;
        let range = stored.as_ptr() as usize..stored.as_ptr() as usize + stored.len();
        assert!(range.contains(&values), "a decoded column was copied");
    }

    #[test]
    fn files_round_trip() {
        let f = Files(vec![
            ("a.parquet".into(), vec![1, 2, 3].into()),
            ("b".into(), bytes::Bytes::new()),
        ]);
        let enc = f.encode().unwrap();
        assert_eq!(Files::decode(&enc).unwrap(), f);
        assert!(Files::decode(&enc[..enc.len() - 1]).is_err());
        assert!(Files::decode(&[0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0]).is_err());
        // What is kept after storing is read in place from the stored bytes.
        let (stored, kept) = f.clone().encode_owned().unwrap();
        assert_eq!(kept, f);
        let range = stored.as_ptr() as usize..stored.as_ptr() as usize + stored.len();
        let a = kept.get("a.parquet").unwrap();
        assert!(range.contains(&(a.as_ptr() as usize)), "a file was copied");
    }
}
