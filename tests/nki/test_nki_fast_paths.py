"""Fast paths of the emulator's hot loop must answer exactly as the general paths do.

Each test builds the situation a shortcut could get wrong (a cached widening whose source is
overwritten, an in-place accumulation into memory that other views share) and checks the
values against numpy.
"""

import ml_dtypes
import numpy as np

from migrator.nki import language as nl
from migrator.nki import run_kernel

F32 = np.float32
BF16 = ml_dtypes.bfloat16


def test_bf16_widening_cache_follows_writes_to_its_source():
    """Loaded bf16 tiles are widened once per source; a store into the source invalidates it."""

    def kernel(x, y):
        out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        first = nl.load(x)
        before = nl.matmul(first, nl.load(y), transpose_x=True)
        nl.store(out[:, 0:128], value=nl.copy(before))
        nl.store(x, value=nl.multiply(first, 2.0, dtype=nl.bfloat16))  # overwrite the source
        after = nl.matmul(nl.load(x), nl.load(y), transpose_x=True)
        nl.store(out[:, 128:256], value=nl.copy(after))
        return out

    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 128)).astype(BF16)
    y = rng.standard_normal((128, 128)).astype(BF16)
    xf, yf = x.astype(F32), y.astype(F32)
    out, _ = run_kernel(kernel, x.copy(), y)
    np.testing.assert_allclose(out[:, :128], xf.T @ yf, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(out[:, 128:], (2 * xf).T @ yf, rtol=1e-5, atol=1e-4)


def test_psum_accumulation_in_place_is_seen_through_a_reshape_alias():
    """`acc += matmul(...)` adds in place; an alias made earlier must see the new values."""

    def kernel(a, b):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
        alias = acc.reshape((128, 64))
        for k in nl.sequential_range(2):
            acc += nl.matmul(
                nl.load(a[k * 128 : (k + 1) * 128, :]), nl.load(b[k * 128 : (k + 1) * 128, :]),
                transpose_x=True,
            )  # fmt: skip
        nl.store(out, value=nl.copy(alias))
        return out

    rng = np.random.default_rng(1)
    a = rng.standard_normal((256, 128)).astype(F32)
    b = rng.standard_normal((256, 64)).astype(F32)
    out, _ = run_kernel(kernel, a, b)
    np.testing.assert_allclose(out, a.T @ b, rtol=1e-5, atol=1e-4)
