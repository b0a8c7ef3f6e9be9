"""Kernel entry points: ``nki.jit``, grid launch ``kernel[g0, g1](...)``, ``simulate_kernel``.

A launch wraps numpy arguments as HBM tensors, runs the kernel once per grid instance
(serially, sharing ``shared_hbm`` — nki-facts §1.6), checks the outputs for uninitialised
elements and converts returned tensors back to numpy arrays. Inputs the kernel wrote are copied
back into the caller's arrays, as the simulators do (nki-facts §1.4).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .errors import NkiConstraintError, NkiKernelError, location_from_traceback, unsupported
from .options import EmulatorOptions
from .run import Run, maybe_current_run
from .storage import compute_deferred
from .tensor import Tensor

Grid = tuple[int, ...]


def _grid(spec: Any) -> Grid:
    spec = spec if isinstance(spec, tuple) else (spec,)
    if not all(isinstance(g, int | np.integer) for g in spec):
        raise unsupported(f"launch grids with non-integer dimensions ({spec!r}) in nki.jit")
    return tuple(int(g) for g in spec)


def _instances(grid: Grid, options: EmulatorOptions) -> list[tuple[int, ...]]:
    """Grid instance indices in launch order (row-major, or shuffled with the seed)."""
    order = [tuple(int(i) for i in idx) for idx in np.ndindex(*grid)] if grid else [()]
    if options.grid_order == "shuffled":
        perm = np.random.default_rng(options.seed).permutation(len(order))
        order = [order[i] for i in perm]
    return order


def _to_numpy(value: Any, run: Run, handed: set[int] | None = None) -> Any:
    handed = set() if handed is None else handed
    if isinstance(value, Tensor):
        data, valid = value.read()
        if valid is not None and not valid.all():
            bad = np.argwhere(~valid)
            name = f" '{value.storage.name}'" if value.storage.name else ""
            run.violation(
                "err_uninitialized_output",
                f"returned tensor{name} of shape {value.shape} has {len(bad)} element(s) that "
                f"were never written or were computed from uninitialised memory (first at index "
                f"{tuple(int(i) for i in bad[0])}); check masks, loop bounds and reads of "
                "nl.ndarray tiles before they are written (location: where it was allocated)",
                run.options.uninit_outputs,
                value.storage.origin,
            )
        storage = value.storage
        whole = (
            not storage.borrowed
            and storage.data.base is None
            and data.shape == storage.data.shape
            and (data is storage.data or data.base is storage.data)
        )
        if whole and id(storage) not in handed:
            handed.add(id(storage))  # the run is over: hand the output array over, no copy
            return storage.data
        return np.array(data, copy=True)
    if isinstance(value, tuple | list):
        return type(value)(_to_numpy(v, run, handed) for v in value)
    return value


def launch(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    grid: Grid = (),
    options: EmulatorOptions | None = None,
) -> tuple[Any, Run]:
    """Run ``fn`` on numpy inputs under a fresh ``Run``; return (numpy outputs, run)."""
    outer = maybe_current_run()
    if outer is not None:
        compute_deferred(outer)  # a launch from inside a kernel may write what those read
    run = Run(options=options or EmulatorOptions(), grid=grid)
    wrapped = [
        Tensor.wrap_input(a, name=f"arg{i}") if isinstance(a, np.ndarray) else a
        for i, a in enumerate(args)
    ]
    kw = {
        k: Tensor.wrap_input(v, name=k) if isinstance(v, np.ndarray) else v
        for k, v in kwargs.items()
    }
    result = None
    with run.activate(), _computing_deferred(run):
        for index in _instances(grid, run.options):
            run.start_instance(tuple(int(i) for i in index))
            try:
                result = fn(*wrapped, **kw)
            except (NkiConstraintError, NotImplementedError):
                raise
            except Exception as exc:
                code = getattr(inspect.unwrap(fn), "__code__", None)
                where = location_from_traceback(
                    exc.__traceback__, code.co_filename if code is not None else None
                )
                context = f" in {run.context()}" if run.grid else ""
                name = getattr(fn, "__name__", "kernel")
                raise NkiKernelError(f"{where}: kernel {name!r} failed{context}: {exc!r}") from exc
        outputs = _to_numpy(result, run)
    for original, handle in zip(
        list(args) + list(kwargs.values()), wrapped + list(kw.values()), strict=True
    ):
        # A still-borrowed argument was never written; one that owns a copy may have been
        # written directly or through a reshape alias (which shares that copy).
        written = isinstance(handle, Tensor) and (
            handle.storage.dirty or not handle.storage.borrowed
        )
        if written and isinstance(original, np.ndarray) and original.flags.writeable:
            np.copyto(original, handle.storage.data)
    return outputs, run


@contextlib.contextmanager
def _computing_deferred(run: Run) -> Iterator[None]:
    """Products still queued when the kernel ends (PSUM tiles never read) are computed, so no
    queued work outlives the launch whose memory it reads."""
    try:
        yield
    finally:
        compute_deferred(run)


class GridLaunch:
    """``kernel[grid]``: a kernel bound to an SPMD launch grid."""

    def __init__(self, kernel: Kernel, grid: Grid) -> None:
        self.kernel, self.grid = kernel, grid

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if maybe_current_run() is not None:
            raise NkiConstraintError(
                "err_nested_kernel_with_spmd_grid",
                "a kernel launched with a grid cannot be called from inside another kernel",
            )
        return launch(self.kernel.fn, args, kwargs, grid=self.grid, options=self.kernel.options)[0]

    def run(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], options: EmulatorOptions | None = None
    ) -> tuple[Any, Run]:
        """Launch and also return the ``Run`` (trace, findings)."""
        return launch(
            self.kernel.fn, args, kwargs, grid=self.grid, options=options or self.kernel.options
        )


class Kernel:
    """What ``@nki.jit`` returns: callable on numpy arrays, indexable with a grid."""

    def __init__(
        self, fn: Callable[..., Any], options: EmulatorOptions | None = None, **jit_kwargs: Any
    ) -> None:
        self.fn = fn
        self.options = options
        self.jit_kwargs = jit_kwargs
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if maybe_current_run() is not None:
            return self.fn(*args, **kwargs)  # a sub-kernel called from a kernel
        return launch(self.fn, args, kwargs, options=self.options)[0]

    def __getitem__(self, grid: Any) -> GridLaunch:
        return GridLaunch(self, _grid(grid))

    def run(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], options: EmulatorOptions | None = None
    ) -> tuple[Any, Run]:
        """Launch and also return the ``Run`` (trace, findings)."""
        return launch(self.fn, args, kwargs, options=options or self.options)


def as_launchable(kernel: Any) -> Kernel | GridLaunch:
    """Accept a Kernel, a grid launch, or a plain Python kernel function."""
    if isinstance(kernel, Kernel | GridLaunch):
        return kernel
    if callable(kernel):
        return Kernel(kernel)
    raise TypeError(f"not a kernel: {kernel!r}")


def make_jit(options: EmulatorOptions | None) -> Callable[..., Any]:
    """Build ``nki.jit`` bound to the emulator options of one shim installation."""

    def jit(func: Callable[..., Any] | None = None, mode: str = "auto", **kwargs: Any) -> Any:
        """Decorator (bare or with arguments) turning a kernel function into a ``Kernel``.

        ``platform_target='trn1'|'trn2'`` selects the emulated target unless the shim was
        given explicit options; other toolchain arguments are accepted and ignored.
        """
        chosen = options
        target = kwargs.get("platform_target")
        if chosen is None and target in ("trn1", "trn2"):
            chosen = EmulatorOptions(target=target)
        if func is None:
            return lambda f: Kernel(f, chosen, mode=mode, **kwargs)
        return Kernel(func, chosen, mode=mode, **kwargs)

    return jit


def simulate_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """Legacy ``nki.simulate_kernel(kernel, *np_arrays)``: run and return numpy outputs."""
    launchable = as_launchable(kernel)
    return launchable.run(args, kwargs)[0]


def simulate(kernel: Any) -> Callable[..., Any]:
    """New ``nki.simulate(kernel)``: a callable taking and returning numpy arrays."""
    launchable = as_launchable(kernel)

    def call(*args: Any, **kwargs: Any) -> Any:
        return launchable.run(args, kwargs)[0]

    return call


def trace(func: Callable[..., Any] | None = None, **_: Any) -> Any:
    """Legacy ``nki.trace``: marks a sub-kernel; it runs inline in the emulator."""
    return func if func is not None else (lambda f: f)


def run_kernel(
    kernel: Any, *args: Any, grid: Any = (), options: EmulatorOptions | None = None, **kwargs: Any
) -> tuple[Any, Run]:
    """Library entry point: run a kernel on numpy arrays; return (outputs, run)."""
    launchable = as_launchable(kernel)
    if grid:
        base = launchable.kernel if isinstance(launchable, GridLaunch) else launchable
        launchable = base[grid]
    return launchable.run(args, kwargs, options)


def _not_supported(name: str) -> Callable[..., Any]:
    def fail(*_: Any, **__: Any) -> Any:
        raise unsupported(name)

    fail.__name__ = name.rsplit(".", 1)[-1]
    return fail


benchmark = _not_supported("nki.benchmark")
profile_decorator = _not_supported("nki.profile")
