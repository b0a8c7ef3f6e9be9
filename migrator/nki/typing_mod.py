"""``nki.typing`` / ``neuronxcc.nki.typing``: annotation helpers (checked nowhere yet)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TensorType:
    """``nt.tensor[shape, dtype]``: an annotation (or legacy shape-only placeholder)."""

    shape: Any
    dtype: Any = None


class tensor:  # noqa: N801 - NKI spelling
    """``nt.tensor[[M, N], dtype]`` builds a ``TensorType``."""

    def __class_getitem__(cls, item: Any) -> TensorType:
        item = item if isinstance(item, tuple) else (item,)
        return TensorType(item[0], item[1] if len(item) > 1 else None)


class mutable_tensor(tensor):  # noqa: N801 - NKI spelling
    """Marks a writable kernel parameter (the emulator allows writes either way)."""


class scalar:  # noqa: N801 - NKI spelling
    """Marks a scalar parameter."""
