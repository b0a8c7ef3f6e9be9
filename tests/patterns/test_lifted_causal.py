"""Causal row programs: a softmax over the first t + 1 columns of each row, zeros stored past
them, migrates as the full-row softmax over the row masked with -inf (the equality checked
numerically first), in both dialects; a program the mask cannot stand for is refused."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from migrator.migration import migrate

# llm.c style: flat T x T matrices, one thread per row, zeros above the diagonal
CAUSAL_SOFTMAX = """
    __global__ void causal_softmax(float* att, const float* pre, int BH, int T) {
        int idx = blockIdx.x * blockDim.x + threadIdx.x;
        if (idx >= BH * T) return;
        int t = idx % T;
        const float* row = pre + idx * T;
        float* out = att + idx * T;
        float m = -3.0e38f;
        for (int k = 0; k <= t; k++) if (row[k] > m) m = row[k];
        float s = 0.0f;
        for (int k = 0; k <= t; k++) { float e = expf(row[k] - m); s += e; out[k] = e; }
        for (int k = 0; k < T; k++) out[k] = k <= t ? out[k] / s : 0.0f;
    }
"""
# the same rows, but past the diagonal the row's own values are summed too: the mask is no
# -inf the sum could ignore
CAUSAL_SUM = """
    __global__ void causal_sum(float* att, const float* pre, int BH, int T) {
        int idx = blockIdx.x * blockDim.x + threadIdx.x;
        if (idx >= BH * T) return;
        int t = idx % T;
        const float* row = pre + idx * T;
        float s = 0.0f;
        for (int k = 0; k <= t; k++) s += row[k];
        for (int k = 0; k < T; k++) att[idx * T + k] = k <= t ? row[k] / s : 0.0f;
    }
"""
SPEC = """
    [kernel]
    name = "{name}"
    [sizes]
    BH = 6
    T = 40
    [[size_sets]]
    BH = 5
    T = 17
    [[size_sets]]
    BH = 3
    T = 130
    [[tensors]]
    name = "att"
    role = "out"
    shape = ["BH * T", "T"]
    [[tensors]]
    name = "pre"
    role = "in"
    shape = ["BH * T", "T"]
    [[scalars]]
    name = "BH"
    size = "BH"
    [[scalars]]
    name = "T"
    size = "T"
    [launch]
    grid = ["ceil_div(BH * T, 64)"]
    block = [64]
"""


def _migrate(tmp_path: Path, name: str, src: str, api: str):  # type: ignore[no-untyped-def]
    (tmp_path / f"{name}.cu").write_text(textwrap.dedent(src))
    (tmp_path / f"{name}.toml").write_text(textwrap.dedent(SPEC.format(name=name)))
    (k,) = migrate(tmp_path / f"{name}.cu", out_dir=tmp_path / api, nki_api=api).kernels
    return k


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_a_causal_softmax_migrates_as_a_masked_full_row_softmax(tmp_path: Path, api: str) -> None:
    k = _migrate(tmp_path, "causal_softmax", CAUSAL_SOFTMAX, api)
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
    src = k.nki_source or ""
    assert 'float("-inf")' in src and "nl.greater(col_ids" in src


def test_a_sum_that_ignores_zeros_is_masked_with_zeros(tmp_path: Path) -> None:
    """`row[k] / sum_{k <= t} row[k]`: -inf past the bound would poison the sum, 0 adds
    nothing to it and divides to the 0 the original stores there."""
    k = _migrate(tmp_path, "causal_sum", CAUSAL_SUM, "legacy")
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
    src = k.nki_source or ""
    assert "nl.greater(col_ids, bound), 0.0, pre_row)" in src and 'float("-inf")' not in src


def test_a_mask_the_reductions_would_not_ignore_is_refused(tmp_path: Path) -> None:
    """`row[k] / sum_{k <= t} exp(row[k])`: -inf past the bound keeps the sum but stores -inf
    there, 0 stores 0 but adds exp(0) to the sum: neither is the original."""
    shifted = CAUSAL_SUM.replace("s += row[k];", "s += expf(row[k]);")
    k = _migrate(tmp_path, "causal_sum", shifted, "legacy")
    assert k.status == "partial"
    text = " ".join(d.message for d in k.diagnostics)
    assert "does not give the masked values" in text, text


# llm.c's layout without a spec: a thread per (b, t, h), rows of [B, NH, T, T] scores; the
# flat output splits both as [B * NH * T, T] rows and as [B, NH, T, T]: the rows are tried first
HEADS_SOFTMAX = """
    __global__ void head_softmax(float* att, const float* pre, int B, int T, int NH) {
        int idx = blockIdx.x * blockDim.x + threadIdx.x;
        if (idx >= B * T * NH) return;
        int h = idx % NH, t = (idx / NH) % T, b = idx / (NH * T);
        const float* row = pre + b * NH * T * T + h * T * T + t * T;
        float* out = att + b * NH * T * T + h * T * T + t * T;
        float m = -3.0e38f;
        for (int k = 0; k <= t; k++) m = fmaxf(m, row[k]);
        float s = 0.0f;
        for (int k = 0; k <= t; k++) { out[k] = expf(row[k] - m); s += out[k]; }
        for (int k = 0; k < T; k++) out[k] = k <= t ? out[k] / s : 0.0f;
    }

    void softmax(float* att, const float* pre, int B, int T, int NH) {
        int threads = 256;
        head_softmax<<<(B * T * NH + threads - 1) / threads, threads>>>(att, pre, B, T, NH);
    }
