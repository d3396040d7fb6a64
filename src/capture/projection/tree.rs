//! The tree of ranges on each thread: every range's tightest enclosing range (its parent)
//! and its nesting level.
//!
//! The parent of a range is the shortest range sorted before it that ends at or after it
//! (ties: the one sorted last). The general answer comes from a Fenwick tree over the ranges'
//! ends ([`ShortestByEnd`], O(n log n)). Most threads nest their ranges properly (push/pop
//! ranges always do), and then a stack of the open ranges gives the same parents in one pass:
//! [`nested_parents`] takes that path and gives up, for the Fenwick tree to answer, as soon as
//! a range it closes could still enclose a later one (ranges that cross, or one ending exactly
//! where the next begins).

use std::cmp::Reverse;

use super::ranges::Range;

/// Parent (index into the sorted ranges) and nesting level of every range.
pub(super) struct Tree {
    pub(super) parent: Vec<Option<u32>>,
    pub(super) level: Vec<u32>,
}

impl Tree {
    /// `ranges` sorted as `Nvtx::ranges` sorts them (by thread, start, end descending, row).
    pub(super) fn new(ranges: &[Range]) -> Self {
        let mut parent = vec![None; ranges.len()];
        let mut shortest = ShortestByEnd::default();
        let mut stack = Vec::new();
        for (offset, group) in thread_groups(ranges) {
            if !nested_parents(group, offset, &mut parent, &mut stack) {
                parent[offset..offset + group.len()].fill(None);
                tightest_parents(group, offset, &mut parent, &mut shortest);
            }
        }
        // Parents come before their children in the sorted order.
        let mut level = vec![0u32; ranges.len()];
        for i in 0..ranges.len() {
            if let Some(p) = parent[i] {
                level[i] = level[p as usize] + 1;
            }
        }
        Self { parent, level }
    }
}

/// `(offset, slice)` of each run of ranges on one thread.
pub(super) fn thread_groups(ranges: &[Range]) -> impl Iterator<Item = (usize, &[Range])> {
    let mut offset = 0;
    ranges.chunk_by(|a, b| a.thread == b.thread).map(move |g| {
        let o = offset;
        offset += g.len();
        (o, g)
    })
}

/// Parents within one thread's ranges (sorted by start, end descending, row) by a stack of
/// the ranges still open, innermost on top: a range closes (is popped) when the next range
/// ends after it, and its parent is then the top. That is the answer of [`tightest_parents`]
/// as long as no range popped could enclose a later one, which needs it to end at or after
/// the start of the range that popped it; at the first such range this returns false (the
/// parents written so far are overwritten by the general method).
fn nested_parents(
    group: &[Range],
    offset: usize,
    parent: &mut [Option<u32>],
    stack: &mut Vec<usize>,
) -> bool {
    stack.clear();
    for (k, r) in group.iter().enumerate() {
        while let Some(&top) = stack.last() {
            let open = &group[top];
            if open.end >= r.end {
                break;
            }
            if open.end >= r.start {
                return false;
            }
            stack.pop();
        }
        parent[offset + k] = stack.last().map(|&top| (offset + top) as u32);
        stack.push(k);
    }
    true
}

/// Parents within one thread's ranges (sorted by start, end descending, row): querying the
/// shortest range ending at or after a range's end before inserting it gives the shortest
/// enclosing range among those sorted before it, which are all the ranges that enclose it.
fn tightest_parents(
    group: &[Range],
    offset: usize,
    parent: &mut [Option<u32>],
    shortest: &mut ShortestByEnd,
) {
    shortest.reset(group);
    for (k, r) in group.iter().enumerate() {
        if let Some(p) = shortest.query(r.end) {
            parent[offset + k] = Some(p);
        }
        shortest.insert(r, offset + k);
    }
}

/// A Fenwick tree over the distinct end times of one thread's ranges, largest first, that
/// holds for each prefix the shortest range inserted so far (ties: the latest inserted).
#[derive(Default)]
pub(super) struct ShortestByEnd {
    ends: Vec<i64>,
    tree: Vec<(i64, i64)>,
}

