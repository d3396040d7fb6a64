# Written by `nsys-jax-pipe run` into its scratch folder and put first on PYTHONPATH, so that
# the program's NVTX ranges made with the `nvtx` package reach the report.
#
# The package (0.2.12 and later) asks NVTX whether a tool enables each domain it creates
# (nvtxDomainIsEnabled, an NVTX extension call) and, when told no, hands out a domain that
# does nothing. Nsight Systems releases whose injection library does not answer that call
# (2023.4 does not) are told no for every domain, and every `nvtx.annotate`, `push_range` and
# `mark` is dropped. Under Nsight Systems (NVTX_INJECTION64_PATH set) this makes the
# package's domains real without asking; their calls then reach Nsight Systems, which
# records them. Nothing else changes. `run --no-nvtx-workaround` leaves it out.
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_TARGET = "nvtx._lib.lib"


def _chain():
    """Run the sitecustomize this file shadows, if there is one."""
    paths = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def _patch(lib):
    domain, handle = getattr(lib, "Domain", None), getattr(lib, "DomainHandle", None)
    if domain is None or handle is None or not hasattr(lib, "DummyDomain"):
        return  # not the package this works around

    def __new__(cls, name=None):
        obj = object.__new__(cls)
        obj.handle = handle(name)
        return obj

    domain.__new__ = __new__


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        try:
            _patch(module)
        except Exception as e:  # never break the program
            print(f"nsys-jax-pipe: NVTX workaround not applied: {e}", file=sys.stderr)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


try:
    _chain()
except Exception as e:
    print(f"nsys-jax-pipe: the program's own sitecustomize failed: {e}", file=sys.stderr)

if os.environ.get("NVTX_INJECTION64_PATH") and _TARGET not in sys.modules:
    sys.meta_path.insert(0, _Finder())
