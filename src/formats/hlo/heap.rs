//! Static heap memory of a module from XLA's buffer assignment (docs/design.md, "Memory"):
//! the after-optimizations `HloProto`'s heap simulator traces replayed as nsys-jax's notebook
//! does, and the dump's `*-memory-usage-report.pb` summarised.
//!
//! Field numbers (`xla/service/hlo.proto`): `HloProto.buffer_assignment` 3;
//! `BufferAssignmentProto { logical_buffers 1, heap_simulator_traces 4 }`;
//! `LogicalBufferProto { id 1, size 2 }`; `HeapSimulatorTrace { events 1,
//! whole_module_simulation 2 }`; `Event { kind 1 (ALLOC 0, FREE 1, SHARE_WITH 2), buffer_id 2,
//! instruction_name 4, share_with_canonical_id 5 }`; `MemoryUsageReportProto {
//! memory_space_allocation_entries 1 { total_bytes 1, memory_space_color 2, allocation_entries 3
//! { index 1, size 2, defining_positions 5 } } }`.

use std::collections::HashMap;

use anyhow::{Result, anyhow, bail};
use prost::Message;
use serde::{Deserialize, Serialize};

#[derive(Clone, PartialEq, Message)]
struct HloProto {
    #[prost(message, optional, tag = "3")]
    buffer_assignment: Option<BufferAssignment>,
}

#[derive(Clone, PartialEq, Message)]
struct BufferAssignment {
    #[prost(message, repeated, tag = "1")]
    logical_buffers: Vec<LogicalBuffer>,
    #[prost(message, repeated, tag = "4")]
    heap_simulator_traces: Vec<Trace>,
}

#[derive(Clone, PartialEq, Message)]
struct LogicalBuffer {
    #[prost(int64, tag = "1")]
    id: i64,
    #[prost(int64, tag = "2")]
    size: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Trace {
    #[prost(message, repeated, tag = "1")]
    events: Vec<Event>,
    #[prost(bool, tag = "2")]
    whole_module_simulation: bool,
}

#[derive(Clone, PartialEq, Message)]
struct Event {
    #[prost(int32, tag = "1")]
    kind: i32,
    #[prost(int64, tag = "2")]
    buffer_id: i64,
    #[prost(string, tag = "4")]
    instruction_name: String,
    #[prost(int64, tag = "5")]
    share_with_canonical_id: i64,
}

const ALLOC: i32 = 0;
const FREE: i32 = 1;
const SHARE_WITH: i32 = 2;

/// The heap of one module: the trace with the highest peak.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HeapProfile {
    /// Heap simulator traces in the module.
    pub traces: usize,
    pub peak_bytes: i64,
    /// Live bytes after each event that changes them, from 0 (the notebook's curve; x is the
    /// position in this list, "program order").
    pub curve: Vec<i64>,
    /// The buffers live at the peak: (defining instruction, bytes), largest first.
    pub at_peak: Vec<(String, i64)>,
}

/// The heap profile of an encoded `HloProto` (None when it has no heap simulator trace).
/// Errors say what is wrong in one line.
pub fn profile(hlo_proto: &[u8]) -> Result<Option<HeapProfile>> {
    let p = HloProto::decode(hlo_proto).map_err(|e| anyhow!("not an HloProto ({e})"))?;
    let Some(ba) = p.buffer_assignment else {
        return Ok(None);
    };
    let sizes: HashMap<i64, i64> = ba.logical_buffers.iter().map(|b| (b.id, b.size)).collect();
    let mut best: Option<HeapProfile> = None;
    for (n, trace) in ba.heap_simulator_traces.iter().enumerate() {
        let t =
            replay(&trace.events, &sizes).map_err(|e| anyhow!("heap simulator trace {n}: {e}"))?;
        if best.as_ref().is_none_or(|b| t.peak_bytes > b.peak_bytes) {
            best = Some(t);
        }
    }
    Ok(best.map(|mut b| {
        b.traces = ba.heap_simulator_traces.len();
        b
    }))
}

