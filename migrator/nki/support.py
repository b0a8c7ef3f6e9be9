"""What the emulator implements, generated from the API modules themselves (house rule 20).

Anything not listed raises ``NotImplementedError`` naming the API when a kernel touches it.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from . import isa_dst, isa_legacy, language
from .tensor import Buffer

_OWN = {
    "migrator.nki.language",
    "migrator.nki.nl_memory",
    "migrator.nki.nl_composite",
    "migrator.nki.nl_int",
    "migrator.nki.nl_extra",
}
_DATA = ("tile_size", "mgrid", "engine", "fp32", "bfp16")


def _public(module: ModuleType, owners: set[str]) -> list[str]:
    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or name in vars(module).get("_INTERNAL", ()):
            continue
        data = isinstance(value, Buffer | np.dtype) or name in _DATA
        own = callable(value) and getattr(value, "__module__", "") in owners
        if data or own:
            names.append(name)
    return sorted(names)


def supported_api() -> dict[str, list[str]]:
    """Implemented names per API surface."""
    return {
        "nki.language": _public(language, _OWN),
        "neuronxcc.nki.isa (legacy, returns tiles)": _public(
            isa_legacy, {"migrator.nki.isa_legacy", "migrator.nki.isa_common"}
        ),
        "nki.isa (new, dst first)": _public(
            isa_dst, {"migrator.nki.isa_dst", "migrator.nki.isa_common"}
        ),
    }


def markdown() -> str:
    """The support table as Markdown (for docs and issue notes)."""
    lines = ["| API surface | implemented |", "|---|---|"]
    for surface, names in supported_api().items():
        lines.append(f"| `{surface}` | {', '.join(f'`{n}`' for n in names)} |")
    return "\n".join(lines)
