//! The normalized push/pop table: its columns, and the names the sources give them.

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::sync::Arc;

/// Range start, ns.
pub const START: &str = "Start";
/// Range end, ns.
pub const END: &str = "End";
/// `End - Start`, ns.
pub const DURATION: &str = "Duration";
/// Sum of the durations of the direct children, ns.
pub const DUR_CHILD: &str = "DurChild";
/// `Duration - DurChild`, ns.
pub const DUR_NON_CHILD: &str = "DurNonChild";
/// Range name, with its domain prefix (`TSL:XlaCompile:#...#`, `NCCL:ncclGroupEnd`).
pub const NAME: &str = "Name";
/// Process id; null where the source does not record it (the parquet variant).
pub const PID: &str = "PID";
/// Thread id.
pub const TID: &str = "TID";
/// Nesting level, 0 for roots.
pub const LVL: &str = "Lvl";
/// Number of direct children.
pub const NUM_CHILD: &str = "NumChild";
/// Identity of the range.
pub const RANGE_ID: &str = "RangeId";
/// `RangeId` of the enclosing range on the same thread; null for roots.
pub const PARENT_ID: &str = "ParentId";
/// `:root:...:self`.
pub const RANGE_STACK: &str = "RangeStack";

/// The normalized push/pop schema.
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(fields()))
}

/// The fields of [`schema`], for schemas that extend it.
pub fn fields() -> Vec<Field> {
    vec![
        Field::new(START, DataType::Int64, false),
        Field::new(END, DataType::Int64, false),
        Field::new(DURATION, DataType::Int64, false),
        Field::new(DUR_CHILD, DataType::Int64, false),
        Field::new(DUR_NON_CHILD, DataType::Int64, false),
        Field::new(NAME, DataType::Utf8, false),
        Field::new(PID, DataType::Int64, true),
        Field::new(TID, DataType::Int64, false),
        Field::new(LVL, DataType::Int32, false),
        Field::new(NUM_CHILD, DataType::Int32, false),
        Field::new(RANGE_ID, DataType::Int64, false),
        Field::new(PARENT_ID, DataType::Int64, true),
        Field::new(RANGE_STACK, DataType::Utf8, false),
    ]
}

/// Column names the sources use for each normalized column, in order of preference.
pub(super) fn aliases(column: &str) -> &'static [&'static str] {
    match column {
        START => &["Start (ns)", "Start"],
        END => &["End (ns)", "End"],
        DURATION => &["Duration (ns)", "Duration"],
        DUR_CHILD => &["DurChild (ns)", "DurChild"],
        DUR_NON_CHILD => &["DurNonChild (ns)", "DurNonChild"],
        NAME => &["Name", "Text"],
        PID => &["PID"],
        TID => &["TID"],
        LVL => &["Lvl", "Stack Level"],
        NUM_CHILD => &["NumChild", "Children Count"],
        RANGE_ID => &["RangeId", "Range ID"],
        PARENT_ID => &["ParentId", "Parent ID"],
        RANGE_STACK => &["RangeStack", "Range Stack"],
        _ => &[],
    }
}

pub(super) const ALL_COLUMNS: [&str; 13] = [
    START,
    END,
    DURATION,
    DUR_CHILD,
    DUR_NON_CHILD,
    NAME,
    PID,
    TID,
    LVL,
    NUM_CHILD,
    RANGE_ID,
    PARENT_ID,
    RANGE_STACK,
];

/// The normalized column a source column name stands for, if any.
pub(super) fn normalized_name(source: &str) -> Option<&'static str> {
    if source == "Domain" {
        return Some("Domain");
    }
    ALL_COLUMNS
        .into_iter()
        .find(|c| aliases(c).contains(&source))
}
