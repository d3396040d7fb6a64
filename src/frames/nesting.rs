//! Impossible traces: a thunk outside its module on the GPU (docs/design.md, "Hostile
//! inputs").

use anyhow::Result;
use arrow::array::Int64Array;

/// How far (ns) a thunk's projected range may reach outside its module's. The projection
/// makes a range span the GPU work of the ranges inside it, so a thunk lies within its module
/// by construction; this leaves room only for rounding (docs/hostile-inputs.md).
pub const NESTING_SLACK_NS: i64 = 1_000;

/// The columns [`check`] reads.
pub(super) struct View<'a> {
    pub name: &'a crate::formats::columns::Names,
    pub range_id: &'a Int64Array,
    pub start: &'a Int64Array,
    pub dur: &'a Int64Array,
    pub is_thunk: &'a [bool],
    pub module_of: &'a [u32],
}

/// Every thunk kept must lie within its module's projected range (with
/// [`NESTING_SLACK_NS`]); a trace where one does not is refused, naming the first such range
/// and how many there are: its times cannot all be right, and the analyses would subtract them
/// into negative idle time.
pub(super) fn check(v: &View) -> Result<()> {
    let mut bad = 0usize;
    let mut first = None;
    for r in 0..v.is_thunk.len() {
        if !v.is_thunk[r] {
            continue;
        }
        let m = v.module_of[r] as usize;
        let (ms, me) = (
            v.start.value(m),
            v.start.value(m).saturating_add(v.dur.value(m)),
        );
        let (ts, te) = (
            v.start.value(r),
            v.start.value(r).saturating_add(v.dur.value(r)),
        );
        let out = (ms - ts).max(te - me);
        if out > NESTING_SLACK_NS {
            bad += 1;
            first.get_or_insert((r, m, out));
        }
    }
    if let Some((r, m, out)) = first {
        anyhow::bail!(
            "an impossible trace: thunk ranges lie outside their module's range on the GPU ({bad} in all; the first, range {} {:?}, {} ns from {} to {}, reaches {out} ns outside range {} {:?}, {} to {})",
            v.range_id.value(r),
            v.name.value(r),
            v.dur.value(r),
            v.start.value(r),
            v.start.value(r).saturating_add(v.dur.value(r)),
            v.range_id.value(m),
            v.name.value(m),
            v.start.value(m),
            v.start.value(m).saturating_add(v.dur.value(m)),
        );
    }
    Ok(())
}
