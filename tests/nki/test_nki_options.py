"""EmulatorOptions validation and the backend selector."""

import dataclasses

import numpy as np
import pytest

from migrator.nki import EmulatorOptions
from migrator.nki.backends import EmulatorBackend, NeuronBackend, select_backend


def test_defaults_are_strict():
    o = EmulatorOptions()
    assert (o.target, o.uninit, o.uninit_outputs, o.affine_deps, o.sbuf_overflow) == (
        "trn2",
        "nan",
        "report",  # legal NKI may leave outputs partly unwritten: a finding, not an error
        "raise",
        "raise",
    )


@pytest.mark.parametrize(
    "field, value",
    [("target", "trn9"), ("uninit", "garbage"), ("affine_deps", "ignore"), ("trace", "yes")],
)
def test_invalid_values_are_rejected_with_the_value_quoted(field, value):
    with pytest.raises(ValueError, match=repr(value) if field != "trace" else "bool"):
        EmulatorOptions(**{field: value})


def test_options_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        EmulatorOptions().target = "trn1"  # type: ignore[misc]


def test_emulator_backend_is_default():
    backend = select_backend()
    assert isinstance(backend, EmulatorBackend)

    from migrator.nki import language as nl

    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))
        return out

    a = np.arange(8, dtype=np.float32).reshape(1, 8)
    np.testing.assert_array_equal(backend.run(kernel, a), a)


def test_unknown_backend_name():
    with pytest.raises(ValueError, match="unknown backend"):
        select_backend("cuda")  # type: ignore[arg-type]


@pytest.mark.skipif(
    not NeuronBackend.available(), reason="real Neuron SDK (neuronxcc/nki) is not installed"
)
def test_neuron_backend_when_installed():  # pragma: no cover - needs the Neuron SDK
    assert select_backend("neuron").name == "neuron"


@pytest.mark.skipif(NeuronBackend.available(), reason="the Neuron SDK is installed here")
def test_neuron_backend_refuses_without_sdk():
    with pytest.raises(RuntimeError, match="Neuron SDK is not installed"):
        select_backend("neuron")


def _order_kernel(seen):
    from migrator.nki import language as nl

    def kernel(a):
        seen.append((nl.program_id(0), nl.program_id(1)))
        return a

    return kernel


def test_grid_order_sequential_and_shuffled():
    from migrator.nki import run_kernel

    seq, shuf = [], []
    a = np.zeros((1, 1), np.float32)
    run_kernel(_order_kernel(seq), a, grid=(3, 4))
    run_kernel(
        _order_kernel(shuf), a, grid=(3, 4), options=EmulatorOptions(grid_order="shuffled", seed=5)
    )
    assert seq == [(i, j) for i in range(3) for j in range(4)]
    assert sorted(shuf) == seq and shuf != seq
    again = []
    run_kernel(
        _order_kernel(again), a, grid=(3, 4), options=EmulatorOptions(grid_order="shuffled", seed=5)
    )
    assert again == shuf


def test_precision_hardware_rounds_bf16_and_fp32_mimics_the_simulators():
    import ml_dtypes
    import numpy as np

    from migrator.nki import isa_legacy as nisa
    from migrator.nki import language as nl
    from migrator.nki import run_kernel

    x = np.random.default_rng(0).uniform(0, 100, (128, 64)).astype(np.float32)

    def kernel(a):
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        t = nisa.activation(op=np.square, data=nl.load(a), dtype=nl.bfloat16)
        nl.store(out, t)
        return out

    hw = run_kernel(kernel, x)[0]
    rounded = (x * x).astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(hw, rounded)  # default: rounded to bf16 as on hardware
    sim = run_kernel(kernel, x, options=EmulatorOptions(precision="fp32"))[0]
    np.testing.assert_allclose(sim, x * x, rtol=1e-6)  # the simulators' fp32 precision
    assert not np.array_equal(sim, rounded)
    with pytest.raises(ValueError, match="precision"):
        EmulatorOptions(precision="fp16")
