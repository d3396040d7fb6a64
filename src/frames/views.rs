//! Typed views of the module and thunk frames: every column of [`super::gpu::MODULE_SCHEMA`]
//! and [`super::gpu::THUNK_SCHEMA`] that the analyses read, as the array it is, so that no
//! analysis looks columns up by name. The frames are made by this crate with those schemas
//! (and verified when read back from the store), so a missing or mistyped column is a bug.

use arrow::array::{
    AsArray, BooleanArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
};
use arrow::datatypes::{Float64Type, Int32Type, Int64Type};

use super::gpu::{
    BUS_BW, COLLECTIVE, COMMAND_BUFFER, COMMUNICATION, DEVICE, MESSAGE_SIZE, NAME, NUM_THUNKS,
    OP_NAME, ORIG_DUR, ORIG_START, PROGRAM_EXECUTION, PROGRAM_ID, PROGRAM_NAME, PROJ_DUR,
    PROJ_DUR_HIDDEN, PROJ_START, THUNK_EXECUTION, THUNK_INDEX,
};
use super::strings::{Strings, strings};

fn col<'a>(b: &'a RecordBatch, name: &str) -> &'a arrow::array::ArrayRef {
    b.column_by_name(name)
        .unwrap_or_else(|| panic!("a GPU frame without its column {name} (a bug)"))
}

fn i32s<'a>(b: &'a RecordBatch, name: &str) -> &'a Int32Array {
    col(b, name).as_primitive::<Int32Type>()
}

fn i64s<'a>(b: &'a RecordBatch, name: &str) -> &'a Int64Array {
    col(b, name).as_primitive::<Int64Type>()
}

/// The columns of a module frame: one row per module execution.
pub struct ModuleView<'a> {
    pub rows: usize,
    pub program_id: Strings<'a>,
    pub program_name: &'a StringArray,
    pub program_execution: &'a Int32Array,
    pub device: &'a Int32Array,
    /// Projected start and duration [ns].
    pub start: &'a Int64Array,
    pub dur: &'a Int64Array,
    /// The host's range (the launch of the execution, on its thread): start and duration
    /// [ns]; null where unknown.
    pub orig_start: &'a Int64Array,
    pub orig_dur: &'a Int64Array,
    pub num_thunks: &'a Int32Array,
}

impl<'a> ModuleView<'a> {
    pub fn of(b: &'a RecordBatch) -> ModuleView<'a> {
        ModuleView {
            rows: b.num_rows(),
            program_id: strings(col(b, PROGRAM_ID)),
            program_name: col(b, PROGRAM_NAME).as_string::<i32>(),
            program_execution: i32s(b, PROGRAM_EXECUTION),
            device: i32s(b, DEVICE),
            start: i64s(b, PROJ_START),
            dur: i64s(b, PROJ_DUR),
            orig_start: i64s(b, ORIG_START),
            orig_dur: i64s(b, ORIG_DUR),
            num_thunks: i32s(b, NUM_THUNKS),
        }
    }
}

/// The columns of a thunk frame (or of its communication rows, the same schema): one row per
/// thunk execution.
pub struct ThunkView<'a> {
    pub rows: usize,
    pub program_id: Strings<'a>,
    pub program_execution: &'a Int32Array,
    pub device: &'a Int32Array,
    pub thunk_index: &'a Int32Array,
    pub thunk_execution: &'a Int32Array,
    /// The thunk's HLO instruction name.
    pub name: Strings<'a>,
    /// JAX's op name of the instruction (null without HLO).
    pub op_name: Strings<'a>,
    /// Projected start, duration and the part of it hidden under other work [ns].
    pub start: &'a Int64Array,
    pub dur: &'a Int64Array,
    pub dur_hidden: &'a Int64Array,
    pub communication: &'a BooleanArray,
    /// The command buffer the thunk ran in (null outside one).
    pub command_buffer: Strings<'a>,
    /// A collective's kind, message size [B] and bus bandwidth [GB/s] (null for others).
    pub collective: Strings<'a>,
    pub message_size: &'a Int64Array,
    pub bus_bw: &'a Float64Array,
}

impl<'a> ThunkView<'a> {
    pub fn of(b: &'a RecordBatch) -> ThunkView<'a> {
        ThunkView {
            rows: b.num_rows(),
            program_id: strings(col(b, PROGRAM_ID)),
            program_execution: i32s(b, PROGRAM_EXECUTION),
            device: i32s(b, DEVICE),
            thunk_index: i32s(b, THUNK_INDEX),
            thunk_execution: i32s(b, THUNK_EXECUTION),
            name: strings(col(b, NAME)),
            op_name: strings(col(b, OP_NAME)),
            start: i64s(b, PROJ_START),
            dur: i64s(b, PROJ_DUR),
            dur_hidden: i64s(b, PROJ_DUR_HIDDEN),
            communication: col(b, COMMUNICATION).as_boolean(),
            command_buffer: strings(col(b, COMMAND_BUFFER)),
            collective: strings(col(b, COLLECTIVE)),
            message_size: i64s(b, MESSAGE_SIZE),
            bus_bw: col(b, BUS_BW).as_primitive::<Float64Type>(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frames::gpu::{MODULE_SCHEMA, THUNK_SCHEMA};

    #[test]
    fn empty_frames_of_the_schemas_have_views() {
        let m = RecordBatch::new_empty(MODULE_SCHEMA.clone());
        assert_eq!(ModuleView::of(&m).rows, 0);
        let t = RecordBatch::new_empty(THUNK_SCHEMA.clone());
        let v = ThunkView::of(&t);
        assert_eq!((v.rows, v.dur.len(), v.communication.len()), (0, 0, 0));
    }
}
