"""The state shared by the kernel-body analysis mixins (`control`, `memory`, `calls`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from migrator import diagnostics as diag
from migrator.cuda.indexing import Env, IndexEvaluator
from migrator.cuda.ir import (
    Access,
    ArrayDecl,
    Barrier,
    Call,
    Expr,
    Guard,
    IndexVar,
    Kernel,
    Loop,
    Reduction,
    Store,
)
from migrator.cuda.parse import ParsedSource


@dataclass
class BodyFacts:
    """What the walk collected; `frontend` turns it into a `Kernel`."""

    shared: list[ArrayDecl] = field(default_factory=list)
    local_arrays: list[ArrayDecl] = field(default_factory=list)
    index_vars: list[IndexVar] = field(default_factory=list)
    accesses: list[Access] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)
    guards: list[Guard] = field(default_factory=list)
    barriers: list[Barrier] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    reductions: list[Reduction] = field(default_factory=list)
    types_used: set[str] = field(default_factory=set)
    diagnostics: list[diag.Diagnostic] = field(default_factory=list)
    # extra role evidence from calls into device functions: param -> {"read", "write"}
    role_evidence: dict[str, set[str]] = field(default_factory=dict)
    written_names: set[str] = field(default_factory=set)  # identifiers assigned (for refs)
    stores: list[Store] = field(default_factory=list)
    returns: Expr | None = None
    returns_seen: int = 0


class BodyState:
    """Attributes every mixin may use; `analysis.BodyAnalyzer.__init__` sets them."""

    p: ParsedSource
    env: Env
    ev: IndexEvaluator  # index arithmetic (template parameters stay symbolic)
    size_ev: IndexEvaluator  # sizes (template parameters bound to their values)
    size_bindings: dict[str, int]
    tu_shared: dict[str, ArrayDecl]
    callees: dict[str, Kernel]
    kernel_name: str
    facts: BodyFacts
    loop_stack: list[int]  # ids of enclosing loops, outermost first
    loop_depths: list[int]  # branch_depth inside each open loop body
    guard_stack: list[int]  # ids of enclosing guards (including early exits)
    branch_depth: int  # loops and if-branches entered; decides strong vs weak updates
    guard_of_if: dict[int, int]  # tree-sitter node id of an if_statement -> guard id
    choice_aliases: dict[str, list[str]]  # `q = c ? a : b`: q -> the arrays it may name