impl ShortestByEnd {
    const EMPTY: (i64, i64) = (i64::MAX, i64::MAX);

    /// Empties the tree for the ranges of `group`.
    pub(super) fn reset(&mut self, group: &[Range]) {
        self.ends.clear();
        self.ends.extend(group.iter().map(|r| r.end));
        self.ends.sort_unstable_by_key(|&e| Reverse(e));
        self.ends.dedup();
        self.tree.clear();
        self.tree.resize(self.ends.len() + 1, Self::EMPTY);
    }

    /// Inserts range `r` (one of the group's), `index` being its place among all ranges.
    pub(super) fn insert(&mut self, r: &Range, index: usize) {
        let key = (r.end - r.start, -(index as i64));
        // 1-based position of its end: the rank among the ends, largest first.
        let mut i = self.ends.partition_point(|&e| e > r.end) + 1;
        while i < self.tree.len() {
            if key < self.tree[i] {
                self.tree[i] = key;
            }
            i += i & i.wrapping_neg();
        }
    }

    /// The index of the shortest range inserted so far that ends at or after `end`.
    pub(super) fn query(&self, end: i64) -> Option<u32> {
        let mut best = Self::EMPTY;
        let mut i = self.ends.partition_point(|&e| e >= end);
        while i > 0 {
            best = best.min(self.tree[i]);
            i &= i - 1;
        }
        (best != Self::EMPTY).then(|| (-best.1) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The parents [`tightest_parents`] alone gives.
    fn general(ranges: &[Range]) -> Vec<Option<u32>> {
        let mut parent = vec![None; ranges.len()];
        let mut shortest = ShortestByEnd::default();
        for (offset, group) in thread_groups(ranges) {
            tightest_parents(group, offset, &mut parent, &mut shortest);
        }
        parent
    }

    fn sorted(spans: Vec<(i64, i64, i64)>) -> Vec<Range> {
        let mut ranges: Vec<Range> = spans
            .into_iter()
            .enumerate()
            .map(|(row, (thread, start, len))| Range {
                thread,
                start,
                end: start + len,
                row: row as u32,
                push_pop: true,
            })
            .collect();
        ranges.sort_unstable_by_key(|r| (r.thread, r.start, Reverse(r.end), r.row));
        ranges
    }

    proptest! {
        // Small coordinates, so that ties, zero-length ranges, ranges touching end to start
        // and crossing ranges all occur.
        #[test]
        fn the_stack_gives_the_general_parents(
            spans in proptest::collection::vec((0i64..3, 0i64..40, 0i64..12), 0..60)
        ) {
            let ranges = sorted(spans);
            prop_assert_eq!(Tree::new(&ranges).parent, general(&ranges));
        }

        // Properly nested ranges (a push/pop trace): always the stack's answer.
        #[test]
        fn nested_ranges_take_the_stack(depths in proptest::collection::vec(0usize..6, 1..80)) {
            // A walk that opens and closes ranges, one time step apart.
            let mut ranges = Vec::new();
            let mut open: Vec<(i64, u32)> = Vec::new();
            let mut t = 0i64;
            for (row, &d) in depths.iter().enumerate() {
                while open.len() > d {
                    let (start, row) = open.pop().unwrap();
                    ranges.push(Range { thread: 1, start, end: t, row, push_pop: true });
                    t += 1;
                }
                open.push((t, row as u32));
                t += 1;
            }
            while let Some((start, row)) = open.pop() {
                ranges.push(Range { thread: 1, start, end: t, row, push_pop: true });
                t += 1;
            }
            ranges.sort_unstable_by_key(|r| (r.thread, r.start, Reverse(r.end), r.row));
            let mut parent = vec![None; ranges.len()];
            prop_assert!(nested_parents(&ranges, 0, &mut parent, &mut Vec::new()));
            prop_assert_eq!(parent, general(&ranges));
        }
    }
}
