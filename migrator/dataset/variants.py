"""Launch-configuration variants: the same kernel with other compile-time launch constants.

Real CUDA fixes its launch shape with macros (`#define BLOCK_SIZE 256`, `#define TILE 16`). A
variant sets such macros to other integers; the launch the file's own host code then makes
(grid, block, dynamic shared memory, template arguments) is read back from the rewritten source
and expressed in the task's size names, so the variant is a complete task of its own. Whether the
kernel still computes its reference with the new constants (a kernel may assume its block is a
multiple of 32, or a power of two) is for the caller to check: `build_task` runs the CUDA
interpreter against the numpy reference and rejects variants that no longer match.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

from migrator.contract import LaunchSpec, TaskSpec

_INT_DEFINE = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(\d+)[uUlL]*[ \t]*(?://.*|/\*.*)?$", re.M
)


class MissingDefine(ValueError):
    """The file has no integer `#define` of that name: the variant does not apply to it."""


def integer_defines(source: str) -> dict[str, int]:
    """The object-like macros of `source` whose value is a plain integer literal."""
    return {m.group(1): int(m.group(2)) for m in _INT_DEFINE.finditer(source)}


def rewrite_defines(source: str, defines: Mapping[str, int], file: str = "<source>") -> str:
    """`source` with each `#define NAME <int>` set to the given value (the rest untouched)."""
    known = integer_defines(source)
    for name, value in defines.items():
        if name not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise MissingDefine(f"{file}: no `#define {name} <integer>` to vary "
                             f"(integer macros in the file: {listed})")  # fmt: skip
        if int(value) <= 0:
            raise ValueError(f"{file}: {name}={value}: a launch constant must be positive")
        hits = [m for m in _INT_DEFINE.finditer(source) if m.group(1) == name]
        if len(hits) > 1:
            raise ValueError(f"{file}: {name} is defined {len(hits)} times; cannot vary it")
        m = hits[0]
        source = source[: m.start(2)] + str(int(value)) + source[m.end(2) :]
    return source


def launch_variant(spec: TaskSpec, source: str, defines: Mapping[str, int]) -> tuple[str, TaskSpec]:
    """(rewritten source, spec with the launch its host code now makes)."""
    from migrator.cuda.frontend import analyze_text
    from migrator.infer import InferenceError, site_launch

    file = str(spec.cuda_source_path()) if spec.path else "<source>"
    new_source = rewrite_defines(source, defines, file)
    tu = analyze_text(new_source, path=str(file))
    try:
        grid, block, smem, targs = site_launch(tu, spec.kernel.name)
    except InferenceError as e:
        raise ValueError(f"{file}: the variant's launch cannot be read: {e}") from e
    # the host function's parameters are the kernel's (corpus convention): bind them to sizes
    bind = {s.cuda_param: s.size for s in spec.scalars if s.size is not None}
    bind.update({n: n for n in spec.sizes})

    def in_sizes(expr: Any) -> Any:
        if isinstance(expr, int):
            return expr

        def name(m: re.Match[str]) -> str:
            word = m.group(0)
            if word in ("min", "max", "ceil_div"):
                return word
            if word not in bind:
                raise ValueError(f"{file}: the launch uses {word!r}, which is not a size of "
                                 f"the task ({', '.join(spec.sizes)})")  # fmt: skip
            return word if bind[word] == word else f"({bind[word]})"

        text = re.sub(r"\b[A-Za-z_]\w*\b", name, str(expr))
        return ast.unparse(ast.parse(text, mode="eval"))  # `((N) + 128 - 1)` → `(N + 128 - 1)`

    launch = LaunchSpec(
        grid=[in_sizes(g) for g in grid],
        block=[in_sizes(b) for b in block],
        shared_bytes=in_sizes(smem),
    )
    kernel = spec.kernel.model_copy(update={"template_args": targs or spec.kernel.template_args})
    out = spec.model_copy(update={"launch": launch, "kernel": kernel})
    for sizes in out.all_size_sets():
        out.launch_config(sizes)  # every expression evaluates
    return new_source, out


def parse_defines(text: str) -> dict[str, int]:
    """`"BLOCK_SIZE=128,TILE=8"` → {"BLOCK_SIZE": 128, "TILE": 8} (the CLI's --launch value)."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, value = part.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_]\w*", name.strip()) or not value.strip().isdigit():
            raise ValueError(f"--launch {text!r}: expected NAME=INTEGER[,NAME=INTEGER...]")
        out[name.strip()] = int(value)
    if not out:
        raise ValueError(f"--launch {text!r}: expected NAME=INTEGER[,NAME=INTEGER...]")
    return out
