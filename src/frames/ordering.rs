//! Orders and sweeps over the rows of a frame being built: names ranked by their order,
//! rows permuted in place, and the hidden time of communication by sort-and-sweep.

use rustc_hash::FxHashMap;

/// The rank of each name among the distinct names, in their order (equal names, equal
/// ranks; the ranks order as the names do).
pub fn ranks<'a>(names: impl Iterator<Item = &'a str>) -> Vec<u32> {
    let mut first: FxHashMap<&str, u32> = FxHashMap::default();
    let ids: Vec<u32> = names
        .map(|n| {
            let next = first.len() as u32;
            *first.entry(n).or_insert(next)
        })
        .collect();
    let mut distinct: Vec<(&str, u32)> = first.into_iter().collect();
    distinct.sort_unstable();
    let mut rank = vec![0u32; distinct.len()];
    for (r, (_, id)) in distinct.iter().enumerate() {
        rank[*id as usize] = r as u32;
    }
    ids.into_iter().map(|id| rank[id as usize]).collect()
}

/// Puts `rows` in the order of `order` (a permutation of its indices: row `k` becomes the
/// row that was at `order[k]`), in place, following the permutation's cycles.
pub fn permute<T>(rows: &mut [T], mut order: Vec<u32>) {
    for start in 0..rows.len() {
        // Each cycle is walked once, from its first position; visited positions point at
        // themselves.
        let mut k = start;
        while order[k] as usize != start {
            let next = order[k] as usize;
            rows.swap(k, next);
            order[k] = k as u32;
            k = next;
        }
        order[k] = k as u32;
    }
}

/// Hidden time of each communication interval: the total overlap with the compute intervals
/// of the same (program, device). Sort-and-sweep: compute intervals sorted by start with a
/// running maximum of their ends, so each communication interval binary-searches the first
/// compute interval that can reach it and scans only the ones that start before it ends.
pub fn overlap<K: Ord + Copy>(intervals: &[(K, i32, i64, i64)], is_comm: &[bool]) -> Vec<i64> {
    let mut hidden = vec![0i64; intervals.len()];
    let mut idx: Vec<usize> = (0..intervals.len()).collect();
    idx.sort_by(|&a, &b| {
        let (pa, da, sa, _) = intervals[a];
        let (pb, db, sb, _) = intervals[b];
        (pa, da, sa).cmp(&(pb, db, sb))
    });
    let mut g = 0;
    while g < idx.len() {
        let (p, d, _, _) = intervals[idx[g]];
        let mut h = g;
        while h < idx.len() && intervals[idx[h]].0 == p && intervals[idx[h]].1 == d {
            h += 1;
        }
        let group = &idx[g..h];
        let compute: Vec<(i64, i64)> = group
            .iter()
            .filter(|&&i| !is_comm[i])
            .map(|&i| (intervals[i].2, intervals[i].3))
            .collect();
        if compute.len() < group.len() && !compute.is_empty() {
            let mut run_max = Vec::with_capacity(compute.len());
            let mut m = i64::MIN;
            for &(_, e) in &compute {
                m = m.max(e);
                run_max.push(m);
            }
            for &i in group.iter().filter(|&&i| is_comm[i]) {
                let (_, _, s, e) = intervals[i];
                let first = run_max.partition_point(|&x| x <= s);
                let mut covered = 0;
                for &(cs, ce) in &compute[first..] {
                    if cs >= e {
                        break;
                    }
                    if ce > s {
                        covered += ce.min(e) - cs.max(s);
                    }
                }
                hidden[i] = covered;
            }
        }
        g = h;
    }
    hidden
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permute_in_place_is_a_gather() {
        // Cycles of every length, fixed points, and the identity.
        for order in [
            vec![],
            vec![0],
            vec![1, 0],
            vec![2, 0, 1, 3],
            vec![4, 3, 0, 1, 2, 5, 7, 6],
            (0..50).rev().collect::<Vec<u32>>(),
        ] {
            let old: Vec<String> = (0..order.len()).map(|i| format!("r{i}")).collect();
            let want: Vec<String> = order.iter().map(|&i| old[i as usize].clone()).collect();
            let mut rows = old.clone();
            permute(&mut rows, order.clone());
            assert_eq!(rows, want, "{order:?}");
        }
    }

    #[test]
    fn overlap_counts_only_compute_of_the_same_group() {
        let iv = [
            ("p", 0, 0, 10),  // compute
            ("p", 0, 5, 20),  // comm: overlaps [5,10) and [12,15)
            ("p", 0, 12, 15), // compute
            ("p", 1, 5, 20),  // compute on another device
            ("q", 0, 0, 100), // compute of another program
        ];
        let comm = [false, true, false, false, false];
        assert_eq!(overlap(&iv, &comm), vec![0, 8, 0, 0, 0]);
    }
}
