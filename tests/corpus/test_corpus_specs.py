"""Every corpus task is self-consistent: spec, CUDA source, numpy reference and launch config.

These checks need no GPU and no CUDA interpreter; they make sure each `corpus/<stem>.toml`
loads under the task contract, names parameters that exist in its `.cu` kernel, and that its
numpy reference follows the calling convention for every published size set.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from migrator.contract import TaskSpec, load_spec, make_inputs, np_dtype

CORPUS = Path(__file__).resolve().parents[2] / "corpus"
SPEC_PATHS = sorted(CORPUS.glob("*.toml"))
FAMILIES = {"elementwise", "reduction", "rowwise", "matmul", "transpose", "stencil", "scan",
            "attention", "histogram", "scatter"}  # fmt: skip
# kernels kept in the corpus to exercise diagnostics: no automatic migration exists
UNSUPPORTED_FAMILIES = {"sort"}
MAX_THREADS_PER_BLOCK = 1024


def _ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


def _strip_comments(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    return re.sub(r"//[^\n]*", " ", src)


def kernel_params(src: str, name: str) -> dict[str, str]:
    """The `__global__` kernel's parameters as {name: declaration text}, in order."""
    pattern = (
        r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+"
        r"(?:__launch_bounds__\s*\([^)]*\)\s*)?"  # either side of the return type
        + re.escape(name)
        + r"\s*\(([^)]*)\)"
    )
    m = re.search(pattern, _strip_comments(src))
    assert m, f"no `__global__ void {name}(...)` definition"
    params: dict[str, str] = {}
    for decl in m.group(1).split(","):
        decl = " ".join(decl.split())
        ident = re.search(r"(\w+)\s*(?:\[[^\]]*\])?$", decl)
        assert ident, f"cannot read parameter name from {decl!r}"
        params[ident.group(1)] = decl
    return params


@pytest.fixture(scope="module", params=SPEC_PATHS, ids=_ids(SPEC_PATHS))
def spec(request: pytest.FixtureRequest) -> TaskSpec:
    return load_spec(request.param)


def test_corpus_has_at_least_forty_tasks_covering_all_families() -> None:
    specs = [load_spec(p) for p in SPEC_PATHS]
    assert len(specs) >= 40
    families = {s.kernel.family for s in specs}
    assert families >= FAMILIES | UNSUPPORTED_FAMILIES, (
        f"missing families: {sorted(FAMILIES | UNSUPPORTED_FAMILIES - families)}"
    )
    known = FAMILIES | UNSUPPORTED_FAMILIES
    assert families <= known, f"unknown families: {sorted(families - known)}"


def test_every_source_has_a_spec_and_reference() -> None:
    for cu in sorted(CORPUS.glob("*.cu")):
        assert cu.with_suffix(".toml").is_file(), f"{cu.name} has no spec sidecar"
        assert cu.with_suffix(".py").is_file(), f"{cu.name} has no numpy reference"


def test_source_has_kernel_and_launch(spec: TaskSpec) -> None:
    cu = spec.cuda_source_path()
    assert cu.is_file(), f"{cu} does not exist"
    src = _strip_comments(cu.read_text(encoding="utf-8"))
    name = spec.kernel.name
    assert "__global__" in src
    assert name in src
    launch = re.search(re.escape(name) + r"\s*(<[^<>;]*>)?\s*<<<[^;]*>>>", src)
    assert launch, f"no `{name}<<<...>>>` launch in {cu.name}"
    if spec.kernel.template_args:
        assert launch.group(1), f"templated kernel {name} launched without template arguments"


