//! Compile time per range name, summed over processes: the share behind nsys-jax's compile
//! summary tables, and the tables themselves. `compilation` and `summary` read it; it is no
//! analysis itself.

use anyhow::Result;
use arrow::array::{RecordBatch, StringArray};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::analyses::{ProcessView, Reads, Share};
use crate::frames::compile_time::Attributed;

/// One process's share of the summary tables: non-child and child time (ns) per range name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RangeSums {
    /// (name, non-child ns, child ns), by name.
    pub by_name: Vec<(String, f64, f64)>,
}

/// Stored as an Arrow table, LZ4-compressed: thousands of range names per process, sharing
/// long prefixes (names carry the pass and program), read back for every process of a run.
impl crate::engine::value::Value for RangeSums {
    fn encode(&self) -> Result<Vec<u8>> {
        use arrow::array::Float64Array;
        let batch = RecordBatch::try_from_iter(vec![
            (
                "name",
                std::sync::Arc::new(StringArray::from_iter_values(
                    self.by_name.iter().map(|r| r.0.as_str()),
                )) as arrow::array::ArrayRef,
            ),
            (
                "non_child",
                std::sync::Arc::new(Float64Array::from_iter_values(
                    self.by_name.iter().map(|r| r.1),
                )),
            ),
            (
                "child",
                std::sync::Arc::new(Float64Array::from_iter_values(
                    self.by_name.iter().map(|r| r.2),
                )),
            ),
        ])?;
        crate::engine::value::batch_to_ipc_lz4(&batch)
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        use arrow::array::AsArray;
        use arrow::datatypes::Float64Type;
        let b = crate::engine::value::batch_from_ipc(bytes)?;
        let (Some(name), Some(nc), Some(c)) = (
            b.column_by_name("name"),
            b.column_by_name("non_child"),
            b.column_by_name("child"),
        ) else {
            anyhow::bail!("range sums without their columns");
        };
        let (name, nc, c) = (
            name.as_string::<i32>(),
            nc.as_primitive::<Float64Type>(),
            c.as_primitive::<Float64Type>(),
        );
        Ok(RangeSums {
            by_name: (0..b.num_rows())
                .map(|i| (name.value(i).to_string(), nc.value(i), c.value(i)))
                .collect(),
        })
    }
}

/// Shares added up in order, per range name: `(name, non-child ns, child ns)` by name.
pub(crate) fn sums(shares: &[RangeSums]) -> Vec<(String, f64, f64)> {
    if shares
        .iter()
        .all(|s| s.by_name.is_sorted_by(|a, b| a.0 < b.0))
    {
        merged(shares)
    } else {
        mapped(shares)
    }
}

/// [`sums`] through a map, for shares in any order.
fn mapped(shares: &[RangeSums]) -> Vec<(String, f64, f64)> {
    let mut by_name: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for share in shares {
        for (name, nc, c) in &share.by_name {
            // Most names recur in every process: look up before allocating.
            let entry = match by_name.get_mut(name.as_str()) {
                Some(e) => e,
                None => by_name.entry(name.clone()).or_default(),
            };
            entry.0 += nc;
            entry.1 += c;
        }
    }
    by_name.into_iter().map(|(n, (nc, c))| (n, nc, c)).collect()
}

/// [`sums`] of shares whose names are sorted and distinct (as every share is): a merge of the
/// sorted lists, each name's values added in share order, as [`mapped`] adds them.
fn merged(shares: &[RangeSums]) -> Vec<(String, f64, f64)> {
    let mut at = vec![0usize; shares.len()];
    let mut out = Vec::new();
    loop {
        let least = shares
            .iter()
            .zip(&at)
            .filter_map(|(s, &i)| s.by_name.get(i).map(|r| r.0.as_str()))
            .min();
        let Some(least) = least else { break };
        let (mut nc_sum, mut c_sum) = (0.0, 0.0);
        for (s, i) in shares.iter().zip(at.iter_mut()) {
            if let Some((name, nc, c)) = s.by_name.get(*i)
                && name == least
            {
                nc_sum += nc;
                c_sum += c;
                *i += 1;
            }
        }
        out.push((least.to_string(), nc_sum, c_sum));
    }
    out
}

/// The shares of several processes as one (added in order).
pub fn add_up(shares: &[RangeSums]) -> RangeSums {
    RangeSums {
        by_name: sums(shares),
    }
}

/// One range name of the summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RangeRow {
    pub name: String,
    pub non_child_ms: f64,
    pub child_ms: f64,
    /// Share of [`CompilationTables::total_ms`].
    pub percent: f64,
}

