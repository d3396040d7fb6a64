# Written by `nsys-jax-pipe run` into its scratch folder and put first on PYTHONPATH. It does
# two things for the profiled program, and nothing else:
#
# 1. The program's NVTX ranges made with the `nvtx` package reach the report
#    (NSYS_JAX_PIPE_NVTX_WORKAROUND=1, under Nsight Systems only). The package (0.2.12 and
#    later) asks NVTX whether a tool enables each domain it creates (nvtxDomainIsEnabled, an
#    NVTX extension call) and, when told no, hands out a domain that does nothing. Nsight
#    Systems releases whose injection library does not answer that call (2023.4 does not) are
#    told no for every domain, and every `nvtx.annotate`, `push_range` and `mark` is dropped.
#    This makes the package's domains real without asking. `run --no-nvtx-workaround` turns it
#    off.
# 2. What the program ran with is recorded (NSYS_JAX_PIPE_RUN_METADATA names a folder): the
#    Python, the installed versions of JAX and its plugins, those the program imported, the
#    JAX/XLA/NCCL/CUDA variables as the process sees them, and the JAX backend once one is
#    initialised. The record is written when the process starts (without the installed
#    versions, which take tens of milliseconds to ask), when JAX has been imported and when the
#    process ends normally (a process ended by a signal keeps the earlier one).
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_NVTX = "nvtx._lib.lib"
_PACKAGES = %PACKAGES%
_PREFIXES = %PREFIXES%


# The folders of every copy of this hook in the process (a program profiled by a `run` inside
# another has two on its path): each runs the sitecustomize after them all, and only the first
# to run installs anything.
_COPIES = sys.__dict__.setdefault("_nsys_jax_pipe_hooks", set())
_FIRST = not _COPIES
_COPIES.add(_HERE)


def _chain():
    """Run the sitecustomize this file shadows, if there is one."""
    paths = [p for p in sys.path if os.path.abspath(p or ".") not in _COPIES]
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
    def __init__(self, inner, after):
        self.inner = inner
        self.after = after

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def __getattr__(self, name):
        # Everything else (get_data, get_resource_reader, is_package, ...) is the real loader's.
        return getattr(self.inner, name)

    def exec_module(self, module):
        self.inner.exec_module(module)
        try:
            self.after(module)
        except Exception as e:  # never break the program
            print(f"nsys-jax-pipe: {e}", file=sys.stderr)


class _Finder(importlib.abc.MetaPathFinder):
    """Calls `after(module)` once each module named in `targets` has been executed."""

    def __init__(self, targets):
        self.targets = targets
        self.busy = set()

    def find_spec(self, name, path, target=None):
        after = self.targets.get(name)
        if after is None or name in self.busy:
            return None
        self.busy.add(name)
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    if spec.loader is not None:
                        spec.loader = _Loader(spec.loader, after)
                    return spec
            return None
        finally:
            self.busy.discard(name)


def _environment():
    return {k: v for k, v in os.environ.items() if k.startswith(_PREFIXES)}


def _installed():
    out = {}
    try:
        from importlib import metadata
    except ImportError:
        return out
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except Exception:
            pass
    return out


def _backend():
    jax = sys.modules.get("jax")
    bridge = sys.modules.get("jax._src.xla_bridge")
    if jax is None or bridge is None:
        return None
    ready = getattr(bridge, "backends_are_initialized", None)
    if ready is None or not ready():
        return None  # asking would initialise one
    devices = jax.devices()
    client = devices[0].client if devices else None
    return {
        "platform": devices[0].platform if devices else "",
        "platform_version": getattr(client, "platform_version", "") or "",
        "devices": [getattr(d, "device_kind", str(d)) for d in devices],
    }


class _Record:
    def __init__(self, folder):
        self.folder = folder
        # Asked once JAX is imported or the process ends (tens of ms: not at start-up).
        self.packages = None
        self.backend = None

    def write(self, at_exit=False, starting=False):
        if self.packages is None and not starting:
            self.packages = _installed()
        imported = {}
        for name in ("jax", "jaxlib", "flax", "optax", "numpy", "transformer_engine"):
            m = sys.modules.get(name)
            if m is not None:
                imported[name] = str(getattr(m, "__version__", ""))
        if at_exit and self.backend is None:
            try:
                self.backend = _backend()
            except Exception:
                pass
        backend = self.backend
        record = {
            "pid": os.getpid(),
            "executable": sys.executable or "",
            "python": sys.version.split()[0],
            "packages": self.packages or {},
            "imported": imported,
            "environment": _environment(),
            "backend": backend,
        }
        path = os.path.join(self.folder, f"python-{os.getpid()}.json")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(record, f)
        os.replace(tmp, path)


try:
    _chain()
except Exception as e:
    print(f"nsys-jax-pipe: the program's own sitecustomize failed: {e}", file=sys.stderr)

_targets = {}
if _FIRST and (
    os.environ.get("NSYS_JAX_PIPE_NVTX_WORKAROUND") == "1"
    and os.environ.get("NVTX_INJECTION64_PATH")
    and _NVTX not in sys.modules
):
    _targets[_NVTX] = _patch

_folder = os.environ.get("NSYS_JAX_PIPE_RUN_METADATA")
if _FIRST and _folder:
    try:
        _record = _Record(_folder)
        _record.write(starting=True)
        import atexit

        atexit.register(lambda: _record.write(at_exit=True))
        if "jax" not in sys.modules:

            def _jax_imported(_module):
                _record.write()
                # Registered after JAX's own exit handlers, so it runs before they let the
                # backend go.
                atexit.register(lambda: _record.write(at_exit=True))

            _targets["jax"] = _jax_imported
    except Exception as e:
        print(f"nsys-jax-pipe: run metadata not recorded: {e}", file=sys.stderr)

if _targets:
    sys.meta_path.insert(0, _Finder(_targets))
