use super::events::NVTX_DOMAIN_CREATE;
use super::*;
use crate::formats::nsys_export::testing;
use arrow::array::AsArray;
use arrow::array::StringArray;
use arrow::datatypes::Int64Type;
use std::collections::HashMap;
use std::path::Path;

mod real_reports;
// ---- synthetic tables -------------------------------------------------------------

const PROC: i64 = (1 << 48) | (7 << 24);
const T1: i64 = PROC | 11;
const T2: i64 = PROC | 12;

/// (start, end, eventType, text, domainId, globalTid)
type Ev = (i64, Option<i64>, i64, &'static str, i64, i64);

fn tables(events: &[Ev], api: &[(i64, i64, i64, i64)], ops: &[(i64, i64, i64)]) -> ExportTables {
    let nvtx = RecordBatch::try_from_iter([
        (
            "start",
            Arc::new(Int64Array::from_iter_values(events.iter().map(|e| e.0))) as ArrayRef,
        ),
        (
            "end",
            Arc::new(Int64Array::from_iter(events.iter().map(|e| e.1))),
        ),
        (
            "eventType",
            Arc::new(Int64Array::from_iter_values(events.iter().map(|e| e.2))),
        ),
        (
            "text",
            Arc::new(StringArray::from_iter_values(events.iter().map(|e| e.3))),
        ),
        ("textId", Arc::new(Int64Array::new_null(events.len()))),
        (
            "domainId",
            Arc::new(Int64Array::from_iter_values(events.iter().map(|e| e.4))),
        ),
        (
            "globalTid",
            Arc::new(Int64Array::from_iter_values(events.iter().map(|e| e.5))),
        ),
        ("endGlobalTid", Arc::new(Int64Array::new_null(events.len()))),
    ])
    .unwrap();
    // api: (start, end, correlationId, globalTid)
    let runtime = RecordBatch::try_from_iter([
        (
            "start",
            Arc::new(Int64Array::from_iter_values(api.iter().map(|a| a.0))) as ArrayRef,
        ),
        (
            "end",
            Arc::new(Int64Array::from_iter_values(api.iter().map(|a| a.1))),
        ),
        (
            "correlationId",
            Arc::new(Int64Array::from_iter_values(api.iter().map(|a| a.2))),
        ),
        (
            "globalTid",
            Arc::new(Int64Array::from_iter_values(api.iter().map(|a| a.3))),
        ),
    ])
    .unwrap();
    // ops: (start, end, correlationId)
    let kernel = RecordBatch::try_from_iter([
        (
            "start",
            Arc::new(Int64Array::from_iter_values(ops.iter().map(|o| o.0))) as ArrayRef,
        ),
        (
            "end",
            Arc::new(Int64Array::from_iter_values(ops.iter().map(|o| o.1))),
        ),
        (
            "correlationId",
            Arc::new(Int64Array::from_iter_values(ops.iter().map(|o| o.2))),
        ),
        (
            "globalPid",
            Arc::new(Int64Array::from(vec![PROC; ops.len()])),
        ),
    ])
    .unwrap();
    ExportTables {
        nvtx_events: nvtx,
        string_ids: None,
        runtime: Some(runtime),
        kernel: Some(kernel),
        memcpy: None,
        memset: None,
        thread_names: None,
        target_info_gpu: None,
        target_info_nvtx_cuda_device: None,
        target_info_system_env: None,
        memory_usage: None,
    }
}

fn ints(b: &RecordBatch, c: &str) -> Vec<Option<i64>> {
    b.column_by_name(c)
        .unwrap()
        .as_primitive::<Int64Type>()
        .iter()
        .collect()
}

fn strs(b: &RecordBatch, c: &str) -> Vec<String> {
    let text = arrow::compute::cast(b.column_by_name(c).unwrap(), &DataType::Utf8).unwrap();
    text.as_string::<i32>()
        .iter()
        .map(|s| s.unwrap().to_string())
        .collect()
}

#[test]
fn projects_nested_ranges() {
    let events: &[Ev] = &[
        (0, None, NVTX_DOMAIN_CREATE, "TSL", 1, T1),
        (10, Some(100), NVTX_PUSH_POP, "outer", 1, T1), // id 2
        (20, Some(40), NVTX_PUSH_POP, "a", 1, T1),      // id 3
        (50, Some(90), NVTX_PUSH_POP, "b", 0, T1),      // id 4, default domain
        (60, Some(70), NVTX_PUSH_POP, "c", 1, T1),      // id 5
        (10, Some(100), NVTX_PUSH_POP, "other", 1, T2), // id 6, other thread
        (5, Some(200), NVTX_START_END, "se", 1, T1),    // id 7, encloses all of T1
        (91, Some(94), NVTX_PUSH_POP, "d", 1, T1),      // id 8, no ops
    ];
    let api = &[
        (21, 25, 100, T1),
        (30, 35, 101, T1),
        (61, 65, 102, T1),
        (95, 99, 103, T1), // directly in "outer"
        (41, 45, 104, T2), // in "other"
        (150, 160, 105, T1),
        (92, 93, 106, T1), // in "d", but without GPU work
    ];
    let ops = &[
        (1000, 1100, 100),
        (1200, 1300, 101),
        (1250, 1280, 101), // second op of the same call
        (1400, 1500, 102),
        (1600, 1700, 103),
        (900, 950, 104),
        (2000, 2100, 105),
        (5000, 5100, 999), // no call
    ];
    let t = tables(events, api, ops);
    let p = project(&t).unwrap();
    assert_eq!(ints(&p, "RangeId"), [2, 3, 4, 5, 6, 7].map(Some));
    assert_eq!(
        strs(&p, "Name"),
        ["TSL:outer", "TSL:a", "b", "TSL:c", "TSL:other", "TSL:se"]
    );
    assert_eq!(ints(&p, "NumGPUOps"), [4, 2, 1, 1, 1, 5].map(Some));
    assert_eq!(
        ints(&p, "Projected Start"),
        [1000, 1000, 1400, 1400, 900, 1000].map(Some)
    );
    assert_eq!(
        ints(&p, "Projected Duration"),
        [700, 300, 100, 100, 50, 1100].map(Some)
    );
    assert_eq!(
        ints(&p, "ParentId"),
        [Some(7), Some(2), Some(2), Some(4), None, None]
    );
    assert_eq!(
        strs(&p, "RangeStack"),
        [":7:2", ":7:2:3", ":7:2:4", ":7:2:4:5", ":6", ":7"]
    );
    assert_eq!(ints(&p, "Lvl"), [1, 2, 2, 3, 0, 0].map(Some));
    // "d" (id 8) is not projected, so "outer" counts two projected children.
    assert_eq!(ints(&p, "NumChild"), [2, 0, 1, 0, 0, 1].map(Some));
    assert_eq!(strs(&p, "Style")[5], "StartEnd");
    assert_eq!(strs(&p, "Style")[0], "PushPop");
    assert_eq!(ints(&p, "PID"), [Some(7); 6]);
    assert_eq!(ints(&p, "TID"), [11, 11, 11, 11, 12, 11].map(Some));
    assert_eq!(ints(&p, "Orig Start"), [10, 20, 50, 60, 10, 5].map(Some));
    assert_eq!(
        ints(&p, "Orig Duration"),
        [90, 20, 40, 10, 90, 195].map(Some)
    );

    let pp = pushpop(&t).unwrap();
    assert_eq!(ints(&pp, "RangeId"), [2, 3, 4, 5, 6, 8].map(Some));
    // The start/end range is not part of the push/pop tree.
    assert_eq!(
        ints(&pp, "ParentId"),
        [None, Some(2), Some(2), Some(4), None, Some(2)]
    );
    assert_eq!(ints(&pp, "DurChild (ns)"), [63, 0, 10, 0, 0, 0].map(Some));
    assert_eq!(
        ints(&pp, "DurNonChild (ns)"),
        [27, 20, 30, 10, 90, 3].map(Some)
    );
    assert_eq!(ints(&pp, "NumChild"), [3, 0, 1, 0, 0, 0].map(Some));
    assert_eq!(ints(&pp, "Lvl"), [0, 1, 1, 2, 0, 1].map(Some));
    assert_eq!(
        strs(&pp, "RangeStack"),
        [":2", ":2:3", ":2:4", ":2:4:5", ":6", ":2:8"]
    );
    assert_eq!(strs(&pp, "Name")[2], "b");
}

#[test]
fn overlapping_start_end_ranges_take_the_tightest_parent() {
    let events: &[Ev] = &[
        (0, Some(100), NVTX_START_END, "A", 0, T1),   // id 1
        (10, Some(200), NVTX_START_END, "B", 0, T1),  // id 2: overlaps A, does not nest
        (20, Some(50), NVTX_START_END, "r", 0, T1),   // id 3: inside both; A is tighter
        (150, Some(160), NVTX_START_END, "s", 0, T1), // id 4: inside B only
        (300, None, NVTX_PUSH_POP, "open", 0, T1),    // id 5: never closed
    ];
    let api = &[(25, 30, 1, T1), (155, 156, 2, T1), (400, 410, 3, T1)];
    let ops = &[(1000, 1010, 1), (2000, 2010, 2), (3000, 3010, 3)];
    let p = project(&tables(events, api, ops)).unwrap();
    assert_eq!(ints(&p, "RangeId"), [1, 2, 3, 4, 5].map(Some));
    assert_eq!(ints(&p, "ParentId"), [None, None, Some(1), Some(2), None]);
    assert_eq!(ints(&p, "NumGPUOps"), [1, 2, 1, 1, 1].map(Some));
    assert_eq!(
        ints(&p, "Projected Start"),
        [1000, 1000, 1000, 2000, 3000].map(Some)
    );
    // The open range ends at the capture's last timestamp (the last op's end).
    assert_eq!(ints(&p, "Orig Duration")[4], Some(3010 - 300));
}

#[test]
fn identical_ranges_and_shared_correlation_ids() {
    let events: &[Ev] = &[
        (0, Some(100), NVTX_PUSH_POP, "x", 0, T1), // id 1
        (0, Some(100), NVTX_PUSH_POP, "y", 0, T1), // id 2: same interval
        (10, Some(20), NVTX_PUSH_POP, "p", 0, T1), // id 3
        (30, Some(40), NVTX_PUSH_POP, "q", 0, T1), // id 4
    ];
    // Correlation id 7: two calls on T1 in different ranges, a nested duplicate, and one
    // on T2. Id 8: one call.
    let api = &[
        (12, 18, 7, T1),
        (13, 14, 7, T1),
        (32, 38, 7, T1),
        (50, 51, 7, T2),
        (60, 61, 8, T1),
    ];
    let ops = &[(500, 600, 7), (700, 800, 8)];
    let p = project(&tables(events, api, ops)).unwrap();
    assert_eq!(ints(&p, "RangeId"), [1, 2, 3, 4].map(Some));
    assert_eq!(ints(&p, "ParentId"), [None, Some(1), Some(2), Some(2)]);
    assert_eq!(strs(&p, "RangeStack"), [":1", ":1:2", ":1:2:3", ":1:2:4"]);
    assert_eq!(ints(&p, "NumGPUOps"), [2, 2, 1, 1].map(Some));
    assert_eq!(ints(&p, "NumChild"), [1, 2, 0, 0].map(Some));
}

#[test]
fn text_ids_text_api_ranges_and_cross_thread_ranges() {
    // textId → StringIds; types 70/71; a start/end range that ends on another thread is
    // not a range of either thread; a never-closed push/pop range ends at the capture's
    // last timestamp in both outputs.
    let n = 5;
    let nvtx = RecordBatch::try_from_iter([
        (
            "start",
            Arc::new(Int64Array::from(vec![0, 10, 20, 30, 40])) as ArrayRef,
        ),
        (
            "end",
            Arc::new(Int64Array::from(vec![
                None,
                Some(100),
                Some(50),
                Some(60),
                None,
            ])),
        ),
        (
            "eventType",
            Arc::new(Int64Array::from(vec![
                NVTX_DOMAIN_CREATE,
                NVTX_TEXT_PUSH_POP,
                NVTX_TEXT_START_END,
                NVTX_START_END,
                NVTX_PUSH_POP,
            ])),
        ),
        (
            "text",
            Arc::new(StringArray::from(vec![
                Some("D"),
                None,
                None,
                Some("x"),
                None,
            ])),
        ),
        (
            "textId",
            Arc::new(Int64Array::from(vec![
                None,
                Some(5),
                Some(6),
                None,
                Some(5),
            ])),
        ),
        ("domainId", Arc::new(Int64Array::from(vec![3, 3, 0, 0, 0]))),
        ("globalTid", Arc::new(Int64Array::from(vec![T1; n]))),
        (
            "endGlobalTid",
            Arc::new(Int64Array::from(vec![None, None, Some(T1), Some(T2), None])),
        ),
    ])
    .unwrap();
    let strings = RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(vec![6, 5])) as ArrayRef),
        ("value", Arc::new(StringArray::from(vec!["six", "five"]))),
    ])
    .unwrap();
    let mut t = tables(
        &[],
        &[(45, 46, 1, T1), (55, 56, 2, T1)],
        &[(70, 80, 1), (90, 130, 2)],
    );
    t.nvtx_events = nvtx;
    t.string_ids = Some(strings);
    let p = project(&t).unwrap();
    assert_eq!(ints(&p, "RangeId"), [2, 3, 5].map(Some));
    assert_eq!(strs(&p, "Name"), ["D:five", "six", "five"]);
    assert_eq!(strs(&p, "Style"), ["PushPop", "StartEnd", "PushPop"]);
    assert_eq!(ints(&p, "NumGPUOps"), [2, 1, 2].map(Some));
    // The open range starts inside range 2 but outlives it.
    assert_eq!(ints(&p, "ParentId"), [None, Some(2), None]);
    // The capture ends with the last op (130).
    assert_eq!(ints(&p, "Orig Duration"), [90, 30, 90].map(Some));
    let pp = pushpop(&t).unwrap();
    assert_eq!(ints(&pp, "RangeId"), [2, 5].map(Some));
    assert_eq!(ints(&pp, "End (ns)"), [100, 130].map(Some));
    assert_eq!(ints(&pp, "ParentId"), [None, None]);
}

#[test]
fn no_gpu_tables_give_an_empty_projection() {
    let events: &[Ev] = &[(0, Some(100), NVTX_PUSH_POP, "x", 0, T1)];
    let mut t = tables(events, &[], &[]);
    t.runtime = None;
    t.kernel = None;
    let p = project(&t).unwrap();
    assert_eq!(p.num_rows(), 0);
    assert_eq!(p.schema(), projection_schema());
    assert_eq!(pushpop(&t).unwrap().num_rows(), 1);
}
