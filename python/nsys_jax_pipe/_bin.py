"""Where the ``nsys-jax-pipe`` binary is, and running it under another name."""

import os
import shutil
import sys
import sysconfig

NAME = "nsys-jax-pipe"


def find_binary() -> str:
    """The path of the ``nsys-jax-pipe`` binary: ``$NSYS_JAX_PIPE_BIN`` when set, else the one
    installed with this package (the scripts folder of its environment), else the first on
    ``PATH``."""
    explicit = os.environ.get("NSYS_JAX_PIPE_BIN")
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise FileNotFoundError(f"NSYS_JAX_PIPE_BIN={explicit}: not an executable file")
        return explicit
    exe = NAME + (sysconfig.get_config_var("EXE") or "")
    schemes = [sysconfig.get_default_scheme()]
    user = f"{os.name}_user"
    if user in sysconfig.get_scheme_names():
        schemes.append(user)
    for scheme in schemes:
        path = os.path.join(sysconfig.get_path("scripts", scheme), exe)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    # Beside the running interpreter (a virtual environment's bin/).
    path = os.path.join(os.path.dirname(sys.executable), exe)
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return path
    found = shutil.which(NAME)
    if found:
        return found
    raise FileNotFoundError(
        f"{NAME}: binary not found (pip install nsys-jax-pipe, or set NSYS_JAX_PIPE_BIN)"
    )


def exec_as(name: str, args: list[str]) -> None:
    """Replace this process by the binary, invoked as ``name`` (it reads its own name)."""
    os.execv(find_binary(), [name, *args])
