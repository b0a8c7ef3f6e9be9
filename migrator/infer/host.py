"""Host code as size formulas: a launch's expressions resolved to the host function's
parameters and the file's constants (typedefs, `sizeof`, struct statics, device properties),
in the contract's formula spelling (`ceil_div`, `select`, `min`/`max`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from migrator.cuda.ir import LaunchSite
from migrator.infer.error import InferenceError

_SIZEOF = {"sizeof(float)": "4", "sizeof(double)": "8", "sizeof(int)": "4",
           "sizeof(unsigned int)": "4", "sizeof(__half)": "2"}  # fmt: skip


# Launches sized from the device (`deviceProp.multiProcessorCount`) are inferred for one small
# reference device: 8 SMs with the per-SM limits of compute capability 8.0 (CUDA programming
# guide, table of technical specifications). A correct kernel gives the same results on any
# device, a small one keeps the CPU oracle quick, and the spec's formulas show the numbers used.
REFERENCE_DEVICE = {
    "multiProcessorCount": 8, "maxThreadsPerMultiProcessor": 2048, "warpSize": 32,
    "maxThreadsPerBlock": 1024, "sharedMemPerBlock": 49152, "sharedMemPerBlockOptin": 166912,
    "sharedMemPerMultiprocessor": 167936, "regsPerBlock": 65536, "regsPerMultiprocessor": 65536,
    "maxBlocksPerMultiProcessor": 32,
}  # fmt: skip


_DEVICE_FIELD = re.compile(rf"\b\w+\s*(?:\.|->)\s*({'|'.join(REFERENCE_DEVICE)})\b")


_DEVICE_GLOBAL = re.compile(
    rf"\b([A-Za-z_]\w*)\s*=\s*\w+\s*(?:\.|->)\s*({'|'.join(REFERENCE_DEVICE)})\s*;"
)


def _device_globals(parsed: Any) -> dict[str, str]:
    """Variables the host sets from a device property (`cuda_num_SMs =
    deviceProp.multiProcessorCount;` in main, read by a launch elsewhere): the reference
    device's value."""
    if parsed is None:
        return {}
    text = parsed.source_bytes.decode("utf-8", "replace")
    found: dict[str, str] = {}
    for m in _DEVICE_GLOBAL.finditer(text):
        found.setdefault(m.group(1), str(REFERENCE_DEVICE[m.group(2)]))
    return found


_FORMULA_FUNCTIONS = {"ceil_div", "round_up", "min", "max", "sqrt", "select"}  # contract's


_FILE_CONSTANT = re.compile(r"\bsizeof\s*\(\s*[\w:<>, ]+\)|\b(?!std::)\w+(?:<[\w, ]+>)?::\w+\b")


# values the host learns at run time, so a size of its own: a tensor's (`x.size(0)`, a torch
# binding) or the command line's (`M = atoi(argv[1])`, a benchmark's `./main 1024 1024`)
_RUNTIME_SIZE = re.compile(
    r"\.\s*(?:size|numel|stride|sizes|dim)\s*\("
    r"|\b(?:std\s*::\s*)?(?:ato(?:i|l|ll)|sto(?:i|l|ll|ul|ull)|strto(?:l|ll|ul|ull))\s*\(\s*argv\b"
)


_C_CAST = re.compile(
    r"\((?:\s*(?:const|unsigned|signed)\s+)*(?:long\s+long|long|int|short|unsigned|size_t|"
    r"ssize_t|ptrdiff_t|u?int(?:8|16|32|64)_t|float|double)(?:\s+int)?\s*\)"
)


