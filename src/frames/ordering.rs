//! Orders and sweeps over the rows of a frame being built: names ranked by their order, and
//! the hidden time of communication by sort-and-sweep.

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

/// Hidden time of each communication interval: the total overlap with the compute intervals
/// of the same (program, device). `interval(i)` is row `i`'s (program, device, start, end).
/// Sort-and-sweep: compute intervals sorted by start with a running maximum of their ends,
/// so each communication interval binary-searches the first compute interval that can reach
/// it and scans only the ones that start before it ends.
pub fn overlap<K: Ord + Copy>(
    n: usize,
    interval: impl Fn(usize) -> (K, i32, i64, i64),
    is_comm: &[bool],
) -> Vec<i64> {
    let mut hidden = vec![0i64; n];
    if !is_comm.iter().any(|&c| c) {
        return hidden;
    }
    let mut idx: Vec<u32> = (0..n as u32).collect();
    idx.sort_by_key(|&i| {
        let (p, d, s, _) = interval(i as usize);
        (p, d, s)
    });
    let group_of = |i: u32| {
        let (p, d, _, _) = interval(i as usize);
        (p, d)
    };
    let mut g = 0;
    while g < idx.len() {
        let key = group_of(idx[g]);
        let mut h = g;
        while h < idx.len() && group_of(idx[h]) == key {
            h += 1;
        }
        let group = &idx[g..h];
        let compute: Vec<u32> = group
            .iter()
            .copied()
            .filter(|&i| !is_comm[i as usize])
            .collect();
        if compute.len() < group.len() && !compute.is_empty() {
            let mut run_max = Vec::with_capacity(compute.len());
            let mut m = i64::MIN;
            for &c in &compute {
                m = m.max(interval(c as usize).3);
                run_max.push(m);
            }
            for &i in group.iter().filter(|&&i| is_comm[i as usize]) {
                let (_, _, s, e) = interval(i as usize);
                let first = run_max.partition_point(|&x| x <= s);
                let mut covered = 0;
                for &c in &compute[first..] {
                    let (_, _, cs, ce) = interval(c as usize);
                    if cs >= e {
                        break;
                    }
                    if ce > s {
                        covered += ce.min(e) - cs.max(s);
                    }
                }
                // Compute thunks that overlap each other (concurrent graph branches) cover
                // no more than the whole communication: its exposed time is never negative.
                hidden[i as usize] = covered.min(e - s);
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
    fn overlap_counts_only_compute_of_the_same_group() {
        let iv = [
            ("p", 0, 0, 10),  // compute
            ("p", 0, 5, 20),  // comm: overlaps [5,10) and [12,15)
            ("p", 0, 12, 15), // compute
            ("p", 1, 5, 20),  // compute on another device
            ("q", 0, 0, 100), // compute of another program
        ];
        let comm = [false, true, false, false, false];
        assert_eq!(overlap(iv.len(), |i| iv[i], &comm), vec![0, 8, 0, 0, 0]);
        // Without communication nothing is hidden.
        assert_eq!(overlap(iv.len(), |i| iv[i], &[false; 5]), vec![0; 5]);
    }
}
