"""Mutated corpus kernels through the whole of `migrate`: a result or a clear input error."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migrator.contract import SpecError
from migrator.cuda.source import SourceError
from migrator.migration import migrate

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
FILES = sorted(CORPUS.glob("*.cu"))
TOKENS = ["", "1", "n", "+", "-", "*", "[", "]", "(", ")", ";", "threadIdx.x", "blockIdx.y",
          "__syncthreads();", "if", "for", "float", "0.5f", "x", "return;", "{", "}"]  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(FILES),
    st.lists(st.tuples(st.floats(0, 1), st.integers(1, 8), st.sampled_from(TOKENS)),
             min_size=1, max_size=3),
    st.booleans(),
)  # fmt: skip
def test_migrate_never_crashes(cu: Path, edits: list[tuple[float, int, str]], spec: bool) -> None:
    text = cu.read_text()
    for where, length, repl in edits:
        i = int(where * len(text))
        text = text[:i] + repl + text[i + length :]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / cu.name).write_text(text)
        if spec:
            shutil.copy(cu.with_suffix(".toml"), d / cu.with_suffix(".toml").name)
        try:
            m = migrate(d / cu.name, out_dir=d / "out", check=False)
        except SourceError as e:
            assert e.diagnostics and all(x.id.startswith("C2N") for x in e.diagnostics)
            return
        except SpecError as e:  # the edit broke the kernel's agreement with its sidecar
            assert spec and ".toml" in str(e)
            return
        for k in m.kernels:
            assert k.status in ("complete", "partial", "failed")
            if k.nki_source:
                compile(k.nki_source, "emitted.py", "exec")  # always valid Python