/// One row of the folded views.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub name: String,
    pub non_child_ms: f64,
    pub percent: f64,
}

/// nsys-jax's summary compilation tables.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompilationTables {
    /// Sum of the non-child time of all ranges: the compilation wall time.
    pub total_ms: f64,
    /// Per range name, by non-child time, descending (`compilation-ranges.json`).
    pub ranges: Vec<RangeRow>,
    /// `XlaPass:#...` folded into `XlaPasses`, `XlaPassPipeline:#...` into `XlaPassPipelines`
    /// (`compilation-high-level.json`).
    pub high_level: Vec<Row>,
    /// `XlaPass:#...` only, percent of the passes' total (`compilation-passes.json`).
    pub passes: Vec<Row>,
}

/// A range's name as nsys-jax's summary shows it: `,module=M` and `:#module=M#` of the
/// range's own module removed (`program_id=` kept).
fn summary_name(name: &str, module: Option<&str>) -> String {
    match module {
        Some(module) if name.contains("module=") => name
            .replace(&format!(",module={module}"), "")
            .replace(&format!(":#module={module}#"), ""),
        _ => name.to_string(),
    }
}

pub(crate) fn percent(part: f64, total: f64) -> f64 {
    if total > 0.0 {
        100.0 * part / total
    } else {
        0.0
    }
}

/// Sorted by value descending, then name.
pub(crate) fn sort_desc<T>(rows: &mut [T], key: impl Fn(&T) -> (f64, &str)) {
    rows.sort_by(|a, b| {
        let (va, na) = key(a);
        let (vb, nb) = key(b);
        vb.total_cmp(&va).then_with(|| na.cmp(nb))
    });
}

/// The summary share of one process's compile frame.
pub fn range_sums(frame: &RecordBatch) -> Result<RangeSums> {
    // Each name's sum is added up in row order, which gives the same digits on every run.
    // A frame has a few hundred distinct (name, module) pairs in tens of thousands of rows:
    // each pair's shown name is made once, and rows find their sum through the pair.
    let a = Attributed::new(frame)?;
    let mut sums: Vec<(String, f64, f64)> = Vec::new();
    let mut by_shown: FxHashMap<String, usize> = FxHashMap::default();
    let mut by_pair: FxHashMap<(&str, Option<&str>), usize> = FxHashMap::default();
    for i in 0..frame.num_rows() {
        let pair = (a.cols.name.value(i), a.program_name(i));
        let at = *by_pair.entry(pair).or_insert_with(|| {
            let shown = summary_name(pair.0, pair.1);
            *by_shown.entry(shown.clone()).or_insert_with(|| {
                sums.push((shown, 0.0, 0.0));
                sums.len() - 1
            })
        });
        sums[at].1 += a.non_child[i];
        sums[at].2 += a.child[i];
    }
    sums.sort_unstable_by(|x, y| x.0.cmp(&y.0));
    Ok(RangeSums { by_name: sums })
}

#[cfg(test)]
/// nsys-jax's summary tables over the compile frames of all processes.
pub fn summary_tables(frames: &[RecordBatch]) -> Result<CompilationTables> {
    let sums = frames.iter().map(range_sums).collect::<Result<Vec<_>>>()?;
    Ok(reduce_summary(&sums))
}

/// nsys-jax's summary tables from the processes' shares (or sums of consecutive groups of
/// them), added in process order.
pub fn reduce_summary(shares: &[RangeSums]) -> CompilationTables {
    let by_name = sums(shares);
    // `+ 0.0`: an empty sum is -0.0.
    let total_ns: f64 = by_name.iter().map(|v| v.1).sum::<f64>() + 0.0;
    let total_ms = total_ns * 1e-6;
    let mut ranges: Vec<RangeRow> = by_name
        .into_iter()
        .map(|(name, nc, c)| RangeRow {
            name,
            non_child_ms: nc * 1e-6,
            child_ms: c * 1e-6,
            percent: percent(nc, total_ns),
        })
        .collect();
    sort_desc(&mut ranges, |r| (r.non_child_ms, &r.name));

    let mut folded: BTreeMap<&str, f64> = BTreeMap::new();
    for r in &ranges {
        let key = if r.name.starts_with("XlaPass:#") {
            "XlaPasses"
        } else if r.name.starts_with("XlaPassPipeline:#") {
            "XlaPassPipelines"
        } else {
            &r.name
        };
        *folded.entry(key).or_default() += r.non_child_ms;
    }
    let mut high_level: Vec<Row> = folded
        .into_iter()
        .map(|(name, ms)| Row {
            name: name.to_string(),
            non_child_ms: ms,
            percent: percent(ms, total_ms),
        })
        .collect();
    sort_desc(&mut high_level, |r| (r.non_child_ms, &r.name));

    let pass_total: f64 = ranges
        .iter()
        .filter(|r| r.name.starts_with("XlaPass:#"))
        .map(|r| r.non_child_ms)
        .sum();
    let passes = ranges
        .iter()
        .filter(|r| r.name.starts_with("XlaPass:#"))
        .map(|r| Row {
            name: r.name.clone(),
            non_child_ms: r.non_child_ms,
            percent: percent(r.non_child_ms, pass_total),
        })
        .collect();
    CompilationTables {
        total_ms,
        ranges,
        high_level,
        passes,
    }
}

