"""Checks `nsys_jax_pipe.load` against what nsys-jax's notebook computed on the same archives.

Usage: python frames_match_notebook.py NOTEBOOK_JSON_XZ CACHE_DIR ARCHIVE...

With warm-up removal and alignment: the steady module rows are the notebook's
`steady_modules` (same (ProgramId, ProgramExecution, Device) rows, ProjDurMs equal, ProjStartMs
within 1e-6 ms after alignment) and the steady communication rows its `communication_rows`
(MessageSize and CollectiveSize equal, BusBandwidthGBPerSec within 1e-6 relative); the device
corrections are the notebook's. The polars variant has the same rows. Prints one line per check.
"""

import json
import lzma
import math
import sys

import nsys_jax_pipe

reference_path, cache_dir, *archives = sys.argv[1:]
with lzma.open(reference_path, "rt") as f:
    ref = json.load(f)


def fail(msg):
    print(f"FAIL {msg}")
    sys.exit(1)


data = nsys_jax_pipe.load(archives, cache_dir=cache_dir)
for name in ("module", "thunk", "compile", "communication"):
    if getattr(data, name) is None:
        fail(f"frame {name} missing")
if list(data.module.index.names) != ["ProgramId", "ProgramExecution", "Device"]:
    fail(f"module index {data.module.index.names}")
want_thunk = ["ProgramId", "ProgramExecution", "Name", "ThunkExecution", "Device"]
for name in ("thunk", "communication"):
    if list(getattr(data, name).index.names) != want_thunk:
        fail(f"{name} index {getattr(data, name).index.names}")
if list(data.compile.index.names) != ["ProfileName", "RangeId"]:
    fail(f"compile index {data.compile.index.names}")
if "Communication" not in data.thunk.columns:
    fail("thunk frame without Communication")

# Device corrections.
want = {int(k): v for k, v in ref["alignment"]["device_corrections_ms"].items()}
got = data.device_corrections_ms
if set(got) != set(want) or any(abs(got[d] - want[d]) > 1e-6 for d in want):
    fail(f"device corrections {got} != {want}")
print(f"ok device corrections {got}")

# Steady module rows.
cols = ref["steady_modules_columns"]
rows = {tuple(r[:3]): dict(zip(cols, r)) for r in ref["steady_modules"]}
mod = data.module.reset_index()
got = {
    (r.ProgramId, int(r.ProgramExecution), int(r.Device)): r
    for r in mod.itertuples(index=False)
}
if set(got) != set(rows):
    fail(f"steady module rows: {len(got)} vs {len(rows)}; only here "
         f"{sorted(set(got) - set(rows))[:3]}, only in the notebook {sorted(set(rows) - set(got))[:3]}")
for k, r in rows.items():
    g = got[k]
    if g.ProjDurMs != r["ProjDurMs"] and abs(g.ProjDurMs - r["ProjDurMs"]) > 1e-9:
        fail(f"module {k} ProjDurMs {g.ProjDurMs} != {r['ProjDurMs']}")
    if abs(g.ProjStartMs - r["ProjStartMs"]) > 1e-6:
        fail(f"module {k} aligned ProjStartMs {g.ProjStartMs} != {r['ProjStartMs']}")
    if g.Name != r["Name"] or int(g.NumThunks) != r["NumThunks"]:
        fail(f"module {k} Name/NumThunks {g.Name}/{g.NumThunks} != {r['Name']}/{r['NumThunks']}")
print(f"ok {len(rows)} steady module rows")

# Steady communication rows.
cols = ref["communication_rows_columns"]
rows = {tuple(r[:5]): dict(zip(cols, r)) for r in ref["communication_rows"]}
comm = data.communication.reset_index()
got = {
    (r.ProgramId, int(r.ProgramExecution), r.Name, int(r.ThunkExecution), int(r.Device)): r
    for r in comm.itertuples(index=False)
}
if set(got) != set(rows):
    fail(f"communication rows: {len(got)} vs {len(rows)}")
worst = 0.0
for k, r in rows.items():
    g = got[k]
    if int(g.MessageSize) != r["MessageSize"] or int(g.CollectiveSize) != r["CollectiveSize"]:
        fail(f"communication {k} sizes {g.MessageSize}/{g.CollectiveSize}")
    if g.Collective != r["Collective"]:
        fail(f"communication {k} collective {g.Collective} != {r['Collective']}")
    rel = abs(g.BusBandwidthGBPerSec - r["BusBandwidthGBPerSec"]) / abs(r["BusBandwidthGBPerSec"])
    worst = max(worst, rel)
    if not rel <= 1e-6:
        fail(f"communication {k} bus bandwidth {g.BusBandwidthGBPerSec} vs {r['BusBandwidthGBPerSec']}")
print(f"ok {len(rows)} steady communication rows, bus bandwidth within {worst:.2e} relative")

# Warm-up rows counted as the notebook does.
init = ref["warmup"]["init_rows"]
for name in ("module", "communication"):
    n = len(getattr(data.init, name))
    if n != init[name]:
        fail(f"init {name} rows {n} != {init[name]}")
print(f"ok init rows module {len(data.init.module)}, communication {len(data.init.communication)}")

# The polars variant: the same rows, the index levels as columns.
pl = nsys_jax_pipe.load(archives, cache_dir=cache_dir, polars=True)
import polars

if not isinstance(pl.module, polars.DataFrame):
    fail(f"polars=True gave {type(pl.module)}")
if pl.module.columns[:3] != ["ProgramId", "ProgramExecution", "Device"]:
    fail(f"polars module columns {pl.module.columns}")
if pl.module.height != len(data.module) or pl.communication.height != len(data.communication):
    fail("polars frames have other rows")
total = pl.module["ProjDurMs"].sum()
if not math.isclose(total, data.module["ProjDurMs"].sum(), rel_tol=1e-12):
    fail("polars module ProjDurMs differs")
print(f"ok polars frames: module {pl.module.height} rows, communication {pl.communication.height}")
print("ALL OK")
