"""Syntax errors: every error node reported with file:line:col, the line and a caret."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator.cuda.parse import parse_file, parse_text, render_with_caret
from migrator.cuda.source import SourceError


def test_errors_have_positions_and_carets(tmp_path: Path) -> None:
    src = tmp_path / "bad.cu"
    src.write_text(
        "__global__ void k(float* x, int n) {\n  int i = blockIdx.x * + ;\n  x[i] = 1\n}\n"
    )
    with pytest.raises(SourceError) as e:
        parse_file(src)
    diags = e.value.diagnostics
    assert [d.id for d in diags] == ["C2N1001", "C2N1001"]
    assert [(d.span.line, d.span.col) for d in diags] == [(2, 26), (3, 11)]  # type: ignore[union-attr]
    text = render_with_caret(diags[0])
    assert text.startswith(f"{src}:2:26: error: C2N1001: syntax error")
    lines = text.splitlines()
    assert lines[1].strip() == "int i = blockIdx.x * + ;"
    assert lines[2].index("^") == lines[1].index(";")


def test_error_after_macro_lines_maps_to_original_line(tmp_path: Path) -> None:
    src = tmp_path / "bad.cu"
    src.write_text("#define A 1\n\n#define B 2\n__global__ void k() {\n  int x = A +;\n}\n")
    with pytest.raises(SourceError) as e:
        parse_file(src)
    assert e.value.diagnostics[0].span.line == 5  # type: ignore[union-attr]


def test_valid_cuda_parses_cleanly() -> None:
    parsed = parse_text(
        "template <int B> __global__ void k(const float* __restrict__ a, float* b) {\n"
        "  __shared__ float s[B];\n  s[threadIdx.x] = a[threadIdx.x];\n  __syncthreads();\n"
        "  b[threadIdx.x] = s[B - 1 - threadIdx.x];\n}\n"
        "void launch(const float* a, float* b) { k<64><<<1, 64>>>(a, b); }\n",
        "k.cu",
    )
    assert not parsed.root.has_error


def test_a_file_parsed_again_reuses_its_tree_under_each_spelling(tmp_path: Path) -> None:
    """A migration parses its file several times (front end, interpreter, the check), under
    several spellings of its path: the tree is parsed once, and each parse keeps the path as
    its caller spelled it; an edit parses again."""
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n")
    first = parse_file(src)
    again = parse_file(tmp_path / "." / "k.cu")
    assert again.tree is first.tree and again.source_bytes == first.source_bytes
    assert again.path == str(tmp_path / "." / "k.cu") and first.path == str(src)
    src.write_text("__global__ void k(float* x) { x[threadIdx.x] = 2.0f; }\n")
    edited = parse_file(src)
    assert edited.tree is not first.tree and b"2.0f" in edited.source_bytes
