"""Histograms from lifted programs: counts per bin migrate in both dialects (the per-bin and the
per-key-column forms both checked against the CUDA original), and what the compare-and-count
form cannot hold is refused with the reason."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from migrator.migration import migrate

SPEC = """
    [kernel]
    name = "{name}"
    [sizes]
    N = {n}
    [[size_sets]]
    N = 77
    [[size_sets]]
    N = 4099
    [[tensors]]
    name = "keys"
    role = "in"
    dtype = "{dtype}"
    shape = ["N"]
    [[tensors]]
    name = "bins"
    role = "{role}"
    dtype = "int32"
    shape = [{bins}]
    [[scalars]]
    name = "n"
    size = "N"
    [launch]
    grid = ["ceil_div(N, 128)"]
    block = [128]
    [inputs.keys]
    dist = "int"
    low = {low}
    high = {high}
"""
DIRECT = """
    __global__ void direct(const int* keys, int* bins, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) atomicAdd(&bins[keys[i]], 1);
    }
"""
BYTE = """
    __global__ void byte_hist(const unsigned int* keys, int* bins, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) atomicAdd(&bins[(keys[i] >> 8) & 0xFFu], 1);
    }
"""
MOD = """
    __global__ void mod_hist(const int* keys, int* bins, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n && keys[i] % 10 >= 0) atomicAdd(&bins[keys[i] % 10], 1);  // C's sign
    }
"""


def _migrate(tmp_path: Path, name: str, src: str, api: str = "legacy", **fields: object):  # type: ignore[no-untyped-def]
    values = {"name": name, "dtype": "int32", "role": "inout", "bins": 64, "high": 64, "low": 0,
              "n": 1000, **fields}  # fmt: skip
    (tmp_path / f"{name}.cu").write_text(textwrap.dedent(src))
    (tmp_path / f"{name}.toml").write_text(textwrap.dedent(SPEC.format(**values)))
    (k,) = migrate(tmp_path / f"{name}.cu", out_dir=tmp_path / api, nki_api=api).kernels
    return k


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_direct_and_byte_histograms_migrate(tmp_path: Path, api: str) -> None:
    # 300 bins: at N = 77 and 1000 fewer keys per partition than bins (the per-column form),
    # at N = 100000 more (the per-bin form)
    k = _migrate(tmp_path, "direct", DIRECT, api, bins=300, high=300, n=100000)
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
    assert k.family == "histogram"
    assert "C2N2003" not in {d.id for d in k.diagnostics}  # emitted: no longer a gap
    k = _migrate(tmp_path, "byte_hist", BYTE, api, dtype="uint32", role="out", bins=256,
                 high=4294967295)  # fmt: skip
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
    assert "right_shift" in (k.nki_source or "") and "bitwise_and" in (k.nki_source or "")


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"bins": 600, "high": 600}, "600 bins (at most 512"),
        ({"low": -50, "high": 50, "bins": 10}, "may be negative"),
    ],
)
def test_what_compare_and_count_cannot_hold_is_refused(
    tmp_path: Path, fields: dict[str, int], why: str
) -> None:
    src = MOD if "low" in fields else DIRECT
    src = src.replace("mod_hist", "refused").replace("direct", "refused")
    k = _migrate(tmp_path, "refused", src, **fields)
    assert k.status == "partial"
    assert any(why in d.message for d in k.diagnostics), [d.render() for d in k.diagnostics]
