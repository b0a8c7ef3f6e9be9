"""Reading C/C++ declarations out of tree-sitter nodes: names, types, pointers, array sizes."""

from __future__ import annotations

from dataclasses import dataclass, field

from tree_sitter import Node

from migrator.cuda.parse import ParsedSource

# Declaration-level keywords that tree-sitter-cuda exposes as separate children.
CUDA_QUALIFIERS = {"__global__", "__device__", "__host__", "__forceinline__", "__noinline__"}
MEMORY_QUALIFIERS = {"__shared__", "__constant__", "__managed__"}


@dataclass
class Declarator:
    """What a (possibly nested) declarator says about one declared name."""

    name: str
    pointer_depth: int = 0
    is_reference: bool = False
    restrict: bool = False
    pointer_const: bool = False
    array_dims: list[Node | None] = field(default_factory=list)  # None for `[]`
    init: Node | None = None
    ctor_args: Node | None = None  # `dim3 block(16, 16)`
    node: Node | None = None


def unwrap_declarator(parsed: ParsedSource, node: Node | None) -> Declarator | None:
    """Follow pointer/reference/array/init declarators down to the identifier."""
    d = Declarator(name="")
    dims: list[Node | None] = []
    cur = node
    while cur is not None:
        t = cur.type
        if t in ("identifier", "field_identifier"):
            d.name = parsed.text(cur)
            d.node = cur
            break
        if t == "init_declarator":
            value = cur.child_by_field_name("value")
            if value is not None and value.type == "argument_list":
                d.ctor_args = value
            else:
                d.init = value
            cur = cur.child_by_field_name("declarator")
        elif t in ("pointer_declarator", "abstract_pointer_declarator"):
            d.pointer_depth += 1
            for c in cur.children:
                if c.type == "type_qualifier":
                    q = parsed.text(c)
                    d.restrict |= q in ("__restrict__", "restrict", "__restrict")
                    d.pointer_const |= q == "const"
            cur = cur.child_by_field_name("declarator")
        elif t in ("reference_declarator", "abstract_reference_declarator"):
            d.is_reference = True
            cur = next((c for c in cur.named_children), None)
        elif t == "array_declarator":
            dims.append(cur.child_by_field_name("size"))
            cur = cur.child_by_field_name("declarator")
        elif t == "parenthesized_declarator":
            cur = next((c for c in cur.named_children), None)
        else:
            return None
    # array_declarator nests outermost-last: `a[2][3]` is array(array(a, 2), 3)
    d.array_dims = list(reversed(dims))
    return d if d.name else None


def base_type_text(parsed: ParsedSource, decl: Node) -> str:
    """The declaration's type specifier text (`float`, `unsigned int`, `T`, `float4`)."""
    t = decl.child_by_field_name("type")
    return " ".join(parsed.text(t).split()) if t is not None else "int"


def qualifiers(parsed: ParsedSource, decl: Node) -> set[str]:
    """Keywords and type qualifiers written on the declaration itself (not on the pointer)."""
    out: set[str] = set()
    for c in decl.children:
        if c.type in ("type_qualifier", "storage_class_specifier"):
            out.add(parsed.text(c))
        elif c.type in CUDA_QUALIFIERS or c.type in MEMORY_QUALIFIERS:
            out.add(c.type)
    return out


def function_declarator(node: Node) -> Node | None:
    """The function_declarator under a function_definition (through pointer/reference)."""
    cur = node.child_by_field_name("declarator")
    while cur is not None and cur.type != "function_declarator":
        cur = cur.child_by_field_name("declarator")
    return cur


def function_name(parsed: ParsedSource, fdecl: Node) -> str:
    d = fdecl.child_by_field_name("declarator")
    if d is None:
        return ""
    if d.type == "template_function":
        d = d.child_by_field_name("name")
    return parsed.text(d) if d is not None else ""


def callee_name(parsed: ParsedSource, call: Node) -> tuple[str, Node | None]:
    """Name of a call's function and its template argument list, if any.

    ``cg::sync`` becomes ``sync`` with scope kept in the text; ``blk.sync()`` becomes ``.sync``.
    """
    fn = call.child_by_field_name("function")
    if fn is None:
        return "", None
    if fn.type == "template_function":
        name = fn.child_by_field_name("name")
        return (parsed.text(name) if name is not None else ""), fn.child_by_field_name("arguments")
    if fn.type == "qualified_identifier":
        name = fn.child_by_field_name("name")
        while name is not None and name.type == "qualified_identifier":
            name = name.child_by_field_name("name")
        if name is not None and name.type == "template_function":
            args = name.child_by_field_name("arguments")
            inner = name.child_by_field_name("name")
            return (parsed.text(inner) if inner is not None else ""), args
        return (parsed.text(name) if name is not None else ""), None
    if fn.type == "field_expression":
        field_node = fn.child_by_field_name("field")
        return "." + (parsed.text(field_node) if field_node is not None else ""), None
    return parsed.text(fn), None