/// Replays one trace: a buffer shared with a canonical one adds a reference to it; the
/// canonical buffer's size counts from its first reference to its last.
fn replay(events: &[Event], sizes: &HashMap<i64, i64>) -> Result<HeapProfile> {
    let mut refs: HashMap<i64, u32> = HashMap::new();
    let mut alias: HashMap<i64, i64> = HashMap::new();
    let mut defined: HashMap<i64, &str> = HashMap::new();
    let mut curve = vec![0i64];
    let (mut live, mut peak, mut peak_at) = (0i64, 0i64, 0usize);
    let size = |id: i64| -> Result<i64> {
        sizes
            .get(&id)
            .copied()
            .ok_or_else(|| anyhow!("event names buffer {id}, which is not a logical buffer"))
    };
    for (i, e) in events.iter().enumerate() {
        let (id, delta) = match e.kind {
            FREE => {
                let id = alias.remove(&e.buffer_id).unwrap_or(e.buffer_id);
                let r = refs.entry(id).or_default();
                if *r == 0 {
                    bail!("event {i} frees buffer {id}, which is not live");
                }
                *r -= 1;
                (id, if *r == 0 { -size(id)? } else { 0 })
            }
            ALLOC | SHARE_WITH => {
                let id = if e.kind == SHARE_WITH {
                    if alias.contains_key(&e.buffer_id) {
                        bail!("event {i} shares buffer {} twice", e.buffer_id);
                    }
                    alias.insert(e.buffer_id, e.share_with_canonical_id);
                    e.share_with_canonical_id
                } else {
                    defined.entry(e.buffer_id).or_insert(&e.instruction_name);
                    e.buffer_id
                };
                let r = refs.entry(id).or_default();
                *r += 1;
                (id, if *r == 1 { size(id)? } else { 0 })
            }
            k => bail!("event {i} has unknown kind {k}"),
        };
        let _ = id;
        if delta != 0 {
            live += delta;
            curve.push(live);
            if live > peak {
                (peak, peak_at) = (live, i);
            }
        }
    }
    if live != 0 || refs.values().any(|&r| r != 0) {
        bail!("{live} bytes still live at the end");
    }
    // What is live just after the peak event.
    let mut at: HashMap<i64, u32> = HashMap::new();
    let mut alias: HashMap<i64, i64> = HashMap::new();
    for e in events.iter().take(if peak > 0 { peak_at + 1 } else { 0 }) {
        match e.kind {
            FREE => {
                let id = alias.remove(&e.buffer_id).unwrap_or(e.buffer_id);
                if let Some(r) = at.get_mut(&id) {
                    *r -= 1;
                }
            }
            SHARE_WITH => {
                alias.insert(e.buffer_id, e.share_with_canonical_id);
                *at.entry(e.share_with_canonical_id).or_default() += 1;
            }
            _ => *at.entry(e.buffer_id).or_default() += 1,
        }
    }
    let mut by_instruction: HashMap<&str, i64> = HashMap::new();
    for (id, r) in at {
        if r > 0 {
            let name = defined.get(&id).copied().unwrap_or("");
            *by_instruction.entry(name).or_default() += size(id)?;
        }
    }
    let mut at_peak: Vec<(String, i64)> = by_instruction
        .into_iter()
        .map(|(n, b)| (n.to_string(), b))
        .collect();
    at_peak.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(HeapProfile {
        traces: 1,
        peak_bytes: peak,
        curve,
        at_peak,
    })
}

#[derive(Clone, PartialEq, Message)]
struct UsageReport {
    #[prost(message, repeated, tag = "1")]
    spaces: Vec<UsageSpace>,
}

#[derive(Clone, PartialEq, Message)]
struct UsageSpace {
    #[prost(int64, tag = "1")]
    total_bytes: i64,
    #[prost(int32, optional, tag = "2")]
    memory_space_color: Option<i32>,
    #[prost(message, repeated, tag = "3")]
    entries: Vec<UsageEntry>,
}

#[derive(Clone, PartialEq, Message)]
struct UsageEntry {
    #[prost(int64, tag = "1")]
    index: i64,
    #[prost(int64, tag = "2")]
    size: i64,
    #[prost(string, repeated, tag = "5")]
    defining_positions: Vec<String>,
}

/// What XLA's memory usage report adds: the bytes its allocations take (padding and
/// fragmentation included) and the largest allocations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageSummary {
    /// Over every memory space.
    pub allocated_bytes: i64,
    /// (allocation index, bytes, what is defined in it), largest first, at most 5.
    pub largest: Vec<(i64, i64, Vec<String>)>,
}

