"""Reading CUDA source files and preprocessing them with pcpp.

Kernels rely on the preprocessor (`#define BLOCK 256`, function-like macros, local headers,
`#ifdef` switches), so analysis runs on the preprocessed text. pcpp emits ``#line`` markers; we
strip them and keep a per-line map back to the original file and line so every later span points
at what the user wrote. System headers (``<cuda_runtime.h>``) are skipped, not errors: CUDA
built-ins are known to the front end.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pcpp

from migrator.diagnostics import Diagnostic, Span, make

MAX_BYTES = 5 * 1024 * 1024

# Defined the way nvcc defines them for the device-and-host compilation of a .cu file.
# __CUDA_ARCH__ is left undefined (host view) unless the user passes -D__CUDA_ARCH__=800.
PREDEFINED = {"__CUDACC__": "1", "__NVCC__": "1",
              # <cuda_runtime.h> makes it __attribute__((aligned(n))); alignment does not
              # change what a kernel computes, and tree-sitter-cuda cannot parse attributes there
              "__align__(n)": ""}  # fmt: skip
# Constants kernels take from system headers we skip (<cfloat>, <climits>, <cmath>,
# <math_constants.h>); values as those headers define them for nvcc on Linux x86-64.
HEADER_CONSTANTS = {
    "FLT_MAX": "3.402823466e+38F",
    "FLT_MIN": "1.175494351e-38F",
    "FLT_EPSILON": "1.192092896e-07F",
    "DBL_MAX": "1.7976931348623158e+308",
    "INFINITY": "__int_as_float(0x7f800000)",
    "NAN": "__int_as_float(0x7fffffff)",
    "INT_MAX": "2147483647",
    "INT_MIN": "(-2147483647 - 1)",
    "UINT_MAX": "4294967295U",
    "M_PI": "3.14159265358979323846",
    "M_PI_F": "3.14159265358979323846F",
    "M_PI_2": "1.57079632679489661923",
    "M_PI_4": "0.78539816339744830962",
    "M_1_PI": "0.31830988618379067154",
    "M_2_PI": "0.63661977236758134308",
    "M_2_SQRTPI": "1.12837916709551257390",
    "M_SQRT2": "1.41421356237309504880",
    "M_SQRT1_2": "0.70710678118654752440",
    "M_E": "2.7182818284590452354",
    "M_LN2": "0.69314718055994530942",
    "M_LN10": "2.30258509299404568402",
    "M_LOG2E": "1.4426950408889634074",
    "M_LOG10E": "0.43429448190325182765",
    "FLT_MAX_EXP": "128",
    "DBL_MIN": "2.2250738585072014e-308",
    "DBL_EPSILON": "2.2204460492503131e-16",
    "LLONG_MAX": "9223372036854775807LL",
    "SHRT_MAX": "32767",
    # <cuda_fp8.h> enumerators
    "__NV_E4M3": "0",
    "__NV_E5M2": "1",
    "__NV_NOSAT": "0",
    "__NV_SATFINITE": "1",
    "CUDART_INF_F": "__int_as_float(0x7f800000)",
    "CUDART_NAN_F": "__int_as_float(0x7fffffff)",
    "CUDART_PI_F": "3.141592654F",
}


# Headers of the C/C++ library and the CUDA toolkit: `#include "assert.h"` with quotes still
# means the system's header when no such file is next to the source.
_SYSTEM_HEADER = re.compile(
    r"^(?:assert|ctype|errno|float|limits|math|stdarg|stddef|stdint|stdio|stdlib|string|time|"
    r"inttypes|stdbool|unistd|sys/\w+|c(?:assert|float|limits|math|stddef|stdint|stdio|stdlib|"
    r"string)|algorithm|vector|iostream|string|memory|type_traits|cstdint|utility|"
    r"cuda|cuda_runtime|cuda_runtime_api|cuda_fp16|cuda_bf16|cuda_fp8|device_launch_parameters|"
    r"cooperative_groups(?:/\w+)?|cub/\S+|thrust/\S+|cublas\w*|curand\w*|mma|"
    r"math_constants|sm_\d+_intrinsics|vector_types|helper_\w+|nvtx3?/\S+)(?:\.hp?p?|\.cuh)?$"
)


def _is_system_header(path: str) -> bool:
    return bool(_SYSTEM_HEADER.match(path))


class SourceError(Exception):
    """A file that cannot be analysed at all; carries the diagnostics that say why."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        super().__init__("\n".join(d.render() for d in diagnostics))


@dataclass
class SourceFile:
    path: str
    text: str


