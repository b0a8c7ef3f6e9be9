"""The front end's entry point: a CUDA file in, a `TranslationUnit` of kernel IR out.

Collects `__global__`/`__device__` functions (with their template parameters and explicit
instantiations), file-scope `__constant__`/`__shared__` declarations and host launch sites, then
analyses each function body (`analysis.BodyAnalyzer`). Device functions are analysed first, callees
before callers, so pointer roles propagate through helper calls.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tree_sitter import Node

from migrator import diagnostics as diag
from migrator.cuda.analysis import BodyAnalyzer, vector_and_half_types
from migrator.cuda.builtins import KNOWN_TYPES, TYPE_BYTES
from migrator.cuda.decl import (
    base_type_text,
    callee_name,
    function_declarator,
    function_name,
    qualifiers,
    unwrap_declarator,
)
from migrator.cuda.indexing import Env, IndexEvaluator, Var
from migrator.cuda.ir import (
    ArrayDecl,
    Expr,
    Kernel,
    LaunchSite,
    Param,
    TemplateParam,
    TranslationUnit,
)
from migrator.cuda.parse import ParsedSource, parse_file, parse_text
from migrator.cuda.source import SourceError


@dataclass
class _Function:
    node: Node  # function_definition
    name: str
    qualifier: str  # global | device | host_device | host
    template: Node | None  # template_parameter_list
    instantiations: list[list[str]] = field(default_factory=list)
    _calls: list[tuple[str, Node | None, Node]] | None = None

    def calls(self, parsed: ParsedSource) -> list[tuple[str, Node | None, Node]]:
        """(callee name, template arguments, call node) of each call in the body, in `_walk`
        order, read once: the call graph, template propagation and every host template's
        binding ask (nine host templates walked llm.c's layer-norm file nine times)."""
        if self._calls is None:
            self._calls = [(*callee_name(parsed, n), n) for n in _walk(self.node)
                           if n.type == "call_expression"]  # fmt: skip
        return self._calls


def analyze_file(
    path: str | Path,
    include_dirs: list[str | Path] | None = None,
    defines: dict[str, str] | None = None,
    kernel: str | None = None,
) -> TranslationUnit:
    """Read, preprocess, parse and analyse a CUDA file (raises `SourceError` on bad input).
    `kernel`: analyse that `__global__` kernel and the functions it calls only (see
    `analyze`); the whole file where it names no kernel of the file."""
    parsed = parse_file(path, include_dirs, defines)
    # a migration analyses its file more than once (itself, the check's parameter types, often
    # under another spelling of the path): the same preprocessed text gives the same unit, and
    # each caller gets its own copy with the file named as that caller names it
    main = parsed.pre.path
    try:
        where = str(Path(main).resolve())
    except OSError:
        where = main
    lines = tuple((where if f == main else f, n) for f, n in parsed.pre.line_map)
    key = (where, parsed.pre.text, lines, None)
    hit = _ANALYSED.get(key)  # (the whole file serves any one kernel of it)
    if hit is None and kernel is not None:
        key = (where, parsed.pre.text, lines, kernel)
        hit = _ANALYSED.get(key)
    if hit is None:
        tu = analyze(parsed, kernel)
        if kernel is not None and kernel not in {k.name for k in tu.global_kernels}:  # the whole
            key = (where, parsed.pre.text, lines, None)  # file, so that callers list its kernels
            tu = analyze(parsed)
        if len(_ANALYSED) >= 8:
            _ANALYSED.pop(next(iter(_ANALYSED)))
        _ANALYSED[key] = (tu, main)
        return tu.model_copy(deep=True)
    tu, spelled = hit
    if spelled == main:
        return tu.model_copy(deep=True)
    text = tu.model_dump_json().replace(json.dumps(spelled), json.dumps(main))
    return TranslationUnit.model_validate_json(text)


_ANALYSED: dict[tuple[Any, ...], tuple[TranslationUnit, str]] = {}


def analyze_text(text: str, path: str = "<string>", **kw: object) -> TranslationUnit:
    return analyze(parse_text(text, path, **kw))  # type: ignore[arg-type]


def analyze(parsed: ParsedSource, kernel: str | None = None) -> TranslationUnit:
    """The translation unit of a parsed file. `kernel`: of its functions, only that kernel
    and the device functions it reaches are analysed (a migration of one kernel of llm.c's
    layer-norm file analysed all 22 functions, a fifth of its front end's time); file-scope
    declarations and every launch site are read as for the whole file."""
    functions, constants, tu_shared, instantiations = _collect_top_level(parsed)
    launches, launch_errors = _launch_sites(parsed, functions)
    if launch_errors:  # invalid CUDA, like a syntax error: nothing sensible to analyse
        raise SourceError(launch_errors)
    by_name = {f.name: f for f in functions}
    for name, targs in instantiations:
        if name in by_name:
            by_name[name].instantiations.append(targs)
    host_bindings: dict[str, dict[str, str]] = {}  # per host template, found once
    for i, site in enumerate(launches):
        f = by_name.get(site.kernel)
        if f is not None and site.template_args and site.template_args not in f.instantiations:
            f.instantiations.append(site.template_args)
        host = by_name.get(site.host_function or "")
        if host is not None and host.template is not None:
            # `reduce0<T><<<..>>>(d_idata, ..)` in `template <class T> void reduce(T* ..)`:
            # T as the file instantiates the host function
            if host.name not in host_bindings:
                host_bindings[host.name] = _host_type_bindings(parsed, host, functions)
            bound = host_bindings[host.name]
            types = {a: _substitute(t, bound) for a, t in site.arg_types.items()}
            targs = [bound.get(a.strip(), a) for a in site.template_args]
            values = {n: _substitute(v, bound) for n, v in site.host_values.items()}
            launches[i] = site.model_copy(
                update={"arg_types": types, "template_args": targs, "host_values": values}
            )

    tu_diags = list(parsed.diagnostics)
    const_values = _constant_values(parsed, functions)
    order = _callees_first(parsed, functions)
    _propagate_instantiations(parsed, list(reversed(order)), by_name)
    wanted = None if kernel is None else _reached(parsed, functions, kernel)
    kernels: dict[str, Kernel] = {}
    for f in order:
        if f.qualifier == "host" or (wanted is not None and f.name not in wanted):
            continue
        kernels[f.name] = _analyze_function(parsed, f, const_values, tu_shared, constants, kernels)
    ordered = [kernels[f.name] for f in functions if f.name in kernels]
    targets = set(kernels) if wanted is None else {f.name for f in functions
                                                   if f.qualifier != "host"}  # fmt: skip
    for site in launches:
        if site.kernel not in targets:
            tu_diags.append(diag.make("UNKNOWN_LAUNCH_TARGET", site.span, name=site.kernel))
    if not ordered:
        tu_diags.append(diag.make("NO_KERNELS", path=parsed.path))
    return TranslationUnit(
        file=parsed.path,
        host_helpers=_host_helpers(parsed, functions),
        kernels=ordered,
        constants=constants,
        launch_sites=launches,
        macros=parsed.pre.macros,
        diagnostics=tu_diags,
    )


# --- top level ---------------------------------------------------------------------------


def _collect_top_level(
    parsed: ParsedSource,
) -> tuple[list[_Function], list[ArrayDecl], dict[str, ArrayDecl], list[tuple[str, list[str]]]]:
    functions: list[_Function] = []
    constants: list[ArrayDecl] = []
    shared: dict[str, ArrayDecl] = {}
    instantiations: list[tuple[str, list[str]]] = []
    evaluator = IndexEvaluator(parsed, Env(), {})

    def visit(node: Node, template: Node | None) -> None:
        t = node.type
        if t == "template_declaration":
            params = node.child_by_field_name("parameters")
            for c in node.named_children:
                if c is not params:
                    visit(c, params)
        elif t == "function_definition":
            fdecl = function_declarator(node)
            if fdecl is None:
                return
            quals = qualifiers(parsed, node)
            if "__global__" in quals:
                q = "global"
            elif "__device__" in quals:
                q = "host_device" if "__host__" in quals else "device"
            else:
                q = "host"
            functions.append(_Function(node, function_name(parsed, fdecl), q, template))
        elif t == "template_instantiation":
            fdecl = function_declarator(node)
            d = fdecl.child_by_field_name("declarator") if fdecl is not None else None
            if d is not None and d.type == "template_function":
                name = d.child_by_field_name("name")
                args = d.child_by_field_name("arguments")
                instantiations.append(
                    (parsed.text(name) if name else "", _template_args(parsed, args))
                )
        elif t == "declaration":
            quals = qualifiers(parsed, node)
            space = (
                "constant"
                if "__constant__" in quals
                else ("shared" if "__shared__" in quals else None)
            )
            if space is None and "__device__" not in quals:
                return
            elem = base_type_text(parsed, node)
            for child in node.children_by_field_name("declarator"):
                d = unwrap_declarator(parsed, child)
                if d is None:
                    continue
                dims = [evaluator.const_int(s) if s is not None else None for s in d.array_dims]
                nbytes = TYPE_BYTES.get(elem)
                for x in dims:
                    nbytes = nbytes * x if nbytes is not None and x is not None else None
                decl = ArrayDecl(
                    name=d.name,
                    elem_type=elem,
                    space=space or "global",  # type: ignore[arg-type]
                    dims=dims,
                    dims_text=[parsed.text(s) if s else "" for s in d.array_dims],
                    dynamic="extern" in quals and space == "shared",
                    bytes=nbytes,
                    has_initializer=d.init is not None,
                    init_values=_initializer_values(parsed, d.init),
                    span=parsed.span(node),
                )
                if space == "shared":
                    shared[d.name] = decl
                else:
                    constants.append(decl)
        elif (
            t in ("linkage_specification", "namespace_definition", "declaration_list")
            or t.startswith("preproc_if")
            or t == "preproc_else"
        ):
            for c in node.named_children:
                visit(c, template)

    for child in parsed.root.named_children:
        visit(child, None)
    return functions, constants, shared, instantiations


def _initializer_values(parsed: ParsedSource, init: Node | None) -> list[float] | None:
    """`{0.1f, -2.0f, 3}` as numbers (for `__constant__` tables); None if not all literal."""
    if init is None or init.type != "initializer_list":
        return None
    values: list[float] = []
    for item in init.named_children:
        if item.type == "initializer_list":  # a row of a 2-D table: flattened row-major
            row = _initializer_values(parsed, item)
            if row is None:
                return None
            values.extend(row)
            continue
        text = parsed.text(item).replace(" ", "")
        try:
            values.append(float(text.rstrip("fFlLuU") if not text.lower().startswith("0x")
                                else int(text.rstrip("uUlL"), 16)))  # fmt: skip
        except ValueError:
            return None
    return values


def _template_args(parsed: ParsedSource, args: Node | None) -> list[str]:
    if args is None:
        return []
    return [" ".join(parsed.text(a).split()) for a in args.named_children]


def _template_params(parsed: ParsedSource, plist: Node | None) -> list[TemplateParam]:
    out: list[TemplateParam] = []
    if plist is None:
        return out
    for p in plist.named_children:
        span = parsed.span(p)
        if p.type in ("type_parameter_declaration", "optional_type_parameter_declaration"):
            name_node = next((c for c in p.named_children if c.type == "type_identifier"), None)
            default = p.child_by_field_name("default_type")
            out.append(
                TemplateParam(
                    name=parsed.text(name_node) if name_node else "",
                    kind="type",
                    default=parsed.text(default) if default else None,
                    span=span,
                )
            )
        elif p.type in ("parameter_declaration", "optional_parameter_declaration"):
            d = unwrap_declarator(parsed, p.child_by_field_name("declarator"))
            default = p.child_by_field_name("default_value")
            out.append(
                TemplateParam(
                    name=d.name if d else "",
                    kind="value",
                    type=base_type_text(parsed, p),
                    default=parsed.text(default) if default else None,
                    span=span,
                )
            )
    return out


def _constant_values(parsed: ParsedSource, functions: list[_Function]) -> dict[str, int]:
    """File-scope `constexpr`/`const` integers and enumerators usable in sizes."""
    values: dict[str, int] = {}
    evaluator = IndexEvaluator(parsed, Env(), values)
    for node in parsed.root.named_children:
        if node.type != "declaration":
            continue
        quals = qualifiers(parsed, node)
        if not ({"const", "constexpr"} & quals):
            continue
        for child in node.children_by_field_name("declarator"):
            d = unwrap_declarator(parsed, child)
            if d is not None and d.init is not None and not d.pointer_depth:
                v = evaluator.const_int(d.init)
                if v is not None:
                    values[d.name] = v
    return values


def _callees_first(parsed: ParsedSource, functions: list[_Function]) -> list[_Function]:
    by_name = {f.name: f for f in functions}
    done: list[_Function] = []
    seen: set[str] = set()

    def visit(f: _Function, stack: tuple[str, ...]) -> None:
        if f.name in seen or f.name in stack:
            return
        for callee in dict.fromkeys(c[0] for c in f.calls(parsed)):  # (in call order)
            g = by_name.get(callee)
            if g is not None and g.qualifier != "host":
                visit(g, (*stack, f.name))
        seen.add(f.name)
        done.append(f)

    for f in functions:
        visit(f, ())
    return done


def _reached(parsed: ParsedSource, functions: list[_Function], kernel: str) -> set[str]:
    """`kernel` and the device functions it calls, directly or through others (by name: a
    host function may share a kernel's name)."""
    named: dict[str, list[_Function]] = {}
    for f in functions:
        if f.qualifier != "host":
            named.setdefault(f.name, []).append(f)
    seen: set[str] = set()
    todo = [kernel]
    while todo:
        name = todo.pop()
        if name in seen or name not in named:
            continue
        seen.add(name)
        for f in named[name]:
            todo += [c[0] for c in f.calls(parsed)]
    return seen


def _propagate_instantiations(
    parsed: ParsedSource, callers_first: list[_Function], by_name: dict[str, _Function]
) -> None:
    """`block_sum<BLOCK>(v)` inside `kernel<128>` instantiates `block_sum<128>`."""
    for f in callers_first:
        bindings = _bindings(_template_params(parsed, f.template), f.instantiations)
        for name, targs, _ in f.calls(parsed):
            g = by_name.get(name)
            if g is None or targs is None or g is f:
                continue
            args = [str(bindings.get(a, a)) for a in _template_args(parsed, targs)]
            if args not in g.instantiations:
                g.instantiations.append(args)


def _called_names(parsed: ParsedSource, node: Node) -> set[str]:
    return {callee_name(parsed, n)[0] for n in _walk(node) if n.type == "call_expression"}


def _walk(node: Node):  # type: ignore[no-untyped-def]
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.named_children)


