//! Library calls inside a command buffer, placed by the structure of its CUDA graph
//! (docs/design.md, "Command buffers"). XLA records a library call (cuBLAS, cuDNN) into a
//! command buffer as a child graph captured from the library's stream work. The graph's own
//! nodes are numbered in command order, one or more a command; the child graphs' nodes come
//! after all of them, call after call in command order, each call's nodes together and opened
//! by the library's workspace memset. So the nodes numbered after every node already
//! attributed, cut where a memset opens the next call, are the free library calls in order —
//! whatever their kernels are named.

/// One node of a command buffer's graph execution, as [`child_graph_calls`] sees it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Node {
    /// Its graph node id.
    pub id: i64,
    /// When it ran (its first start, its last end) [ns].
    pub start: i64,
    pub end: i64,
    /// Whether it has an owner already.
    pub owned: bool,
    /// Whether it is an operation that opens a library call (its workspace memset).
    pub opens: bool,
    /// Whether it is a call's main work, not an auxiliary operation (a memset, a copy, a
    /// split-K reduction, a layout conversion).
    pub main: bool,
    /// Whether it is a copy: one of the command buffer's own commands, never a library's.
    pub copy: bool,
}

/// What a command recorded as a child graph runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Call {
    /// A library GEMM (cuBLAS, cuBLASLt): one main kernel, with a workspace memset before it
    /// and a split-K reduction after it.
    Gemm,
    /// Any other library call (cuDNN): all its nodes.
    Library,
    /// A copy of a dynamic slice fusion: one copy.
    Copy,
}

