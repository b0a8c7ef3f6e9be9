"""The interpreter state for one batch of blocks, and the services every evaluator uses.

`Machine` combines the expression evaluator (`exprs`), the statement executor (`stmts`) and
calls (`calls`), each a mixin with a dict from tree-sitter node type to method. This module holds
what they share: lane geometry, options, the frame stack, type resolution, and the error and
finding helpers that attach kernel name, block, thread and source line.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tree_sitter import Node

from migrator.cuda.interp import coop
from migrator.cuda.interp import ctypes_ as ct
from migrator.cuda.interp.calls import CallMixin
from migrator.cuda.interp.ctypes_ import CType
from migrator.cuda.interp.exprs import ExprMixin
from migrator.cuda.interp.findings import (
    FindingKind,
    FindingLog,
    InterpError,
    OutOfBoundsError,
    UnsupportedError,
)
from migrator.cuda.interp.geometry import Geometry
from migrator.cuda.interp.memory import Buffer, oob_message
from migrator.cuda.interp.options import InterpOptions
from migrator.cuda.interp.program import Program
from migrator.cuda.interp.scope import Binding, Frame, TypeName, Unavailable, Var
from migrator.cuda.interp.stmts import StmtMixin
from migrator.cuda.interp.structs import StructInfo, StructMixin
from migrator.cuda.interp.traced import traced
from migrator.cuda.interp.values import Val
from migrator.diagnostics import Span

SHADOW_FLOAT = CType("float", "float", np.dtype(np.float64))
MAX_CALL_DEPTH = 64
MASK_MEMO_SIZE = 8  # lane masks whose active lanes are kept (`_mask_facts`)
_UNKNOWN = object()  # active lanes not asked for yet


# C's type keywords: a type node spelled so names the built-in type whatever is in scope
_KEYWORD_TYPES = frozenset(("int", "float", "double", "char", "bool", "void", "short", "long"))


class Machine(ExprMixin, StmtMixin, CallMixin, StructMixin):
    def __init__(
        self,
        program: Program,
        kernel: str,
        geo: Geometry,
        options: InterpOptions,
        log: FindingLog,
        shared_bytes: int,
        struct_info: dict[str, StructInfo] | None = None,
    ) -> None:
        self.program = program
        self.parsed = program.parsed
        self.kernel = kernel
        self.geo = geo
        self.options = options
        self.log = log
        self.shared_bytes = shared_bytes
        self.float_t = SHADOW_FLOAT if options.shadow_f64 else ct.FLOAT
        self.types = dict(ct.NAMED)
        if options.shadow_f64:
            self.types["float"] = SHADOW_FLOAT
            for n in (1, 2, 3, 4):
                self.types[f"float{n}"] = ct.vec(SHADOW_FLOAT, n)
        if options.trace:  # every floating-point type stores traced values (traced.py)
            for name, t in ct.NAMED.items():
                if t.kind == "float":
                    self.types[name] = traced(t)
                elif t.kind == "vec" and t.elem is not None and t.elem.kind == "float":
                    self.types[name] = ct.vec(traced(t.elem), t.count)
            self.float_t = traced(ct.FLOAT)
        self.frames: list[Frame] = []
        self.shared: dict[tuple[int, str, str], Buffer] = {}  # static __shared__: site, name, type
        self.dynamic_shared: Buffer | None = None
        self.globals: dict[str, Binding] = {}
        # struct types of this launch, shared by its batches (statics are uniform values)
        self.struct_info: dict[str, StructInfo] = struct_info if struct_info is not None else {}
        self.thread_statements = 0
        self.mask_memo: dict[int, list[Any]] = {}  # `_mask_facts`
        self.current: Node | None = None  # statement being executed
        self.init_mixins()

    # --- frames and names ----------------------------------------------------------------
    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    def push_frame(self, ret_type: CType, scope: dict[str, Binding]) -> Frame:
        if len(self.frames) >= MAX_CALL_DEPTH:
            raise UnsupportedError(
                "call depth limit reached (recursion is not supported)", kernel=self.kernel
            )
        f = Frame(ret_type, [self.globals, scope], np.zeros(self.geo.n, dtype=bool))
        self.frames.append(f)
        return f

    def release(self) -> None:
        """Drop everything this batch's machine holds. Its dispatch tables hold its own bound
        methods, a reference cycle that only the cycle collector would free, and with it the
        batch's shared and local memory (a traced run's millions of values, which the
        collector then walks): dropped here, it all goes as the run ends."""
        self.__dict__.clear()

    def active_count(self, mask: np.ndarray) -> int:
        """How many lanes of `mask` are active."""
        return self._mask_facts(mask)[1]

    def active_lanes(self, mask: np.ndarray) -> np.ndarray | None:
        """The indices of the active lanes of `mask`, or None where every lane is active."""
        facts = self._mask_facts(mask)
        if facts[2] is _UNKNOWN:
            facts[2] = None if facts[1] == mask.size else np.flatnonzero(mask)
        return facts[2]

    def _mask_facts(self, mask: np.ndarray) -> list[Any]:
        """[mask, active count, active lanes (computed when first asked)]. Statements, block
        children, loop tests, stores and memory accesses ask them of the same few mask objects
        again and again (masks are never modified in place), so they are kept per mask object,
        which the memo holds (its id is not reused meanwhile)."""
        memo = self.mask_memo
        hit = memo.get(id(mask))
        if hit is not None and hit[0] is mask:
            return hit
        facts = [mask, int(np.count_nonzero(mask)), _UNKNOWN]
        if len(memo) >= MASK_MEMO_SIZE:
            memo.pop(next(iter(memo)))
        memo[id(mask)] = facts
        return facts

    def lookup(self, name: str) -> Binding | None:
        frames = self.frames
        if frames:  # (`Frame.lookup`, inlined: every identifier of every statement asks)
            b = None
            for scope in reversed(frames[-1].scopes):
                b = scope.get(name)
                if b is not None:
                    break
        else:
            b = self.globals.get(name)
        if isinstance(b, Unavailable):  # the kernel reaches a declaration that failed: now stop
            raise UnsupportedError(
                f"{name!r} is used, but its file-scope declaration could not be evaluated: "
                f"{b.error}",
                self.span(self.current) if self.current is not None else b.error.span,
                self.kernel,
            )
        return b

    def declare(self, name: str, b: Binding) -> None:
        scopes = self.frame.scopes if self.frames else [self.globals]
        scopes[-1][name] = b

    # --- types -----------------------------------------------------------------------------
    def base_type(self, node: Node) -> CType:
        """The type named by a `type` field node (primitive, sized, identifier, template T)."""
        t = node.type
        text = self.parsed.text(node)
        if t == "primitive_type" and text in _KEYWORD_TYPES:
            return self.types[text]  # (no name can stand for a keyword: no lookup)
        if t == "sized_type_specifier":
            words = [self.parsed.text(c) for c in node.children]
            inner = node.child_by_field_name("type")
            if inner is not None and self.parsed.text(inner) in ("float", "double"):
                return self.types[self.parsed.text(inner)]
            return ct.sized(
                [
                    w
                    for w in words
                    if w in ("unsigned", "signed", "long", "short", "char", "int", "double")
                ]
            )
        if t in ("primitive_type", "type_identifier"):
            b = self.lookup(text)
            if isinstance(b, TypeName):
                return b.ctype
            if text in self.types:
                return self.types[text]
            if text in self.program.structs:
                return self.struct_type(text, self.program.structs[text])
        if t == "struct_specifier":
            name_node, body = node.child_by_field_name("name"), node.child_by_field_name("body")
            name = self.parsed.text(name_node) if name_node is not None else f"<struct@{node.id}>"
            if body is not None:
                return self.struct_type(name, body)
            if name in self.program.structs:
                return self.struct_type(name, self.program.structs[name])
        if t == "template_type":
            inst = self.instantiate(node)
            if inst is not None:
                return inst
        group = coop.group_type(text.split("::")[-1])
        if group is not None and t in ("type_identifier", "qualified_identifier", "template_type"):
            return group
        if t == "type_descriptor":
            return self.type_of_descriptor(node)
        if t == "qualified_identifier":
            name = text.split("::")[-1]
            if name in self.types:
                return self.types[name]
        raise self.unsupported(node, f"unknown type {text!r}")

    def type_of_descriptor(self, node: Node) -> CType:
        """Type of a `type_descriptor` (casts, template arguments, sizeof)."""
        tnode = node.child_by_field_name("type")
        if tnode is None:
            raise self.unsupported(node, "type without a name")
        t = self.base_type(tnode)
        decl = node.child_by_field_name("declarator")
        while decl is not None:
            if decl.type == "abstract_pointer_declarator":
                t = ct.ptr(t)
            elif decl.type == "abstract_reference_declarator":
                pass
            else:
                raise self.unsupported(decl, f"type declarator {decl.type}")
            decl = decl.child_by_field_name("declarator")
        return t

    def declarator_type(self, base: CType, decl: Node) -> tuple[str, CType, bool, Node]:
        """(name, type, is_reference, declarator-node) of a (possibly nested) declarator."""
        t, ref = base, False
        node = decl
        while True:
            kind = node.type
            if kind == "identifier":
                return self.name_of(node), t, ref, node
            if kind == "pointer_declarator":
                t = ct.ptr(t)
            elif kind == "reference_declarator":
                ref = True
                node = node.named_children[-1]
                continue
            elif kind == "array_declarator":
                size = node.child_by_field_name("size")
                n = -1 if size is None else int(self.const_int(size))
                t = ct.array(t, n)
            elif kind == "init_declarator":
                pass
            else:
                raise self.unsupported(node, f"declarator {kind}")
            inner = node.child_by_field_name("declarator")
            if inner is None:
                raise self.unsupported(node, "declarator without a name")
            node = inner

    def const_int(self, node: Node) -> int:
        """A compile-time integer (array sizes, template arguments), evaluated uniformly."""
        v = self.ev(node, self.geo.full)
        if not v.is_uniform or v.ctype.kind not in ("int", "bool"):
            raise self.unsupported(node, f"{self.parsed.text(node)!r} is not a constant integer")
        return int(v.data)

    # --- errors and findings ---------------------------------------------------------------
    def span(self, node: object) -> Span | None:
        return self.parsed.span(node) if isinstance(node, Node) else None

    def error(self, node: object, msg: str) -> InterpError:
        return InterpError(msg, self.span(node), self.kernel)

    def unsupported(
        self, node: object, msg: str, kind: type[UnsupportedError] = UnsupportedError
    ) -> UnsupportedError:
        return kind(f"not supported by the interpreter: {msg}", self.span(node), self.kernel)

    def finding(self, node: object, kind: FindingKind, msg: str, lanes: np.ndarray) -> None:
        coords = self.geo.coords(lanes)
        first = f" (first: {coords[0]})" if coords else ""
        self.log.add(kind, msg + first, self.span(node), coords, int(np.count_nonzero(lanes)))

    def oob(
        self,
        node: object,
        buf: Buffer,
        off: np.ndarray,
        bad: np.ndarray,
        idx: np.ndarray | None,
        write: bool,
        misaligned: bool = False,
    ) -> None:
        """An out-of-bounds (or misaligned vector) access by the lanes `bad` of the subset."""
        lanes_idx = np.flatnonzero(bad) if idx is None else idx[bad]
        first = int(lanes_idx[0])
        msg = oob_message(buf, int(off[bad][0]), write, misaligned)
        coord = self.geo.coord(first)
        full = np.zeros(self.geo.n, dtype=bool)
        full[lanes_idx] = True
        if self.options.oob == "raise" or (
            self.options.oob == "shared_reads" and (write or misaligned or buf.space != "shared")
        ):
            raise OutOfBoundsError(
                f"{msg} by {coord} ({len(lanes_idx)} lanes)", self.span(node), self.kernel
            )
        self.finding(node, "misaligned" if misaligned else "out_of_bounds", msg, full)

    # --- helpers used by several mixins ----------------------------------------------------
    def count(self, mask: np.ndarray) -> None:
        self.thread_statements += int(np.count_nonzero(mask))

    def as_val(self, b: Binding, node: Node, mask: np.ndarray) -> Val:
        if isinstance(b, Var):
            b.check_read(self, mask, node)
            return b.val
        if isinstance(b, TypeName):
            raise self.error(node, "a type used as a value")
        return b.load(self, mask, node)
