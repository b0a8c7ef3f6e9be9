"""Errors and findings that point at the user's kernel source line.

Every constraint violation names the kernel file and line of the offending call, found by
walking the Python stack to the first frame outside this package (house rule 13).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

_PACKAGE_DIR = str(Path(__file__).resolve().parent)


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """A kernel source position (file, line, function)."""

    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


# No kernel frame found; also the placeholder of a trace record until Run.add sets its line.
UNKNOWN_LOCATION = SourceLocation("<unknown>", 0, "<unknown>")


def kernel_location() -> SourceLocation:
    """Return the innermost stack frame that is not emulator code (the kernel's call site)."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        filename = code.co_filename
        inside = _IS_EMULATOR.get(filename)
        if inside is None:
            if len(_IS_EMULATOR) > 4096:
                _IS_EMULATOR.clear()
            inside = _IS_EMULATOR[filename] = filename.startswith(_PACKAGE_DIR)
        if not inside:
            key = (filename, frame.f_lineno, code.co_name)
            location = _LOCATIONS.get(key)
            if location is None:
                if len(_LOCATIONS) > 65536:
                    _LOCATIONS.clear()
                location = _LOCATIONS[key] = SourceLocation(*key)
            return location
        frame = frame.f_back
    return UNKNOWN_LOCATION


# Trace records ask for the location of every instruction, so both lookups are cached, keyed
# by strings (whose hashes Python caches) rather than code objects (hashed from their contents
# on every lookup). Bounded: kernels compiled at run time come and go.
_IS_EMULATOR: dict[str, bool] = {}  # file name -> defined in the emulator package
_LOCATIONS: dict[tuple[str, int, str], SourceLocation] = {}  # one object per kernel line


class NkiConstraintError(Exception):
    """A kernel broke a Trainium/NKI rule; the message says which, where and how to fix it."""

    def __init__(
        self, code: str, message: str, location: SourceLocation | None = None, context: str = ""
    ) -> None:
        self.code = code
        self.location = location if location is not None else kernel_location()
        self.detail = message
        if not context:
            from .run import maybe_current_run  # errors.py is imported by run.py

            run = maybe_current_run()
            context = run.context() if run is not None else ""
        self.context = context
        where = f"{self.location}: " if self.location is not UNKNOWN_LOCATION else ""
        extra = f" ({context})" if context else ""
        super().__init__(f"{where}[{code}] {message}{extra}")


class NkiIndexError(NkiConstraintError, IndexError):
    """An index outside a tensor (``err_tensor_access_out_of_bound``): the C2N constraint error,
    and also an ``IndexError`` so code expecting numpy's out-of-bounds error catches it."""

    def __init__(
        self, message: str, location: SourceLocation | None = None, context: str = ""
    ) -> None:
        super().__init__("err_tensor_access_out_of_bound", message, location, context)


def constraint_error(code: str, message: str) -> NkiConstraintError:
    """The constraint error for ``code`` (an IndexError subclass for out-of-bounds access)."""
    if code == "err_tensor_access_out_of_bound":
        return NkiIndexError(message)
    return NkiConstraintError(code, message)


def location_from_traceback(
    tb: TracebackType | None, kernel_file: str | None = None
) -> SourceLocation:
    """The deepest traceback frame that is not emulator code (where a kernel failed); with
    `kernel_file`, the deepest frame in that file when there is one (a refusal raised by a
    sandbox's audit hook belongs to the kernel line that asked)."""
    found = mine = UNKNOWN_LOCATION
    while tb is not None:
        code = tb.tb_frame.f_code
        if not code.co_filename.startswith(_PACKAGE_DIR):
            found = SourceLocation(code.co_filename, tb.tb_lineno, code.co_name)
            if code.co_filename == kernel_file:
                mine = found
        tb = tb.tb_next
    return mine if mine is not UNKNOWN_LOCATION else found


class NkiKernelError(RuntimeError):
    """A non-NKI exception raised while a kernel ran, re-raised with kernel coordinates.

    The original exception is chained (``raise ... from``), so its traceback is kept.
    """


class NkiUnsupportedError(NotImplementedError):
    """An NKI API exists on the real toolchain but not (yet) in the emulator."""


class NkiHostComputeError(NkiUnsupportedError):
    """A kernel reached values outside NKI (a tensor's storage, Tensor.read(), a numpy array
    as an operand): compute on the host, which no NeuronCore runs."""


class NkiUnsupportedAttribute(NkiUnsupportedError, AttributeError):
    """A missing tensor method: still a NotImplementedError naming it, and ``hasattr`` is False."""


class NkiNotEmulatedError(NkiUnsupportedError):
    """A keyword argument, mode or value of a public NKI API that the emulator does not model
    (``err_not_emulated``): raised instead of silently ignoring it."""

    code = "err_not_emulated"

    def __init__(self, api: str, parameter: str, value: object) -> None:
        self.api, self.parameter, self.value = api, parameter, value
        super().__init__(
            f"[err_not_emulated] {api}({parameter}={value!r}) is not emulated by the cuda2nki "
            f"emulator; leave {parameter} at its default or run on the Neuron toolchain"
        )


def not_emulated(api: str, **given: object) -> None:
    """Raise ``NkiNotEmulatedError`` for the first keyword given a value other than its default.

    Call as ``not_emulated("nisa.x", name=(value, default), ...)``."""
    for parameter, pair in given.items():
        value, default = pair  # type: ignore[misc]
        if not _same_default(value, default):
            raise NkiNotEmulatedError(api, parameter, value)


def _same_default(value: object, default: object) -> bool:
    if value is default:
        return True
    if hasattr(value, "__array__") or hasattr(default, "__array__"):  # masks, tiles, arrays
        return False
    try:
        return bool(value == default)
    except Exception:  # arrays and other values without a plain truth value
        return False


def unsupported(qualified_name: str) -> NkiUnsupportedError:
    """Build the standard error for an API the emulator does not implement."""
    return NkiUnsupportedError(f"{qualified_name} is not supported by the cuda2nki emulator")


@dataclass(frozen=True, slots=True)
class Finding:
    """A non-fatal observation about a run (e.g. an affine-loop dependency in "report" mode)."""

    code: str
    message: str
    location: SourceLocation

    def __str__(self) -> str:
        return f"{self.location}: [{self.code}] {self.message}"
