"""``python -m nsys_jax_pipe ARGS``: the ``nsys-jax-pipe`` command."""

import sys

from ._bin import exec_as

if __name__ == "__main__":
    exec_as("nsys-jax-pipe", sys.argv[1:])