# --- one function --------------------------------------------------------------------------


def _analyze_function(
    parsed: ParsedSource,
    f: _Function,
    constants: dict[str, int],
    tu_shared: dict[str, ArrayDecl],
    tu_constants: list[ArrayDecl],
    callees: dict[str, Kernel],
) -> Kernel:
    node = f.node
    fdecl = function_declarator(node)
    assert fdecl is not None
    tparams = _template_params(parsed, f.template)
    type_params = {t.name for t in tparams if t.kind == "type"}
    bindings = _bindings(tparams, f.instantiations)
    env = Env()
    for c in tu_constants:
        env.define(
            c.name, Var("array", base=c.name, space=c.space, elem_type=c.elem_type, offset={})
        )
    env.push()
    for t in tparams:
        if t.kind == "value":
            env.define(t.name, Var("param"))
    diags: list[diag.Diagnostic] = []
    raw_params: list[tuple[Node, str, object]] = []
    tags: list[tuple[int, str]] = []  # unnamed parameters (`std::bool_constant<B>` tags)
    plist = fdecl.child_by_field_name("parameters")
    for i, p in enumerate(plist.named_children if plist is not None else []):
        if p.type not in ("parameter_declaration", "optional_parameter_declaration"):
            continue
        d = unwrap_declarator(parsed, p.child_by_field_name("declarator"))
        if d is None:
            tnode = p.child_by_field_name("type")
            tags.append((i, " ".join(parsed.text(tnode).split()) if tnode is not None else ""))
            continue
        elem = base_type_text(parsed, p)
        if d.pointer_depth:
            env.define(
                d.name,
                Var(
                    "array", base=d.name, space="global", elem_type=elem, offset={}, is_pointer=True
                ),
            )
        else:
            env.define(d.name, Var("param", expr=Expr(kind="param", name=d.name, text=d.name)))
        raw_params.append((p, elem, d))
        if d.pointer_depth > 1:
            diags.append(diag.make("POINTER_TO_POINTER", parsed.span(p), name=d.name))
        elif not d.pointer_depth and _is_struct_type(p, elem, type_params):
            diags.append(diag.make("STRUCT_PARAM", parsed.span(p), name=d.name, type=elem))
    env.push()
    # Template values are constants of the index algebra when they have one meaning (a single
    # instantiation, or the defaults): `k < K` is then a counted loop and `K / 2` folds. With
    # several instantiations the IR stays symbolic in them; shared-array sizes take the first.
    index_constants = {**constants, **bindings} if len(f.instantiations) <= 1 else constants
    analyzer = BodyAnalyzer(parsed, env, index_constants, bindings, tu_shared, callees, f.name)
    body = node.child_by_field_name("body")
    facts = analyzer.run(body) if body is not None else analyzer.facts
    diags.extend(facts.diagnostics)

    params: list[Param] = []
    for p, elem, d in raw_params:
        quals = qualifiers(parsed, p)
        name = d.name  # type: ignore[attr-defined]
        role = _role(name, d, facts)
        params.append(
            Param(
                name=name,
                type=_type_without_name(parsed, p, d.node),  # type: ignore[attr-defined]
                base_type=elem,
                pointer_depth=d.pointer_depth,  # type: ignore[attr-defined]
                is_const="const" in quals or d.pointer_const,  # type: ignore[attr-defined]
                is_restrict=d.restrict,  # type: ignore[attr-defined]
                is_reference=d.is_reference,  # type: ignore[attr-defined]
                role=role,
                span=parsed.span(p),
            )
        )
    if body is not None and f.qualifier != "global" and f.name in _called_names(parsed, body):
        diags.append(diag.make("RECURSION", parsed.span(node), name=f.name))
    if f.qualifier in ("device", "host_device") and body is not None:
        for n in _walk(body):
            if n.type == "call_expression" and any(
                c.type == "kernel_call_syntax" for c in n.children
            ):
                diags.append(
                    diag.make("DYNAMIC_PARALLELISM", parsed.span(n), name=callee_name(parsed, n)[0])
                )
    for t in tparams:
        if t.name not in bindings and t.default is None and t.kind == "value":
            diags.append(diag.make("UNRESOLVED_TEMPLATE", t.span, name=t.name, kernel=f.name))
    vec, half = vector_and_half_types(facts.types_used | {e for _, e, _ in raw_params})  # type: ignore[misc]
    rt = node.child_by_field_name("type")
    return Kernel(
        name=f.name,
        qualifier=f.qualifier,  # type: ignore[arg-type]
        return_type=parsed.text(rt) if rt is not None else "void",
        template_params=tparams,
        instantiations=f.instantiations,
        params=params,
        unnamed_params=tags,
        shared=facts.shared,
        local_arrays=facts.local_arrays,
        index_vars=facts.index_vars,
        accesses=facts.accesses,
        loops=facts.loops,
        guards=facts.guards,
        barriers=facts.barriers,
        calls=facts.calls,
        reductions=facts.reductions,
        stores=facts.stores,
        returns=facts.returns,
        vector_types=vec,
        half_types=half,
        diagnostics=_dedupe(diags),
        span=parsed.span(node),
        expanded=parsed.text(node) if _one_row(node) else None,
    )


