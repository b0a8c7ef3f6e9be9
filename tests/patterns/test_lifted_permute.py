"""Copies with their axes permuted: attention's head split (a packed `[B, T, 3, NH, d]`
projection into three `[B, NH, T, d]` tensors) and merge, written over flat pointers with a
split flat index, migrate without a spec in both dialects; the head dimension `C / NH` becomes a
size of its own, the mixed-radix index a view of N-D tensors."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np
import pytest

from migrator.contract import TaskSpec
from migrator.lift.program import Assign, Expr, IndexMap, Program, Term
from migrator.lift.views import with_views
from migrator.migration import migrate

HEADS = """
    __global__ void split_heads(float* q, float* k, float* v, const float* qkv,
                                int batch, int seq, int heads, int hd) {
        int n = blockIdx.x * blockDim.x + threadIdx.x;
        if (n >= batch * heads * seq * hd) return;
        int e = n % hd;
        int t = (n / hd) % seq;
        int h = (n / (hd * seq)) % heads;
        int b = n / (hd * seq * heads);
        const float* row = qkv + ((b * seq + t) * 3 * heads + h) * hd + e;
        q[n] = row[0];
        k[n] = row[heads * hd];
        v[n] = row[2 * heads * hd];
    }

    __global__ void merge_heads(float* out, const float* x, int batch, int seq, int heads,
                                int hd) {
        int n = blockIdx.x * blockDim.x + threadIdx.x;
        if (n < batch * seq * heads * hd) {
            int e = n % hd, h = (n / hd) % heads;
            int t = (n / (hd * heads)) % seq, b = n / (hd * heads * seq);
            out[n] = x[((b * heads + h) * seq + t) * hd + e];
        }
    }

    __global__ void mix_heads(float* out, const float* x, int batch, int seq, int heads,
                              int hd) {
        // the innermost axis moves (out[b, e, t, h]): no rows to copy whole, a transpose
        int n = blockIdx.x * blockDim.x + threadIdx.x;
        if (n < batch * seq * heads * hd) {
            int h = n % heads, t = (n / heads) % seq;
            int e = (n / (heads * seq)) % hd, b = n / (hd * heads * seq);
            out[n] = x[((b * heads + h) * seq + t) * hd + e];
        }
    }

    __global__ void merge_heads_backward(float* dx, const float* dout, int batch, int seq,
                                         int heads, int hd) {
        // the merge's gradient, added to what dx holds: dx[b, h, t, e] += dout[b, t, h, e]
        int n = blockIdx.x * blockDim.x + threadIdx.x;
        if (n < batch * seq * heads * hd) {
            int e = n % hd, t = (n / hd) % seq;
            int h = (n / (hd * seq)) % heads, b = n / (hd * seq * heads);
            dx[n] += dout[((b * seq + t) * heads + h) * hd + e];
        }
    }

    void attention_heads(float* q, float* k, float* v, const float* qkv, float* out,
                         int B, int T, int C, int NH) {
        int hd = C / NH;
        int threads = 256;
        int blocks = (B * T * C + threads - 1) / threads;
        split_heads<<<blocks, threads>>>(q, k, v, qkv, B, T, NH, hd);
        merge_heads<<<blocks, threads>>>(out, q, B, T, NH, hd);
        mix_heads<<<blocks, threads>>>(out, q, B, T, NH, hd);
        merge_heads_backward<<<blocks, threads>>>(q, out, B, T, NH, hd);
    }
