"""``nki.compiler`` / ``neuronxcc.nki.compiler`` (``ncc``): scheduling and allocation hints.

The emulator computes in program order, so every hint here is a no-op for results
(nki-facts §1.2): decorators return the kernel unchanged, scoping helpers are empty context
managers. Direct allocation (``ncc.sbuf.mod_alloc(...)`` as ``buffer=``) places tiles at
fixed addresses on hardware; the emulator treats such a buffer as plain SBUF/PSUM and does not
model address aliasing (a documented gap).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from .storage import Buffer


def _passthrough(func: Callable[..., Any] | None = None, **_: Any) -> Any:
    """Decorator usable bare or with arguments; returns the kernel unchanged."""
    return func if func is not None else (lambda f: f)


skip_middle_end_transformations = _passthrough
enable_stack_allocator = _passthrough
force_auto_alloc = _passthrough


@contextlib.contextmanager
def _scope(*_: Any, **__: Any) -> Iterator[None]:
    yield


allocation_scope = _scope
multi_buffer = _scope
no_reorder = _scope


class _Allocator:
    """``ncc.sbuf`` / ``ncc.psum``: allocator factories that resolve to the plain buffer."""

    def __init__(self, buffer: Buffer) -> None:
        self.buffer = buffer

    def alloc(self, *_: Any, **__: Any) -> Buffer:
        return self.buffer

    def mod_alloc(self, *_: Any, **__: Any) -> Buffer:
        return self.buffer

    def auto_alloc(self, *_: Any, **__: Any) -> Buffer:
        return self.buffer


sbuf = _Allocator(Buffer.SBUF)
psum = _Allocator(Buffer.PSUM)