def _one_row(node: Node) -> bool:
    """A definition the preprocessor wrote on one line: a macro's expansion (a body written
    on one line reads the same either way)."""
    return node.start_point.row == node.end_point.row


def _type_without_name(parsed: ParsedSource, p: Node, ident: Node | None) -> str:
    """The parameter's text with its name cut out: `const float* __restrict__`."""
    text = parsed.source_bytes[p.start_byte : p.end_byte]
    if ident is not None:
        a, b = ident.start_byte - p.start_byte, ident.end_byte - p.start_byte
        text = text[:a] + text[b:]
    return " ".join(text.decode("utf-8", "replace").split())


def _bindings(tparams: list[TemplateParam], instantiations: list[list[str]]) -> dict[str, int]:
    """Integer values of template value parameters, from the first instantiation or defaults."""
    out: dict[str, int] = {}
    first = instantiations[0] if instantiations else []
    for i, t in enumerate(tparams):
        if t.kind != "value":
            continue
        text = first[i] if i < len(first) else t.default
        if text is None:
            continue
        value = _literal_int(text)
        if value is not None:
            out[t.name] = value
    return out


def _literal_int(text: str) -> int | None:
    """An integer template argument written as literals: `64`, `(32)` from a macro, `256 / 4`
    (C's division of non-negative integers); None for anything naming something."""
    src = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\b", r"\1", text.strip())
    if not re.fullmatch(r"[0-9a-fA-FxX\s+\-*/()%]+", src) or re.search(r"[a-fA-F]", re.sub(
            r"0[xX][0-9a-fA-F]+", "", src)):  # fmt: skip
        return None
    try:
        value = eval(src.replace("/", "//"), {"__builtins__": {}}, {})  # digits and operators
    except (SyntaxError, ZeroDivisionError, TypeError):
        return None
    return value if isinstance(value, int) else None


