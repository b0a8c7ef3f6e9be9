"""Parsing preprocessed CUDA with tree-sitter-cuda, and reporting syntax errors precisely.

Every ERROR or MISSING node becomes a `C2N1001` diagnostic with the original file:line:col; the
CLI prints it with the offending line and a caret. tree-sitter is error-tolerant, so a file with
errors still yields a tree, but the front end refuses to build IR from it: analysis of a broken
tree would guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import tree_sitter_cuda
from tree_sitter import Language, Node, Parser, Tree

from migrator.cuda.source import Preprocessed, SourceError, preprocess, read_source
from migrator.diagnostics import Diagnostic, Span, make

MAX_SYNTAX_ERRORS = 20


@lru_cache(maxsize=1)
def cuda_language() -> Language:
    return Language(tree_sitter_cuda.language())


def new_parser() -> Parser:
    return Parser(cuda_language())


@dataclass
class ParsedSource:
    """A preprocessed, parsed CUDA translation unit."""

    pre: Preprocessed
    tree: Tree
    source_bytes: bytes
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def root(self) -> Node:
        return self.tree.root_node

    @property
    def path(self) -> str:
        return self.pre.path

    def text(self, node: Node) -> str:
        return self.source_bytes[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def span(self, node: Node) -> Span:
        """Span of a node in the original file (columns are exact where no macro expanded)."""
        file, line = self.pre.origin(node.start_point.row)
        end_file, end_line = self.pre.origin(node.end_point.row)
        col = self._column(node.start_byte, node.start_point.column)
        end_col = self._column(node.end_byte, node.end_point.column)
        return Span(
            file=file,
            line=line,
            col=col,
            end_line=end_line if end_file == file else line,
            end_col=end_col,
        )

    def _column(self, byte_offset: int, byte_col: int) -> int:
        # tree-sitter columns are byte offsets; report characters, 1-based
        line_start = byte_offset - byte_col
        return len(self.source_bytes[line_start:byte_offset].decode("utf-8", "replace")) + 1


# `cg::thread_block_tile<32> warp = ...` is read by tree-sitter-cuda as the comparison chain
# `(cg::thread_block_tile < 32) > (warp = ...)`: the template type is spelt `auto`, padded to the
# same width so every column stays where it was (the initialiser says what the tile is).
_CG_TILE_DECL = re.compile(r"\b(?:\w+::)*thread_block_tile\s*<[^<>;=]*>(?=\s+\w+\s*=)")


def _untangle_templates(text: str) -> str:
    return _CG_TILE_DECL.sub(lambda m: "auto".ljust(len(m.group(0))), text)


def unparen(node: Node) -> Node:
    """`(e)` -> e, however deep (macros add parentheses: `&(a[i])`, `(LDST128BITS(c[i])) = v`)."""
    while node.type == "parenthesized_expression" and node.named_children:
        node = node.named_children[-1]
    return node


def _comparisons_read_as_templates(tree: Tree, data: bytes) -> list[tuple[int, int]]:
    """`(x < w && y >= 0)` is read by tree-sitter-cuda as the assignment `x<w && y> = 0`
    (a template `x<...>` assigned to): the (start, end) bytes of each such `x` whose `<` is
    spaced (`x < w`). An assignment to a template whose `>` touches its `=` is no C++."""
    found: list[tuple[int, int]] = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type != "assignment_expression":
            continue
        left, op = node.child_by_field_name("left"), node.child_by_field_name("operator")
        if left is None or op is None or left.type != "template_function":
            continue
        name = left.child_by_field_name("name")
        if name is None or name.type != "identifier":
            continue
        if data[op.start_byte - 1 : op.end_byte] != b">=":
            continue
        if data[name.end_byte : name.end_byte + 3] == b" < ":
            found.append((name.start_byte, name.end_byte))
    return found


# Trees by preprocessed text: a migration parses its file three times (front end, interpreter,
# the check's parameter types), each a tenth of a second on a large file. A tree is never
# edited, so one serves every parse of the same text.
_TREES: dict[str, tuple[Tree, bytes]] = {}
_TREES_MAX = 8


def parse_preprocessed(pre: Preprocessed) -> ParsedSource:
    hit = _TREES.get(pre.text)
    if hit is None:
        hit = _parse_text(pre.text)
        if len(_TREES) >= _TREES_MAX:
            _TREES.pop(next(iter(_TREES)))  # the oldest
        _TREES[pre.text] = hit
    tree, data = hit
    parsed = ParsedSource(pre=pre, tree=tree, source_bytes=data, diagnostics=list(pre.diagnostics))
    errors = syntax_errors(parsed)
    if errors:
        raise SourceError(errors)
    return parsed


def _parse_text(text: str) -> tuple[Tree, bytes]:
    """The tree of preprocessed text, and the bytes it was parsed from (comparisons read as
    template arguments parenthesised)."""
    data = _untangle_templates(text).encode("utf-8")
    tree = new_parser().parse(data)
    for _ in range(64):  # (each pass parenthesises the names it finds, then parses again)
        spots = _comparisons_read_as_templates(tree, data)
        if not spots:
            break
        buf = bytearray(data)
        for start, end in spots:  # `x < w` -> `(x)<w`: the same width, every column kept
            buf[start : end + 3] = b"(" + data[start:end] + b")<"
        data = bytes(buf)
        tree = new_parser().parse(data)
    return tree, data


def parse_file(
    path: str | Path,
    include_dirs: list[str | Path] | None = None,
    defines: dict[str, str] | None = None,
) -> ParsedSource:
    """Read, preprocess and parse one CUDA file; raises `SourceError` with diagnostics."""
    return parse_preprocessed(preprocess(read_source(path), include_dirs, defines))


def parse_text(
    text: str,
    path: str = "<string>",
    include_dirs: list[str | Path] | None = None,
    defines: dict[str, str] | None = None,
) -> ParsedSource:
    """Parse CUDA source given as a string (for the library API and tests)."""
    from migrator.cuda.source import SourceFile

    if not text.strip():
        raise SourceError([make("FILE_EMPTY", path=path)])
    return parse_preprocessed(preprocess(SourceFile(path=path, text=text), include_dirs, defines))


def syntax_errors(parsed: ParsedSource) -> list[Diagnostic]:
    """One diagnostic per ERROR/MISSING node (outermost only), in source order."""
    out: list[Diagnostic] = []
    if not parsed.root.has_error:
        return out
    stack = [parsed.root]
    while stack and len(out) < MAX_SYNTAX_ERRORS:
        node = stack.pop()
        if node.is_missing:
            out.append(make("SYNTAX_ERROR", parsed.span(node), detail=f"expected '{node.type}'"))
            continue
        if node.type == "ERROR":
            out.append(
                make("SYNTAX_ERROR", parsed.span(node), detail=_describe_error(parsed, node))
            )
            continue
        if node.has_error:
            stack.extend(reversed(node.children))
    out.sort(key=lambda d: (d.span.line, d.span.col) if d.span else (0, 0))
    return out


def _describe_error(parsed: ParsedSource, node: Node) -> str:
    snippet = parsed.text(node).strip().splitlines()
    first = snippet[0] if snippet else ""
    if len(first) > 40:
        first = first[:37] + "..."
    if not first:
        return "unexpected end of input"
    return f"unexpected '{first}'"


def render_with_caret(diag: Diagnostic, pre: Preprocessed | None = None) -> str:
    """``file:line:col: error: ...`` followed by the source line and a caret under the column."""
    text = diag.render()
    if diag.span is None:
        return text + f"\n  help: {diag.help}"
    line = ""
    if pre is not None:
        line = pre.original_line(diag.span.file, diag.span.line)
    else:
        try:
            lines = Path(diag.span.file).read_text(encoding="utf-8", errors="replace").splitlines()
            line = lines[diag.span.line - 1] if 0 < diag.span.line <= len(lines) else ""
        except OSError:
            line = ""
    if line:
        col = max(1, min(diag.span.col, len(line) + 1))
        caret = " " * (col - 1) + "^"
        text += f"\n  {line}\n  {caret}"
    return text + f"\n  help: {diag.help}"
