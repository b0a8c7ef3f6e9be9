"""Shared helpers for the CUDA interpreter tests: run a kernel given as source text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from migrator.cuda.interp import InterpOptions, RunResult, run_kernel
from migrator.cuda.parse import parse_text

Runner = Callable[..., RunResult]


def _run(
    src: str,
    kernel: str | None = None,
    grid: Any = 1,
    block: Any = 32,
    shared_bytes: int = 0,
    template_args: list[Any] | None = None,
    **kwargs: Any,
) -> RunResult:
    opts = kwargs.pop("options", None) or InterpOptions()
    parsed = parse_text(src, "kernel.cu")
    return run_kernel(parsed, kernel, grid, block, kwargs, shared_bytes, template_args, opts)


@pytest.fixture
def krun() -> Runner:
    """`krun(src, kernel, grid, block, **args)` -> RunResult."""
    return _run


def zeros(n: int, dtype: Any = np.float32) -> np.ndarray:
    return np.zeros(n, dtype=dtype)