def _is_struct_type(p: Node, elem: str, type_params: set[str]) -> bool:
    t = p.child_by_field_name("type")
    if t is None or t.type not in ("type_identifier", "struct_specifier", "qualified_identifier"):
        return False
    return elem not in KNOWN_TYPES and elem not in type_params and elem not in TYPE_BYTES


def _role(name: str, d: object, facts) -> str:  # type: ignore[no-untyped-def]
    reads = writes = False
    for a in facts.accesses:
        if a.array != name or a.space != "global":
            continue
        reads |= a.kind in ("read", "update", "atomic", "address")
        writes |= a.kind in ("write", "update", "atomic", "address")
    ev = facts.role_evidence.get(name, set())
    reads |= "read" in ev
    writes |= "write" in ev
    if not d.pointer_depth:  # type: ignore[attr-defined]
        if d.is_reference and name in facts.written_names:  # type: ignore[attr-defined]
            return "out"
        return "scalar"
    if reads and writes:
        return "inout"
    if writes:
        return "out"
    if reads:
        return "in"
    return "unused"


def _dedupe(diags: list[diag.Diagnostic]) -> list[diag.Diagnostic]:
    seen: set[tuple[str, str, int]] = set()
    out = []
    for d in diags:
        key = (d.id, d.message, d.span.line if d.span else 0)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


# --- launch sites ---------------------------------------------------------------------------


