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


def test_increments_of_a_uniform_int_agree_with_the_per_lane_path(krun: Runner) -> None:
    """`i++` / `--i` of an int every lane holds alike takes a short path; it must give what
    the per-lane path gives (lane-dependent `j`): the values before and after, prefix and
    postfix, wrapping past INT_MAX and INT_MIN as the int32 add does."""
    src = """
    __global__ void k(int* o, int start) {
        int t = threadIdx.x;
        int i = start, j = start + (t - t);    // j: the same value, held per lane
        int a = i++, b = j++;
        int c = ++i, d = ++j;
        int e = i--, f = j--;
        int g = --i, h = --j;
        o[t * 10 + 0] = a; o[t * 10 + 1] = b; o[t * 10 + 2] = c; o[t * 10 + 3] = d;
        o[t * 10 + 4] = e; o[t * 10 + 5] = f; o[t * 10 + 6] = g; o[t * 10 + 7] = h;
        o[t * 10 + 8] = i; o[t * 10 + 9] = j;
    }"""
    for start in (0, 5, 2147483646, -2147483647):
        o = np.zeros(40, np.int32)
        krun(src, "k", 1, 4, o=o, start=start)
        got = o.reshape(4, 10)
        np.testing.assert_array_equal(got[:, 0::2], got[:, 1::2])  # uniform == per lane
        w = np.int64(start)
        want = np.array([w, w + 2, w + 2, w, w], dtype=np.int64).astype(np.int32)  # a c e g i
        np.testing.assert_array_equal(got[0, [0, 2, 4, 6, 8]], want)


@pytest.mark.parametrize("op", ["+", "-", "*", "<", ">", "<=", ">=", "==", "!="])
def test_uniform_int_operators_match_the_c_model(krun: Runner, op: str) -> None:
    """Two ints every lane holds alike (kernel arguments) take a short path in Python ints;
    each result, read back per lane, must be the C model's (sums wrapped to int32)."""
    src = f"""
    __global__ void k(int* o, int x, int y) {{
      o[threadIdx.x] = x {op} y;
    }}"""
    model = {">": lambda x, y: int(x > y), "<=": lambda x, y: int(x <= y),
             "!=": lambda x, y: int(x != y)}  # fmt: skip
    for x, y in itertools.product(_edges(np.int32), repeat=2):
        o = np.zeros(4, np.int32)
        krun(src, "k", 1, 4, o=o, x=x, y=y)
        want = _wrap(model[op](x, y), np.int32) if op in model else _model(op, x, y, np.int32)
        assert (o == want).all(), (x, op, y, o, want)