/// Summarises an encoded `MemoryUsageReportProto`.
pub fn usage_report(bytes: &[u8]) -> Result<UsageSummary> {
    let r = UsageReport::decode(bytes).map_err(|e| anyhow!("not a memory usage report ({e})"))?;
    let mut s = UsageSummary::default();
    let mut all: Vec<(i64, i64, Vec<String>)> = Vec::new();
    for space in r.spaces {
        s.allocated_bytes = s.allocated_bytes.saturating_add(space.total_bytes);
        let _ = space.memory_space_color;
        for e in space.entries {
            let mut d = e.defining_positions;
            d.truncate(8);
            all.push((e.index, e.size, d));
        }
    }
    all.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    all.truncate(5);
    s.largest = all;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: i32, id: i64, canonical: i64, instr: &str) -> Event {
        Event {
            kind,
            buffer_id: id,
            instruction_name: instr.into(),
            share_with_canonical_id: canonical,
        }
    }

    fn encode(buffers: &[(i64, i64)], traces: Vec<Vec<Event>>) -> Vec<u8> {
        HloProto {
            buffer_assignment: Some(BufferAssignment {
                logical_buffers: buffers
                    .iter()
                    .map(|&(id, size)| LogicalBuffer { id, size })
                    .collect(),
                heap_simulator_traces: traces
                    .into_iter()
                    .map(|events| Trace {
                        events,
                        whole_module_simulation: true,
                    })
                    .collect(),
            }),
        }
        .encode_to_vec()
    }

    #[test]
    fn shared_buffers_count_once_until_their_last_user_frees() {
        let bytes = encode(
            &[(10, 100), (11, 50), (12, 7)],
            vec![vec![
                ev(ALLOC, 10, 0, "fusion.1"),
                ev(SHARE_WITH, 12, 10, "bitcast.2"),
                ev(ALLOC, 11, 0, "dot.3"),
                ev(FREE, 10, 0, ""),
                ev(FREE, 11, 0, ""),
                ev(FREE, 12, 0, ""),
            ]],
        );
        let p = profile(&bytes).unwrap().unwrap();
        assert_eq!(p.curve, [0, 100, 150, 100, 0]);
        assert_eq!(p.peak_bytes, 150);
        assert_eq!(
            p.at_peak,
            [("fusion.1".to_string(), 100), ("dot.3".to_string(), 50)]
        );
        assert_eq!(p.traces, 1);
    }

    #[test]
    fn inconsistent_traces_are_errors() {
        let unknown = encode(
            &[(1, 8)],
            vec![vec![ev(ALLOC, 2, 0, "x"), ev(FREE, 2, 0, "")]],
        );
        assert!(
            profile(&unknown)
                .unwrap_err()
                .to_string()
                .contains("buffer 2")
        );
        let leak = encode(&[(1, 8)], vec![vec![ev(ALLOC, 1, 0, "x")]]);
        assert!(
            profile(&leak)
                .unwrap_err()
                .to_string()
                .contains("still live")
        );
        let double = encode(&[(1, 8)], vec![vec![ev(FREE, 1, 0, "")]]);
        assert!(
            profile(&double)
                .unwrap_err()
                .to_string()
                .contains("not live")
        );
        assert!(profile(b"\xff\xff").is_err());
        assert_eq!(profile(&HloProto::default().encode_to_vec()).unwrap(), None);
    }

    #[test]
    fn usage_reports_are_summarised() {
        let r = UsageReport {
            spaces: vec![UsageSpace {
                total_bytes: 300,
                memory_space_color: Some(0),
                entries: vec![
                    UsageEntry {
                        index: 0,
                        size: 100,
                        defining_positions: vec!["a".into()],
                    },
                    UsageEntry {
                        index: 1,
                        size: 200,
                        defining_positions: vec!["b".into()],
                    },
                ],
            }],
        };
        let s = usage_report(&r.encode_to_vec()).unwrap();
        assert_eq!(s.allocated_bytes, 300);
        assert_eq!(s.largest[0], (1, 200, vec!["b".to_string()]));
        assert!(usage_report(b"\x0a\xff").is_err());
    }
}