"""


def test_flat_head_rows_without_a_spec_take_the_row_view(tmp_path: Path) -> None:
    (tmp_path / "heads.cu").write_text(textwrap.dedent(HEADS_SOFTMAX))
    (k,) = migrate(tmp_path / "heads.cu", out_dir=tmp_path / "out").kernels
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
    assert k.family == "rows"


# a warp per row of [BH * T, T] scores, only the columns up to the row's position computed and
# written (the rest left as they were), the temperature inside every exponent, rescaled online
TRIANGLE_SOFTMAX = """
    #include <cfloat>
    __global__ void tri_softmax(float* out, float inv_t, const float* inp, int BH, int T) {
        int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
        int lane = threadIdx.x % 32;
        if (row >= BH * T) return;
        int own = row % T;
        const float* x = inp + row * T;
        float m = -FLT_MAX, s = 0.0f;
        for (int c = lane; c <= own; c += 32) {
            float m_new = fmaxf(m, x[c]);
            s = s * expf(inv_t * (m - m_new)) + expf(inv_t * (x[c] - m_new));
            m = m_new;
        }
        for (int off = 16; off > 0; off >>= 1) {
            float m_other = __shfl_xor_sync(0xffffffff, m, off);
            float s_other = __shfl_xor_sync(0xffffffff, s, off);
            float m_new = fmaxf(m, m_other);
            s = s * expf(inv_t * (m - m_new)) + s_other * expf(inv_t * (m_other - m_new));
            m = m_new;
        }
        for (int c = lane; c <= own; c += 32) out[row * T + c] = expf(inv_t * (x[c] - m)) / s;
    }

    void softmax(float* out, const float* inp, int BH, int T) {
        int rows_per_block = 4;
        tri_softmax<<<(BH * T + rows_per_block - 1) / rows_per_block, 32 * rows_per_block>>>(
            out, 0.125f, inp, BH, T);
    }
"""


def test_a_lower_triangle_softmax_with_a_temperature_writes_zero_past_it(tmp_path: Path) -> None:
    """The temperature scales each exponent (`exp(t * (x - m))`, rescaled online): the
    differences multiply out and cancel as without it; the columns the kernel leaves unwritten
    are written 0 by the masked full-row program, and not compared (C2N2015)."""
    (tmp_path / "tri.cu").write_text(textwrap.dedent(TRIANGLE_SOFTMAX))
    (k,) = migrate(tmp_path / "tri.cu", out_dir=tmp_path / "out").kernels
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
    assert k.family == "rows"
    assert k.lifted is not None and k.lifted.program is not None
    assert "sum_{q < (i % T) + 1}" in k.lifted.program.render()
    assert "inv_t" in k.lifted.program.render()
    assert "C2N2015" in {d.id for d in k.diagnostics}
    assert "writes 0" in (k.nki_source or "")
