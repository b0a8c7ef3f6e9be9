"""The scoped import shim and the unsupported-API policy."""

import sys

import numpy as np
import pytest

import migrator.nki as mn
from migrator.nki import shim

NAMES = [
    "neuronxcc",
    "neuronxcc.nki",
    "neuronxcc.nki.language",
    "neuronxcc.nki.isa",
    "neuronxcc.nki.typing",
    "nki",
    "nki.language",
    "nki.isa",
    "nki.typing",
]


def snapshot():
    return {name: sys.modules.get(name) for name in NAMES}


def test_imports_resolve_inside_and_are_restored_after():
    before = snapshot()
    with mn.simulate():
        import neuronxcc.nki as nki_legacy
        import neuronxcc.nki.isa as nisa_legacy
        import neuronxcc.nki.language as nl
        import neuronxcc.nki.typing as nt
        import nki
        import nki.isa as nisa
        from neuronxcc.nki.typing import tensor

        # the public NKI surface of the emulator's module, without what it imports (numpy)
        import migrator.nki.language as real_nl
        from migrator.nki.errors import NkiHostComputeError

        assert nl.__name__ == "neuronxcc.nki.language" and nl.add is real_nl.add
        with pytest.raises(NkiHostComputeError, match="numpy on the host|np on the host"):
            nl.np  # noqa: B018
        assert nisa_legacy.nc_matmul is not nisa.nc_matmul  # the two dialects differ
        assert callable(nki_legacy.jit) and callable(nki.simulate)
        assert nt.tensor is tensor
    assert snapshot() == before


def test_restored_after_exception():
    before = snapshot()
    with pytest.raises(RuntimeError), mn.simulate():
        import nki  # noqa: F401

        raise RuntimeError("boom")
    assert snapshot() == before


def test_restores_pre_existing_entries_and_nests():
    sentinel = object()
    sys.modules["nki.typing"] = sentinel  # type: ignore[assignment]
    try:
        with mn.simulate(force=True):
            outer = sys.modules["nki"]
            with mn.simulate(force=True):
                assert sys.modules["nki"] is not outer
            assert sys.modules["nki"] is outer
            assert sys.modules["nki.typing"] is not sentinel
        assert sys.modules["nki.typing"] is sentinel
    finally:
        del sys.modules["nki.typing"]


def test_real_package_detection_ignores_namespace_dirs_and_own_modules():
    assert not shim.real_package_available("neuronxcc")
    with mn.simulate():
        assert not shim.real_package_available("nki")
    assert shim.real_package_available("numpy")


def test_kernels_keep_working_after_the_shim_exits(tmp_path):
    source = tmp_path / "k.py"
    source.write_text(
        "import neuronxcc.nki as nki\n"
        "import neuronxcc.nki.language as nl\n\n"
        "@nki.jit(mode='simulation')\n"
        "def double(a):\n"
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
        "    nl.store(out, value=nl.multiply(nl.load(a), 2))\n"
        "    return out\n"
    )
    module = mn.load_kernel_module(source)
    assert "neuronxcc" not in sys.modules
    a = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
    np.testing.assert_array_equal(module.double(a), 2 * a)


@pytest.mark.parametrize(
    "expr, name",
    [
        ("nl.all_reduce", "nki.language.all_reduce"),
        ("nisa.builtin_custom_op", "nki.isa.builtin_custom_op"),
        ("nki.benchmark()", "nki.benchmark"),
        ("nki.collectives", "neuronxcc.nki.collectives"),
    ],
)
def test_unsupported_api_raises_not_implemented_naming_it(expr, name):
    with mn.simulate():
        import neuronxcc.nki as nki
        import neuronxcc.nki.isa as nisa
        import neuronxcc.nki.language as nl

        with pytest.raises(NotImplementedError, match=name.replace(".", r"\.")):
            eval(expr, {"nl": nl, "nisa": nisa, "nki": nki})


def test_unsupported_call_inside_kernel_is_not_silently_ignored():
    from migrator.nki import language as nl

    def kernel(a):
        return nl.all_reduce(nl.load(a), nl.add, program_axes=[0])

    with pytest.raises(NotImplementedError, match="nki.language.all_reduce"):
        mn.run_kernel(kernel, np.zeros((128, 4), np.float32))


def test_calls_outside_a_kernel_are_errors():
    from migrator.nki import language as nl

    with pytest.raises(mn.NkiConstraintError, match="err_outside_kernel"):
        nl.program_id(0)


def test_python_errors_in_kernels_are_wrapped_with_coordinates():
    from migrator.nki import language as nl

    def kernel(a):
        if nl.program_id(0) == 1:
            raise ValueError("bad tile")  # fails in instance 1
        return a

    with pytest.raises(mn.NkiKernelError) as info:
        mn.run_kernel(kernel, np.zeros((1, 1), np.float32), grid=(2,))
    message = str(info.value)
    assert "grid instance (1,) of (2,)" in message and "ValueError('bad tile')" in message
    assert "test_nki_shim.py:" in message
    assert isinstance(info.value.__cause__, ValueError)


def test_shim_stays_out_of_the_way_of_a_real_sdk(monkeypatch):
    monkeypatch.setattr(shim, "real_package_available", lambda name: True)
    before = snapshot()
    with mn.simulate():
        assert snapshot() == before  # nothing installed: the real packages win
    with mn.simulate(force=True):
        assert getattr(sys.modules["nki"], "__cuda2nki_emulator__", False)
    assert snapshot() == before


def test_spmd_dim_nc_grid_and_platform_target(tmp_path):
    source = tmp_path / "k2.py"
    source.write_text(
        "import neuronxcc.nki as nki\n"
        "import neuronxcc.nki.language as nl\n\n"
        "@nki.jit(platform_target='trn1')\n"
        "def ids(a):\n"
        "    out = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.shared_hbm)\n"
        "    i = nl.program_id(0)\n"
        "    nl.store(out[i : i + 1, 0:1], value=nl.full((1, 1), i, nl.int32))\n"
        "    return out\n"
    )
    module = mn.load_kernel_module(source)
    with mn.simulate():
        import neuronxcc.nki.language as nl

        grid = nl.spmd_dim(2, nl.nc(2))
    assert grid == 4 and module.ids.options.target == "trn1"
    out = module.ids[grid](np.zeros((1, 1), np.float32))
    np.testing.assert_array_equal(out[:, 0], [0, 1, 2, 3])


def test_missing_tensor_methods_raise_not_implemented():
    def kernel(a):
        assert not hasattr(a, "rearrange")  # hasattr stays usable
        return a.rearrange("p f -> f p")

    with pytest.raises(NotImplementedError, match=r"nki tensor method \.rearrange\(\)"):
        mn.run_kernel(kernel, np.zeros((1, 4), np.float32))