class _Host:
    """Host-side definitions of one launch site: expressions resolved to host parameters."""

    def __init__(
        self,
        host: dict[str, str],
        helpers: dict[str, tuple[list[str], str]] | None = None,
        constants: Callable[[list[str]], dict[str, int]] | None = None,
        params: set[str] | None = None,
    ) -> None:
        self.host = host
        self.helpers = helpers or {}
        self.params = params or set()  # the host function's parameters
        self.constants = constants  # evaluates `sizeof(floatX)`, `x128::size` in the file
        self._known: dict[str, int | None] = {}

    def _file_constants(self, text: str) -> str:
        """`sizeof(T)` and `S::member` replaced by their values, as the interpreter sees the
        file (typedefs chosen by macros, struct templates); others stay as written."""
        if self.constants is None:
            return text
        found = set(_FILE_CONSTANT.findall(text)) - set(self._known)
        if found:
            values = self.constants(sorted(found))
            self._known.update({t: values.get(t) for t in found})
        for t, v in self._known.items():
            if v is not None and t in text:
                text = text.replace(t, str(v))
        return text

    def resolve(self, text: str, depth: int = 0) -> str:
        if text.startswith("<conditional"):
            raise InferenceError(f"the launch depends on a value set at run time ({text})")
        out = _min_max(self._inline_helpers(text))
        out = re.sub(r"\b(\w+)\.([xyz])\b", self._dim3_component, out)  # blockSize.x
        for k, v in _SIZEOF.items():
            out = out.replace(k, v)
        out = self._file_constants(out)
        out = _DEVICE_FIELD.sub(lambda m: str(REFERENCE_DEVICE[m.group(1)]), out)
        if depth <= 8:
            for name, value in self.host.items():
                if not value.startswith("dim3") and re.search(rf"\b{re.escape(name)}\b", out):
                    sub = f"({self.resolve(value, depth + 1)})"
                    out = re.sub(rf"\b{re.escape(name)}\b", sub, out)
        out = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", out)  # `block_size / 32U`: a suffix, not a name
        out = re.sub(r"\bstatic_cast<[^>]*>", "", out)
        out = _C_CAST.sub("", out)  # `(long)N`, `(size_t)n`: casts, never sizes
        # `ceil((float) N / Bc)`: the cast is gone, the rounding up stays
        out = _ceil_of_quotient(out)
        out = _c_conditionals(out)
        return re.sub(r"\(\((\w+)\)\)", r"(\1)", out).strip()

    def _dim3_component(self, m: re.Match[str]) -> str:
        if m.group(1) in self.params:  # a dim3 parameter: each component a size
            return f"{m.group(1)}_{m.group(2)}"
        value = self.host.get(m.group(1), "")
        inner = re.fullmatch(r"\s*dim3\s*\((.*)\)\s*", value, re.S)
        if inner is None:
            return m.group(0)
        parts = _split_args(inner.group(1))
        k = "xyz".index(m.group(2))
        return f"({parts[k]})" if k < len(parts) else "1"

    def _inline_helpers(self, text: str) -> str:
        """`grid_for(n)` → the helper's returned expression with `n` for its parameter; every
        call, nested ones too (`iDivUp(n, 64 * iSnapDown(255, 4))`), a bounded number of
        rounds (a recursive helper is left as a call)."""
        for _ in range(8):
            before = text
            for name, (params, body) in self.helpers.items():
                start, call = 0, re.compile(rf"\b{re.escape(name)}\s*\(")
                while m := call.search(text, start):
                    depth, i = 1, m.end()
                    while i < len(text) and depth:
                        depth += {"(": 1, ")": -1}.get(text[i], 0)
                        i += 1
                    args = _split_args(text[m.end() : i - 1])
                    if len(args) != len(params):
                        start = m.end()
                        continue
                    inlined = body
                    for p, a in zip(params, args, strict=True):
                        inlined = re.sub(rf"\b{re.escape(p)}\b", f"({a})", inlined)
                    text = text[: m.start()] + f"({inlined})" + text[i:]
                    start = m.start() + len(inlined) + 2  # (past it: nesting is next round's)
            if text == before:
                break
        return text

    def dim3(self, text: str) -> list[Any]:
        source = self.host.get(text.strip(), text)
        if not str(source).startswith("dim3"):
            source = text
        inner = re.fullmatch(r"\s*dim3\s*\((.*)\)\s*", source, re.S)
        parts = _split_args(inner.group(1)) if inner else [source]
        return [_int_or_text(self.resolve(part)) for part in parts]


def _ceil_of_quotient(text: str) -> str:
    """`ceil(a / b)` (a float division, its cast already dropped) as `ceil_div(a, b)`."""
    m = re.search(r"\bceil[f]?\s*\(", text)
    if m is None:
        return text
    depth, i, slash = 1, m.end(), []
    while i < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if text[i] == "/" and depth == 1:
            slash.append(i)
        i += 1
    if depth or len(slash) != 1:
        return text
    a, b = text[m.end() : slash[0]].strip(), text[slash[0] + 1 : i - 1].strip()
    return text[: m.start()] + f"ceil_div({a}, {b})" + _ceil_of_quotient(text[i:])


