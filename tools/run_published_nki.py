"""Run published NKI kernels, unmodified, in the cuda2nki emulator and check them against numpy.

Usage::

    .venv/bin/python tools/run_published_nki.py CHECKOUT_DIR [CHECKOUT_DIR ...] [--json]
        [--only TEXT] [--verbose]

CHECKOUT_DIR is a checkout (or ``git archive``) of aws-neuron/nki-samples at 0898a771 (the last
commit with the legacy tutorials and reference kernels), of aws-neuron/nki-samples at a later
commit (6905a68a: the matmul tutorial ported to the standalone ``nki`` package, same paths)
and/or of aws-neuron/aws-neuron-sdk at tag v2.26.0 (legacy examples under ``general/nki``).
Each case names its dialect, so files at the same path in two checkouts are told apart.
Each kernel file is imported through ``migrator.nki.load_kernel_module`` exactly as
published; the tool builds numpy inputs, runs the kernel, and compares the result with a numpy
reference written here (not taken from the samples). Kernel files whose *driver* code imports
a package that is not installed (scipy) get a placeholder module for that import while
loading; the kernels never touch it, and the table says so in the notes column. Published
kernels that over-subscribe PSUM/SBUF (the compiler spills) run with those checks in "report"
mode, also noted.

This tool needs the published sources, so it is not part of the test suite; its helpers are
unit-tested in ``tests/tools/test_run_published_nki.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

import migrator.nki as mn

SAMPLES_TUT = "src/nki_samples/tutorials"
SAMPLES_REF = "src/nki_samples/reference"
SDK_EX = "general/nki/examples"

Inputs = tuple[tuple[Any, ...], dict[str, Any]]

# Published kernels may over-subscribe PSUM/SBUF and rely on the compiler to spill (nki-facts
# §2.4); the tool reports that in the notes column instead of failing the kernel.
OPTIONS = mn.EmulatorOptions(psum_overflow="report", sbuf_overflow="report")


@dataclass(frozen=True)
class Case:
    """One published kernel: where it lives, how to call it, what it must compute."""

    name: str
    paths: tuple[str, ...]  # candidate paths relative to a checkout, first found wins
    kernel: str
    inputs: Callable[[np.random.Generator], Inputs]
    reference: Callable[..., Any]
    grid: tuple[int, ...] = ()
    atol: float = 1e-5
    rtol: float = 1e-4
    driver_stubs: tuple[str, ...] = ()  # driver-only imports replaced by placeholders
    dialect: str = "legacy"  # "legacy" (neuronxcc.nki) or "new" (standalone nki)
    host: bool = False  # the name is the sample's host-side launcher, called as it is


@dataclass
class Result:
    """One table row."""

    name: str
    file: str
    status: str  # "match", "MISMATCH", "ERROR", "missing"
    max_error: float | None = None
    seconds: float | None = None
    notes: str = ""
    detail: str = field(default="", repr=False)


# ---------------------------------------------------------------------------------------------
# Helpers (unit-tested)


def dialect_of(path: Path) -> str:
    """ "legacy" when a kernel file imports neuronxcc.nki, else "new"."""
    return "legacy" if "neuronxcc" in path.read_text(errors="replace") else "new"


def find_file(
    roots: Sequence[Path], candidates: Sequence[str], dialect: str | None = None
) -> Path | None:
    """First ``root/candidate`` that exists (and is written in ``dialect``, if given), trying
    every root for each candidate in order. Both nki-samples generations use the same paths."""
    for candidate in candidates:
        for root in roots:
            path = root / candidate
            if path.is_file() and (dialect is None or dialect_of(path) == dialect):
                return path
    return None


def max_error(actual: Any, expected: Any) -> float:
    """Largest absolute difference over (possibly nested tuples of) arrays, in float64."""
    if isinstance(expected, tuple | list):
        if not isinstance(actual, tuple | list) or len(actual) != len(expected):
            raise ValueError(f"expected {len(expected)} outputs, got {type(actual).__name__}")
        return max((max_error(a, e) for a, e in zip(actual, expected, strict=True)), default=0.0)
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if a.shape != e.shape:
        raise ValueError(f"output shape {a.shape} != reference shape {e.shape}")
    if a.size == 0:
        return 0.0
    if np.isnan(a).any() != np.isnan(e).any():
        return float("inf")
    return float(np.nanmax(np.abs(a - e)))


def allclose(actual: Any, expected: Any, atol: float, rtol: float) -> bool:
    """``np.allclose`` over (possibly nested tuples of) arrays, compared in float64."""
    if isinstance(expected, tuple | list):
        return all(allclose(a, e, atol, rtol) for a, e in zip(actual, expected, strict=True))
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    return a.shape == e.shape and bool(np.allclose(a, e, atol=atol, rtol=rtol))


@contextlib.contextmanager
def placeholder_modules(names: Sequence[str]) -> Iterator[list[str]]:
    """Put empty modules in ``sys.modules`` for ``names`` that cannot be imported; undo after.

    Yields the names that were actually replaced (installed packages are left alone).
    """
    added: list[str] = []
    try:
        for name in names:
            if name in sys.modules or _importable(name):
                continue
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                sub = ".".join(parts[:i])
                if sub not in sys.modules:
                    module = _placeholder(sub)
                    sys.modules[sub] = module
                    added.append(sub)
                    if i > 1:
                        setattr(sys.modules[".".join(parts[: i - 1])], parts[i - 1], module)
        yield [n for n in names if n in added]
    finally:
        for sub in reversed(added):
            sys.modules.pop(sub, None)


@contextlib.contextmanager
def sibling_imports(directory: Path) -> Iterator[None]:
    """Let a sample import its sibling files (as when run from its directory); undo after."""
    before = set(sys.modules)
    sys.path.insert(0, str(directory))
    try:
        yield
    finally:
        sys.path.remove(str(directory))
        for name in set(sys.modules) - before:
            module = sys.modules[name]
            if str(getattr(module, "__file__", "") or "").startswith(str(directory)):
                del sys.modules[name]


def _placeholder(name: str) -> ModuleType:
    """A module whose every attribute is a function that fails if the kernel ever calls it."""
    module = ModuleType(name, "placeholder for a driver-only import")
    module.__path__ = []

    def attr(key: str) -> Any:
        if key.startswith("__"):
            raise AttributeError(key)

        def unavailable(*_: Any, **__: Any) -> Any:
            raise ImportError(f"{name}.{key} is a placeholder: the package is not installed")

        return unavailable

    module.__getattr__ = attr  # type: ignore[method-assign]
    return module


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def capacity_note(findings: Sequence[Any]) -> str:
    """Summarise on-chip over-subscription findings (reported, not raised, by this tool)."""
    codes = {"err_psum_capacity_exceeded": "PSUM", "err_sbuf_capacity_exceeded": "SBUF"}
    hits = sorted({codes[f.code] for f in findings if f.code in codes})
    return f"{'/'.join(hits)} over-subscribed (compiler would spill)" if hits else ""


def format_table(results: Sequence[Result]) -> str:
    """Markdown table of results."""
    rows = ["| kernel | file | status | max abs error | emulator s | notes |", "|---" * 6 + "|"]
    for r in results:
        err = "" if r.max_error is None else f"{r.max_error:.2e}"
        secs = "" if r.seconds is None else f"{r.seconds:.2f}"
        rows.append(f"| {r.name} | {r.file} | {r.status} | {err} | {secs} | {r.notes} |")
    return "\n".join(rows)


# ---------------------------------------------------------------------------------------------
# numpy references (written for this tool from the kernels' documented semantics)


def ref_transpose2d(x: np.ndarray, shape2d: tuple[int, int]) -> np.ndarray:
    rows, cols = shape2d
    return x.reshape(x.shape[0], rows, cols).transpose(0, 2, 1).reshape(x.shape)


def ref_avgpool(x: np.ndarray, pool: int) -> np.ndarray:
    c, h, w = x.shape
    windows = x.astype(np.float32).reshape(c, h // pool, pool, w // pool, pool)
    return windows.mean(axis=(2, 4)).astype(x.dtype)


def ref_rmsnorm(a: np.ndarray, g: np.ndarray) -> np.ndarray:
    return a / np.sqrt(np.mean(np.square(a), axis=1, keepdims=True)) * g[None, :]


def ref_layernorm(x: np.ndarray, eps: float, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma[None, :] + beta[None, :]


def ref_matmul(lhs_t: np.ndarray, rhs: np.ndarray, **_: Any) -> np.ndarray:
    product = lhs_t.astype(np.float32).T @ rhs.astype(np.float32)
    return product.astype(lhs_t.dtype)


def ref_mamba(
    delta: np.ndarray, u: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray
) -> np.ndarray:
    """Selective scan: h_t = exp(delta_t A) h_{t-1} + delta_t B_t u_t;  y_t = sum_s C_t h_t."""
    batch, channels, seq = delta.shape
    y = np.zeros((batch, channels, seq), dtype=np.float64)
    for n in range(batch):
        decay = np.exp(delta[n][:, None, :] * a[:, :, None])  # (channels, state, seq)
        drive = (delta[n] * u[n])[:, None, :] * b[n][None, :, :]
        h = np.zeros((channels, a.shape[1]))
        for t in range(seq):
            h = decay[:, :, t] * h + drive[:, :, t]
            y[n, :, t] = h @ c[n][:, t]
    return y.astype(delta.dtype)


def _softmax_rows(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def ref_attention_dhead_major(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """q, k, v are [d_head, seq]: softmax(qᵀk) vᵀ, shape [seq, d_head]."""
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    return (_softmax_rows(q64.T @ k64) @ v64.T).astype(q.dtype)


def ref_sd_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, **_: Any) -> np.ndarray:
    """q, k, v are [seq, d_head]: softmax(0.125 q kᵀ) v (the tutorial's fixed scale)."""
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    return (_softmax_rows(0.125 * q64 @ k64.T) @ v64).astype(q.dtype)


def ref_flash_fwd(q: np.ndarray, k: np.ndarray, v: np.ndarray, *_: Any, **kw: Any) -> np.ndarray:
    """q, k: [bs, heads, d, seq]; v: [bs, heads, seq, d]; causal softmax(qᵀk/√d) v."""
    d = q.shape[2]
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    scores = np.einsum("bhdq,bhdk->bhqk", q64, k64) / np.sqrt(d)
    if kw.get("use_causal_mask", True):
        sq, sk = scores.shape[-2:]
        scores = np.where(np.tril(np.ones((sq, sk), dtype=bool)), scores, -np.inf)
    return np.einsum("bhqk,bhkd->bhqd", _softmax_rows(scores), v64).astype(q.dtype)


def ref_adaptive_avg_pool(x: np.ndarray, out_size: int | tuple[int, int]) -> np.ndarray:
    oh, ow = (out_size, out_size) if isinstance(out_size, int) else out_size
    n, c, h, w = x.shape
    out = np.empty((n, c, oh, ow), dtype=np.float64)
    for i in range(oh):
        h0, h1 = (i * h) // oh, -(-((i + 1) * h) // oh)
        for j in range(ow):
            w0, w1 = (j * w) // ow, -(-((j + 1) * w) // ow)
            out[:, :, i, j] = x[:, :, h0:h1, w0:w1].astype(np.float64).mean(axis=(2, 3))
    return out.astype(x.dtype)


def ref_resize_nearest(x: np.ndarray, out_shape: tuple[int, int, int, int]) -> np.ndarray:
    """NHWC nearest-neighbour resize: source index floor(i * in/out) in fp32 on each axis."""
    _, in_h, in_w, _ = x.shape
    _, out_h, out_w, _ = out_shape
    rows = np.floor(np.arange(out_h, dtype=np.float32) * np.float32(in_h / out_h)).astype(int)
    cols = np.floor(np.arange(out_w, dtype=np.float32) * np.float32(in_w / out_w)).astype(int)
    return x[:, rows][:, :, cols]


# ---------------------------------------------------------------------------------------------
# Inputs


def _uniform(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any = np.float32) -> Any:
    return rng.random(shape).astype(dtype)


def _signed(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any = np.float32) -> Any:
    return ((rng.random(shape) - 0.5) * 2).astype(dtype)


def _mm_inputs(k: int, m: int, n: int) -> Callable[[np.random.Generator], Inputs]:
    return lambda rng: ((_signed(rng, (k, m)), _signed(rng, (k, n))), {})


def _mamba_inputs(rng: np.random.Generator) -> Inputs:
    batch, channels, seq, state = 1, 256, 512, 16
    delta = (0.1 * rng.random((batch, channels, seq))).astype(np.float32)
    u = _signed(rng, (batch, channels, seq))
    a = (-rng.random((channels, state))).astype(np.float32)
    b = _signed(rng, (batch, state, seq))
    c = _signed(rng, (batch, state, seq))
    return (delta, u, a, b, c), {}


def _attn_inputs(seq: int) -> Callable[[np.random.Generator], Inputs]:
    return lambda rng: (tuple(_signed(rng, (128, seq)) for _ in range(3)), {})


def _layernorm_inputs(cols: int) -> Callable[[np.random.Generator], Inputs]:
    def make(rng: np.random.Generator) -> Inputs:
        x = _uniform(rng, (300, cols))
        return (x, 1e-5, _uniform(rng, (cols,)), _uniform(rng, (cols,))), {}

    return make


def _flash_inputs(rng: np.random.Generator) -> Inputs:
    bs, heads, d, seq = 1, 2, 128, 2048
    q = _signed(rng, (bs, heads, d, seq))
    k = _signed(rng, (bs, heads, d, seq))
    v = _signed(rng, (bs, heads, seq, d))
    return (q, k, v, None), {"use_causal_mask": True, "mixed_precision": True}


_TA = f"{SAMPLES_TUT}/tensor_addition"
_LN = (
    f"{SAMPLES_TUT}/layernorm/layernorm_nki_kernel.py",
    f"{SDK_EX}/layernorm/layernorm_nki_kernel.py",
)
_MM = (
    f"{SAMPLES_TUT}/matrix_multiplication/matrix_multiplication_nki_kernels.py",
    f"{SDK_EX}/matrix_multiplication/matrix_multiplication_nki_kernels.py",
)
_ATT = (f"{SAMPLES_TUT}/attention_fwd_performance/attention_kernels.py",)
# These versions round exp() to bf16 on purpose; the tutorial's own test uses atol=1e-2.
_BF16_ATTN = frozenset({"v7", "v8", "v8a", "v11"})


def _add(a: np.ndarray, b: np.ndarray, *_: Any) -> np.ndarray:
    return a + b


CASES: tuple[Case, ...] = (
    Case(
        "getting_started add",
        (f"{SDK_EX}/getting_started_baremetal.py",),
        "nki_tensor_add_kernel",
        lambda rng: ((_uniform(rng, (128, 512), np.float16),) * 2, {}),
        _add,
        atol=0,
        rtol=0,
    ),
    Case(
        "tensor add (grid 2x2)",
        (
            f"{_TA}/tensor_addition_nki_kernels.py",
            f"{SDK_EX}/tensor_addition/tensor_addition_nki_kernels.py",
        ),
        "nki_tensor_add_kernel_",
        lambda rng: (
            (_uniform(rng, (256, 1024), np.float16), _uniform(rng, (256, 1024), np.float16)),
            {},
        ),
        _add,
        grid=(2, 2),
        atol=0,
        rtol=0,
    ),
    Case(
        "SPMD tensor add (grid 2x2)",
        (
            f"{_TA}/spmd_tensor_addition_nki_kernels.py",
            f"{SDK_EX}/tensor_addition/spmd_tensor_addition_nki_kernels.py",
        ),
        "nki_tensor_add_kernel_",
        lambda rng: (
            (_uniform(rng, (256, 1024), np.float16), _uniform(rng, (256, 1024), np.float16)),
            {},
        ),
        _add,
        grid=(2, 2),
        atol=0,
        rtol=0,
    ),
    Case(
        "add_kernel_nx8x128x512 (grid 2)",
        (f"{SAMPLES_REF}/tutorial.py",),
        "add_kernel_nx8x128x512",
        lambda rng: (
            (_uniform(rng, (2, 8, 128, 512)), _uniform(rng, (2, 8, 128, 512)), 2 * 8 * 128 * 512),
            {},
        ),
        _add,
        grid=(2,),
        atol=0,
        rtol=0,
    ),
    Case(
        "transpose2d",
        (
            f"{SAMPLES_TUT}/transpose2d/transpose2d_nki_kernels.py",
            f"{SDK_EX}/transpose2d/transpose2d_nki_kernels.py",
        ),
        "tensor_transpose2D_kernel_",
        lambda rng: ((rng.integers(-100, 100, (128, 24)).astype(np.int8), (4, 6)), {}),
        ref_transpose2d,
        atol=0,
        rtol=0,
    ),
    Case(
        "avgpool2d",
        (
            f"{SAMPLES_TUT}/average_pool2d/average_pool2d_nki_kernels.py",
            f"{SDK_EX}/average_pool2d/average_pool2d_nki_kernels.py",
        ),
        "tensor_avgpool_kernel",
        lambda rng: ((_uniform(rng, (64, 16, 16), np.float16), 2), {}),
        ref_avgpool,
        atol=1e-3,
        rtol=1e-3,
    ),
    Case(
        "rmsnorm (300 rows, masked tail)",
        (
            f"{SAMPLES_TUT}/rmsnorm/rmsnorm_nki_kernels.py",
            f"{SDK_EX}/rmsnorm/rmsnorm_nki_kernels.py",
        ),
        "nki_rmsnorm_kernel",
        lambda rng: ((_uniform(rng, (300, 512)), _uniform(rng, (512,))), {}),
        ref_rmsnorm,
    ),
    Case(
        "layernorm v1 (nl)",
        _LN,
        "nki_layernorm_kernel_v1",
        _layernorm_inputs(512),
        ref_layernorm,
        atol=1e-4,
    ),
    Case(
        "layernorm v2 (bn_stats)",
        _LN,
        "nki_layernorm_kernel_v2",
        _layernorm_inputs(512),
        ref_layernorm,
        atol=1e-4,
    ),
    Case(
        "layernorm v2, 300x1000 (tutorial size)",
        _LN,
        "nki_layernorm_kernel_v2",
        _layernorm_inputs(1000),
        ref_layernorm,
        atol=1e-4,
    ),
    Case("matmul basic", _MM, "nki_matmul_basic_", _mm_inputs(128, 64, 512), ref_matmul),
    Case("matmul tiled", _MM, "nki_matmul_tiled_", _mm_inputs(256, 256, 1024), ref_matmul),
    Case(
        "matmul hoist load", _MM, "nki_matmul_hoist_load_", _mm_inputs(256, 256, 1024), ref_matmul
    ),
    Case(
        "matmul block free dim",
        _MM,
        "nki_matmul_block_free_dimension_",
        _mm_inputs(256, 512, 2048),
        ref_matmul,
    ),
    Case(
        "matmul fully optimized",
        _MM,
        "nki_matmul_fully_optimized_",
        _mm_inputs(1024, 2048, 1024),
        ref_matmul,
        atol=1e-4,
    ),
    Case(
        "mamba v1",
        (
            f"{SAMPLES_TUT}/fused_mamba/mamba_nki_kernels.py",
            f"{SDK_EX}/fused_mamba/mamba_nki_kernels.py",
        ),
        "mamba_v1",
        _mamba_inputs,
        ref_mamba,
        atol=1e-4,
    ),
    Case(
        "mamba v2",
        (
            f"{SAMPLES_TUT}/fused_mamba/mamba_nki_kernels.py",
            f"{SDK_EX}/fused_mamba/mamba_nki_kernels.py",
        ),
        "mamba_v2",
        _mamba_inputs,
        ref_mamba,
        atol=1e-4,
    ),
    Case(
        "mamba v3",
        (
            f"{SAMPLES_TUT}/fused_mamba/mamba_nki_kernels.py",
            f"{SDK_EX}/fused_mamba/mamba_nki_kernels.py",
        ),
        "mamba_v3",
        _mamba_inputs,
        ref_mamba,
        atol=1e-4,
    ),
    Case(
        "SD attention (small head)",
        (
            f"{SAMPLES_TUT}/sd_attention/sd_attention_nki_kernels.py",
            f"{SDK_EX}/sd_attention/sd_attention_nki_kernels.py",
        ),
        "fused_self_attn_for_SD_small_head_size",
        lambda rng: (tuple(_uniform(rng, (1024, 64)) for _ in range(3)), {}),
        ref_sd_attention,
        atol=1e-4,
        rtol=1e-3,
        driver_stubs=("scipy.special",),
    ),
    *(
        Case(
            f"attention fwd {v}",
            _ATT,
            f"attn_fwd_{v}",
            _attn_inputs(128 if v in ("v1", "v2") else 1024),
            ref_attention_dhead_major,
            atol=1e-2 if v in _BF16_ATTN else 1e-4,
            rtol=1e-3,
        )
        for v in ("v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v8a", "v11")
    ),
    Case(
        "flash attention fwd (grid 1x2, causal)",
        (f"{SAMPLES_REF}/attention.py",),
        "flash_fwd",
        _flash_inputs,
        ref_flash_fwd,
        grid=(1, 2),
        atol=1e-2,  # bf16 matmuls (mixed_precision); the sample's own test uses atol=1e-2
        rtol=1e-3,
    ),
    Case(
        "SPMD tensor add on 2 cores (host launcher)",
        (f"{_TA}/spmd_multiple_nc_tensor_addition_nki_kernels.py",),
        "nki_tensor_add_nc2",
        lambda rng: (
            (_uniform(rng, (512, 2048), np.float16), _uniform(rng, (512, 2048), np.float16)),
            {},
        ),
        _add,
        atol=0,
        rtol=0,
        host=True,
    ),
    *(
        Case(
            f"matmul {label} (new nki)",
            _MM,
            f"nki_matmul_{kernel}_",
            _mm_inputs(*shape),
            ref_matmul,
            atol=1e-4,
            dialect="new",
        )
        for label, kernel, shape in (
            ("basic", "basic", (128, 64, 512)),
            ("tiled", "tiled", (256, 256, 1024)),
            ("hoist load", "hoist_load", (256, 256, 1024)),
            ("block free dim", "block_free_dimension", (256, 512, 2048)),
            ("fully optimized", "fully_optimized", (1024, 2048, 1024)),
        )
    ),
    Case(
        "adaptive avg pool2d",
        (f"{SAMPLES_REF}/vision.py",),
        "adaptive_avg_pool2d_kernel",
        lambda rng: ((rng.standard_normal((2, 64, 28, 28)).astype(np.float32), (7, 7)), {}),
        ref_adaptive_avg_pool,
        atol=1e-5,
    ),
    Case(
        "resize nearest (grid 2)",
        (f"{SAMPLES_REF}/vision.py",),
        "resize_nearest_fixed_dma_kernel",
        lambda rng: ((_uniform(rng, (2, 30, 20, 256)), (2, 59, 38, 256)), {}),
        ref_resize_nearest,
        grid=(2,),
        atol=0,
        rtol=0,
    ),
)


# ---------------------------------------------------------------------------------------------
# Driver


def run_case(case: Case, roots: Sequence[Path], seed: int = 0) -> Result:
    """Load, run and check one case."""
    path = find_file(roots, case.paths, case.dialect)
    if path is None:
        note = f"no {case.dialect}-dialect file in the checkouts"
        return Result(case.name, case.paths[0], "missing", notes=note)
    shown = next((str(path.relative_to(r)) for r in roots if path.is_relative_to(r)), str(path))
    notes = ""
    try:
        with placeholder_modules(case.driver_stubs) as stubbed, sibling_imports(path.parent):
            module = mn.load_kernel_module(path)
        if stubbed:
            notes = "driver import placeholder: " + ", ".join(stubbed)
        kernel = getattr(module, case.kernel)
        args, kwargs = case.inputs(np.random.default_rng(seed))
        start = time.perf_counter()
        if case.host:
            out = kernel(*args, **kwargs)
        else:
            out, run = mn.run_kernel(kernel, *args, grid=case.grid, options=OPTIONS, **kwargs)
            notes = "; ".join(filter(None, [notes, capacity_note(run.findings)]))
        seconds = time.perf_counter() - start
        expected = case.reference(*args, **kwargs)
        if isinstance(out, tuple | list) and not isinstance(expected, tuple | list):
            out = out[0]
        err = max_error(out, expected)
        ok = allclose(out, expected, case.atol, case.rtol)
        return Result(case.name, shown, "match" if ok else "MISMATCH", err, seconds, notes=notes)
    except Exception as exc:  # report every failure as a row, keep going
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return Result(
            case.name,
            shown,
            "ERROR",
            notes=f"{type(exc).__name__}: {first}"[:160],
            detail=traceback.format_exc(),
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="+", type=Path, help="nki-samples / SDK checkouts")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help="run cases whose name contains this text (repeatable)",
    )
    parser.add_argument("--verbose", action="store_true", help="print tracebacks of errors")
    args = parser.parse_args(argv)
    roots = [p.resolve() for p in args.checkouts]
    chosen = [c for c in CASES if not args.only or any(s in c.name for s in args.only)]
    results = [run_case(c, roots) for c in chosen]
    if args.json:
        print(
            json.dumps(
                [{k: v for k, v in asdict(r).items() if k != "detail"} for r in results], indent=2
            )
        )
    else:
        print(format_table(results))
        matched = sum(r.status == "match" for r in results)
        print(f"\n{matched}/{len(results)} published kernels match numpy")
    if args.verbose:
        for r in results:
            if r.detail:
                print(f"\n--- {r.name}\n{r.detail}", file=sys.stderr)
    return 0 if all(r.status in ("match", "missing") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