def _launch_sites(
    parsed: ParsedSource, functions: list[_Function]
) -> tuple[list[LaunchSite], list[diag.Diagnostic]]:
    sites: list[LaunchSite] = []
    errors: list[diag.Diagnostic] = []
    kernels = {f.name for f in functions if f.qualifier == "global"}
    for f in functions:
        host_types = _host_pointer_types(parsed, f.node)
        defining: list[Node] | None = None  # found once per function, read at each launch
        for n in _walk(f.node):
            if n.type != "call_expression":
                continue
            cfg = next((c for c in n.children if c.type == "kernel_call_syntax"), None)
            if cfg is None:
                continue
            name, targs = callee_name(parsed, n)
            # `kernel = &transposeNaive; ... kernel<<<grid, threads>>>(...)`: a launch through
            # a function pointer launches each kernel the function assigns to it
            names = [name] if name in kernels else _pointed_kernels(parsed, f.node, name, kernels)
            parts = [parsed.text(c) for c in cfg.named_children]
            if len(parts) < 2:
                errors.append(diag.make("BAD_LAUNCH_CONFIG", parsed.span(n), name=name,
                                        count=len(parts)))  # fmt: skip
                continue
            args_node = n.child_by_field_name("arguments")
            args = [parsed.text(a) for a in args_node.named_children] if args_node else []
            # `switch (K) { case 64: k<64><<<grid, dim3(K)>>>(...); }`: here K is 64
            if defining is None:
                defining = [d for d in _walk_in_order(f.node) if d.type in _DEFINING]
            values_here = _host_definitions(parsed, f.node, at=n, nodes=defining)
            # `auto launch = [&](auto c) { k<c.value><<<g, c.value>>>(...); };
            # dispatch(launch, block_size);`: c.value is block_size at the launch
            tags = _dispatched_tags(parsed, f.node, n, functions)
            if tags is not None:
                sub, call = tags
                outside = _host_definitions(parsed, f.node, at=call, nodes=defining)
                for key, value in list(values_here.items()):
                    value = _substituted(value, sub)
                    # (`constexpr int block_size = c.value;` in the lambda: the outer one)
                    values_here[key] = outside.get(key, value) if value == key else value
                parts = [_substituted(x, sub) for x in parts]
                args = [_substituted(x, sub) for x in args]
            cases = _case_bindings(parsed, n)
            memsets = _memset_fills(parsed, n, defining)
            site_values = {**values_here, **cases}
            used = _dependencies(parsed, cfg, site_values)
            if args_node is not None:  # sizes passed as arguments are host-side sizes too
                used |= _dependencies(parsed, args_node, site_values)
                used = dict(sorted(used.items()))
            if tags is not None:  # (the names the substituted tag brought in)
                used |= {w: site_values[w] for x in [*parts, *args]
                         for w in re.findall(r"[A-Za-z_]\w*", x) if w in site_values}  # fmt: skip
                used = dict(sorted(used.items()))
            raw_targs = [_substituted(a, sub) if tags else a for a in _template_args(parsed, targs)]
            template_args = [_host_constant(a, values_here) for a in raw_targs]
            # `Sgemm<BLOCK_SIZE_M, ...><<<dim3(N / BLOCK_SIZE_M), ...>>>`: the constant the
            # kernel is compiled for, which the launch reads too: a constant of this launch
            compiled = {a.strip(): v for a, v in zip(raw_targs, template_args, strict=True)
                        if a.strip() in used and v != a}  # fmt: skip
            sites.extend(
                LaunchSite(
                    kernel=name,
                    template_args=template_args,
                    grid=parts[0] if parts else "",
                    block=parts[1] if len(parts) > 1 else "",
                    shared_bytes=parts[2] if len(parts) > 2 else None,
                    stream=parts[3] if len(parts) > 3 else None,
                    args=args,
                    arg_types={a: host_types[a] for a in args if a in host_types},
                    host_function=f.name,
                    host_values=used,
                    case_values={**compiled, **{k: v for k, v in cases.items() if k in used}},
                    requires=_host_requirements(parsed, f.node, n),
                    fills={b: v for b, (v, _) in memsets.items()},
                    fill_bytes={b: c for b, (_, c) in memsets.items()},
                    span=parsed.span(n),
                )
                for name in names or [name]
            )
    sites.sort(key=lambda s: (s.span.line, s.span.col))
    return sites, errors


_REFUSES = re.compile(r"\b(exit|abort|return|throw)\b|\bEXIT_FAILURE\b")
_UNEQUAL = re.compile(r"(.+?)\s*!=\s*(.+)")


def _host_requirements(parsed: ParsedSource, fn: Node, at: Node) -> list[str]:
    """Conditions the host code checks before the launch `at` and refuses to go on without
    (`if (n % TILE != 0 || m != n) { printf(...); exit(EXIT_FAILURE); }`), each as what holds
    at the launch: `n % TILE == 0`, `m == n`. Only unequal comparisons joined by `||` are read
    (a refusal of anything else says nothing a size set must obey)."""
    out: list[str] = []
    for n in _walk_in_order(fn):
        if n.type == "call_expression" and n.end_byte <= at.start_byte:
            # `assert(OC % 32 == 0 && C % 8 == 0)` before the launch: each equality holds
            for rel in _asserted(parsed, n, fn, at):
                if rel not in out:
                    out.append(rel)
            continue
        if n.type != "if_statement" or n.end_byte > at.start_byte or _contains(n, at):
            continue
        if n.parent is None or not _contains(n.parent, at):
            continue  # (in a branch or a loop the launch is not in: it may not have run)
        then, cond = n.child_by_field_name("consequence"), n.child_by_field_name("condition")
        if then is None or cond is None or n.child_by_field_name("alternative") is not None:
            continue
        if not _REFUSES.search(parsed.text(then)):
            continue
        text = " ".join(parsed.text(cond).split())
        text = text.removeprefix("(").removesuffix(")").strip()
        text = re.sub(r"\((\w+)\)", r"\1", text)  # `K % (128) != 0`, from a macro
        if "&&" in text or "(" in text.replace("((", "").replace("))", ""):
            continue  # (a call, a cast or a conjunction: not read)
        for part in text.split("||"):
            m = _UNEQUAL.fullmatch(part.strip())
            if m is not None and "=" not in m.group(1) + m.group(2):
                rel = f"{m.group(1).strip()} == {m.group(2).strip()}"
                if rel not in out:
                    out.append(rel)
    return out


_ASSERTS = frozenset({"assert", "TORCH_CHECK", "CHECK", "static_assert"})
_EQUAL = re.compile(r"([\w\s%*+\-]+?)\s*==\s*([\w\s%*+\-]+)")


def _asserted(parsed: ParsedSource, call: Node, fn: Node, at: Node) -> list[str]:
    """The equalities an `assert(...)` in the launching function's own block states (`OC %
    32 == 0`), where it runs whenever the launch does (not in a branch the launch is not in)."""
    name = call.child_by_field_name("function")
    args = call.child_by_field_name("arguments")
    if name is None or args is None or parsed.text(name).strip() not in _ASSERTS:
        return []
    node = call.parent
    while node is not None and node is not fn and not _contains(node, at):
        if node.type in ("if_statement", "for_statement", "while_statement", "do_statement",
                         "switch_statement", "lambda_expression"):  # fmt: skip
            return []
        node = node.parent
    if not args.named_children:
        return []
    text = " ".join(parsed.text(args.named_children[0]).split())
    text = re.sub(r"\((\w+)\)", r"\1", text).removeprefix("(").removesuffix(")").strip()
    if "||" in text:
        return []
    out = []
    for part in text.split("&&"):
        m = _EQUAL.fullmatch(part.strip().removeprefix("(").removesuffix(")").strip())
        if m is not None:
            out.append(f"{m.group(1).strip()} == {m.group(2).strip()}")
    return out


