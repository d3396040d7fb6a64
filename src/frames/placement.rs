//! Devices of processes that name none: the GPU frames of a process are built from its own
//! profile alone, so that they are the same in every run it is part of; rows whose device
//! only the process's position in its run can give carry a placeholder until then.

use super::gpu::DEVICE;
use anyhow::Result;
use arrow::array::RecordBatch;
use std::sync::Arc;

/// The device of rows launched by a process that names no device on its launching threads:
/// a placeholder, replaced by the process's position in its run ([`place`]).
pub const UNPLACED: i32 = -1;

/// Whether any frame among `tables` has rows on the [`UNPLACED`] device.
pub fn has_unplaced(tables: &[(String, RecordBatch)]) -> bool {
    use arrow::array::AsArray;
    tables.iter().any(|(_, b)| {
        // Only frames' 32-bit device columns (see [`place`]).
        b.column_by_name(DEVICE).is_some_and(|c| {
            c.as_primitive_opt::<arrow::datatypes::Int32Type>()
                .is_some_and(|d| d.values().contains(&UNPLACED))
        })
    })
}

/// `tables` with the [`UNPLACED`] device replaced by `device`.
pub fn place(tables: &[(String, RecordBatch)], device: i32) -> Result<Vec<(String, RecordBatch)>> {
    use arrow::array::{AsArray, Int32Array};
    tables
        .iter()
        .map(|(name, b)| {
            // Frames name devices in 32-bit columns; a table that names them otherwise (the
            // memory-usage events' CUDA ids) is not placed.
            let Some(devices) = b.schema().index_of(DEVICE).ok().and_then(|i| {
                Some((
                    i,
                    b.column(i)
                        .as_primitive_opt::<arrow::datatypes::Int32Type>()?,
                ))
            }) else {
                return Ok((name.clone(), b.clone()));
            };
            let (i, devices) = devices;
            let placed: Int32Array = devices.unary(|d| if d == UNPLACED { device } else { d });
            let mut columns = b.columns().to_vec();
            columns[i] = Arc::new(placed);
            Ok((name.clone(), RecordBatch::try_new(b.schema(), columns)?))
        })
        .collect()
}
