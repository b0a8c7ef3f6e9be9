"""Random and mutated CUDA text: the front end returns IR or a clear error, never a crash."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migrator.cuda.frontend import analyze_text
from migrator.cuda.ir import TranslationUnit
from migrator.cuda.source import SourceError
from migrator.cuda.validate import validate

CORPUS = Path(__file__).resolve().parents[2] / "corpus"
SOURCES = [p.read_text() for p in sorted(CORPUS.glob("*.cu"))]
TOKENS = [
    "__global__", "__device__", "__shared__", "void", "float", "int", "*", "&", "(", ")", "{",
    "}", "[", "]", ";", ",", "=", "+=", "<", ">>", "<<<", ">>>", "threadIdx.x", "blockIdx.y",
    "blockDim.x", "__syncthreads()", "if", "else", "for", "while", "return", "x", "y", "n",
    "0", "1.0f", "#define", "#if", "#endif", "#include", '"a.h"', "template", "<", ">",
    "typename", "T", "atomicAdd", "__shfl_down_sync", "extern", "\n", " ", "?", ":", "%", "/",
]  # fmt: skip


def check(text: str) -> None:
    try:
        tu = analyze_text(text, "fuzz.cu")
    except SourceError as e:
        assert e.diagnostics, "a SourceError must carry at least one diagnostic"
        for d in e.diagnostics:
            assert d.id.startswith("C2N") and d.message
        return
    assert isinstance(tu, TranslationUnit)
    validate(tu)
    TranslationUnit.model_validate_json(tu.model_dump_json())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(TOKENS), max_size=60).map(" ".join))
def test_token_soup(text: str) -> None:
    check(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(SOURCES),
    st.lists(st.tuples(st.floats(0, 1), st.integers(1, 12), st.sampled_from(TOKENS + [""])),
             min_size=1, max_size=4),
)  # fmt: skip
def test_mutated_corpus(source: str, edits: list[tuple[float, int, str]]) -> None:
    text = source
    for where, length, repl in edits:
        i = int(where * len(text))
        text = text[:i] + repl + text[i + length :]
    check(text)


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text(text: str) -> None:
    check(text)