def test_params_match_kernel_signature(spec: TaskSpec) -> None:
    src = spec.cuda_source_path().read_text(encoding="utf-8")
    params = kernel_params(src, spec.kernel.name)
    # an input may be a `__constant__` table the host fills (`cudaMemcpyToSymbol(sym, ...)`)
    symbols = set(re.findall(r"__constant__\s+\w+\s+(\w+)\s*\[[^\]=;]*\]\s*;", src))
    for t in spec.tensors:
        if t.cuda_param in symbols and t.cuda_param not in params:
            assert t.role == "in", f"tensor {t.name}: a __constant__ table is an input"
            assert re.search(rf"cudaMemcpyToSymbol\(\s*{t.cuda_param}\b", src), t.name
            continue
        assert t.cuda_param in params, f"tensor {t.name}: no kernel parameter {t.cuda_param!r}"
        assert "*" in params[t.cuda_param], f"tensor {t.name}: {params[t.cuda_param]!r}"
        if t.role == "in":
            assert "const" in params[t.cuda_param], f"input {t.name} is not const"
        if t.ld is not None:
            assert t.ld in {s.name for s in spec.scalars}, f"tensor {t.name}: ld {t.ld!r}"
    for s in spec.scalars:
        assert s.cuda_param in params, f"scalar {s.name}: no kernel parameter {s.cuda_param!r}"
        assert "*" not in params[s.cuda_param], f"scalar {s.name} is a pointer"
    covered = {t.cuda_param for t in spec.tensors} | {s.cuda_param for s in spec.scalars}
    covered -= symbols - set(params)
    assert set(params) == covered, f"kernel parameters not in the spec: {set(params) - covered}"


def test_size_sets_include_ragged_sizes(spec: TaskSpec) -> None:
    ragged = [sizes for sizes in spec.all_size_sets() if any(v % 32 for v in sizes.values())]
    assert len(spec.size_sets) >= 2
    assert ragged, "no size set with a size that is not a multiple of 32 (nor of 128)"


def _call_reference(spec: TaskSpec, sizes: dict[str, int]) -> tuple[dict, tuple]:
    inputs = make_inputs(spec, sizes, seed=0)
    args = [inputs[t.name] for t in spec.inputs_in_order]
    kwargs = {s.name: s.value for s in spec.value_scalars}
    before = {k: v.copy() for k, v in inputs.items()}
    result = spec.reference_function()(*args, **kwargs)
    for k, v in inputs.items():
        np.testing.assert_array_equal(v, before[k], err_msg=f"reference modified input {k}")
    return inputs, result


def _as_tuple(spec: TaskSpec, result: object) -> tuple[np.ndarray, ...]:
    """One array for one output, else a tuple in spec order (the calling convention)."""
    if len(spec.outputs_in_order) == 1:
        assert isinstance(result, np.ndarray), "expected one array for one output"
        return (result,)
    assert isinstance(result, tuple), "expected a tuple for several outputs"
    assert len(result) == len(spec.outputs_in_order)
    return result


def test_reference_follows_calling_convention(spec: TaskSpec) -> None:
    outputs = spec.outputs_in_order
    assert outputs, "a task needs at least one out/inout tensor"
    for sizes in spec.all_size_sets():
        _, result = _call_reference(spec, sizes)
        results = _as_tuple(spec, result)
        for t, arr in zip(outputs, results, strict=True):
            assert arr.shape == spec.shape_of(t, sizes), (t.name, sizes)
            assert arr.dtype == np_dtype(t.dtype), (t.name, sizes)
            assert np.all(np.isfinite(arr.astype(np.float64))), (t.name, sizes)


def test_reference_is_deterministic(spec: TaskSpec) -> None:
    sizes = spec.all_size_sets()[-1]
    _, first = _call_reference(spec, sizes)
    _, second = _call_reference(spec, sizes)
    for a, b in zip(_as_tuple(spec, first), _as_tuple(spec, second), strict=True):
        np.testing.assert_array_equal(a, b)


def test_launch_config_is_valid(spec: TaskSpec) -> None:
    for sizes in spec.all_size_sets():
        grid, block, shared = spec.launch_config(sizes)
        assert all(isinstance(v, int) and v >= 1 for v in (*grid, *block)), (grid, block)
        assert isinstance(shared, int) and shared >= 0
        threads = block[0] * block[1] * block[2]
        assert threads <= MAX_THREADS_PER_BLOCK
        assert threads % 32 == 0, f"block {block} is not a whole number of warps"
        assert grid[0] * grid[1] * grid[2] * threads >= 1


def test_scalar_sizes_resolve(spec: TaskSpec) -> None:
    for sizes in spec.all_size_sets():
        for s in spec.scalars:
            value = spec.scalar_value(s, sizes)
            if s.size is not None:
                assert isinstance(value, int) and value >= 1, (s.name, sizes)
