"""``load``: a profile's frames from nsys-jax archives or Nsight Systems reports."""

import os
import subprocess
import tempfile
from typing import Iterable, Optional, Union

import pandas as pd

from ._bin import find_binary
from ._transforms import Frames, align_timestamps, remove_autotuning, split_warmup

FRAMES = ("module", "thunk", "compile", "communication")
PathLike = Union[str, "os.PathLike[str]"]


def _frames_dir(paths: list[str], out: str, cache_dir: Optional[PathLike]) -> None:
    cmd = [find_binary(), "analyze", "--no-analysis", "--quiet", "--frames", out]
    if cache_dir is not None:
        cmd += ["--cache-dir", os.fspath(cache_dir)]
    cmd += ["--", *paths]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        lines = [l for l in proc.stderr.splitlines() if l.strip()]
        raise RuntimeError(lines[-1] if lines else f"nsys-jax-pipe exited with {proc.returncode}")


def load(
    paths: Union[PathLike, Iterable[PathLike]],
    frames: Iterable[str] = FRAMES,
    warmup_removal: bool = True,
    align: bool = True,
    polars: bool = False,
    autotuning_removal: bool = True,
    cache_dir: Optional[PathLike] = None,
) -> Frames:
    """The frames of the profiled processes in ``paths`` (nsys-jax archives, zip or
    extracted, or ``.nsys-rep`` reports with their XLA dumps), as nsys-jax's
    ``load_profiler_data`` returns them: ``module`` indexed by (ProgramId, ProgramExecution,
    Device); ``thunk`` and ``communication`` by (ProgramId, ProgramExecution, Name,
    ThunkExecution, Device); ``compile`` by (ProfileName, RangeId); times in ms.

    ``autotuning_removal`` drops the autotuner's executions (ProgramId "unknown"; nsys-jax's
    ``remove_autotuning_detail``), ``align`` corrects each device's clock from the collectives (nsys-jax's
    ``align_profiler_data_timestamps``) and ``warmup_removal`` keeps the steady state, with the
    warm-up rows in ``.init`` (its ``apply_warmup_heuristics``). The work is done by the
    ``nsys-jax-pipe`` binary through its cache, so loading the same profiles again is quick.
    ``polars=True`` returns polars frames, the index levels as leading columns.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError("load: no profiles given")
    wanted = list(frames)
    unknown = sorted(set(wanted) - set(FRAMES))
    if unknown:
        raise ValueError(f"load: unknown frames {unknown}; choose among {list(FRAMES)}")
    with tempfile.TemporaryDirectory(prefix="nsys-jax-pipe-frames-") as out:
        _frames_dir(paths, out, cache_dir)
        # Alignment needs the communication frame, warm-up removal the compile frame.
        data = Frames(**{f: pd.read_parquet(os.path.join(out, f + ".parquet")) for f in FRAMES})
    if autotuning_removal:
        data = remove_autotuning(data)
    if align:
        data = align_timestamps(data)
    if warmup_removal:
        data = split_warmup(data)
    result = _select(data, wanted)
    if data.init is not None:
        result.init = _select(data.init, wanted)
    if polars:
        result = _to_polars(result)
    return result


def _select(data: Frames, wanted: list[str]) -> Frames:
    return Frames(
        **{f: getattr(data, f) if f in wanted else None for f in FRAMES},
        device_corrections_ms=data.device_corrections_ms,
    )


def _to_polars(data: Frames) -> Frames:
    import polars as pl

    def convert(df):
        return None if df is None else pl.from_pandas(df.reset_index())

    out = Frames(
        **{f: convert(getattr(data, f)) for f in FRAMES},
        device_corrections_ms=data.device_corrections_ms,
    )
    if data.init is not None:
        out.init = _to_polars(data.init)
    return out
