"""Attention scores from a packed QKV projection (`[B, T, 3, NH, hs]`, the head size `C / NH`
computed in the kernel), causal: the launch is read where it happens (the host resets its size
variable for the next kernel), C % NH == 0 holds while measuring and tracing, the query and key
factors of one tensor keep their roles, the mask's -inf elements are told from the dot
products, and the scale `1 / sqrt(C / NH)` is a size expression: the whole computation is
lifted and verified."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from migrator.infer.spec import infer_for_file
from migrator.lift import lift_task

SCORES = """
    __global__ void causal_scores(float* scores, const float* qkv, int B, int T, int C, int NH) {
        int n = blockIdx.x * blockDim.x + threadIdx.x;
        if (n >= B * NH * T * T) return;
        int key = n % T;
        int query = (n / T) % T;
        if (key > query) { scores[n] = -INFINITY; return; }
        int head = (n / (T * T)) % NH;
        int b = n / (NH * T * T);
        int hs = C / NH;
        const float* q = qkv + (b * T + query) * 3 * C + head * hs;
        const float* k = qkv + (b * T + key) * 3 * C + C + head * hs;
        float dot = 0.0f;
        for (int d = 0; d < hs; d++) dot += q[d] * k[d];
        scores[n] = dot / sqrtf((float)hs);
    }

    __global__ void row_copy(float* out, const float* in, int rows) {
        int r = blockIdx.x * blockDim.x + threadIdx.x;
        if (r < rows) out[r] = in[r];
    }

    void forward(float* scores, const float* qkv, float* copy, int B, int T, int C, int NH) {
        int threads = 128;
        int total = B * NH * T * T;
        int blocks = (total + threads - 1) / threads;
        causal_scores<<<blocks, threads>>>(scores, qkv, B, T, C, NH);
        total = B * T;  // the next launch's size
        blocks = (total + threads - 1) / threads;
        row_copy<<<blocks, threads>>>(copy, scores, total);
    }
"""


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_packed_causal_scores_lift_with_their_scale_and_mask(tmp_path: Path) -> None:
    src = tmp_path / "scores.cu"
    src.write_text(textwrap.dedent(SCORES))
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
