"""Differential test of C integer operators against a Python big-int model of C semantics.

For each integer type and operator, a one-line kernel computes `o[i] = a[i] OP b[i]` over edge
values (0, ±1, min, max, ...) and the result must equal the model: operands promoted (char and
short to int), the exact result truncated toward zero for `/` and `%`, then wrapped to the
result type. Cases that are undefined behaviour in C (division by zero, INT_MIN / -1, shift
counts out of range) are left out.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest

from migrator.cuda.interp import RunResult

Runner = Callable[..., RunResult]  # the `krun` fixture (conftest.py)

TYPES = {
    "char": np.int8,
    "short": np.int16,
    "int": np.int32,
    "unsigned int": np.uint32,
    "long long": np.int64,
    "unsigned long long": np.uint64,
}
OPS = ["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "<", "==", ">="]


def _wrap(v: int, dt: type) -> int:
    info = np.iinfo(dt)
    bits = 8 * np.dtype(dt).itemsize
    v &= (1 << bits) - 1
    if info.min < 0 and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def _model(op: str, a: int, b: int, dt: type) -> int | None:
    """C result of `a op b` (None where C leaves it undefined)."""
    res_dt = dt if np.dtype(dt).itemsize >= 4 else np.int32  # integer promotion
    bits = 8 * np.dtype(res_dt).itemsize
    if op in ("<<", ">>"):
        if not 0 <= b < bits:
            return None
        v = a << b if op == "<<" else a >> b  # Python >> on negatives is arithmetic
        return _wrap(v, res_dt)
    if op in ("/", "%"):
        if b == 0 or _wrap(a // -1 if b == -1 else 0, res_dt) != (-a if b == -1 else 0):
            return None
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        return _wrap(q if op == "/" else a - q * b, res_dt)
    table: dict[str, Callable[[int, int], int]] = {
        "+": lambda x, y: x + y,
        "-": lambda x, y: x - y,
        "*": lambda x, y: x * y,
        "&": lambda x, y: x & y,
        "|": lambda x, y: x | y,
        "^": lambda x, y: x ^ y,
        "<": lambda x, y: int(x < y),
        "==": lambda x, y: int(x == y),
        ">=": lambda x, y: int(x >= y),
    }
    return _wrap(table[op](a, b), res_dt)


def _edges(dt: type) -> list[int]:
    info = np.iinfo(dt)
    vals = {0, 1, 2, 3, 7, 31, info.max, info.max - 1, info.min, info.min + 1, 12345 % info.max}
    if info.min < 0:
        vals |= {-1, -2, -7, -31}
    return sorted(v for v in vals if info.min <= v <= info.max)


@pytest.mark.parametrize("ctype", list(TYPES))
@pytest.mark.parametrize("op", OPS)
def test_integer_operator_matches_c_model(krun: Runner, ctype: str, op: str) -> None:
    dt = TYPES[ctype]
    res_t = ctype if np.dtype(dt).itemsize >= 4 else "int"
    src = f"""
    __global__ void k(const {ctype}* a, const {ctype}* b, {res_t}* o, int n) {{
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) o[i] = a[i] {op} b[i];
    }}"""
    pairs = [
        (x, y)
        for x, y in itertools.product(_edges(dt), repeat=2)
        if _model(op, x, y, dt) is not None
    ]
    a = np.array([p[0] for p in pairs], dtype=dt)
    b = np.array([p[1] for p in pairs], dtype=dt)
    o = np.zeros(len(pairs), dtype=TYPES[res_t])
    krun(src, "k", -(-len(pairs) // 64), 64, a=a, b=b, o=o, n=len(pairs))
    expected = [_model(op, int(x), int(y), dt) for x, y in pairs]
    rows = zip(a, b, o, expected, strict=True)
    bad = [(int(x), int(y), int(g), e) for x, y, g, e in rows if int(g) != e]
    assert not bad, f"{ctype} {op}: (a, b, got, want) {bad[:5]}"
