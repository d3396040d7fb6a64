//! Compile time per range name, summed over processes: the share behind nsys-jax's compile
//! summary tables (see `compilation` and `summary`).

use anyhow::Result;
use arrow::array::{RecordBatch, StringArray};
use std::collections::BTreeMap;

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
