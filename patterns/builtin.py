"""Registers the built-in family matchers (imported once by the registry)."""

from __future__ import annotations

from migrator.patterns.elementwise import ElementwiseMatcher
from migrator.patterns.irregular import IrregularMatcher
from migrator.patterns.matmul import MatmulMatcher
from migrator.patterns.reduction import ReductionMatcher
from migrator.patterns.registry import register
from migrator.patterns.rowwise import RowwiseMatcher
from migrator.patterns.stencil import StencilMatcher
from migrator.patterns.transpose import TransposeMatcher

BUILTIN = (
    ElementwiseMatcher(),
    RowwiseMatcher(),
    MatmulMatcher(),
    TransposeMatcher(),
    StencilMatcher(),
    ReductionMatcher(),
    IrregularMatcher(),
)
for _matcher in BUILTIN:
    register(_matcher)