def _pointed_kernels(
    parsed: ParsedSource, body: Node, pointer: str, kernels: set[str]
) -> list[str]:
    """The kernels a host function assigns to the function pointer `pointer` (`kernel =
    &copy;`, `kernel = copy;`), in source order."""
    out: list[str] = []
    for a in _walk_in_order(body):
        if a.type != "assignment_expression":
            continue
        left, right = a.child_by_field_name("left"), a.child_by_field_name("right")
        if left is None or right is None or parsed.text(left).strip() != pointer:
            continue
        target = parsed.text(right).strip().lstrip("&").strip()
        if target in kernels and target not in out:
            out.append(target)
    return out


def _memset_fills(parsed: ParsedSource, at: Node, nodes: list[Node]) -> dict[str, tuple[str, str]]:
    """`cudaMemset(l, 0, bytes)` (or its Async form, inside a `cudaCheck(...)` or not) in a
    statement that always runs before the launch `at`: {"l": ("0", "bytes")}; the last one per
    buffer. `nodes`: the host function's calls (among others) in source order."""
    out: dict[str, tuple[str, str]] = {}
    for n in nodes:
        if n.type != "call_expression" or n.end_byte > at.start_byte:
            continue
        callee = n.child_by_field_name("function")
        if callee is None or parsed.text(callee) not in ("cudaMemset", "cudaMemsetAsync"):
            continue
        args = n.child_by_field_name("arguments")
        items = args.named_children if args is not None else []
        stmt = n
        while stmt is not None and stmt.type != "expression_statement":
            stmt = stmt.parent
        if len(items) < 3 or stmt is None or _on_path(stmt.named_children[0], at) != "always":
            continue
        name = re.sub(r"^\(\s*void\s*\*\s*\)\s*", "", parsed.text(items[0]).strip())
        if re.fullmatch(r"[A-Za-z_]\w*", name):
            out[name] = (" ".join(parsed.text(items[1]).split()),
                         " ".join(parsed.text(items[2]).split()))  # fmt: skip
    return out


def _substituted(text: str, sub: dict[str, str]) -> str:
    for tag, value in sub.items():
        text = re.sub(rf"\b{re.escape(tag)}\b", value, text)
    return text


def _dispatched_tags(
    parsed: ParsedSource, fn: Node, at: Node, functions: list[_Function]
) -> tuple[dict[str, str], Node] | None:
    """A launch inside a lambda of one `auto` parameter c, handed (as the variable it is
    assigned to) to a function that calls it with `std::integral_constant<int, K>{}` only under
    `case K:` of a `switch` on one of its own parameters (llm.c's `dispatch_launch(launch,
    block_size)`): `c.value` is the argument the caller passed for that parameter.
    ({"c.value": that argument}, the dispatching call), or None."""
    lam = at.parent
    while lam is not None and lam.type != "lambda_expression" and lam != fn:
        lam = lam.parent
    if lam is None or lam.type != "lambda_expression":
        return None
    decl = next((c for c in lam.named_children if c.type == "lambda_declarator"), None)
    plist = (
        next((c for c in decl.named_children if c.type == "parameter_list"), None) if decl else None
    )
    prms = plist.named_children if plist is not None else []
    if len(prms) != 1 or not any(
        c.type == "placeholder_type_specifier" for c in prms[0].named_children
    ):
        return None
    ident = next((c for c in prms[0].named_children if c.type == "identifier"), None)
    init = lam.parent
    if ident is None or init is None or init.type != "init_declarator":
        return None
    tag, var = parsed.text(ident), parsed.text(init.named_children[0])
    for call in _walk(fn):
        if call.type != "call_expression" or call.start_byte < lam.end_byte:
            continue
        args = call.child_by_field_name("arguments")
        texts = [" ".join(parsed.text(a).split()) for a in args.named_children] if args else []
        callee = call.child_by_field_name("function")
        disp = next((g for g in functions
                     if callee is not None and g.name == parsed.text(callee)), None)  # fmt: skip
        if var not in texts or disp is None:
            continue
        at_param = _dispatch_parameter(parsed, disp.node, texts.index(var))
        if at_param is not None and at_param < len(texts):
            return {f"{tag}.value": texts[at_param]}, call
    return None


def _dispatch_parameter(parsed: ParsedSource, fn: Node, launcher: int) -> int | None:
    """Which parameter of `fn` every call of its `launcher`-th parameter with
    `std::integral_constant<int, K>{}` switches on (under `case K:`), or None."""
    fdecl = function_declarator(fn)
    plist = fdecl.child_by_field_name("parameters") if fdecl is not None else None
    names = []
    for prm in plist.named_children if plist is not None else []:
        d = unwrap_declarator(parsed, prm.child_by_field_name("declarator"))
        names.append(d.name if d is not None else "")
    if launcher >= len(names):
        return None
    found: set[int] = set()
    for call in _walk(fn):
        if call.type != "call_expression":
            continue
        callee = call.child_by_field_name("function")
        if callee is None or parsed.text(callee) != names[launcher]:
            continue
        args = call.child_by_field_name("arguments")
        text = " ".join(parsed.text(args).split()) if args is not None else ""
        m = re.fullmatch(r"\(\s*std::integral_constant<\s*int\s*,\s*(\d+)\s*>\s*\{\s*\}\s*\)", text)
        bound = _case_bindings(parsed, call)
        hits = [k for k, v in bound.items() if m is not None and v == m.group(1) and k in names]
        if m is None or len(hits) != 1:
            return None
        found.add(names.index(hits[0]))
    return found.pop() if len(found) == 1 else None


def _case_bindings(parsed: ParsedSource, call: Node) -> dict[str, str]:
    """Values a launch's enclosing `case` labels give their `switch` variables."""
    out: dict[str, str] = {}
    node = call.parent
    while node is not None:
        if node.type == "case_statement":
            value = node.child_by_field_name("value")
            switch = node.parent.parent if node.parent is not None else None
            cond = switch.child_by_field_name("condition") if switch is not None else None
            if value is not None and cond is not None and switch.type == "switch_statement":
                name = re.sub(r"[()\s]", "", parsed.text(cond))
                if re.fullmatch(r"[A-Za-z_]\w*", name) and name not in out:
                    out[name] = " ".join(parsed.text(value).split())
        elif (
            node.type == "if_statement"
            and (then := node.child_by_field_name("consequence"))
            and _contains(then, call)
        ):
            # `if (block_size == 16) k<16><<<grid, threads>>>(...)`: here block_size is 16
            cond = node.child_by_field_name("condition")
            text = " ".join(parsed.text(cond).split()).strip("() ") if cond is not None else ""
            m = re.fullmatch(r"([A-Za-z_]\w*) == (\d+)|(\d+) == ([A-Za-z_]\w*)", text)
            if m is not None:
                name, value = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
                out.setdefault(name, value)
        node = node.parent
    return out


