"""The translation unit as the interpreter needs it: functions by name and file-scope globals.

Built once per `ParsedSource` and reused by every batch of blocks. Host functions are kept too
(they are never run) so that a missing `__device__` qualifier gives a clear error, not a
"function not found".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tree_sitter import Node

from migrator.cuda.parse import ParsedSource

QUALIFIERS = ("__global__", "__device__", "__host__", "__forceinline__", "__noinline__")


def function_declarator(fn: Node) -> Node | None:
    """The `function_declarator` of a function definition, under the pointer and reference
    declarators of its return type (`T* f()`, `E& operator[](int)`)."""
    decl = fn.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        inner = decl.child_by_field_name("declarator")
        if inner is None and decl.named_children:  # reference_declarator names no field
            inner = decl.named_children[-1]
        decl = inner
    return decl


@dataclass
class Function:
    name: str
    node: Node  # function_definition
    template: Node | None  # template_parameter_list, if a template
    qualifiers: frozenset[str]

    @property
    def is_kernel(self) -> bool:
        return "__global__" in self.qualifiers

    @cached_property
    def params(self) -> list[Node]:
        decl = function_declarator(self.node)
        assert decl is not None
        plist = decl.child_by_field_name("parameters")
        assert plist is not None
        return [
            c
            for c in plist.named_children
            if c.type in ("parameter_declaration", "optional_parameter_declaration")
        ]

    @cached_property
    def body(self) -> Node:
        body = self.node.child_by_field_name("body")
        assert body is not None
        return body


@dataclass
class Program:
    parsed: ParsedSource
    functions: dict[str, list[Function]] = field(default_factory=dict)
    globals: list[Node] = field(default_factory=list)  # file-scope declarations, in order
    compact_cache: dict[int, Any] = field(default_factory=dict)  # node id -> compact.Safety
    widen_plans: dict[int, Any] = field(default_factory=dict)  # node id -> widen.Plan | None
    # node id -> the parts of an operator node, read from the tree once (the evaluator asks
    # for them at every execution): a binary or assignment expression's (op, left, right), the
    # `a * b` operands of a possible fused multiply-add (or None)
    operator_parts: dict[int, tuple[str, Node, Node]] = field(default_factory=dict)
    mul_parts: dict[int, tuple[Node, Node] | None] = field(default_factory=dict)
    # node id -> a subscript's (argument, index, argument's name or None, plain argument)
    subscript_parts: dict[int, tuple[Node, Node, str | None, bool]] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)  # node id -> an identifier's text
    # node id -> which of threadIdx / blockIdx / blockDim / gridDim a field expression reads
    # (None: another field), and that field's component (0, 1, 2)
    dim3_fields: dict[int, str | None] = field(default_factory=dict)
    dim3_components: dict[int, int] = field(default_factory=dict)
    # node id -> an `i++` / `--i`'s (step, operand, whether the operator comes first)
    update_parts: dict[int, tuple[int, Node, bool]] = field(default_factory=dict)
    # node id -> a declaration's (specifier words, type node, whether `auto`, (declarator,
    # initialiser or None) of each declarator)
    declaration_parts: dict[int, tuple[frozenset[str], Node | None, bool,
                                       tuple[tuple[Node, Node | None], ...]]] = field(
        default_factory=dict)  # fmt: skip
    structs: dict[str, Node] = field(default_factory=dict)  # `struct S {...};` bodies by name
    # `template <class E> struct S {...};`: (template parameters, body) by name
    struct_templates: dict[str, tuple[Node, Node]] = field(default_factory=dict)

    @classmethod
    def build(cls, parsed: ParsedSource) -> Program:
        prog = cls(parsed)
        prog._scan(parsed.root)
        return prog

    def _scan(self, node: Node) -> None:
        for child in node.named_children:
            if child.type == "function_definition":
                self._add(child, None)
            elif child.type == "template_declaration":
                inner = next(
                    (c for c in child.named_children if c.type == "function_definition"), None
                )
                if inner is not None:
                    self._add(inner, child.child_by_field_name("parameters"))
                st = next((c for c in child.named_children if c.type == "struct_specifier"), None)
                params = child.child_by_field_name("parameters")
                if st is not None and params is not None:
                    name, body = st.child_by_field_name("name"), st.child_by_field_name("body")
                    if name is not None and body is not None:
                        self.struct_templates[self.parsed.text(name)] = (params, body)
            elif child.type in ("declaration", "type_definition", "alias_declaration"):
                self.globals.append(child)
            elif child.type == "struct_specifier":  # `struct S { ... };`
                name, body = child.child_by_field_name("name"), child.child_by_field_name("body")
                if name is not None and body is not None:
                    self.structs[self.parsed.text(name)] = body
            elif child.type in ("namespace_definition", "linkage_specification"):
                body = child.child_by_field_name("body")
                if body is not None:
                    self._scan(body)

    def _add(self, node: Node, template: Node | None) -> None:
        decl = function_declarator(node)
        if decl is None:
            return
        name_node = decl.child_by_field_name("declarator")
        if name_node is None:
            return
        name = self.parsed.text(name_node)
        quals = frozenset(
            self.parsed.text(c) for c in node.children if self.parsed.text(c) in QUALIFIERS
        )
        self.functions.setdefault(name, []).append(Function(name, node, template, quals))

    def kernel(self, name: str | None) -> Function:
        kernels = [f for fs in self.functions.values() for f in fs if f.is_kernel]
        if name is None:
            if len(kernels) != 1:
                names = ", ".join(sorted(f.name for f in kernels)) or "none"
                raise KeyError(f"pass the kernel name; __global__ functions here: {names}")
            return kernels[0]
        for f in kernels:
            if f.name == name:
                return f
        names = ", ".join(sorted(f.name for f in kernels)) or "none"
        raise KeyError(f"no __global__ function {name!r}; kernels here: {names}")