/// Which free candidate each child-graph node belongs to, as (node, candidate). `nodes` in
/// graph node order; `free`: the free candidates recorded as child graphs, in command order,
/// with what each runs. The child-graph nodes are the unowned ones numbered after every owned
/// one. A call ends where a memset opens the next, or where an owned node ran between two of
/// its nodes (a call's nodes run back to back); calls recorded back to back without a memset
/// are told apart by what each runs (a GEMM's one main kernel, a copy). Nothing when the
/// nodes and the candidates do not pair one to one (then time decides,
/// [`super::command_buffers`]).
pub(super) fn child_graph_calls(nodes: &[Node], free: &[(usize, Call)]) -> Vec<(usize, usize)> {
    let Some(last_own) = nodes.iter().filter(|n| n.owned).map(|n| n.id).max() else {
        return Vec::new();
    };
    let child: Vec<usize> = (0..nodes.len())
        .filter(|&j| !nodes[j].owned && nodes[j].id > last_own)
        .collect();
    if child.is_empty() || free.is_empty() {
        return Vec::new();
    }
    let mut owned_starts: Vec<i64> = nodes.iter().filter(|n| n.owned).map(|n| n.start).collect();
    owned_starts.sort_unstable();
    let owned_between = |a: i64, b: i64| {
        let (lo, hi) = (a.min(b), a.max(b));
        let k = owned_starts.partition_point(|&s| s <= lo);
        owned_starts.get(k).is_some_and(|&s| s < hi)
    };
    let mut calls: Vec<Vec<usize>> = Vec::new();
    for (k, &j) in child.iter().enumerate() {
        let new_call = match k.checked_sub(1).map(|p| &nodes[child[p]]) {
            None => true,
            Some(prev) => {
                (nodes[j].opens && !prev.opens) || owned_between(prev.end, nodes[j].start)
            }
        };
        if new_call {
            calls.push(Vec::new());
        }
        calls.last_mut().expect("a call was opened").push(j);
    }
    // Candidates take calls in order: a GEMM its call's next main kernel with the auxiliary
    // operations around it, a copy its call's next copy, any other library call the rest of
    // its call.
    let mut out = Vec::with_capacity(child.len());
    let mut call = calls.iter().map(Vec::as_slice);
    let mut rest: &[usize] = &[];
    for &(c, what) in free {
        if rest.is_empty() {
            match call.next() {
                Some(next) => rest = next,
                None => return Vec::new(),
            }
        }
        let take = match what {
            Call::Library => rest.len(),
            Call::Copy if nodes[rest[0]].copy => 1,
            Call::Copy => return Vec::new(),
            Call::Gemm => {
                let Some(main) = rest.iter().position(|&j| nodes[j].main) else {
                    return Vec::new();
                };
                if rest[..main].iter().any(|&j| nodes[j].copy) {
                    return Vec::new();
                }
                // Through the main kernel, then what follows it up to the next main kernel,
                // memset or copy (a split-K reduction).
                main + 1
                    + rest[main + 1..]
                        .iter()
                        .take_while(|&&j| !nodes[j].main && !nodes[j].opens && !nodes[j].copy)
                        .count()
            }
        };
        out.extend(rest[..take].iter().map(|&j| (j, c)));
        rest = &rest[take..];
    }
    if !rest.is_empty() || call.next().is_some() {
        return Vec::new();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: i64, start: i64, owned: bool, opens: bool) -> Node {
        Node {
            id,
            start,
            end: start + 5,
            owned,
            opens,
            main: !opens,
            copy: false,
        }
    }

    fn library(cs: &[usize]) -> Vec<(usize, Call)> {
        cs.iter().map(|&c| (c, Call::Library)).collect()
    }

    /// Own nodes 0..4 (two attributed, the last one among them), then three calls: memset +
    /// GEMM, memset + three attention kernels, memset + GEMM + split-K reduction.
    #[test]
    fn child_graph_nodes_are_cut_at_memsets_into_the_calls_in_order() {
        let mut nodes = vec![
            node(0, 0, true, false),
            node(1, 10, false, false),
            node(2, 20, false, false),
            node(3, 30, true, false),
        ];
        for (k, opens) in [true, false, true, false, false, false, true, false, false]
            .into_iter()
            .enumerate()
        {
            nodes.push(node(10 + k as i64, 100 + 10 * k as i64, false, opens));
        }
        let got = child_graph_calls(&nodes, &library(&[7, 8, 9]));
        let want: Vec<(usize, usize)> = [7, 7, 8, 8, 8, 8, 9, 9, 9]
            .into_iter()
            .enumerate()
            .map(|(k, c)| (4 + k, c))
            .collect();
        assert_eq!(got, want);
    }

    /// A call without a memset of its own is told from the one before it by the owned node
    /// that ran between them; a dynamic slice fusion's copy numbered among the calls is its
    /// own.
    #[test]
    fn an_owned_node_between_two_kernels_cuts_them_into_two_calls() {
        let mut nodes = vec![
            node(0, 0, true, false),
            node(1, 50, true, false),
            node(5, 10, false, true),
            node(6, 20, false, false),
            node(7, 60, false, false),
        ];
        nodes.push(Node {
            copy: true,
            main: false,
            ..node(8, 70, false, false)
        });
        let free = [(3, Call::Library), (4, Call::Gemm), (9, Call::Copy)];
        assert_eq!(
            child_graph_calls(&nodes, &free),
            vec![(2, 3), (3, 3), (4, 4), (5, 9)]
        );
    }

    #[test]
    fn calls_that_do_not_pair_with_the_candidates_are_left_to_time() {
        let nodes = [
            node(0, 0, true, false),
            node(1, 10, true, false),
            node(5, 20, false, true),
            node(6, 30, false, false),
            node(7, 40, false, true),
            node(8, 50, false, false),
        ];
        assert!(child_graph_calls(&nodes, &library(&[3])).is_empty());
        assert!(child_graph_calls(&nodes, &library(&[3, 4, 5])).is_empty());
        assert_eq!(child_graph_calls(&nodes, &library(&[3, 4])).len(), 4);
        // Nothing attributed: own and child nodes cannot be told apart.
        let unowned: Vec<Node> = nodes.iter().map(|n| Node { owned: false, ..*n }).collect();
        assert!(child_graph_calls(&unowned, &library(&[3, 4])).is_empty());
    }

    /// Two GEMM calls recorded back to back without a memset between them (nothing else ran
    /// between): each takes one main kernel, the split-K reduction going with the first.
    #[test]
    fn back_to_back_gemm_calls_take_one_main_kernel_each() {
        let mut nodes = vec![node(0, 0, true, false), node(10, 10, false, true)];
        nodes.push(node(11, 20, false, false));
        nodes.push(Node {
            main: false,
            ..node(12, 30, false, false)
        });
        nodes.push(node(13, 40, false, false));
        nodes.push(node(14, 50, false, true));
        nodes.push(node(15, 60, false, false));
        nodes.push(node(16, 70, false, false));
        let free = [(5, Call::Gemm), (6, Call::Gemm), (7, Call::Library)];
        assert_eq!(
            child_graph_calls(&nodes, &free),
            vec![(1, 5), (2, 5), (3, 5), (4, 6), (5, 7), (6, 7), (7, 7)]
        );
        // More GEMM candidates than main kernels: time decides.
        assert!(
            child_graph_calls(
                &nodes,
                &[
                    (5, Call::Gemm),
                    (6, Call::Gemm),
                    (7, Call::Gemm),
                    (8, Call::Gemm),
                    (9, Call::Gemm)
                ]
            )
            .is_empty()
        );
    }
}
