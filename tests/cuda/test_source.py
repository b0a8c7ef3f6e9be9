"""Reading and preprocessing: bad files get clear diagnostics; macros and includes work."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator.cuda.parse import parse_file
from migrator.cuda.source import MAX_BYTES, SourceError, preprocess, read_source


def _ids(e: SourceError) -> list[str]:
    return [d.id for d in e.diagnostics]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SourceError) as e:
        read_source(tmp_path / "nope.cu")
    assert _ids(e.value) == ["C2N0001"]


def test_empty_file(tmp_path: Path) -> None:
    f = tmp_path / "empty.cu"
    f.write_text("  \n\n")
    with pytest.raises(SourceError) as e:
        read_source(f)
    assert _ids(e.value) == ["C2N0003"]


def test_binary_file(tmp_path: Path) -> None:
    f = tmp_path / "k.o"
    f.write_bytes(b"\x7fELF\x00\x01\x02")
    with pytest.raises(SourceError) as e:
        read_source(f)
    assert _ids(e.value) == ["C2N0002"]
    assert "offset 4" in e.value.diagnostics[0].message


def test_huge_file(tmp_path: Path) -> None:
    f = tmp_path / "big.cu"
    f.write_bytes(b"// x\n" * (MAX_BYTES // 5 + 10))
    with pytest.raises(SourceError) as e:
        read_source(f)
    assert _ids(e.value) == ["C2N0004"]


def test_non_utf8_reports_line_and_column(tmp_path: Path) -> None:
    f = tmp_path / "latin1.cu"
    f.write_bytes(b"__global__ void k() {}\n// caf\xe9\n")
    with pytest.raises(SourceError) as e:
        read_source(f)
    d = e.value.diagnostics[0]
    assert d.id == "C2N0005"
    assert d.span is not None and (d.span.line, d.span.col) == (2, 7)


def test_macros_includes_and_defines(tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "tile.cuh").write_text("#define TILE 32\n#define SQ(x) ((x) * (x))\n")
    (tmp_path / "local.h").write_text("#define SCALE 2.0f\n")
    src = tmp_path / "k.cu"
    src.write_text(
        "#include <cuda_runtime.h>\n"
        '#include "local.h"\n'
        '#include "tile.cuh"\n'
        "#ifdef FAST\n#define EXP __expf\n#else\n#define EXP expf\n#endif\n"
        "__global__ void k(float* x) {\n"
        "  __shared__ float s[TILE];\n"
        "  x[threadIdx.x] = EXP(SQ(x[threadIdx.x])) * SCALE;\n"
        "}\n"
    )
    slow = parse_file(src, include_dirs=[tmp_path / "inc"])
    assert "expf(((x[threadIdx.x]) * (x[threadIdx.x])))" in slow.pre.text
    assert "s[32]" in slow.pre.text
    assert slow.pre.macros["TILE"] == "32"
    assert any(d.id == "C2N0007" for d in slow.diagnostics)  # system header skipped
    fast = parse_file(src, include_dirs=[tmp_path / "inc"], defines={"FAST": "1"})
    assert "__expf(" in fast.pre.text
    # spans map back to the original file and line
    row = next(i for i, line in enumerate(fast.pre.text.splitlines()) if "__shared__" in line)
    assert fast.pre.origin(row) == (str(src), 10)


def test_missing_local_include_is_an_error(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text('#include "nowhere.h"\n__global__ void k() {}\n')
    with pytest.raises(SourceError) as e:
        parse_file(src)
    d = e.value.diagnostics[0]
    assert d.id == "C2N0006" and "-I" in d.message
    assert d.span is not None and d.span.line == 1


def test_unterminated_if(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text("#if FOO\n__global__ void k() {}\n")
    with pytest.raises(SourceError) as e:
        preprocess(read_source(src))
    assert _ids(e.value) == ["C2N0006"]


def test_header_constants_are_known(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text("#include <cfloat>\n__global__ void k(float* x) { x[0] = -FLT_MAX; }\n")
    assert "3.402823466e+38F" in parse_file(src).pre.text


def test_quoted_system_header_is_skipped_like_a_system_one(tmp_path: Path) -> None:
    """`#include "assert.h"` (quotes, no such file beside the source) is the C library's."""
    cu = tmp_path / "k.cu"
    cu.write_text('#include "assert.h"\n#include "cuda_runtime.h"\n'
                  "__global__ void k(float* x) { x[0] = 1.0f; }\n")  # fmt: skip
    parsed = parse_file(cu)
    assert "__global__" in parsed.text(parsed.root)


def test_preprocessing_is_reused_until_an_included_file_changes(tmp_path: Path) -> None:
    """A migration reads its file several times; the preprocessed result is kept, but an edit
    of a header it includes (even one that only defines macros) is seen at the next read."""
    import os

    (tmp_path / "width.cuh").write_text("#define WIDTH 4\n")
    main = tmp_path / "k.cu"
    main.write_text('#include "width.cuh"\n__global__ void k(float* y) { y[0] = WIDTH; }\n')
    first = preprocess(read_source(main))
    assert first.macros["WIDTH"] == "4"
    again = preprocess(read_source(main))
    assert again.macros["WIDTH"] == "4" and again is not first
    again.macros["WIDTH"] = "changed by a caller"  # a caller's edit stays its own
    assert preprocess(read_source(main)).macros["WIDTH"] == "4"
    # the same file spelled another way is the same preprocessing, under the caller's name
    other = preprocess(read_source(f"{tmp_path}/./k.cu"))
    assert other.path == f"{tmp_path}/./k.cu" and other.origin(1)[0] == other.path
    (tmp_path / "width.cuh").write_text("#define WIDTH 16\n")
    st = (tmp_path / "width.cuh").stat()
    os.utime(tmp_path / "width.cuh", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert preprocess(read_source(main)).macros["WIDTH"] == "16"


def test_host_expression_snippets_do_not_push_files_out_of_the_memo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spec inference evaluates dozens of host expressions as snippets: they are preprocessed
    apart from the memo, so the kernel's file (0.4 s of pcpp for a large one) stays in it."""
    from migrator.cuda import source
    from migrator.cuda.parse import parse_text

    main = tmp_path / "k.cu"
    main.write_text("__global__ void k(float* y) { y[0] = 1.0f; }\n")
    preprocess(read_source(main))
    runs: list[str] = []
    real = source._preprocess
    monkeypatch.setattr(source, "_preprocess", lambda s, *a: runs.append(s.path) or real(s, *a))
    for i in range(2 * source._PREPROCESSED_MAX):
        parse_text(f"auto __c2n_value = ({i} + 1);\n", "<host expression>")
    preprocess(read_source(main))
    assert runs == ["<host expression>"] * (2 * source._PREPROCESSED_MAX)


def test_a_file_analysed_under_another_spelling_is_the_fresh_analysis(tmp_path: Path) -> None:
    """The analysis of a file is reused across spellings of its path (the migration and its
    check name it differently), but each caller sees the file named its own way."""
    from migrator.cuda.frontend import analyze, analyze_file

    (tmp_path / "sub").mkdir()
    main = tmp_path / "sub" / "k.cu"
    main.write_text("__global__ void k(float* y, int n) {\n  int i = threadIdx.x;\n"
                    "  if (i < n) y[i] = 2.0f * y[i];\n}\n")  # fmt: skip
    first = analyze_file(main)
    other = f"{tmp_path}/sub/../sub/k.cu"
    again = analyze_file(other)
    assert again == analyze(parse_file(other))
    assert again.kernel("k").span.file == other and first.kernel("k").span.file == str(main)