def _host_constant(arg: str, host_values: dict[str, str]) -> str:
    """A template argument named by a host constant (`constexpr int BX = 32; k<BX>`,
    `const bool DOUBLE_BUFFER = false; k<..., DOUBLE_BUFFER>`) as its integer or boolean
    value; anything else as written."""

    def literal(name: str) -> str | None:
        value, seen = name, set()
        while value in host_values and value not in seen:
            seen.add(value)
            value = host_values[value].strip()
        return value if seen and re.fullmatch(r"-?\d+[uUlL]*|true|false", value) else None

    whole = literal(arg.strip())
    if whole is not None:
        return whole
    # `1024 / numOfMultiWarpGroups` with `constexpr int numOfMultiWarpGroups = 2;`: literals
    out = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: f"({literal(m.group(0)) or m.group(0)})", arg)
    return out if re.fullmatch(r"[\d\s()+\-*/%uUlL]+", out) else arg


def _host_helpers(
    parsed: ParsedSource, functions: list[_Function]
) -> dict[str, tuple[list[str], str]]:
    """Host functions that return one expression (after their locals are substituted)."""
    out: dict[str, tuple[list[str], str]] = {}
    for f in functions:
        if f.qualifier != "host":
            continue
        returns = [n for n in _walk(f.node) if n.type == "return_statement" and n.named_children]
        if len(returns) != 1:
            continue
        defs = _host_definitions(parsed, f.node)
        params = [n for n, v in defs.items() if v.startswith("<parameter")]
        expr = " ".join(parsed.text(returns[0].named_children[0]).split())
        for _ in range(4):  # locals defined from locals
            for name, value in defs.items():
                if not value.startswith("<") and re.search(rf"\b{re.escape(name)}\b", expr):
                    expr = re.sub(rf"\b{re.escape(name)}\b", f"({value})", expr)
        out[f.name] = (params, expr)
    return out


def _substitute(text: str, bound: dict[str, str]) -> str:
    return re.sub(r"\b\w+\b", lambda m: bound.get(m.group(0), m.group(0)), text)


def _host_type_bindings(
    parsed: ParsedSource, host: _Function, functions: list[_Function]
) -> dict[str, str]:
    """The type parameters of a host function template, as the file instantiates it: an
    explicit instantiation (`template void reduce<float>(...)`), else the first call whose
    arguments' declared types decide them (`layernorm_backward2(dinp, ...)` from a function
    with `floatX* dinp` binds Tdinp to floatX)."""
    tparams = _template_params(parsed, host.template)
    if host.instantiations:
        return {t.name: a for t, a in zip(tparams, host.instantiations[0], strict=False)}
    types = {t.name for t in tparams if t.kind == "type"}
    fdecl = function_declarator(host.node)
    plist = fdecl.child_by_field_name("parameters") if fdecl is not None else None
    params: list[tuple[str, int]] = []  # declared base type and pointer depth, in order
    for p in plist.named_children if plist is not None else []:
        d = unwrap_declarator(parsed, p.child_by_field_name("declarator"))
        params.append((base_type_text(parsed, p), d.pointer_depth if d is not None else 0))
    out: dict[str, str] = {}
    for g in functions:
        if g is host:
            continue
        caller: dict[str, str] | None = None  # g's declared pointer types, read once
        for name, _, n in g.calls(parsed):
            if name != host.name:
                continue
            args_node = n.child_by_field_name("arguments")
            args = [parsed.text(a) for a in args_node.named_children] if args_node else []
            caller = caller if caller is not None else _host_pointer_types(parsed, g.node)
            for (base, depth), a in zip(params, args, strict=False):
                t = caller.get(a.strip(), "")
                if base in types and depth and len(t) - len(t.rstrip("*")) == depth:
                    out.setdefault(base, t.rstrip("*"))
            if out:
                return out
    return out


def _host_pointer_types(parsed: ParsedSource, fn: Node) -> dict[str, str]:
    """Declared types of a host function's pointer parameters and locals (`floatX*`): a
    kernel template's type parameter is deduced from them at the launch (`kernel<<<..>>>(x)`
    with `T* x` in the kernel and `floatX* x` in the host makes T floatX)."""
    out: dict[str, str] = {}
    decls = [n for n in _walk(fn) if n.type in ("parameter_declaration", "declaration")]
    for n in decls:
        tname = base_type_text(parsed, n)
        children = (
            [n.child_by_field_name("declarator")]
            if n.type == "parameter_declaration"
            else n.children_by_field_name("declarator")
        )
        for child in children:
            d = unwrap_declarator(parsed, child) if child is not None else None
            if d is not None and d.pointer_depth and tname:
                out.setdefault(d.name, tname + "*" * d.pointer_depth)
    return out


_DEFINING = ("declaration", "assignment_expression", "call_expression")


