"""nsys-jax's adjustments of the frames, on pandas frames indexed as nsys-jax's:

- autotuning removal: module and thunk executions of no known program (the autotuner's
  measurements, ProgramId "unknown") are dropped;
- clock alignment: each device's clock is corrected by the median, over the collectives that
  span the most devices, of its end time's skew from the mean end time of that collective;
- warm-up removal: executions of a program below a threshold are initialisation — 1 when its
  compilation is in the profile, plus 1 when the profile has communication — and the rest is
  steady state (everything, when that would leave a non-empty frame with none).
"""

import warnings
from dataclasses import dataclass, field
from typing import Any, Optional

import pandas as pd

INSTANCE = ["ProgramId", "ProgramExecution", "Name", "ThunkExecution"]


@dataclass
class Frames:
    """The frames of a profile: pandas data frames indexed as nsys-jax's (polars frames, with
    the index levels as leading columns, when loaded with ``polars=True``). A frame that was
    not asked for is ``None``."""

    module: Optional[Any] = None
    thunk: Optional[Any] = None
    compile: Optional[Any] = None
    communication: Optional[Any] = None
    #: The warm-up rows that warm-up removal took out (a ``Frames``), else ``None``.
    init: Optional["Frames"] = None
    #: The clock correction subtracted from each device's timestamps [ms]; empty when the
    #: frames were not aligned.
    device_corrections_ms: dict = field(default_factory=dict)


def _shift(df: Optional[pd.DataFrame], corrections: pd.Series) -> Optional[pd.DataFrame]:
    if df is None or not len(df):
        return df
    devices = df.index.get_level_values("Device")
    offset = devices.map(corrections).fillna(0.0).to_numpy(dtype=float)
    df = df.copy()
    df["ProjStartMs"] = df["ProjStartMs"].to_numpy() - offset
    return df


def remove_autotuning(frames: Frames) -> Frames:
    """Without the executions of ProgramId "unknown" (nsys-jax's ``remove_autotuning_detail``;
    the compile frame has no autotuner detail to begin with)."""

    def known(df):
        if df is None or not len(df):
            return df
        return df[df.index.get_level_values("ProgramId") != "unknown"]

    return Frames(
        module=known(frames.module),
        thunk=known(frames.thunk),
        compile=frames.compile,
        communication=known(frames.communication),
        init=frames.init,
        device_corrections_ms=frames.device_corrections_ms,
    )


def align_timestamps(frames: Frames) -> Frames:
    """Align the device clocks of frames loaded from several processes (nsys-jax's
    ``align_profiler_data_timestamps``). Without communication nothing changes; when the
    largest collectives do not span every profiled device, or span one device only, a warning
    says why and nothing changes."""
    comm = frames.communication
    if comm is None or not len(comm):
        return frames
    devices = comm.index.get_level_values("Device").unique()
    size = int(comm["CollectiveSize"].max())
    if size == 1:
        warnings.warn(f"cannot align {len(devices)} devices: the largest collective spans one")
        return frames
    if size != len(devices):
        warnings.warn(
            f"not aligning {len(devices)} profiled devices with collectives of {size} devices"
        )
        return frames
    wide = comm[comm["CollectiveSize"] == size]
    end = wide["ProjStartMs"] + wide["ProjDurMs"] + wide["ProjDurHiddenMs"]
    mean = end.groupby(level=INSTANCE, sort=False).transform("mean")
    skew = end - mean
    corrections = skew.groupby(level="Device").median()
    return Frames(
        module=_shift(frames.module, corrections),
        thunk=_shift(frames.thunk, corrections),
        compile=frames.compile,
        communication=_shift(frames.communication, corrections),
        init=frames.init,
        device_corrections_ms={int(d): float(c) for d, c in corrections.items()},
    )


def split_warmup(frames: Frames) -> Frames:
    """The steady-state frames, with the warm-up rows in ``.init`` (nsys-jax's
    ``apply_warmup_heuristics``; its init frames carry the compile frame, here both do)."""
    compiled = set()
    if frames.compile is not None and len(frames.compile):
        compiled = set(frames.compile["ProgramId"].unique())
    comm = frames.communication
    extra = 1 if comm is not None and len(comm) else 0
    steady = Frames(compile=frames.compile, device_corrections_ms=frames.device_corrections_ms)
    init = Frames(compile=frames.compile)
    for name in ("communication", "thunk", "module"):
        df = getattr(frames, name)
        if df is None:
            continue
        programs = df.index.get_level_values("ProgramId")
        threshold = programs.isin(compiled).astype(int) + extra
        is_init = df.index.get_level_values("ProgramExecution") < threshold
        if len(df) and is_init.all():
            warnings.warn(
                f"could not identify steady-state execution in the {name} frame; treating "
                "everything as steady state (profile more executions)"
            )
            is_init[:] = False
        setattr(init, name, df[is_init])
        setattr(steady, name, df[~is_init])
    steady.init = init
    return steady