"""


@pytest.fixture(scope="module")
def heads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("heads") / "heads.cu"
    path.write_text(textwrap.dedent(HEADS))
    return path


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_head_split_and_merge_migrate_as_permuted_copies(heads: Path, api: str) -> None:
    m = migrate(heads, out_dir=heads.parent / api, nki_api=api)
    split, merge = (next(k for k in m.kernels if k.kernel == n)
                    for n in ("split_heads", "merge_heads"))  # fmt: skip
    for k in (split, merge):
        assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
        assert k.family == "permute"
    program = split.lifted.program.render()
    # (a packed [B, T, 3, NH, d] tensor read at Q's, K's and V's offsets)
    assert "q[i0, i1, i2, i3] = qkv[i0, i2, 0, i1, i3]" in program
    assert "v[i0, i1, i2, i3] = qkv[i0, i2, 2, i1, i3]" in program
    assert "out[i0, i1, i2, i3] = x[i0, i2, i1, i3]" in merge.lifted.program.render()
    lines = (heads.parent / api / "split_heads.inferred.toml").read_text().splitlines()
    # the head dimension is a size of its own, C = NH * hd no longer one
    assert any(line.startswith("hd = ") for line in lines)
    assert not any(line.startswith("C = ") for line in lines)


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_a_permuted_gradient_added_to_the_old_values_migrates(heads: Path, api: str) -> None:
    m = migrate(heads, out_dir=heads.parent / f"bwd_{api}", kernel="merge_heads_backward",
                nki_api=api)  # fmt: skip
    (k,) = m.kernels
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
    assert k.family == "permute"
    program = k.lifted.program.render()
    assert "dx[i0, i1, i2, i3] = dout[i0, i2, i1, i3] + dx[i0, i1, i2, i3]" in program


def test_a_moved_innermost_axis_migrates_as_transposes(heads: Path) -> None:
    """No rows to copy whole: the permute rule says so, and the transpose rule takes it (the
    two axes that trade places turned on TensorE, once per index of the others)."""
    m = migrate(heads, out_dir=heads.parent / "mix", kernel="mix_heads")
    (k,) = m.kernels
    assert (k.family, k.status) == ("transpose", "complete"), k.diagnostics
    assert k.check is not None and k.check.ok
    assert "out[i0, i1, i2, i3] = x[i0, i3, i2, i1]" in k.lifted.program.render()


def _flat_permute(perm: tuple[int, ...], dims: dict[str, int]) -> tuple[Program, TaskSpec]:
    """`out[i] = x[...]` for out = x.transpose(perm) over flat tensors, as the lifter fits it."""
    names = list(dims)
    out_names = [names[p] for p in perm]
    terms, inner = [], 1
    for d in reversed(range(len(out_names))):  # digits of i, innermost first
        n = out_names[d]
        stride = math.prod(dims[m] for m in names[names.index(n) + 1 :])
        coef = " * ".join(m for m in names[names.index(n) + 1 :]) or 1
        div = " * ".join(out_names[d + 1 :]) or None
        last = d == 0
        terms.append(Term(coef=coef if stride != 1 else 1, var="i", div=div,
                          mod=None if last else n))  # fmt: skip
        inner *= dims[n]
    load = Expr(kind="load", tensor="x", index=[IndexMap(terms=terms)])
    program = Program(assigns=[Assign(tensor="out", vars=["i"], expr=load)])
    shape = " * ".join(names)
    spec = TaskSpec.model_validate({
        "kernel": {"name": "k"}, "sizes": dims,
        "tensors": [{"name": "x", "role": "in", "dtype": "float32", "shape": [shape]},
                    {"name": "out", "role": "out", "dtype": "float32", "shape": [shape]}],
        "launch": {"grid": [1], "block": [1]},
    })  # fmt: skip
    return program, spec


@pytest.mark.parametrize("perm", [(0, 2, 1, 3), (1, 0, 2, 3), (2, 0, 1, 3), (0, 1, 3, 2)])
def test_views_of_a_flat_permutation_reproduce_numpys_transpose(perm: tuple[int, ...]) -> None:
    dims = {"A": 3, "B": 5, "C": 7, "D": 11}
    program, spec = _flat_permute(perm, dims)
    got = with_views(program, spec)
    assert got is not None
    viewed, vspec = got
    shapes = {t.name: vspec.shape_of(t, dims) for t in vspec.tensors}
    x = np.arange(math.prod(dims.values())).reshape(tuple(dims.values()))
    assert shapes["x"] == x.shape
    assert shapes["out"] == x.transpose(perm).shape
    # the viewed load reads x at the output's coordinates in x's axis order
    (a,) = viewed.assigns
    at = [m.terms[0].var for m in a.expr.index]
    assert at == [a.vars[perm.index(n)] for n in range(4)]
