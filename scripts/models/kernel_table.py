"""kernel_table.py CAPTURE_DIR [--md OUT.md]

The kernel -> HLO instruction table of one capture of tests/data/models/ (a folder with
rep.sqlite, exported from rep.nsys-rep by `nsys export --type sqlite` or `nsys stats`, and
dump_rep/ with the step module's thunk_metadata.pb and thunk_sequence_after_thunk_passes.txt
(or thunk_sequence.txt)). Standard library only.

Each GPU activity (kernel, memset, memcpy) of the profiled steps is placed in its step (the
`XlaModule:#hlo_module=jit_step...#` NVTX range around the API call that launched it) and
given an HLO instruction:
- nvtx: the innermost `Thunk:#...hlo_op=NAME...#` range around the launching API call
  (command buffers off, or a thunk outside a command buffer);
- cmd: inside a command buffer (the launch's range is `hlo_op=command_buffer_N`), a kernel
  node of the CUDA graph: its node id (CUPTI graphNodeId, low 32 bits) is the position of
  its command in the command buffer (thunk_sequence_after_thunk_passes.txt), found by
  aligning the kernel names of the kCustomKernel commands with the nodes' kernel names;
  (kAsyncDone commands make no node), checked against the kernel names of the kCustomKernel
  commands (the command buffer chosen is the one whose names match best);
- traced: a node of a child graph (a command XLA records by stream capture: cuBLAS, cuDNN,
  collectives, async starts...): child nodes are numbered after the command buffer's own
  nodes, one group per traced command in command order: leading memsets (the library's
  workspace clear), then one activity (cuBLAS, collectives; an async start: one per nested
  leaf command) or, for cuDNN, every kernel up to the next memset, GEMM or copy; what is left
  over is `?`.
Prints a Markdown table, one row per (device, activity, graph node, instruction) in order of
first appearance: count over the steps (a while loop body's kernels count once per
iteration), total ms, mean us.
"""
import collections
import glob
import os
import re
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hlo_summary as h  # noqa: E402

TRACED = ("kCublasLtMatmul", "kCuDnn", "kGemm", "kConvolution", "kCublasLtMatmulF8",
          "kAllGatherStart", "kAllReduceStart", "kReduceScatterStart", "kAllToAllStart",
          "kCollectivePermuteStart", "kNcclAllGatherStart", "kNcclAllReduceStart",
          "kNcclReduceScatterStart", "kNcclAllToAllStart", "kNcclCollectivePermuteStart",
          "kAllGather", "kAllReduce", "kReduceScatter", "kAllToAll", "kCollectivePermute",
          "kCustomCall", "kFft", "kTriangularSolve", "kCholesky", "kNorm", "kCuDnnFmha")


def thunk_names(dump):
    """thunk id -> (kind, HLO instruction) from thunk_metadata.pb."""
    out = {}
    for f in glob.glob(os.path.join(dump, "*thunk_metadata.pb")):
        for v in h.fields(open(f, "rb").read()).get(1, []):
            g = h.fields(v)
            info = h.fields(g[1][0]) if g.get(1) and g[1][0] else {}
            if 3 in info:
                out[info[3][0]] = (h.s(g.get(2)), h.s(info.get(1)))
    return out


