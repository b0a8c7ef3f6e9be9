"""Anti-gaming defences (peers.md §3.4): a static scan of the candidate and runtime checks.

Static (AST of the candidate file; the ``if __name__ == "__main__":`` block is ignored since
it never runs under the scorer):

* framework compute: numpy calls other than dtypes/constants inside functions, torch imports;
* forbidden imports and builtins (files, processes, reflection, dynamic code);
* monkey-patching: assignments to attributes of imported modules, ``setattr`` on them,
  ``sys.modules`` edits, ``builtins``;
* module-level mutable state (caches): list/dict/set/array values, ``global`` statements;
* swallowed exceptions: ``try`` blocks inside functions;
* hard-coded shapes: integer literals equal to a published task size (warning);
* the calling convention: positional tensors and keyword scalars; value scalars never used.

Runtime (what the sandbox child observed): outputs that are not NKI HBM tensors, returned
inputs, mutated inputs, emulator objects replaced, lower-precision compute in a float32 task,
and outputs that do not change with the inputs (constant outputs).
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path
from typing import Any

import numpy as np

from migrator.contract import TaskSpec
from migrator.score.models import Finding

ALLOWED_IMPORTS = {
    "neuronxcc",
    "nki",
    "numpy",
    "math",
    "typing",
    "__future__",
    "functools",
    "itertools",
    "ml_dtypes",
    "dataclasses",
    "enum",
}
FRAMEWORKS = {"torch", "jax", "tensorflow", "cupy", "scipy", "numba", "tinygrad"}
FORBIDDEN_CALLS = {
    "open",
    "eval",
    "exec",
    "compile",
    "__import__",
    "globals",
    "vars",
    "locals",
    "breakpoint",
    "input",
    "memoryview",
}
REFLECTIVE = {"getattr", "setattr", "delattr"}
# attributes through which a kernel would take values out of NKI (numpy behind the nl module,
# the emulator's storage and read/write of a tile)
HOST_ATTRS = {"np", "numpy", "storage", "read", "write", "data"}
FORBIDDEN_ATTRS = {
    "__builtins__",
    "__dict__",
    "__globals__",
    "__class__",
    "__subclasses__",
    "__code__",
    "__closure__",
    "f_back",
    "f_globals",
    "f_locals",
    "_getframe",
    "__import__",
    "__loader__",
    "__spec__",
    "gi_frame",
    "tb_frame",
}
NUMPY_OK = {
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "bool_",
    "dtype",
    "finfo",
    "iinfo",
    "newaxis",
    "pi",
    "e",
    "inf",
    "prod",
    "ndarray",
}
MUTATORS = {
    "append",
    "extend",
    "insert",
    "update",
    "setdefault",
    "pop",
    "popitem",
    "clear",
    "add",
    "remove",
    "discard",
    "__setitem__",
    "fill",
    "put",
    "resize",
}
LOW = ("bfloat16", "float16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn", "tfloat32")


class _Scan(ast.NodeVisitor):
    def __init__(self, path: str, spec: TaskSpec, kernel: str | None) -> None:
        self.path, self.spec, self.kernel = path, spec, kernel
        self.findings: list[Finding] = []
        self.aliases: dict[str, str] = {}  # local name -> imported module root
        self.depth = 0  # function nesting
        self.module_mutables: dict[str, tuple[ast.AST, bool]] = {}  # name -> (node, empty)
        self.mutated: set[str] = set()

    def hit(self, rule: str, node: ast.AST, message: str) -> None:
        loc = f"{self.path}:{getattr(node, 'lineno', 0)}"
        self.findings.append(Finding.of(rule, message, nki_location=loc))

    # imports --------------------------------------------------------------------------
    def _import(self, node: ast.AST, module: str, alias: str) -> None:
        root = module.split(".")[0]
        self.aliases[alias] = root
        if root in FRAMEWORKS:
            self.hit("C2N4020", node, f"imports {module}: framework compute is not NKI")
        elif root not in ALLOWED_IMPORTS:
            self.hit("C2N4028", node, f"imports {module}, which a kernel file may not use")

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._import(node, a.name, (a.asname or a.name).split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        for a in node.names:
            self._import(node, f"{module}.{a.name}" if module else a.name, a.asname or a.name)

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if (
            isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name)
            and test.left.id == "__name__"
        ):
            for stmt in node.orelse:
                self.visit(stmt)
            return  # the __main__ block never runs under the scorer
        self.generic_visit(node)

    # state and functions ----------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Global(self, node: ast.Global) -> None:
        self.hit("C2N4024", node, f"`global {', '.join(node.names)}` keeps state between calls")

    def visit_Try(self, node: ast.Try) -> None:
        if self.depth and node.handlers:
            self.hit("C2N4030", node, "try/except inside a function can hide kernel failures")
        self.generic_visit(node)

    visit_TryStar = visit_Try  # type: ignore[assignment]

    def _module_state(self, node: ast.AST, value: ast.AST | None) -> None:
        if self.depth or value is None:
            return
        mutable = isinstance(
            value, ast.List | ast.Dict | ast.Set | ast.ListComp | ast.DictComp | ast.SetComp
        )
        if isinstance(value, ast.Call):
            f = value.func
            name = (
                f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            )
            root = _root(f)
            mutable = (
                name in {"list", "dict", "set", "defaultdict", "OrderedDict", "deque", "bytearray"}
                or self.aliases.get(root or "") == "numpy"
            )
        if mutable:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            empty = (isinstance(value, ast.List | ast.Dict | ast.Set) and not _elts(value)) or (
                isinstance(value, ast.Call) and not value.args
            )
            for t in targets:
                if isinstance(t, ast.Name):
                    self.module_mutables[t.id] = (node, empty)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._target(t)
        self._module_state(node, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._target(node.target)
        self._module_state(node, node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._target(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._target(t)

    def finish(self) -> None:
        """Module-level containers that functions mutate, or empty ones (caches), are state."""
        for name, (node, empty) in self.module_mutables.items():
            if name in self.mutated or empty:
                self.hit(
                    "C2N4024",
                    node,
                    f"module-level mutable {name!r} keeps state between "
                    "calls (a cache can replay old results)",
                )

    def _target(self, t: ast.AST) -> None:
        if self.depth and isinstance(t, ast.Subscript | ast.Attribute):
            root = _root(t)
            if root:
                self.mutated.add(root)
        if isinstance(t, ast.Tuple | ast.List):
            for e in t.elts:
                self._target(e)
            return
        if isinstance(t, ast.Attribute | ast.Subscript):
            root = _root(t)
            if root in self.aliases or root in {"sys", "builtins", "__builtins__"}:
                what = ast.unparse(t)
                self.hit("C2N4026", t, f"assigns to {what}, an attribute of a library module")

    # calls and attributes ---------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Name):
            if f.id in FORBIDDEN_CALLS:
                self.hit("C2N4028", node, f"calls {f.id}(), which a kernel may not use")
            elif f.id in REFLECTIVE and node.args:
                target = _root(node.args[0])
                name = node.args[1] if len(node.args) > 1 else None
                dynamic = not (isinstance(name, ast.Constant) and isinstance(name.value, str))
                dunder = isinstance(name, ast.Constant) and str(name.value).startswith("__")
                if f.id != "getattr" and target in self.aliases:
                    self.hit("C2N4026", node, f"{f.id}() on module {target} patches a library")
                elif dynamic or dunder or target in {"sys", "builtins"}:
                    self.hit("C2N4028", node, f"reflective {f.id}() call")
        elif isinstance(f, ast.Attribute) and self.depth:
            root = _root(f)
            if f.attr in MUTATORS and root:
                self.mutated.add(root)
            if self.aliases.get(root or "") == "numpy" and f.attr not in NUMPY_OK:
                self.hit(
                    "C2N4020",
                    node,
                    f"computes with numpy ({ast.unparse(f)}) instead of NKI instructions",
                )
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in FORBIDDEN_ATTRS:
            self.hit("C2N4028", node, f"uses {node.attr}, reflection a kernel may not use")
        elif node.attr in HOST_ATTRS or (node.attr[:1] == "_" and node.attr[-2:] != "__"):
            # `nl.np`, `tile.read()`, `t.storage.data`, `t._st`: values taken to the host
            self.hit("C2N4020", node, f"reaches {ast.unparse(node)}: values outside NKI")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in {"__builtins__", "__loader__", "__spec__"}:
            self.hit("C2N4028", node, f"uses {node.id}")


def _elts(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Dict):
        return [k for k in node.keys if k is not None]
    return list(getattr(node, "elts", []))


def _root(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def kernel_function(tree: ast.Module, name: str | None) -> ast.FunctionDef | None:
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    for f in funcs:
        if f.name == name:
            return f
    jitted = [f for f in funcs if any("jit" in ast.unparse(d) for d in f.decorator_list)]
    return jitted[0] if len(jitted) == 1 else None


def _contract(fn: ast.FunctionDef, spec: TaskSpec, path: str) -> list[Finding]:
    out: list[Finding] = []
    loc = f"{path}:{fn.lineno}"
    a = fn.args
    positional = [p.arg for p in a.posonlyargs + a.args]
    required = len(positional) - len(a.defaults)
    want = [t.name for t in spec.inputs_in_order]
    if a.vararg is None and (len(positional) < len(want) or required > len(want)):
        out.append(
            Finding.of(
                "C2N4043",
                f"{fn.name}({', '.join(positional)}) should take the "
                f"tensors ({', '.join(want)}) positionally",
                nki_location=loc,
            )
        )
    names = set(positional[len(want) :]) | {k.arg for k in a.kwonlyargs}
    used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    for s in spec.keyword_scalars:
        if s.nki_kwarg not in names and a.kwarg is None:
            what = ("value scalars are passed by name" if s.value is not None else
                    f"size {s.size} is in no input's shape, so it is passed by name")  # fmt: skip
            out.append(
                Finding.of(
                    "C2N4043",
                    f"{fn.name} has no keyword parameter {s.nki_kwarg!r} ({what})",
                    nki_location=loc,
                )
            )
        elif s.nki_kwarg in names and s.nki_kwarg not in used:
            value = f"= {s.value}" if s.value is not None else f"size {s.size}"
            out.append(
                Finding.of(
                    "C2N4042",
                    f"scalar {s.name!r} ({value}) is accepted but never used",
                    nki_location=loc,
                )
            )
    for k, p in enumerate(positional[: len(want)]):
        if p not in used:
            out.append(
                Finding.of(
                    "C2N4041",
                    f"input {want[k]!r} (parameter {p!r}) is never referenced",
                    nki_location=loc,
                )
            )
    return out


def _hardcoded(fn: ast.FunctionDef, spec: TaskSpec, path: str) -> list[Finding]:
    sizes = {v for s in spec.all_size_sets() for v in s.values()}
    suspicious = {v for v in sizes if v >= 8 and v & (v - 1)}  # not powers of two
    out = []
    for n in ast.walk(fn):
        if isinstance(n, ast.Constant) and type(n.value) is int and n.value in suspicious:
            out.append(
                Finding.of(
                    "C2N4031",
                    f"literal {n.value} equals a published task size",
                    nki_location=f"{path}:{n.lineno}",
                )
            )
    return out[:3]


def scan_source(path: str | Path, spec: TaskSpec, kernel: str | None) -> list[Finding]:
    """Static findings for the candidate file (empty when it does not parse: the sandbox
    reports the syntax error)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    scan = _Scan(str(path), spec, kernel)
    scan.visit(tree)
    scan.finish()
    out = scan.findings
    fn = kernel_function(tree, kernel)
    if fn is not None:
        out += _contract(fn, spec, str(path))
        out += _hardcoded(fn, spec, str(path))
    if not _has_comments(text):
        out.append(Finding.of("C2N4060", "the file has no comments", nki_location=f"{path}:1"))
    return out


