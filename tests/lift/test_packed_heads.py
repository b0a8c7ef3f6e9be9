"""Attention scores from a packed QKV projection (`[B, T, 3, NH, hs]`, the head size `C / NH`
computed in the kernel), causal: the launch is read where it happens (the host resets its size
variable for the next kernel), C % NH == 0 holds while measuring and tracing, the query and key
factors of one tensor keep their roles, the mask's -inf elements are told from the dot
products, and the scale `1 / sqrt(C / NH)` is a size expression: the whole computation is
lifted and verified."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator.infer.spec import infer_for_file
from migrator.lift import lift_task

SCORES = Path(__file__).resolve().parents[1] / "data" / "causal_scores.cu"


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_packed_causal_scores_lift_with_their_scale_and_mask(tmp_path: Path) -> None:
    src = tmp_path / "scores.cu"
    src.write_text(SCORES.read_text())
    spec = infer_for_file(src, "causal_scores")
    assert spec.launch.grid == ["(B * NH * T * T + 128 - 1) / 128"]  # the scores' own launch
    assert spec.relations == ["C % NH == 0"]
    # (read up to the last row's key: C short of the whole packed tensor)
    assert next(t for t in spec.tensors if t.name == "qkv").shape == ["3 * B * C * T"]
    lifted = lift_task(spec)
    assert lifted.ok, lifted
    program = lifted.program.render()
    assert "(i % T) > ((i // T) % T) ? -inf" in program
    assert "((C / NH) ** -0.5) * (sum_{k < C / NH}" in program
    # query rows at (i // T) % T, key rows at i % T, the key's C columns further on
    q, key = program.split("sum_{k < C / NH} (")[1].split(" * qkv")
    assert "(3 * C)*((i // T) % T)" in q and "(3 * C)*(i % T)" in key
    assert key.rstrip(")]").endswith("+ C")