def _c_conditionals(text: str) -> str:
    """C's `c ? a : b` as `select(c, a, b)`, the spec formulas' spelling (innermost first)."""
    if "?" not in text:
        return text

    def split_top(s: str) -> tuple[str, str, str] | None:
        depth, q, nested = 0, -1, 0
        for i, ch in enumerate(s):
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
            if depth == 0 and ch == "?":
                nested += q >= 0
                q = i if q < 0 else q
            elif depth == 0 and ch == ":" and q >= 0:
                if not nested:
                    return s[:q], s[q + 1 : i], s[i + 1 :]
                nested -= 1
        return None

    def conv(s: str) -> str:
        out, i = "", 0
        while i < len(s):
            if s[i] != "(":
                out, i = out + s[i], i + 1
                continue
            depth, j = 1, i + 1
            while j < len(s) and depth:
                depth += {"(": 1, ")": -1}.get(s[j], 0)
                j += 1
            out, i = out + "(" + conv(s[i + 1 : j - 1]) + ")", j
        parts = split_top(out)
        if parts is None:
            return out
        c, a, b = (conv(x).strip() for x in parts)
        return f"select({c}, {a}, {b})"

    return conv(text)


def _min_max(text: str) -> str:
    """`a > B ? B : a` and friends (clamping idioms) as `min(a, B)` / `max(a, B)`."""
    t = r"([\w()+\-*/ ]+?)"
    text = re.sub(rf"{t}\s*>\s*{t}\s*\?\s*\2\s*:\s*\1", r"min(\1, \2)", text)
    text = re.sub(rf"{t}\s*<\s*{t}\s*\?\s*\2\s*:\s*\1", r"max(\1, \2)", text)
    text = re.sub(rf"{t}\s*<\s*{t}\s*\?\s*\1\s*:\s*\2", r"min(\1, \2)", text)
    text = re.sub(rf"{t}\s*>\s*{t}\s*\?\s*\1\s*:\s*\2", r"max(\1, \2)", text)
    return text


def _clean(expr: str) -> str:
    """Drop redundant parentheses (`((n))` → `n`) so the spec reads like hand-written ones."""
    import ast

    try:
        return ast.unparse(ast.parse(expr, mode="eval"))
    except SyntaxError:
        return expr


def _split_args(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    return [*parts, cur.strip()] if cur.strip() else parts


def _positive_int(text: str) -> int | None:
    """`50000`, `1 << 20`, `32 * 1024`: a positive integer constant, else None."""
    from migrator.contract import SpecError, eval_expr

    clean = re.sub(r"(?<=\d)[uUlL]+\b", "", text.strip())
    if not re.fullmatch(r"(?:[\d\s()+*/%-]|<<|>>)+", clean):
        return None
    try:
        v = eval_expr(clean, {})
    except (SpecError, TypeError, ValueError):
        return None
    return v if isinstance(v, int) and v > 0 else None


def _int_or_text(s: str) -> Any:
    try:
        return int(_clean(s))
    except ValueError:
        return _clean(s)


def _number(text: str) -> Any:
    try:
        return int(text.rstrip("uUlL"), 0)
    except ValueError:
        return text


def _literal(text: str, default: float) -> float:
    try:
        return float(text.rstrip("fF"))
    except ValueError:
        return default


def _file_scope_sizes(
    parsed: Any, kernel: str, site: LaunchSite, values: dict[str, str]
) -> dict[str, str]:
    """Names the launch reads that the host function does not define, which the file defines
    as integer constants (`const int OPT_N = 4000000;`, `constexpr int N = 1 << 20;`)."""
    if parsed is None:
        return {}
    text = " ".join([site.grid, site.block, site.shared_bytes or "", *site.args,
                     *(v for v in values.values() if not v.startswith("<"))])  # fmt: skip
    names = set(re.findall(r"\b[A-Za-z_]\w*\b", text)) - set(values) - set(site.host_values)
    names -= _FORMULA_FUNCTIONS | {"sizeof", "dim3"}
    if not names:
        return {}
    from migrator.cuda.interp.runner import file_constants

    found = file_constants(parsed, kernel, sorted(names))
    return {n: str(v) for n, v in found.items() if v > 0 and n.isidentifier()}


def _constants_of(parsed: Any, kernel: str) -> Callable[[list[str]], dict[str, int]] | None:
    if parsed is None:
        return None

    def evaluate(texts: list[str]) -> dict[str, int]:
        from migrator.cuda.interp.runner import file_constants

        return file_constants(parsed, kernel, texts)

    return evaluate
