"""hlo_summary.py DUMP.hlo.pb [--all]

Reads an XLA after-optimizations HLO dump (`*.hlo.pb`, an HloProto) with no protobuf
library (a minimal wire-format reader; field numbers as in protos/xla/) and prints, per
computation, the instructions that carry work or cross devices: custom-calls (target,
result and operand shapes), dot / ragged-dot / convolution (shapes, contracting and batch
dimensions, and 2*prod(result)*prod(contracted) FLOPs), fusions whose computation holds a
dot (XLA's Triton GEMM fusions; the dot's FLOPs), while loops (known trip count), and
collectives (all-gather, reduce-scatter, all-reduce, all-to-all, collective-permute, their
-start forms). --all prints every instruction (name, opcode, shape, operands). Used to
write tests/data/models/*/README.md.
"""
import json
import re
import sys

TYPES = {1: "pred", 2: "s8", 3: "s16", 4: "s32", 5: "s64", 6: "u8", 7: "u16", 8: "u32",
         9: "u64", 10: "f16", 11: "f32", 12: "f64", 13: "tuple", 14: "opaque", 15: "c64",
         16: "bf16", 17: "token", 18: "c128", 19: "f8e5m2", 20: "f8e4m3fn", 21: "s4", 22: "u4",
         23: "f8e4m3b11fnuz", 24: "f8e5m2fnuz", 25: "f8e4m3fnuz", 28: "f8e4m3", 34: "buffer"}
COLLECTIVES = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all",
               "collective-permute", "ragged-all-to-all", "collective-broadcast")


def varint(b, i):
    r = s = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, i


def fields(b):
    """{field number: [values]}: ints for varints, bytes for length-delimited."""
    out, i = {}, 0
    while i < len(b):
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        out.setdefault(f, []).append(v)
    return out


def ints(vals):
    """A repeated int64: packed (bytes) or not (ints)."""
    r = []
    for v in vals or []:
        if isinstance(v, bytes):
            i = 0
            while i < len(v):
                x, i = varint(v, i)
                r.append(x)
        else:
            r.append(v)
    return r


def s(vals):
    return vals[0].decode() if vals else ""


def shape(b):
    f = fields(b)
    t = (f.get(2) or [0])[0]
    if t == 13:
        return "(" + ", ".join(shape(x) for x in f.get(4, [])) + ")"
    return f"{TYPES.get(t, t)}[{','.join(map(str, ints(f.get(3))))}]"


def dims(b):
    f = fields(b)
    return f"{TYPES.get((f.get(2) or [0])[0], '?')}", ints(f.get(3))


