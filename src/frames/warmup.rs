//! Warm-up split (docs/design.md, "Formulas"): a program whose compile was seen has execution 0 as
//! initialisation; when the profile has communication, one more execution of every program
//! is initialisation (so a program compiled outside the profile loses its execution 0, one
//! compiled inside loses 0 and 1). If that leaves a frame with no steady-state rows,
//! everything in it counts as steady state.

use super::gpu::{COMMUNICATION, PROGRAM_EXECUTION, PROGRAM_ID, UNKNOWN_PROGRAM};
use anyhow::Result;
use arrow::array::{AsArray, BooleanArray, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::datatypes::Int32Type;
use std::collections::BTreeSet;

pub struct Steady {
    pub module: RecordBatch,
    pub thunk: RecordBatch,
    /// The steady-state communication thunks.
    pub communication: RecordBatch,
    pub notes: Vec<String>,
}

fn split(
    frame: &RecordBatch,
    what: &str,
    compiled: &BTreeSet<String>,
    extra: i32,
    notes: &mut Vec<String>,
) -> Result<RecordBatch> {
    let prog = crate::frames::strings::strings(frame.column_by_name(PROGRAM_ID).unwrap());
    let exec = frame
        .column_by_name(PROGRAM_EXECUTION)
        .unwrap()
        .as_primitive::<Int32Type>();
    let known: Vec<bool> = (0..frame.num_rows())
        .map(|i| prog.value(i) != UNKNOWN_PROGRAM)
        .collect();
    let steady: Vec<bool> = (0..frame.num_rows())
        .map(|i| {
            let init = compiled.contains(prog.value(i)) as i32 + extra;
            known[i] && exec.value(i) >= init
        })
        .collect();
    let mask = if frame.num_rows() > 0 && !steady.iter().any(|&s| s) && known.iter().any(|&k| k) {
        notes.push(format!(
            "could not identify steady-state execution in the {what} frame; treating everything as steady state (profile more executions)"
        ));
        BooleanArray::from(known)
    } else {
        BooleanArray::from(steady)
    };
    // Steady rows in one run (everything, or the executions after the warm-up of a frame of
    // one program, whose rows are in execution order) are a slice of the frame, not a copy.
    let count = mask.true_count();
    let first = (0..mask.len()).find(|&i| mask.value(i)).unwrap_or(0);
    if count == 0 || (first + count <= mask.len() && (first..first + count).all(|i| mask.value(i)))
    {
        return Ok(frame.slice(first, count));
    }
    Ok(filter_record_batch(frame, &mask)?)
}

/// The steady state (what follows the warm-up) of one process's frames within a run:
/// `compiled` and `has_comm` are the whole run's (the programs compiled in any process's
/// profile; whether any communicates).
pub fn steady_state_in(
    module: &RecordBatch,
    thunk: &RecordBatch,
    compiled: &BTreeSet<String>,
    has_comm: bool,
) -> Result<Steady> {
    let extra = has_comm as i32;
    let mut notes = Vec::new();
    let module = split(module, "module", compiled, extra, &mut notes)?;
    let thunk = split(thunk, "thunk", compiled, extra, &mut notes)?;
    let comm_mask = thunk
        .column_by_name(COMMUNICATION)
        .unwrap()
        .as_boolean()
        .clone();
    let communication = filter_record_batch(&thunk, &comm_mask)?;
    Ok(Steady {
        module,
        thunk,
        communication,
        notes,
    })
}
