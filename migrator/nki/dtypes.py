"""The NKI dtype table, type promotion, poison values and round-to-nearest-even casting.

Low-precision floats are stored with ``ml_dtypes`` (bf16, fp8), whose float32 casts round to
nearest even, the hardware default (nki-facts §5 "Rounding").
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from .errors import NkiConstraintError

float32 = np.dtype(np.float32)
float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
# tf32 (1s8e10m) is held in float32 storage; the mantissa is not truncated (nki-facts §3.8:
# the legacy stub itself is an opaque 4-byte type).
tfloat32 = np.dtype(np.float32)
# NKI's float8_e4m3 is the IEEE-like format with max 240 (nki-facts §3.8).
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
int8, int16, int32 = np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32)
uint8, uint16, uint32 = np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32)
bool_ = np.dtype(np.bool_)

LOW_PRECISION_FLOATS = frozenset({bfloat16, float8_e4m3, float8_e5m2, float8_e4m3fn})
FLOATS = frozenset({float32, float16} | LOW_PRECISION_FLOATS)
INTS = frozenset({int8, int16, int32, uint8, uint16, uint32})
ALL = FLOATS | INTS | {bool_}
FP8 = frozenset({float8_e4m3, float8_e5m2, float8_e4m3fn})


def normalize(dtype: Any) -> np.dtype:
    """Turn a user dtype (nl.float32, np.float32, 'bfloat16', ...) into a legal numpy dtype."""
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise NkiConstraintError("err_unsupported_dtype", f"{dtype!r} is not a dtype") from exc
    if dt not in ALL:
        raise NkiConstraintError(
            "err_unsupported_dtype",
            f"dtype {dt} is not an NKI dtype; use one of float32, bfloat16, float16, "
            "float8_e4m3, float8_e5m2, (u)int8/16/32 or bool_",
        )
    return dt


def is_float(dt: np.dtype) -> bool:
    """True for every floating dtype, including ml_dtypes ones numpy does not know as floats."""
    return dt in FLOATS


def weak_scalar_dtype(value: Any) -> np.dtype:
    """Python scalars are weakly typed: bool→uint8, int→int32, float→float32 (nki-facts §3.8)."""
    if isinstance(value, bool | np.bool_):
        return uint8
    if isinstance(value, int | np.integer):
        return int32
    return float32


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """NKI binary-op result dtype (nki-facts §3.8), which differs from numpy's rules.

    numpy would give int64 for int32+uint32 and float16 for fp8+fp16 via float32 quirks; NKI
    widens to float32 and to the documented float types instead.
    """
    if a == b:
        return a
    fa, fb = is_float(a), is_float(b)
    if fa and not fb:
        return a
    if fb and not fa:
        return b
    if fa and fb:
        if a in FP8 and b in FP8:
            return bfloat16
        if a in FP8:
            return b
        if b in FP8:
            return a
        if a.itemsize != b.itemsize:
            return a if a.itemsize > b.itemsize else b
        return float32  # fp16 + bf16
    if a == bool_:
        return b
    if b == bool_:
        return a
    if {a, b} == {int32, uint32}:
        return float32
    return np.promote_types(a, b)


_NAMES: dict[np.dtype, str] = {}


def name(dt: np.dtype) -> str:
    """``str(dt)``, cached (trace records name the dtype of every instruction)."""
    text = _NAMES.get(dt)
    if text is None:
        text = _NAMES[dt] = str(dt)
    return text


def poison_value(dt: np.dtype) -> Any:
    """Value that marks uninitialised memory: NaN for floats, max for ints, True for bool."""
    if is_float(dt):
        return np.nan
    if dt == bool_:
        return True
    return np.iinfo(dt).max


def cast(values: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Cast engine results (float32) to a destination dtype the way the hardware writes them.

    Floats: round to nearest even via ml_dtypes/numpy casting. Integers: numpy truncates and
    wraps; we round to nearest even and saturate instead (inferred: engines compute in fp32 and
    the documented output conversion is RNE, nki-facts §5). Bool: non-zero is True.
    """
    if values.dtype == dt:
        return values
    if dt == bool_:
        return values != 0
    if dt in INTS and is_float(np.dtype(values.dtype)):
        info = np.iinfo(dt)
        with np.errstate(invalid="ignore"):
            rounded = np.rint(values.astype(np.float64))
            rounded = np.nan_to_num(rounded, nan=0.0)
        return np.clip(rounded, info.min, info.max).astype(dt)
    return values.astype(dt)


def to_f32(values: np.ndarray) -> np.ndarray:
    """Widen stored values to the float32 compute type of every engine (nki-facts §5)."""
    if values.dtype == np.float32:
        return values
    if values.dtype == bfloat16:  # exact: bf16 is the upper half of the fp32 bit pattern
        return (values.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return values.astype(np.float32)
