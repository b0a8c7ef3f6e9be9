"""The migration check's element comparison: NaN and infinity agree with themselves only."""

from __future__ import annotations

import numpy as np

from migrator.check import compare


def test_matching_nan_and_infinity_agree_mismatched_ones_do_not() -> None:
    want = np.array([1.0, np.nan, np.inf, -np.inf, 2.0], dtype=np.float32)
    assert compare("y", want.copy(), want, 1e-5, 1e-6).ok  # sqrt(-1) in both: not a mismatch
    got = np.array([1.0, 0.5, np.inf, np.inf, np.nan], dtype=np.float32)
    r = compare("y", got, want, 1e-5, 1e-6)
    assert not r.ok and r.mismatches == 3  # number for NaN, +inf for -inf, NaN for a number


def test_tolerance_still_applies_to_finite_values() -> None:
    want = np.array([1.0, 100.0], dtype=np.float32)
    assert compare("y", want * (1 + 1e-7), want, 1e-5, 1e-6).ok
    assert compare("y", want * 1.01, want, 1e-5, 1e-6).mismatches == 2