def main():
    data = open(sys.argv[1], "rb").read()
    show_all = "--all" in sys.argv
    mod = fields(fields(data)[1][0])
    comps = []
    for cb in mod.get(3, []):
        c = fields(cb)
        insts = []
        for ib in c.get(2, []):
            f = fields(ib)
            insts.append(dict(
                name=s(f.get(1)), op=s(f.get(2)), shape=shape(f[3][0]) if 3 in f else "",
                raw_shape=f[3][0] if 3 in f else b"", id=(f.get(35) or [0])[0],
                operands=ints(f.get(36)), called=ints(f.get(38)),
                target=s(f.get(28)), dnums=fields(f[30][0]) if 30 in f else {},
                backend=(f.get(43) or [b""])[0],
                op_name=s(fields(f[7][0]).get(2)) if 7 in f else ""))
        comps.append(dict(name=s(c.get(1)), id=(c.get(5) or [0])[0], insts=insts))
    by_id = {i["id"]: i for c in comps for i in c["insts"]}
    comp_by_id = {c["id"]: c for c in comps}
    entry = (mod.get(6) or [0])[0]
    print(f"module {s(mod.get(1))}: {len(comps)} computations, entry "
          f"{comp_by_id.get(entry, {}).get('name', '?')}")

    def dot_flops(inst):
        _, rdims = dims(inst["raw_shape"]) if not inst["shape"].startswith("(") else ("", [])
        if not inst["operands"] or inst["operands"][0] not in by_id:
            return None, ""
        lhs = by_id[inst["operands"][0]]
        _, ldims = dims(lhs["raw_shape"])
        dn = inst["dnums"]
        lc = ints(dn.get(1))
        k = 1
        for d in lc:
            k *= ldims[d]
        n = 1
        for d in rdims:
            n *= d
        desc = (f"lhs_contract={lc} rhs_contract={ints(dn.get(2))} lhs_batch={ints(dn.get(3))}"
                f" rhs_batch={ints(dn.get(4))}")
        return 2 * n * k, desc

    def custom_detail(inst):
        """FLOPs of a cuBLAS GEMM from its backend config; the cuDNN attention's mask and
        the rectangle it spans."""
        try:
            cfg = json.loads(inst["backend"].decode() or "{}")
        except ValueError:
            return ""
        g = cfg.get("gemm_backend_config")
        if g and len(inst["operands"]) >= 2 and inst["operands"][0] in by_id:
            dn = g.get("dot_dimension_numbers", {})
            _, ld = dims(by_id[inst["operands"][0]]["raw_shape"])
            _, rd = dims(by_id[inst["operands"][1]]["raw_shape"])
            k = 1
            for d in dn.get("lhs_contracting_dimensions", []):
                k *= ld[int(d)]
            lb = [int(d) for d in dn.get("lhs_batch_dimensions", [])]
            rb = [int(d) for d in dn.get("rhs_batch_dimensions", [])]
            lc = [int(d) for d in dn.get("lhs_contracting_dimensions", [])]
            rc = [int(d) for d in dn.get("rhs_contracting_dimensions", [])]
            n = 1
            for d in lb:
                n *= ld[d]
            for j, d in enumerate(ld):
                if j not in lb and j not in lc:
                    n *= d
            for j, d in enumerate(rd):
                if j not in rb and j not in rc:
                    n *= d
            return (f" GEMM lhs{ld} rhs{rd} contract {lc}/{rc} batch {lb}/{rb} epilogue "
                    f"{g.get('epilogue')} FLOPs {2 * n * k:.6e}")
        f = cfg.get("cudnn_fmha_backend_config")
        if f:
            it = f.get("intermediate_tensor_shape", {}).get("dimensions", [])
            return (f" fmha mask {f.get('mask_type')} flash {f.get('is_flash_attention')} "
                    f"scores {'x'.join(it)} (B x H x Sq x Skv)")
        return ""

    def operands(inst):
        return ", ".join(f"{by_id[o]['name']}:{by_id[o]['shape']}" if o in by_id else str(o)
                         for o in inst["operands"])

    for c in comps:
        lines = []
        for i in c["insts"]:
            op = i["op"]
            if show_all:
                lines.append(f"  {i['name']} = {op} {i['shape']} ({operands(i)})"
                             + (f" target={i['target']}" if i["target"] else ""))
                continue
            if op == "custom-call":
                lines.append(f"  {i['name']}: custom-call {i['target']} -> {i['shape']} "
                             f"({operands(i)}){custom_detail(i)}  [{i['op_name'][-90:]}]")
            elif op in ("dot", "ragged-dot", "convolution", "scaled-dot"):
                fl, desc = dot_flops(i) if op == "dot" else (None, "")
                lines.append(f"  {i['name']}: {op} -> {i['shape']} ({operands(i)}) {desc}"
                             + (f" FLOPs {fl:.6e}" if fl else ""))
            elif op == "fusion":
                for cid in i["called"]:
                    sub = comp_by_id.get(cid)
                    for j in (sub or {}).get("insts", []):
                        if j["op"] in ("dot", "ragged-dot", "scaled-dot", "convolution"):
                            fl, desc = dot_flops(j) if j["op"] == "dot" else (None, "")
                            kind = ""
                            m = re.search(rb'"kind":"(\w+)"', i["backend"])
                            if m:
                                kind = m.group(1).decode()
                            lines.append(f"  {i['name']}: fusion ({kind}) with {j['op']} "
                                         f"{j['shape']} ({operands(j)}) {desc}"
                                         + (f" FLOPs {fl:.6e}" if fl else "")
                                         + f" -> {i['shape']}")
            elif op == "while":
                m = re.search(rb'"known_trip_count":\{"n":"(\d+)"', i["backend"])
                lines.append(f"  {i['name']}: while, trip count "
                             f"{m.group(1).decode() if m else '?'}, body/cond "
                             f"{[comp_by_id[x]['name'] for x in i['called'] if x in comp_by_id]}")
            elif any(op == k or op == k + "-start" for k in COLLECTIVES):
                lines.append(f"  {i['name']}: {op} -> {i['shape']} ({operands(i)})")
            elif op == "call" or op == "conditional":
                lines.append(f"  {i['name']}: {op} "
                             f"{[comp_by_id[x]['name'] for x in i['called'] if x in comp_by_id]}")
        if lines:
            print(f"computation {c['name']}:")
            print("\n".join(lines))


if __name__ == "__main__":
    main()