def _has_comments(text: str) -> bool:
    try:
        toks = tokenize.generate_tokens(io.StringIO(text).readline)
        return any(t.type == tokenize.COMMENT for t in toks)
    except (tokenize.TokenError, SyntaxError):
        return True


def runtime_findings(
    trials: list[dict[str, Any]], patched: list[str], spec: TaskSpec
) -> list[Finding]:
    """Findings from what the sandbox child observed over all trials."""
    out: list[Finding] = []
    seen: set[tuple[str, str]] = set()
    inputs = spec.inputs_in_order
    outputs = spec.outputs_in_order

    def once(rule: str, key: str, message: str, loc: str | None = None) -> None:
        if (rule, key) not in seen:
            seen.add((rule, key))
            out.append(Finding.of(rule, message, nki_location=loc))

    ok = [t for t in trials if t.get("status") == "ok"]
    for t in ok:
        for j, kind in enumerate(t.get("raw_kinds", [])):
            name = outputs[j].name if j < len(outputs) else f"#{j}"
            if kind.startswith("input:"):
                k = int(kind.split(":")[1])
                src = inputs[k].name if k < len(inputs) else f"#{k}"
                if not (k < len(inputs) and inputs[k].role == "inout" and src == name):
                    once("C2N4022", name, f"output {name!r} is the input {src!r} itself")
            elif kind not in ("nki_hbm", "nki_hbm_unknown"):
                once(
                    "C2N4021",
                    name,
                    f"output {name!r} is a {kind}, not an HBM tensor written by NKI stores",
                )
        for k in t.get("inputs_mutated", []):
            if k < len(inputs) and inputs[k].role == "in":
                once("C2N4025", inputs[k].name, f"input {inputs[k].name!r} was modified")
        for f in t.get("findings", []):
            once("C2N4057", f, f)
    if ok:
        for k, t in enumerate(inputs):
            if not any(k < len(r.get("inputs_read", [])) and r["inputs_read"][k] for r in ok):
                once("C2N4041", t.name, f"input {t.name!r} is never read by any instruction")
        floats = [t for t in spec.tensors if t.dtype.startswith("float") or t.dtype in LOW]
        all_fp32 = all(t.dtype == "float32" for t in floats)  # ("bfloat16" is a float too)
        low = sorted(
            {
                d
                for r in ok
                for d in r.get("compute_dtypes", []) + r.get("matmul_dtypes", [])
                if d in LOW
            }
        )
        if all_fp32 and low:
            once("C2N4029", "dtype", f"engines computed in {', '.join(low)} in a float32 task")
    for name in patched:
        once("C2N4027", name, f"{name} was replaced while the candidate ran")
    return out


def constant_output_findings(
    groups: list[tuple[list[np.ndarray], list[np.ndarray]]], spec: TaskSpec
) -> list[Finding]:
    """`groups`: (candidate outputs, oracle outputs) of trials with the same sizes. An output
    identical across trials whose oracle outputs differ does not depend on the inputs."""
    out = []
    for j, t in enumerate(spec.outputs_in_order):
        for a in range(len(groups)):
            for b in range(a + 1, len(groups)):
                (ca, oa), (cb, ob) = groups[a], groups[b]
                if j >= min(len(ca), len(cb), len(oa), len(ob)) or ca[j].shape != cb[j].shape:
                    continue
                if ca[j].tobytes() == cb[j].tobytes() and oa[j].tobytes() != ob[j].tobytes():
                    out.append(
                        Finding.of(
                            "C2N4023", f"output {t.name!r} is identical for different inputs"
                        )
                    )
                    return out
    return out
