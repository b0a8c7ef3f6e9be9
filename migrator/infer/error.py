"""The one error of spec inference: what could not be inferred, said plainly."""

from __future__ import annotations


class InferenceError(ValueError):
    """The spec cannot be inferred; the message says what is missing."""


class GatherError(InferenceError):
    """An extent follows the values of an integer input: a gather's table (its rows are a
    size of their own, which the integer input indexes)."""
