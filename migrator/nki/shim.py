"""Scoped import shim: make ``neuronxcc.nki`` and ``nki`` resolve to the emulator.

``simulate()`` installs module objects into ``sys.modules`` and restores every entry it touched
on exit, also after an exception (house rule 6). Nested use works (each level restores what it
saw). A dialect is installed only when the real package is absent, unless ``force=True``.
Installation is process-wide while active, so do not overlap it across threads.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import itertools
import sys
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from . import compiler_mod, frontend, isa_dst, isa_legacy, language, typing_mod
from .errors import NkiHostComputeError, unsupported
from .options import EmulatorOptions
from .tensor import Tensor

_MARK = "__cuda2nki_emulator__"
_MISSING = object()
_counter = itertools.count()


def real_package_available(name: str) -> bool:
    """True when an importable ``name`` exists that is not this emulator's shim."""
    module = sys.modules.get(name)
    if module is not None:
        return not getattr(module, _MARK, False)
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    # A bare directory named like the package (e.g. tests/nki on sys.path) is a namespace
    # package, not the Neuron SDK: real packages have an origin file.
    return spec is not None and spec.origin not in (None, "namespace")


def _package(name: str, attrs: dict[str, Any]) -> ModuleType:
    module = ModuleType(name, f"cuda2nki emulator stand-in for {name}")
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    module.__path__ = []  # a package, so submodule imports are resolved through sys.modules
    setattr(module, _MARK, True)
    for key, value in attrs.items():
        setattr(module, key, value)

    def missing(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if attr in _HOST_MODULES:  # `nl.np`: numpy reached through the NKI namespace
            raise NkiHostComputeError(f"{name}.{attr} is {attr} on the host, not NKI")
        raise unsupported(f"{name}.{attr}")

    module.__getattr__ = missing  # type: ignore[method-assign]
    return module


_HOST_MODULES = {"np", "numpy", "math", "torch", "jax", "scipy"}
_SOURCES: weakref.WeakKeyDictionary[ModuleType, ModuleType] = weakref.WeakKeyDictionary()


# Emulator modules whose functions and classes make up each facade's public surface; helpers
# the implementation imports from elsewhere in the emulator (checks, tracing, errors, the
# Tensor class) are not NKI API and stay out of it.
_SURFACE = {
    "language": {"language", "nl_memory", "nl_composite", "nl_int", "nl_extra"},
    "isa_legacy": {"isa_legacy", "isa_common"},
    "isa_dst": {"isa_dst", "isa_common"},
}


def _public(module: ModuleType, value: Any) -> bool:
    if isinstance(value, ModuleType):
        return False
    if not callable(value):
        return True
    owner = str(getattr(value, "__module__", ""))
    if not owner.startswith("migrator."):
        return False
    allowed = _SURFACE.get(module.__name__.rsplit(".", 1)[-1])
    return allowed is None or owner.rsplit(".", 1)[-1] in allowed


def public_api(module: ModuleType) -> dict[str, Any]:
    """The names a facade of ``module`` exposes (see ``_facade``)."""
    internal = vars(module).get("_INTERNAL", frozenset())
    return {
        k: v
        for k, v in vars(module).items()
        if not k.startswith("_") and k not in internal and _public(module, v)
    }


def _facade(name: str, module: ModuleType) -> ModuleType:
    """The public NKI surface of an emulator module as a package of its own: none of the
    modules or foreign helpers its implementation imports (numpy as `np`, `math`, typing),
    so a kernel cannot reach host compute through `nl.np`."""
    attrs = public_api(module)
    facade = _package(name, attrs)
    _SOURCES[facade] = module  # (see replaced_api); not an attribute a kernel could follow
    return facade


def replaced_api(namespace: dict[str, Any]) -> list[str]:
    """NKI functions a kernel file replaced (`nl.add = my_add`): facade attributes reachable
    from its globals that are no longer the emulator's own objects."""
    out: list[str] = []
    seen: set[int] = set()
    todo = [v for v in namespace.values() if isinstance(v, ModuleType)]
    while todo:
        mod = todo.pop()
        if id(mod) in seen or not getattr(mod, _MARK, False):
            continue
        seen.add(id(mod))
        source = _SOURCES.get(mod)
        for k, v in vars(mod).items():
            if isinstance(v, ModuleType):
                todo.append(v)
            elif source is not None and k[:1] != "_" and getattr(source, k, None) is not v:
                out.append(f"{mod.__name__}.{k}")
    return sorted(out)


def _modules(options: EmulatorOptions | None, legacy: bool, new: bool) -> dict[str, ModuleType]:
    jit = frontend.make_jit(options)
    common = {
        "jit": jit,
        "baremetal": jit,
        "simulate_kernel": frontend.simulate_kernel,
        "trace": frontend.trace,
        "benchmark": frontend.benchmark,
        "profile": frontend.profile_decorator,
        "tensor": Tensor,
    }
    out: dict[str, ModuleType] = {}
    for root, isa, extra in (("neuronxcc.nki", isa_legacy, {}),
                             ("nki", isa_dst, {"simulate": frontend.simulate})):  # fmt: skip
        if (root == "nki" and not new) or (root != "nki" and not legacy):
            continue
        subs = {"language": _facade(f"{root}.language", language),
                "isa": _facade(f"{root}.isa", isa),
                "typing": _facade(f"{root}.typing", typing_mod),
                "compiler": _facade(f"{root}.compiler", compiler_mod)}  # fmt: skip
        out[root] = _package(root, {**common, **subs, **extra})
        out.update({f"{root}.{k}": v for k, v in subs.items()})
    if legacy:
        out["neuronxcc"] = _package("neuronxcc", {"nki": out["neuronxcc.nki"]})
    return out


@contextlib.contextmanager
def simulate(*, force: bool = False, options: EmulatorOptions | None = None) -> Iterator[None]:
    """Within the block, ``import neuronxcc.nki`` / ``import nki`` give the emulator."""
    legacy = force or not real_package_available("neuronxcc")
    new = force or not real_package_available("nki")
    saved: dict[str, Any] = {}
    try:
        for name, module in _modules(options, legacy, new).items():
            saved[name] = sys.modules.get(name, _MISSING)
            sys.modules[name] = module
        yield
    finally:
        for name, previous in saved.items():
            if previous is _MISSING:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous


def load_kernel_module(
    path: str | Path, *, force: bool = False, options: EmulatorOptions | None = None
) -> ModuleType:
    """Import a user's kernel file with the shim active; kernels keep working afterwards."""
    path = Path(path)
    name = f"_cuda2nki_kernels_{path.stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import kernel file {path}")
    module = importlib.util.module_from_spec(spec)
    with simulate(force=force, options=options):
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        finally:
            sys.modules.pop(name, None)
    return module


def kernel_from_module(module: ModuleType, name: str) -> Callable[..., Any]:
    """Look up a kernel by name in a module loaded with ``load_kernel_module``."""
    try:
        return getattr(module, name)
    except AttributeError as exc:
        raise LookupError(f"kernel {name!r} not found in {module.__file__}") from exc