def command_buffers(dump):
    """[(commands)] per kCommandBuffer of the thunk sequence: each command (id, kind, kernel
    name or '', nested leaves) in order (its direct children; nested leaves: the commands
    nested under it with nothing nested under them, e.g. kAsyncStart > kDynamicSliceFusion >
    kCopy)."""
    files = (glob.glob(os.path.join(dump, "*thunk_sequence_after_thunk_passes.txt"))
             or glob.glob(os.path.join(dump, "*thunk_sequence.txt")))
    if not files:
        return []
    lines = []
    for line in open(files[0]):
        m = re.match(r"^( *)(\d+): (k\w+)\s*\[[^\]]*\]\s*(\S*)", line)
        if m:
            lines.append((len(m.group(1)), int(m.group(2)), m.group(3), m.group(4)))
    cbs = []
    for i, (ind, _, kind, _) in enumerate(lines):
        if kind != "kCommandBuffer":
            continue
        cmds = []
        for j in range(i + 1, len(lines)):
            ind2, tid, kind2, name = lines[j]
            if ind2 <= ind:
                break
            if ind2 == ind + 4:
                leaves = 0
                for k in range(j + 1, len(lines)):
                    if lines[k][0] <= ind2:
                        break
                    if k + 1 >= len(lines) or lines[k + 1][0] <= lines[k][0]:
                        leaves += 1
                cmds.append((tid, kind2, name if kind2 == "kCustomKernel" else "", leaves))
        cbs.append(cmds)
    return cbs


def load(cap):
    db = sqlite3.connect(os.path.join(cap, "rep.sqlite"))
    tabs = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
    strings = dict(db.execute("select id, value from StringIds"))
    acts = []  # (start, end, device, corr, graphNodeId, name)
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tabs:
        for r in db.execute("select start, end, deviceId, correlationId, graphNodeId, shortName "
                            "from CUPTI_ACTIVITY_KIND_KERNEL"):
            acts.append(r[:5] + (strings.get(r[5], "?"),))
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tabs:
        for r in db.execute("select start, end, deviceId, correlationId, graphNodeId, bytes "
                            "from CUPTI_ACTIVITY_KIND_MEMSET"):
            acts.append(r[:5] + (f"[memset {r[5]} B]",))
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tabs:
        for r in db.execute("select start, end, deviceId, correlationId, graphNodeId, bytes, "
                            "copyKind from CUPTI_ACTIVITY_KIND_MEMCPY"):
            acts.append(r[:5] + (f"[memcpy {r[5]} B kind {r[6]}]",))
    api = {}
    for t in ("CUPTI_ACTIVITY_KIND_RUNTIME",):
        if t in tabs:
            for corr, tid, start in db.execute(f"select correlationId, globalTid, start from {t}"):
                api[corr] = (tid, start)
    ranges = collections.defaultdict(list)  # tid -> [(start, end, text)]
    if "NVTX_EVENTS" in tabs:
        for start, end, text, tid in db.execute(
                "select e.start, e.end, coalesce(e.text, s.value), e.globalTid from NVTX_EVENTS e "
                "left join StringIds s on e.textId = s.id where e.eventType = 59 and e.end > 0"):
            ranges[tid].append((start, end, text or ""))
    return acts, api, ranges