/// A compile range's NVTX name for people: `XlaPass:#name=algsimp,program_id=19#` →
/// `XlaPass algsimp (program 19)`; a name that is not one is returned as it is.
pub fn range_label(name: &str) -> String {
    let Some(c) = crate::nvtx::parse_compile(name) else {
        return name.to_string();
    };
    let mut s = c.kind.to_string();
    for v in [c.name, c.module].into_iter().flatten() {
        s.push(' ');
        s.push_str(v);
    }
    if let Some(p) = c.program_id {
        s.push_str(&format!(" (program {p})"));
    }
    s
}

/// The pass table summed per pass name over programs and modules: `(pass, ms, % of pass
/// time)`, the longest first.
pub fn passes_by_name(rows: &[Row]) -> Vec<(String, f64, f64)> {
    let mut by: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for r in rows {
        let name = crate::nvtx::parse_compile(&r.name)
            .and_then(|c| c.name)
            .unwrap_or(&r.name)
            .to_string();
        let e = by.entry(name).or_default();
        e.0 += r.non_child_ms;
        e.1 += r.percent;
    }
    let mut v: Vec<(String, f64, f64)> = by.into_iter().map(|(n, (ms, p))| (n, ms, p)).collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

/// The compile-time summary share of one process: [`range_sums`] of its compile frame. The
/// sums add up over processes.
pub struct RangeSumsShare;

impl Share for RangeSumsShare {
    const KIND: &'static str = "compile-sums";
    const FILE: &'static str = file!();
    const READS: Reads = Reads::Compile;
    // Large (a sum per range name), and read once into its group's sum.
    const KEEP: crate::engine::Keep = crate::engine::Keep::Volatile;
    type Param = ();
    type Value = RangeSums;

    fn map(&self, p: &ProcessView, _: &()) -> Result<RangeSums> {
        p.compile
            .map(range_sums)
            .unwrap_or_else(|| Ok(Default::default()))
    }

    fn add_up(&self, parts: &[RangeSums]) -> Option<RangeSums> {
        Some(add_up(parts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn share(names: std::collections::BTreeMap<String, (i32, i32)>) -> RangeSums {
        RangeSums {
            by_name: names
                .into_iter()
                .map(|(n, (a, b))| (n, a as f64 * 0.1, b as f64 * 1e-3))
                .collect(),
        }
    }

    proptest! {
        #[test]
        fn the_merge_adds_as_the_map_does(
            shares in proptest::collection::vec(
                proptest::collection::btree_map("[a-d]{0,3}", (-1000i32..1000, -5i32..5), 0..12),
                0..6,
            )
        ) {
            let shares: Vec<RangeSums> = shares.into_iter().map(share).collect();
            let merged = merged(&shares);
            // Bit for bit: the same additions in the same order.
            let bits = |v: &[(String, f64, f64)]| -> Vec<(String, u64, u64)> {
                v.iter().map(|(n, a, b)| (n.clone(), a.to_bits(), b.to_bits())).collect()
            };
            prop_assert_eq!(bits(&merged), bits(&mapped(&shares)));
            prop_assert_eq!(bits(&sums(&shares)), bits(&merged));
        }
    }

    #[test]
    fn unsorted_shares_are_added_through_the_map() {
        let s = RangeSums {
            by_name: vec![("b".into(), 1.0, 0.0), ("a".into(), 2.0, 1.0)],
        };
        let out = sums(&[s.clone(), s]);
        assert_eq!(out, vec![("a".into(), 4.0, 2.0), ("b".into(), 2.0, 0.0)]);
    }
}
