"""The ALU/activation vocabulary as data: op name → numpy function (fp32) and engine.

Kernels name operators by passing functions (``op=nl.add``, legacy ``op=np.add``); ``resolve``
maps any accepted spelling to one canonical name. Where numpy differs from the hardware the
difference is written next to the op (house rule 5).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import NkiConstraintError
from .trace import Engine

Fn = Callable[..., np.ndarray]


def _erf(x: np.ndarray) -> np.ndarray:
    """erf via Abramowitz–Stegun 7.1.26 in float64 (|error| < 1.5e-7, below fp32 spacing at 1).

    numpy has no erf; ScalarE evaluates it with its own polynomial (nki-facts §4, activation
    table), so bit-exactness is not expected either way.
    """
    z = np.abs(x.astype(np.float64))
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    y = 1.0 - poly * np.exp(-z * z)
    return (np.sign(x) * y).astype(np.float32)


def _gelu(x: np.ndarray) -> np.ndarray:
    return (0.5 * x * (1.0 + _erf(x / np.float32(np.sqrt(2.0))))).astype(np.float32)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    c = np.float32(np.sqrt(2.0 / np.pi))
    return 0.5 * x * (1.0 + np.tanh(c * (x + np.float32(0.044715) * x * x * x)))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _gelu_dx(x: np.ndarray) -> np.ndarray:
    """d/dx x·Φ(x) = Φ(x) + x·φ(x)."""
    cdf = 0.5 * (1.0 + _erf(x / np.float32(np.sqrt(2.0))))
    pdf = np.exp(-0.5 * x * x) / np.float32(np.sqrt(2.0 * np.pi))
    return (cdf + x * pdf).astype(np.float32)


def _gelu_sigmoid(x: np.ndarray) -> np.ndarray:
    """The sigmoid approximation of GELU: x·σ(1.702·x)."""
    return x * _sigmoid(np.float32(1.702) * x)


def _gelu_sigmoid_dx(x: np.ndarray) -> np.ndarray:
    s = _sigmoid(np.float32(1.702) * x)
    return s + np.float32(1.702) * x * s * (1.0 - s)


def _silu_dx(x: np.ndarray) -> np.ndarray:
    """d/dx x·σ(x) = σ(x)·(1 + x·(1 − σ(x)))."""
    s = _sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


def _erf_dx(x: np.ndarray) -> np.ndarray:
    return (np.float32(2.0 / np.sqrt(np.pi)) * np.exp(-x * x)).astype(np.float32)


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(np.float32(0.0), x)


UNARY: dict[str, tuple[Fn, Engine]] = {
    "exp": (np.exp, Engine.SCALAR),
    "log": (np.log, Engine.SCALAR),
    "sqrt": (np.sqrt, Engine.SCALAR),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), Engine.SCALAR),
    "tanh": (np.tanh, Engine.SCALAR),
    "sigmoid": (_sigmoid, Engine.SCALAR),
    "relu": (lambda x: np.maximum(x, np.float32(0.0)), Engine.SCALAR),
    "gelu": (_gelu, Engine.SCALAR),
    "gelu_apprx_tanh": (_gelu_tanh, Engine.SCALAR),
    "gelu_dx": (_gelu_dx, Engine.SCALAR),
    "gelu_apprx_sigmoid": (_gelu_sigmoid, Engine.SCALAR),
    "gelu_apprx_sigmoid_dx": (_gelu_sigmoid_dx, Engine.SCALAR),
    "silu_dx": (_silu_dx, Engine.SCALAR),
    "erf_dx": (_erf_dx, Engine.SCALAR),
    # arctan is valid on [-pi/2, pi/2] and tan has no range reduction on ScalarE (nki-facts §4
    # activation table); numpy is exact everywhere.
    "arctan": (np.arctan, Engine.SCALAR),
    "tan": (np.tan, Engine.SCALAR),
    "silu": (lambda x: x * _sigmoid(x), Engine.SCALAR),
    "softplus": (_softplus, Engine.SCALAR),
    "mish": (lambda x: x * np.tanh(_softplus(x)), Engine.SCALAR),
    "erf": (_erf, Engine.SCALAR),
    # nl.sin/nl.cos range-reduce before the activation (nki-facts §3.5), so numpy is right.
    "sin": (np.sin, Engine.SCALAR),
    "cos": (np.cos, Engine.SCALAR),
    "square": (np.square, Engine.SCALAR),
    "copy": (lambda x: x, Engine.SCALAR),
    "identity": (lambda x: x, Engine.SCALAR),
    "abs": (np.abs, Engine.VECTOR),
    "negative": (np.negative, Engine.VECTOR),
    "reciprocal": (lambda x: 1.0 / x, Engine.VECTOR),
    "sign": (np.sign, Engine.VECTOR),
    "floor": (np.floor, Engine.VECTOR),
    "ceil": (np.ceil, Engine.VECTOR),
    "trunc": (np.trunc, Engine.VECTOR),
    "logical_not": (lambda x: (x == 0).astype(np.float32), Engine.VECTOR),
}

BINARY: dict[str, tuple[Fn, Engine]] = {
    "add": (np.add, Engine.VECTOR),
    "subtract": (np.subtract, Engine.VECTOR),
    "multiply": (np.multiply, Engine.VECTOR),
    "divide": (np.divide, Engine.VECTOR),
    "maximum": (np.maximum, Engine.VECTOR),
    "minimum": (np.minimum, Engine.VECTOR),
    # power runs on GpSimd (nki-facts §4 tensor_tensor row).
    "power": (np.power, Engine.GPSIMD),
    # NKI mod/fmod follow C fmod on fp32 values (sign of the dividend), unlike numpy's `%`.
    "fmod": (np.fmod, Engine.VECTOR),
    # nl.mod on floats: floor modulo, sign of the divisor (numpy `%`); integers: nl_int.py.
    "mod": (np.mod, Engine.VECTOR),
    "equal": (np.equal, Engine.VECTOR),
    "not_equal": (np.not_equal, Engine.VECTOR),
    "greater": (np.greater, Engine.VECTOR),
    "greater_equal": (np.greater_equal, Engine.VECTOR),
    "less": (np.less, Engine.VECTOR),
    "less_equal": (np.less_equal, Engine.VECTOR),
    "logical_and": (lambda a, b: (a != 0) & (b != 0), Engine.VECTOR),
    "logical_or": (lambda a, b: (a != 0) | (b != 0), Engine.VECTOR),
    "logical_xor": (lambda a, b: (a != 0) ^ (b != 0), Engine.VECTOR),
}

COMPARISONS = frozenset(
    {"equal", "not_equal", "greater", "greater_equal", "less", "less_equal"}
    | {"logical_and", "logical_or", "logical_xor", "logical_not"}
)

# Reductions usable as nl.sum/... and as `op=` of nisa.tensor_reduce (nki-facts §4 ALU table).
REDUCE: dict[str, Fn] = {
    "add": np.sum,
    "multiply": np.prod,
    "maximum": np.max,
    "minimum": np.min,
}

_ALIASES: dict[Any, str] = {
    np.add: "add",
    np.subtract: "subtract",
    np.multiply: "multiply",
    np.divide: "divide",
    np.true_divide: "divide",
    np.maximum: "maximum",
    np.minimum: "minimum",
    np.power: "power",
    np.exp: "exp",
    np.log: "log",
    np.sqrt: "sqrt",
    np.tanh: "tanh",
    np.abs: "abs",
    np.negative: "negative",
    np.square: "square",
    np.equal: "equal",
    np.not_equal: "not_equal",
    np.greater: "greater",
    np.greater_equal: "greater_equal",
    np.less: "less",
    np.less_equal: "less_equal",
    np.max: "maximum",
    np.amax: "maximum",  # a separate function object from np.max in numpy 2
    np.amin: "minimum",
    np.min: "minimum",
    np.sum: "add",
    np.prod: "multiply",
}
_REDUCTION_NAMES = {"sum": "add", "max": "maximum", "min": "minimum", "prod": "multiply"}


def op_name(name: str) -> Callable[[Fn], Fn]:
    """Decorator: tag an ``nl`` function with the operator it stands for in ``op=`` arguments."""

    def tag(fn: Fn) -> Fn:
        fn._nki_op = name  # type: ignore[attr-defined]
        return fn

    return tag


def resolve(op: Any, where: str) -> str:
    """Canonical operator name for ``op=`` (nl function, numpy ufunc, or string)."""
    name = getattr(op, "_nki_op", None)
    if name is None:
        name = op if isinstance(op, str) else _ALIASES.get(op)
    name = _REDUCTION_NAMES.get(name, name) if name is not None else None
    if name is None or (name not in UNARY and name not in BINARY):
        raise NkiConstraintError(
            "err_unsupported_operator", f"{where}: operator {op!r} is not a supported NKI op"
        )
    return name