@dataclass
class Preprocessed:
    """Preprocessed text plus, for each of its lines, the (file, line) it came from."""

    path: str  # the main file, as given
    text: str
    line_map: list[tuple[str, int]]
    originals: dict[str, list[str]] = field(default_factory=dict)  # file -> its lines
    macros: dict[str, str] = field(default_factory=dict)  # object-like macros: name -> value
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def origin(self, row: int) -> tuple[str, int]:
        """Original (file, 1-based line) of a 0-based row of the preprocessed text."""
        if 0 <= row < len(self.line_map):
            return self.line_map[row]
        return (self.path, row + 1)

    def original_line(self, file: str, line: int) -> str:
        lines = self.originals.get(file)
        if lines is None:
            try:
                lines = Path(file).read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                lines = []
            self.originals[file] = lines
        return lines[line - 1] if 0 < line <= len(lines) else ""


def read_source(path: str | Path) -> SourceFile:
    """Read a CUDA file, rejecting what is not usable source text with a clear diagnostic."""
    p = Path(path)
    shown = str(path)
    if not p.is_file():
        raise SourceError([make("FILE_NOT_FOUND", path=shown)])
    data = p.read_bytes()
    if len(data) > MAX_BYTES:
        raise SourceError([make("FILE_TOO_LARGE", path=shown, size=len(data), limit=MAX_BYTES)])
    if not data.strip():
        raise SourceError([make("FILE_EMPTY", path=shown)])
    nul = data.find(b"\0")
    if nul >= 0:
        raise SourceError([make("FILE_BINARY", path=shown, offset=nul)])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        span = Span(file=shown, line=line, col=col)
        raise SourceError(
            [make("FILE_NOT_UTF8", span, path=shown, byte=data[e.start], line=line, col=col)]
        ) from e
    if text.startswith("\ufeff"):
        text = text[1:]
    return SourceFile(path=shown, text=text)


class _Preprocessor(pcpp.Preprocessor):
    """pcpp with our policy: skip system headers, collect errors as diagnostics."""

    def __init__(self, main_file: str) -> None:
        super().__init__()
        self.main_file = main_file
        self.c2n_diagnostics: list[Diagnostic] = []
        self.line_directive = "#line"
        self.compress = 0
        self.opened: set[str] = set()  # files read through #include (a cached result's deps)

    def on_file_open(self, is_system_include: bool, includepath: str):  # type: ignore[no-untyped-def]
        f = super().on_file_open(is_system_include, includepath)
        self.opened.add(str(Path(includepath).resolve()))
        return f

    def on_include_not_found(
        self, is_malformed: bool, is_system_include: bool, curdir: str, includepath: str
    ) -> None:
        if is_system_include or _is_system_header(includepath):
            self.c2n_diagnostics.append(make("SYSTEM_INCLUDE_SKIPPED", header=includepath))
            raise pcpp.OutputDirective(pcpp.Action.IgnoreAndRemove)
        super().on_include_not_found(is_malformed, is_system_include, curdir, includepath)

    def on_error(self, file: str, line: int, msg: str) -> None:
        # pcpp reports file names relative to how they were given; map back to the full path
        f = self.main_file if Path(file).name == Path(self.main_file).name else file
        span = Span(file=f, line=int(line), col=1)
        detail = msg
        if "not found" in msg and "nclude" in msg:
            detail = f"{msg} (add its directory with -I)"
        self.c2n_diagnostics.append(make("PREPROCESSOR_ERROR", span, detail=detail))
        self.return_code += 1

    def on_directive_unknown(self, directive, toks, ifpassthru, precedingtoks):  # type: ignore[no-untyped-def]
        # `#pragma unroll` and friends pass through untouched; unknown directives are kept too
        return super().on_directive_unknown(directive, toks, ifpassthru, precedingtoks)


_LINE_RE = re.compile(r'^#line (\d+)(?: "(.*)")?\s*$')


# Preprocessed files by (name, text, -I, -D): one migration reads its file several times
# (front end, spec inference, interpreter, check), and pcpp is the slowest step of each read.
# An entry is used only while every file it included is unchanged (its mtime and size).
_PREPROCESSED: dict[tuple[str, str, str, str], tuple[Preprocessed, list[tuple[str, int, int]]]]
_PREPROCESSED = {}
_PREPROCESSED_MAX = 16
PREPROCESSED = _PREPROCESSED  # (the memo a child that preprocesses ahead fills: `workers`)


def preprocessed_before() -> bool:
    """Whether this process has preprocessed a file already (a library user's, a batch's)."""
    return bool(_PREPROCESSED)


def _stamp(path: str) -> tuple[str, int, int]:
    try:
        st = Path(path).stat()
    except OSError:
        return (path, -1, -1)
    return (path, st.st_mtime_ns, st.st_size)