def _host_definitions(
    parsed: ParsedSource, fn: Node, at: Node | None = None, nodes: list[Node] | None = None
) -> dict[str, str]:
    """Local definitions and parameters of a host function: name -> expression text.

    Straight-line reassignments replace a definition (with the old value substituted for the
    name, so `blocks = blocks > 128 ? 128 : blocks` keeps its meaning); assignments inside
    branches or loops cannot be resolved statically and are marked `<conditional: ...>`.
    Seen from a launch `at`: an assignment in a branch the launch's path cannot take (another
    `case` of a switch that holds the launch, the other arm of an `if`) is not on its path,
    and one earlier in the same block as the launch always runs before it. `nodes`: the
    function's declarations and assignments in source order, when the caller has them.
    """
    defs: dict[str, str] = {}
    fdecl = function_declarator(fn)
    plist = fdecl.child_by_field_name("parameters") if fdecl is not None else None
    fname = function_name(parsed, fdecl) if fdecl is not None else "?"
    for p in plist.named_children if plist is not None else []:
        d = unwrap_declarator(parsed, p.child_by_field_name("declarator"))
        if d is not None:
            defs[d.name] = f"<parameter of {fname}>"
    body = fn.child_by_field_name("body")
    top = set(body.named_children) if body is not None else set()
    unset: set[str] = set()  # declared without a value (`int size_x, size_y;`)
    for n in nodes if nodes is not None else _walk_in_order(fn):
        if n.type == "call_expression" and (at is None or n.end_byte <= at.start_byte):
            # `getParams(argc, argv, size_x, size_y)` or `scanf("%d", &n)`: a variable declared
            # without a value and handed to a call is set there, at run time; so is one whose
            # address a call takes, whatever its first value
            # (`int numBlocks = 0; cudaOccupancyMaxPotentialBlockSize(&numBlocks, ...)`)
            args = n.child_by_field_name("arguments")
            for a in args.named_children if args is not None else []:
                text = parsed.text(a).strip()
                name = text.lstrip("&").strip()
                known = name in defs and not defs[name].startswith("<")
                by_address = text.startswith("&") and known
                if (name in unset and name not in defs) or by_address:
                    callee = n.child_by_field_name("function")
                    defs[name] = (
                        f"<conditional: set by {parsed.text(callee) if callee else 'a call'}>"
                    )
            continue
        if (
            n.type == "declaration" and at is not None and n.parent is not None
            and (not _contains(n.parent, at) or n.start_byte >= at.end_byte)
        ):  # fmt: skip
            continue  # out of scope at the launch (C's block scope), or declared after it
        if n.type == "declaration":
            tname = base_type_text(parsed, n)
            for child in n.children_by_field_name("declarator"):
                if child.type == "function_declarator" and tname == "dim3":
                    # `dim3 block(BN, BM);` parses as a function declaration (C++'s most
                    # vexing parse): its "parameter types" are the constructor's arguments
                    name = child.child_by_field_name("declarator")
                    params = child.child_by_field_name("parameters")
                    if name is not None and params is not None:
                        args = ", ".join(" ".join(parsed.text(a).split())
                                         for a in params.named_children)  # fmt: skip
                        defs[parsed.text(name)] = f"dim3({args})"
                    continue
                d = unwrap_declarator(parsed, child)
                if d is None:
                    continue
                if d.ctor_args is None and d.init is None:
                    unset.add(d.name)
                if d.ctor_args is not None:
                    defs[d.name] = f"{tname}{' '.join(parsed.text(d.ctor_args).split())}"
                elif d.init is not None and tname == "dim3" and d.init.type == "initializer_list":
                    inner = ", ".join(" ".join(parsed.text(a).split())
                                      for a in d.init.named_children)  # fmt: skip
                    defs[d.name] = f"dim3({inner})"  # `dim3 block = {4, 8, n / 32};`
                elif d.init is not None:
                    defs[d.name] = " ".join(parsed.text(d.init).split())
        elif n.type == "assignment_expression":
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            if left is None or right is None or left.type != "identifier":
                continue
            name, value = parsed.text(left), " ".join(parsed.text(right).split())
            stmt = n.parent
            straight = stmt is not None and stmt in top
            # (a reassignment after the launch, even at the top level, is not seen by it:
            # llm.c sets `total_threads` again for the next launch)
            if at is not None and (not straight or n.start_byte >= at.end_byte):
                path = _on_path(n, at)
                if path == "never":
                    continue
                straight = path == "always"
            if straight and parsed.text(n.child_by_field_name("operator")) == "=":  # type: ignore[arg-type]
                old = defs.get(name)
                if old is not None and not old.startswith("<"):
                    value = re.sub(rf"\b{re.escape(name)}\b", f"({old})", value)
                defs[name] = value
            elif name in defs and not defs[name].startswith("<parameter"):
                defs[name] = f"<conditional: {defs[name]} or {value}>"
    return defs


_LOOPS = ("for_statement", "while_statement", "do_statement", "for_range_loop")


def _contains(outer: Node, inner: Node) -> bool:
    return outer.start_byte <= inner.start_byte and inner.end_byte <= outer.end_byte


def _on_path(assign: Node, at: Node) -> str:
    """Whether the statement `assign` runs on the way to `at`: "always" (an earlier statement of
    a block that holds `at`), "never" (a switch case or if arm `at` is not in, beside the one it
    is in), else "maybe"."""
    if assign.start_byte >= at.end_byte:  # after the launch: only a loop could bring it back
        loop, node = False, at.parent
        while node is not None and not loop:
            loop = node.type in _LOOPS and _contains(node, assign)
            node = node.parent
        if not loop:
            return "never"
    stmt = assign.parent
    block = stmt.parent if stmt is not None else None
    if (
        stmt is not None and stmt.type == "expression_statement" and block is not None
        and block.type in ("compound_statement", "case_statement")
        and _contains(block, at) and stmt.end_byte <= at.start_byte
    ):  # fmt: skip
        return "always"
    node = assign.parent
    while node is not None and not _contains(node, at):
        parent = node.parent
        if parent is None:
            break
        if node.type == "case_statement" and _contains(parent, at):
            return "never"  # another case of the switch the launch is in
        if parent.type == "if_statement" and _contains(parent, at):
            arm = "alternative" if node == parent.child_by_field_name("consequence") else None
            other = parent.child_by_field_name(arm or "consequence")
            if other is not None and _contains(other, at):
                return "never"
        node = parent
    return "maybe"


def _walk_in_order(node: Node):  # type: ignore[no-untyped-def]
    yield node
    for c in node.named_children:
        yield from _walk_in_order(c)


def _dependencies(parsed: ParsedSource, cfg: Node, defs: dict[str, str]) -> dict[str, str]:
    """Host names the launch configuration depends on, transitively, with their definitions."""
    out: dict[str, str] = {}
    todo = [parsed.text(n) for n in _walk(cfg) if n.type == "identifier"]
    while todo:
        name = todo.pop()
        if name in out or name not in defs:
            continue
        out[name] = defs[name]
        sub = parse_text_identifiers(defs[name])
        todo.extend(s for s in sub if s not in out)
    return dict(sorted(out.items()))


def parse_text_identifiers(expr: str) -> list[str]:
    import re

    return re.findall(r"[A-Za-z_]\w*", expr)
