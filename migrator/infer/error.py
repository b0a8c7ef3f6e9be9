"""The one error of spec inference: what could not be inferred, said plainly."""

from __future__ import annotations


class InferenceError(ValueError):
    """The spec cannot be inferred; the message says what is missing."""