def preprocess(
    source: SourceFile,
    include_dirs: list[str | Path] | None = None,
    defines: dict[str, str] | None = None,
) -> Preprocessed:
    """Run the C preprocessor over a CUDA file, mapping every output line to its origin."""
    if source.path.startswith("<"):  # a snippet (`<host expression>`): cheap, and kept out of
        return _preprocess(source, include_dirs, defines)[0]  # the memo so files stay in it
    try:  # one file however it is spelled (`k.cu`, `./k.cu`, absolute): the same includes
        where = str(Path(source.path).resolve())
    except OSError:
        where = source.path
    key = (where, source.text, repr([str(d) for d in include_dirs or []]),
           repr(sorted((defines or {}).items())))  # fmt: skip
    hit = _PREPROCESSED.get(key)
    if hit is None or any(_stamp(st[0]) != st for st in hit[1]):
        pre, opened = _preprocess(source, include_dirs, defines)
        if len(_PREPROCESSED) >= _PREPROCESSED_MAX:
            _PREPROCESSED.pop(next(iter(_PREPROCESSED)))  # the oldest
        hit = _PREPROCESSED[key] = (pre, [_stamp(f) for f in sorted(opened)])
    p = hit[0]
    old, new = p.path, source.path  # the main file under the caller's spelling

    def named(f: str) -> str:
        return new if f == old else f

    return Preprocessed(
        path=new,
        text=p.text,
        line_map=[(named(f), n) for f, n in p.line_map] if old != new else list(p.line_map),
        originals={named(f): lines for f, lines in p.originals.items()},
        macros=dict(p.macros),
        diagnostics=[d.model_copy(update={"span": d.span.model_copy(update={"file": new})})
                     if d.span is not None and d.span.file == old else d
                     for d in p.diagnostics],
    )  # fmt: skip


def _preprocess(
    source: SourceFile,
    include_dirs: list[str | Path] | None = None,
    defines: dict[str, str] | None = None,
) -> tuple[Preprocessed, set[str]]:
    """The preprocessed file and the paths of the files it included."""
    main = source.path
    pp = _Preprocessor(main)
    base_dir = str(Path(main).resolve().parent)
    pp.add_path(base_dir)
    for d in include_dirs or []:
        pp.add_path(str(d))
    for name, value in {**PREDEFINED, **HEADER_CONSTANTS, **(defines or {})}.items():
        pp.define(f"{name} {value}")
    try:
        pp.parse(source.text, main)
        buf = io.StringIO()
        pp.write(buf)
    except Exception as e:  # pcpp raises bare errors for some malformed input
        raise SourceError(
            [
                make(
                    "PREPROCESSOR_ERROR",
                    Span(file=main, line=1, col=1),
                    detail=f"{type(e).__name__}: {e}",
                )
            ]
        ) from e
    if any(d.severity == "error" for d in pp.c2n_diagnostics):
        raise SourceError(pp.c2n_diagnostics)

    out_lines: list[str] = []
    line_map: list[tuple[str, int]] = []
    cur_file, cur_line = main, 1
    for raw in buf.getvalue().split("\n"):
        m = _LINE_RE.match(raw)
        if m:
            cur_line = int(m.group(1))
            if m.group(2) is not None:
                cur_file = _resolve_include(m.group(2), main, base_dir, include_dirs or [])
            continue
        out_lines.append(raw)
        line_map.append((cur_file, cur_line))
        cur_line += 1

    macros = {}
    for name, macro in pp.macros.items():
        if macro.arglist is None and not name.startswith("__") and name not in HEADER_CONSTANTS:
            macros[name] = "".join(t.value for t in macro.value).strip()
    return Preprocessed(
        path=main,
        text="\n".join(out_lines),
        line_map=line_map,
        originals={main: source.text.splitlines()},
        macros=macros,
        diagnostics=list(pp.c2n_diagnostics),
    ), pp.opened


def _resolve_include(name: str, main: str, base_dir: str, include_dirs: list[str | Path]) -> str:
    """pcpp names files as it found them; give the main file its user-facing name back."""
    if Path(name).name == Path(main).name and (Path(base_dir) / Path(name).name).exists():
        return main
    for d in [base_dir, *map(str, include_dirs)]:
        cand = Path(d) / name
        if cand.exists():
            return str(cand)
    return name


def iter_sources(inputs: Iterable[str | Path]) -> Iterator[Path]:
    """CUDA files named directly or found in directories (sorted, deduplicated)."""
    seen: set[Path] = set()
    for item in inputs:
        p = Path(item)
        files = sorted(p.glob("*.cu")) if p.is_dir() else [p]
        for f in files:
            r = f.resolve()
            if r not in seen:
                seen.add(r)
                yield f
