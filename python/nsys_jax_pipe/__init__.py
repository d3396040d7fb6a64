"""nsys-jax-pipe from Python: the command-line tool (installed beside this package) and the
profile's frames as pandas or polars data frames, shaped as nsys-jax's ``load_profiler_data``
returns them.

    import nsys_jax_pipe
    data = nsys_jax_pipe.load(["rank0.zip", "rank1.zip"])
    data.module.groupby("ProgramId")["ProjDurMs"].sum()
"""

from ._bin import find_binary
from ._load import Frames, load
from ._transforms import align_timestamps, remove_autotuning, split_warmup

__all__ = ["Frames", "align_timestamps", "find_binary", "load", "remove_autotuning", "split_warmup"]