def main():
    cap = sys.argv[1]
    dump = os.path.join(cap, "dump_rep")
    names = thunk_names(dump)
    cbs = command_buffers(dump)
    acts, api, ranges = load(cap)
    rows = []  # (device, step, gpu start, activity, graph node, hlo, how, duration)
    for start, end, dev, corr, node, name in acts:
        tid, t = api.get(corr, (None, None))
        step, hlo = None, None
        inner = None
        for s0, e0, text in ranges.get(tid, []):
            if s0 <= t <= e0:
                if text.startswith("XlaModule:") and "jit_step" in text:
                    step = s0
                elif text.startswith("Thunk:") and (inner is None or s0 >= inner[0]):
                    inner = (s0, text)
        if step is None:
            continue
        if inner:
            m = re.search(r"hlo_op=([^,#]+)", inner[1])
            hlo = m.group(1) if m else "?"
        rows.append([dev, step, start, name, node, hlo, "nvtx" if hlo else "-", end - start])
    # Steps: rank of the XlaModule range start per device.
    steps = collections.defaultdict(set)
    for r in rows:
        steps[r[0]].add(r[1])
    step_no = {(d, s): i for d, ss in steps.items() for i, s in enumerate(sorted(ss))}
    nsteps = max(len(v) for v in steps.values()) if steps else 0
    # Command buffers: map graph nodes.
    by_graph = collections.defaultdict(dict)  # graph -> low id -> activity name
    for r in rows:
        if r[4] and r[5] and r[5].startswith("command_buffer"):
            by_graph[(r[0], r[4] >> 32)][r[4] & 0xFFFFFFFF] = r[3]
    node_map = {}  # (device, graph, low) -> (hlo, how)
    for key, nodes in by_graph.items():
        # The command buffer whose kernel commands, one graph node each in order (none for
        # kAsyncDone), name the graph's nodes best.
        best = None
        for ci, cmds in enumerate(cbs):
            pos = [c for c in cmds if c[1] != "kAsyncDone"]
            n = sum(1 for p, c in enumerate(pos) if c[2] and nodes.get(p) == c[2])
            if best is None or n > best[0]:
                best = (n, pos)
        if not best or best[0] == 0:
            continue
        pos = best[1]
        hlo_of = lambda c: names.get(c[0], ("", f"thunk {c[0]}"))[1]  # noqa: E731
        inner = []
        for low, aname in sorted(nodes.items()):
            if low < len(pos):
                c = pos[low]
                ok = not c[2] or c[2] == aname
                node_map[key + (low,)] = (hlo_of(c), "cmd" if ok else "cmd (name differs)")
            else:
                inner.append((low, aname))
        # Child graphs (traced commands), numbered after the top-level nodes, in order.
        traced = [c for c in pos if c[1] not in ("kCustomKernel", "kCopy", "kMemset32BitValue",
                                                 "kMemzero", "kWaitForStreams")]
        i = 0
        for c in traced:
            if i >= len(inner):
                break
            take = []
            while i < len(inner) and inner[i][1].startswith("[memset"):
                take.append(inner[i])
                i += 1
            if c[1] == "kCuDnn":
                while i < len(inner) and not inner[i][1].startswith(("[memset", "nvjet", "ncclDev",
                                                                     "cutlass", "[memcpy")):
                    take.append(inner[i])
                    i += 1
            else:
                for _ in range(max(1, c[3])):
                    if i < len(inner) and not inner[i][1].startswith("[memset"):
                        take.append(inner[i])
                        i += 1
            for low, _ in take:
                node_map[key + (low,)] = (hlo_of(c), "traced")
        for low, _ in inner[i:]:
            node_map[key + (low,)] = ("?", "traced? (left over)")
    for r in rows:
        if r[4] and r[5] and r[5].startswith("command_buffer"):
            hlo, how = node_map.get((r[0], r[4] >> 32, r[4] & 0xFFFFFFFF), ("?", "?"))
            r[5], r[6] = f"{hlo} (in {r[5]})", how
    # Aggregate over steps, ordered as in the first step of each device.
    agg = collections.OrderedDict()
    rows.sort(key=lambda r: (r[0], step_no[(r[0], r[1])], r[2]))
    for r in rows:
        k = (r[0], r[3], r[4] or 0, r[5])
        if k not in agg:
            agg[k] = [r[6], 0, 0]
        agg[k][1] += 1
        agg[k][2] += r[7]
    out = [f"Kernel -> HLO instruction, {nsteps} profiled steps "
           f"({len(rows)} GPU activities); graph node: CUPTI graphNodeId (graph id << 32 | "
           "node), blank outside CUDA graphs; mapping: see scripts/models/kernel_table.py.",
           "",
           "| device | # | graph node | activity | HLO instruction | mapping | count | "
           "total ms | mean us |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    order = collections.Counter()
    for (dev, name, node, hlo), (how, n, tot) in agg.items():
        order[dev] += 1
        out.append(f"| {dev} | {order[dev]} | {node or ''} | `{name}` | `{hlo}` | {how} | {n} | "
                   f"{tot / 1e6:.3f} | {tot / n / 1e3:.1f} |")
    text = "\n".join(out) + "\n"
    if "--md" in sys.argv:
        open(sys.argv[sys.argv.index("--md") + 1], "w").write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
