"""The front end on every corpus kernel: roles, shared arrays, barriers, index forms, loops.

Each row states what a reader of the CUDA source can see; the IR must say the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from migrator.contract import load_spec
from migrator.cuda.frontend import analyze_file
from migrator.cuda.ir import Kernel
from migrator.cuda.validate import validate

CORPUS = Path(__file__).resolve().parents[2] / "corpus"

GX = "blockIdx.x*blockDim.x + threadIdx.x"
GY = "blockIdx.y*blockDim.y + threadIdx.y"

EXPECT: dict[str, dict[str, Any]] = {
    "vector_add": {
        "kernel": "vector_add_kernel",
        "roles": {"a": "in", "b": "in", "c": "out", "n": "scalar"},
        "shared": {},
        "barriers": 0,
        "index_vars": {"i": ("global_x", GX)},
        "accesses": {("c", "write"): [GX], ("a", "read"): [GX]},
        "guards": ["bounds"],
    },
    "saxpy": {
        "kernel": "saxpy_kernel",
        "roles": {"n": "scalar", "a": "scalar", "x": "in", "y": "inout"},
        "shared": {},
        "barriers": 0,
        "loops": ["grid_stride"],
        "accesses": {("y", "write"): ["i"]},
    },
    "adamw": {
        "kernel": "adamw_kernel",
        "roles": {
            "param": "inout",
            "exp_avg": "inout",
            "exp_avg_sq": "inout",
            "grad": "in",
            "lr": "scalar",
            "step_size": "scalar",
            "n": "scalar",
        },  # fmt: skip
        "shared": {},
        "barriers": 0,
        "loops": ["grid_stride"],
        "accesses": {("param", "write"): ["i"], ("exp_avg_sq", "write"): ["i"]},
        "calls": {"sqrtf": "math"},
        "reductions": set(),  # `p = p * decay` on a loop-local is not an accumulator
    },
    "gelu": {
        "kernel": "gelu_kernel",
        "roles": {"x": "in", "y": "out", "n": "scalar"},
        "template": ["T"],
        "instantiations": [["float"]],
        "loops": ["grid_stride"],
        "calls": {"gelu_tanh": "device"},
    },
    "scale_2d_pitch": {
        "kernel": "scale_2d_pitch_kernel",
        "roles": {"in": "in", "out": "out", "ld_in": "scalar", "alpha": "scalar"},
        "index_vars": {"row": ("global_y", GY), "col": ("global_x", GX)},
        "accesses": {
            ("out", "write"): [
                "blockIdx.y*blockDim.y*ld_out + threadIdx.y*ld_out + "
                "blockIdx.x*blockDim.x + threadIdx.x"
            ]
        },
        "guards": ["bounds"],
    },
    "reduce_sum_shared": {
        "kernel": "reduce_sum_shared_kernel",
        "roles": {"in": "in", "partial": "out", "n": "scalar"},
        "template": ["BLOCK"],
        "instantiations": [["256"]],
        "shared": {"sdata": [256]},
        "barriers": 2,
        "loops": ["halving"],
        "reductions": {("sdata", "shared_tree")},
        "accesses": {("partial", "write"): ["blockIdx.x"]},
    },
    "reduce_warp_shuffle": {
        "kernel": "row_sum_warp_kernel",
        "roles": {"in": "in", "out": "out", "rows": "scalar", "cols": "scalar"},
        "shared": {},
        "barriers": 0,
        "index_vars": {"lane": (None, "mod(threadIdx.x, 32)")},
        "reductions": {("sum", "loop_accumulate"), ("warp_reduce_sum:v", "warp_shuffle")},
        "accesses": {("out", "write"): ["4*blockIdx.x + floordiv(threadIdx.x, 32)"]},
    },
    "softmax_row": {
        "kernel": "softmax_row_kernel",
        "roles": {"in": "in", "out": "out", "rows": "scalar", "cols": "scalar"},
        "shared": {"sbuf": [None]},
        "dynamic_shared": True,
        "barriers": 5,
        "loops": ["block_stride", "halving", "block_stride", "halving", "block_stride"],
        "reductions": {
            ("local_max", "loop_accumulate"),
            ("sbuf", "shared_tree"),
            ("local_sum", "loop_accumulate"),
        },
        "calls": {"expf": "math", "fmaxf": "math"},
        "accesses": {("out", "write"): ["blockIdx.x*cols + c"]},
    },
    "layernorm": {
        "kernel": "layernorm_kernel",
        "roles": {"x": "in", "gamma": "in", "beta": "in", "y": "out", "eps": "scalar"},
        "instantiations": [["128"]],
        "shared": {"red": [4]},
        "calls": {"rsqrtf": "math", "block_sum": "device"},
        "loops": ["block_stride", "block_stride", "block_stride"],
    },
    "matmul_naive": {
        "kernel": "matmul_naive_kernel",
        "roles": {"A": "in", "B": "in", "C": "out", "M": "scalar", "N": "scalar", "K": "scalar"},
        "index_vars": {"row": ("global_y", GY), "col": ("global_x", GX)},
        "loops": ["counted"],
        "reductions": {("acc", "loop_accumulate")},
        "accesses": {
            ("A", "read"): ["blockIdx.y*blockDim.y*K + threadIdx.y*K + k"],
            ("B", "read"): ["N*k + blockIdx.x*blockDim.x + threadIdx.x"],
        },
    },
    "matmul_tiled": {
        "kernel": "sgemm_tiled_kernel",
        "roles": {"A": "in", "B": "in", "C": "inout", "alpha": "scalar", "lda": "scalar"},
        "shared": {"As": [16, 16], "Bs": [16, 16]},
        "barriers": 2,
        "index_vars": {"row": ("block_tiled_y", "16*blockIdx.y + threadIdx.y")},
        "accesses": {("As", "read"): ["threadIdx.y", "k"], ("Bs", "read"): ["k", "threadIdx.x"]},
    },
    "transpose_tiled": {
        "kernel": "transpose_tiled_kernel",
        "roles": {"odata": "out", "idata": "in", "rows": "scalar", "cols": "scalar"},
        "shared": {"tile": [32, 33]},
        "barriers": 1,
        "accesses": {
            ("tile", "write"): ["threadIdx.y + j", "threadIdx.x"],
            ("tile", "read"): ["threadIdx.x", "threadIdx.y + j"],
            ("odata", "write"): [
                "threadIdx.y*rows + j*rows + 32*blockIdx.x*rows + 32*blockIdx.y + threadIdx.x"
            ],
        },
    },
    "stencil_1d": {
        "kernel": "stencil_1d_kernel",
        "roles": {"in": "in", "out": "out", "n": "scalar"},
        "shared": {"s": [262]},
        "barriers": 1,
        "index_vars": {"gidx": ("global_x", GX)},
        "accesses": {("c_weights", "read"): ["k + 3"], ("s", "read"): ["k + threadIdx.x + 3"]},
        "constants": ["c_weights"],
    },
    "scan_block": {
        "kernel": "scan_block_kernel",
        "roles": {"in": "in", "out": "out", "n": "scalar"},
        "shared": {"buf": [256]},
        "barriers": 3,
        "loops": ["doubling"],
        "accesses": {("buf", "read"): ["threadIdx.x - offset"]},
    },
    "dot_atomic": {
        "kernel": "dot_atomic_kernel",
        "roles": {"x": "in", "y": "in", "result": "inout", "n": "scalar"},
        "shared": {"partial": [256]},
        "barriers": 2,
        "loops": ["grid_stride", "halving"],
        "reductions": {
            ("sum", "loop_accumulate"),
            ("partial", "shared_tree"),
            ("result", "atomic"),
        },
        "accesses": {("result", "atomic"): ["0"]},
    },
    "layernorm_backward": {
        "kernel": "layernorm_backward_kernel",
        "roles": {
            "dx": "out",
            "dweight": "inout",
            "dbias": "inout",
            "dy": "in",
            "x": "in",
            "weight": "in",
            "mean": "in",
            "rstd": "in",
            "rows": "scalar",
            "cols": "scalar",
        },
        "loops": ["block_stride", "block_stride"],
        "reductions": {
            ("g_sum", "loop_accumulate"),
            ("gx_sum", "loop_accumulate"),
            ("lnb_warp_sum:v", "warp_shuffle"),
            ("dweight", "atomic"),
            ("dbias", "atomic"),
        },
    },
    "embedding_backward": {
        "kernel": "embedding_bwd_kernel",
        "roles": {
            "dwte": "inout",
            "dwpe": "inout",
            "dout": "in",
            "tokens": "in",
            "B": "scalar",
            "T": "scalar",
            "C": "scalar",
        },  # fmt: skip
        "barriers": 0,
        "loops": ["grid_stride"],
        "reductions": {("dwte", "atomic"), ("dwpe", "atomic")},
    },
    "separable_rows": {
        "kernel": "separable_rows_kernel",
        "roles": {"img": "in", "out": "out", "width": "scalar", "height": "scalar"},
        "shared": {"seg": [8, 42]},
        "barriers": 1,
        "loops": ["counted"],
        "constants": ["c_taps"],
        "accesses": {("c_taps", "read"): ["t + 5"]},
    },
    "separable_cols": {
        "kernel": "separable_cols_kernel",
        "roles": {"img": "in", "out": "out", "width": "scalar", "height": "scalar"},
        "shared": {"seg": [26, 17]},
        "barriers": 1,
        "loops": ["block_stride", "counted"],
        "constants": ["c_taps"],
        "accesses": {("c_taps", "read"): ["t"]},
    },
    "conv2d_3x3": {
        "kernel": "conv2d_3x3_kernel",
        "roles": {"in": "in", "out": "out", "H": "scalar", "W": "scalar"},
        "shared": {"s": [18, 18]},
        "barriers": 1,
        "loops": ["block_stride", "block_stride", "counted", "counted"],
        "constants": ["c_w"],
        "accesses": {("s", "read"): ["threadIdx.y + ky + 1", "kx + threadIdx.x + 1"]},
    },
    "histogram": {
        "kernel": "histogram_kernel",
        "roles": {"keys": "in", "bins": "inout", "n": "scalar"},
        "shared": {"local": [64]},
        "barriers": 2,
        "loops": ["block_stride", "grid_stride", "block_stride"],
        "reductions": {("local", "atomic"), ("bins", "atomic")},
        "calls": {"atomicAdd": "atomic"},
    },
    # entries added with the corpus's growth to 46 kernels: IR facts as the front end reads them
    # (roles cross-checked against the spec by test_spec_roles_agree_with_ir)
    "attention_fwd": {
        "kernel": "attention_fwd_kernel",
        "roles": {"Q": "in", "K": "in", "V": "in", "O": "out", "S": "scalar", "scale": "scalar"},
        "shared": {"scores": [None], "q_s": [16], "red": [4]},
        "barriers": 1,
        "loops": [
            "block_stride",
            "block_stride",
            "counted",
            "block_stride",
            "block_stride",
            "counted",
        ],
        "reductions": {
            ("acc", "loop_accumulate"),
            ("block_allreduce_max:r", "loop_accumulate"),
            ("block_allreduce_max:warp_allreduce_max:v", "warp_shuffle"),
            ("block_allreduce_sum:warp_allreduce_sum:v", "warp_shuffle"),
            ("local_sum", "loop_accumulate"),
            ("local_max", "loop_accumulate"),
            ("block_allreduce_sum:r", "loop_accumulate"),
            ("dot", "loop_accumulate"),
        },
        "calls": {"__expf": "math", "fmaxf": "math"},
    },
    "attention_causal_online": {
        "kernel": "attention_causal_online_kernel",
        "roles": {"Q": "in", "K": "in", "V": "in", "O": "out", "T": "scalar", "scale": "scalar"},
        "barriers": 0,
        # the causal key loop `j <= row` runs as far as the thread's own row
        "loops": ["counted", "thread_dependent", "counted", "halving", "counted", "counted"],
        # the rescaled running sums (`l = l * corr + p`) are no plain accumulations
        "reductions": {("part", "loop_accumulate"), ("part", "warp_shuffle")},
        "calls": {"__shfl_xor_sync": "warp", "fmaxf": "math", "expf": "math"},
    },
    "attention_mha": {
        "kernel": "attention_mha_kernel",
        "roles": {
            "Q": "in",
            "K": "in",
            "V": "in",
            "O": "out",
            "T": "scalar",
            "HS": "scalar",
            "scale": "scalar",
        },  # fmt: skip
        "shared": {"att": [None], "red": [64]},
        "barriers": 5,
        "loops": [
            "block_stride",
            "counted",
            "halving",
            "block_stride",
            "halving",
            "block_stride",
            "thread_dependent",
        ],  # fmt: skip
        "reductions": {
            ("dot", "loop_accumulate"),
            ("red", "shared_tree"),
            ("acc", "loop_accumulate"),
            ("local_sum", "loop_accumulate"),
            ("local_max", "loop_accumulate"),
        },  # fmt: skip
        "calls": {"fmaxf": "math", "expf": "math", "__syncthreads": "barrier"},
    },
    "avgpool_2x2": {
        "kernel": "avgpool_2x2_kernel",
        "roles": {"in": "in", "out": "out", "H": "scalar", "W": "scalar"},
        "shared": {},
        "barriers": 0,
        "loops": [],
        "reductions": set(),
        "calls": {},
    },
    "batched_gemm": {
        "kernel": "batched_gemm_kernel",
        "roles": {
            "A": "in",
            "B": "in",
            "C": "out",
            "M": "scalar",
            "N": "scalar",
            "K": "scalar",
            "stride_a": "scalar",
            "stride_b": "scalar",
            "stride_c": "scalar",
            "batch_count": "scalar",
        },
        "shared": {"As": [16, 16], "Bs": [16, 16]},
        "barriers": 2,
        "loops": ["counted", "counted"],
        "reductions": {("acc", "loop_accumulate")},
        "calls": {},
    },
    "batched_transpose": {
        "kernel": "batched_transpose_kernel",
        "roles": {"in": "in", "out": "out", "batch": "scalar", "rows": "scalar", "cols": "scalar"},
        "shared": {"tile": [32, 33]},
        "barriers": 1,
        "loops": ["counted", "counted"],
        "reductions": set(),
        "calls": {},
    },
    "bias_gelu_2d": {
        "kernel": "bias_gelu_2d_kernel",
        "roles": {"x": "in", "bias": "in", "out": "out", "rows": "scalar", "cols": "scalar"},
        "shared": {},
        "barriers": 0,
        "loops": [],
        "reductions": set(),
        "calls": {},
    },
    "bitonic_sort": {
        "kernel": "bitonic_sort_segments_kernel",
        "roles": {"keys_in": "in", "keys_out": "out", "n": "scalar"},
        "shared": {"s_key": [512]},
        "barriers": 3,
        "loops": ["doubling", "halving", "halving"],
        "reductions": set(),
        "calls": {},
    },
    "col_sum": {
        "kernel": "col_sum_kernel",
        "roles": {"in": "in", "out": "out", "rows": "scalar", "cols": "scalar"},
        "shared": {"partial": [8, 33]},
        "barriers": 2,
        "loops": ["block_stride", "halving"],
        "reductions": {("partial", "shared_tree"), ("sum", "loop_accumulate")},
        "calls": {},
    },
    "conv1d": {
        "kernel": "conv1d_same_kernel",
        "roles": {"x": "in", "w": "in", "y": "out", "n": "scalar"},
        "shared": {"s_x": [260], "s_w": [5]},
        "barriers": 1,
        "loops": ["block_stride", "counted"],
        "reductions": {("acc", "loop_accumulate")},
        "calls": {},
    },
    "cross_entropy": {
        "kernel": "cross_entropy_fwd_kernel",
        "roles": {
            "logits": "in",
            "labels": "in",
            "loss": "out",
            "rows": "scalar",
            "cols": "scalar",
        },
        "shared": {"scratch": [9]},
        "barriers": 0,
        "loops": ["block_stride", "block_stride"],
        "reductions": {
            ("block_reduce_sum:warp_reduce_sum:v", "warp_shuffle"),
            ("m", "loop_accumulate"),
            ("block_reduce_max:warp_reduce_max:v", "warp_shuffle"),
            ("s", "loop_accumulate"),
        },
        "calls": {"expf": "math", "fmaxf": "math", "logf": "math"},
    },
    "fused_classifier": {
        "kernel": "fused_classifier_kernel",
        "roles": {
            "dlogits": "out",
            "losses": "out",
            "logits": "in",
            "dlosses": "in",
            "targets": "in",
            "rows": "scalar",
            "vocab": "scalar",
        },
        "shared": {"partial": [8]},
        "barriers": 1,
        "loops": ["block_stride", "counted", "block_stride"],
        "calls": {"merge": "device", "warp_merge": "device", "logf": "math", "__expf": "math"},
    },
    "embedding": {
        "kernel": "embedding_fwd_kernel",
        "roles": {
            "out": "out",
            "tokens": "in",
            "wte": "in",
            "wpe": "in",
            "BT": "scalar",
            "T": "scalar",
            "C": "scalar",
        },  # fmt: skip
        "shared": {},
        "barriers": 0,
        "loops": ["block_stride"],
        "reductions": set(),
        "calls": {},
    },
    "gemm_tn": {
        "kernel": "gemm_tn_kernel",
        "roles": {
            "M": "scalar",
            "N": "scalar",
            "K": "scalar",
            "A": "in",
            "lda": "scalar",
            "B": "in",
            "ldb": "scalar",
            "C": "out",
            "ldc": "scalar",
        },
        "shared": {},
        "barriers": 0,
        "loops": ["counted"],
        "reductions": {("acc", "loop_accumulate")},
        "calls": {},
    },
    "gemv": {
        "kernel": "gemv_kernel",
        "roles": {"A": "in", "x": "in", "y": "out", "M": "scalar", "K": "scalar"},
        "shared": {},
        "barriers": 0,
        "loops": ["block_stride", "block_stride"],
        "reductions": {("warp_reduce_sum:v", "warp_shuffle"), ("sum", "loop_accumulate")},
        "calls": {},
    },
    "hardswish": {
        "kernel": "hardswish_kernel",
        "roles": {"x": "in", "y": "out", "n": "scalar"},
        "shared": {},
        "barriers": 0,
        "loops": [],
        "reductions": set(),
        "calls": {"fmaxf": "math", "fminf": "math"},
    },
    "hgemm_bf16": {
        "kernel": "hgemm_bf16_kernel",
        "roles": {"A": "in", "B": "in", "C": "out", "M": "scalar", "N": "scalar", "K": "scalar"},
        "shared": {},
        "barriers": 0,
        "loops": ["counted"],
        "reductions": {("acc", "loop_accumulate")},
        "calls": {"fmaf": "math"},
    },
    "l2_norm_sq": {
        "kernel": "l2_norm_sq_kernel",
        "roles": {"x": "in", "result": "inout", "n": "scalar"},
        "shared": {},
        "barriers": 0,
        "loops": ["grid_stride", "grid_stride"],
        "reductions": {
            ("warp_reduce_sum:v", "warp_shuffle"),
            ("sum", "loop_accumulate"),
            ("result", "atomic"),
        },
        "calls": {"atomicAdd": "atomic"},
    },
    "leaky_relu": {
        "kernel": "leaky_relu_kernel",
        "roles": {"x": "in", "y": "out", "negative_slope": "scalar", "n": "scalar"},
        "shared": {},
        "barriers": 0,
        "loops": [],
        "reductions": set(),
        "calls": {},
    },
    "log_softmax": {
        "kernel": "log_softmax_kernel",
        "roles": {"in": "in", "out": "out", "rows": "scalar", "cols": "scalar"},
        "shared": {"smem": [256]},
        "barriers": 5,
        "loops": ["block_stride", "halving", "block_stride", "halving", "block_stride"],
        "reductions": {
            ("smem", "shared_tree"),
            ("m", "loop_accumulate"),
            ("sum", "loop_accumulate"),
        },
        "calls": {"expf": "math", "fmaxf": "math", "logf": "math"},
    },
    "matmul_bias_relu": {
        "kernel": "matmul_bias_relu_kernel",
        "roles": {
            "A": "in",
            "B": "in",
            "bias": "in",
            "C": "out",
            "M": "scalar",
            "N": "scalar",
            "K": "scalar",
        },
        "shared": {"As": [32, 32], "Bs": [32, 33]},
        "barriers": 2,
        "loops": ["counted", "counted"],
        "reductions": {("acc", "loop_accumulate")},
        "calls": {"fmaxf": "math"},
    },
    "mean_rows_cg": {
        "kernel": "mean_rows_cg_kernel",
        "roles": {"x": "in", "mean": "out", "rows": "scalar", "cols": "scalar"},
        "shared": {},
        "barriers": 0,
        "loops": ["block_stride", "halving"],  # lanes stride from warp.thread_rank()
        "reductions": {("sum", "warp_shuffle"), ("sum", "loop_accumulate")},
        "calls": {".shfl_down": "warp"},
    },
    "relu_half": {
        "kernel": "relu_half_kernel",
        "roles": {"x": "in", "y": "out", "n": "scalar"},
        "shared": {},
        "barriers": 0,
        "loops": [],
        "reductions": set(),
        "calls": {},
    },
    "rmsnorm": {
        "kernel": "rmsnorm_kernel",
        "roles": {
            "x": "in",
            "weight": "in",
            "y": "out",
            "rows": "scalar",
            "cols": "scalar",
            "eps": "scalar",
        },
        "shared": {"warp_sums": [8], "s_inv_rms": []},
        "barriers": 2,
        "loops": ["block_stride", "block_stride"],
        "reductions": {("sq", "loop_accumulate"), ("warp_allreduce_sum:v", "warp_shuffle")},
        "calls": {"rsqrtf": "math"},
    },
    "row_max": {
        "kernel": "row_max_kernel",
        "roles": {"in": "in", "out": "out", "rows": "scalar", "cols": "scalar"},
        "shared": {"smax": [256]},
        "barriers": 2,
        "loops": ["block_stride", "block_stride", "halving"],
        "reductions": {("m", "loop_accumulate"), ("smax", "shared_tree")},
        "calls": {"fmaxf": "math"},
    },
    "scan_warp": {
        "kernel": "scan_warp_kernel",
        "roles": {"in": "in", "out": "out", "n": "scalar"},
        "shared": {"warp_totals": [8]},  # NUM_WARPS = BLOCK / 32, BLOCK = 256 (one instantiation)
        "barriers": 2,
        "loops": [],
        "reductions": {("warp_inclusive_scan:v", "loop_accumulate")},
        "calls": {},
    },
    "sgd_momentum": {
        "kernel": "sgd_momentum_kernel",
        "roles": {
            "param": "inout",
            "momentum_buf": "inout",
            "grad": "in",
            "lr": "scalar",
            "momentum": "scalar",
            "weight_decay": "scalar",
            "n": "scalar",
        },
        "shared": {},
        "barriers": 0,
        "loops": ["grid_stride"],
        "reductions": set(),
        "calls": {},
    },
    "sigmoid_vec4": {
        "kernel": "sigmoid_vec4_kernel",
        "roles": {"x": "in", "y": "out", "n": "scalar"},
        "shared": {},
        "barriers": 0,
        "loops": ["grid_stride", "grid_stride"],
        "reductions": set(),
        "calls": {},
    },
    "silu_bf16": {
        "kernel": "silu_bf16_kernel",
        "roles": {"x": "in", "y": "out", "n": "scalar"},
        "shared": {},
        "barriers": 0,
        "loops": ["grid_stride"],
        "reductions": set(),
        "calls": {},
    },
    "softmax_warp": {
        "kernel": "softmax_warp_kernel",
        "roles": {"in": "in", "out": "out", "rows": "scalar", "cols": "scalar"},
        "shared": {},
        "barriers": 0,
        "loops": ["counted", "counted", "counted"],
        "reductions": {
            ("m", "loop_accumulate"),
            ("warp_sum:v", "warp_shuffle"),
            ("s", "loop_accumulate"),
            ("warp_max:v", "warp_shuffle"),
        },
        "calls": {"expf": "math", "fmaxf": "math"},
    },
    "stencil_2d_5pt": {
        "kernel": "jacobi_5pt_kernel",
        "roles": {"in": "in", "out": "out", "H": "scalar", "W": "scalar", "alpha": "scalar"},
        "shared": {},
        "barriers": 0,
        "loops": [],
        "reductions": set(),
        "calls": {},
    },
    "swiglu": {
        "kernel": "swiglu_kernel",
        "roles": {"x": "in", "out": "out", "rows": "scalar", "cols": "scalar"},
        "shared": {},
        "barriers": 0,
        "loops": ["grid_stride"],
        "reductions": set(),
        "calls": {},
    },
    "transpose_naive": {
        "kernel": "transpose_naive_kernel",
        "roles": {"in": "in", "out": "out", "rows": "scalar", "cols": "scalar"},
        "shared": {},
        "barriers": 0,
        "loops": [],
        "reductions": set(),
        "calls": {},
    },
}


def _kernel(stem: str) -> tuple[Any, Kernel]:
    tu = validate(analyze_file(CORPUS / f"{stem}.cu"))
    return tu, tu.kernel(EXPECT[stem]["kernel"])


@pytest.mark.parametrize("stem", sorted(EXPECT))
def test_kernel_facts(stem: str) -> None:
    exp = EXPECT[stem]
    tu, k = _kernel(stem)
    assert k.qualifier == "global"
    for name, role in exp["roles"].items():
        assert k.param(name).role == role, name
    if "shared" in exp:
        assert {s.name: s.dims for s in k.shared} == exp["shared"]
    if exp.get("dynamic_shared"):
        assert all(s.dynamic for s in k.shared)
    if "barriers" in exp:
        assert len(k.barriers) == exp["barriers"]
        assert not any(b.divergent for b in k.barriers)
    if "template" in exp:
        assert [t.name for t in k.template_params] == exp["template"]
    if "instantiations" in exp:
        assert k.instantiations == exp["instantiations"]
    if "loops" in exp:
        assert [lp.kind for lp in k.loops] == exp["loops"]
    if "reductions" in exp:
        assert {(r.target, r.style) for r in k.reductions} == exp["reductions"]
    if "guards" in exp:
        assert [g.kind for g in k.guards] == exp["guards"]
    for name, (pattern, canonical) in exp.get("index_vars", {}).items():
        v = next(v for v in k.index_vars if v.name == name)
        assert v.expr.affine
        assert v.expr.canonical == canonical
        assert v.expr.pattern == pattern
    for (array, kind), indices in exp.get("accesses", {}).items():
        found = [a for a in k.accesses if a.array == array and a.kind == kind]
        assert found, (array, kind)
        assert any([i.canonical for i in a.indices] == indices for a in found), [
            [i.canonical for i in a.indices] for a in found
        ]
    for name, kind in exp.get("calls", {}).items():
        assert any(c.name == name and c.kind == kind for c in k.calls), name
    for name in exp.get("constants", []):
        assert any(c.name == name for c in tu.constants)


@pytest.mark.parametrize("stem", sorted(EXPECT))
def test_launch_site_matches_spec(stem: str) -> None:
    """The file's own launch site launches the spec's kernel, with its template arguments."""
    tu, k = _kernel(stem)
    spec = load_spec(CORPUS / f"{stem}.toml")
    sites = [s for s in tu.launch_sites if s.kernel == spec.kernel.name]
    assert sites, f"no launch of {spec.kernel.name}"
    site = sites[0]
    assert site.template_args == [str(a) for a in spec.kernel.template_args]
    assert len(site.args) == len(k.params)
    assert site.host_function and site.host_function.startswith("launch")


@pytest.mark.parametrize("stem", sorted(EXPECT))
def test_spec_roles_agree_with_ir(stem: str) -> None:
    """The spec's tensor roles are what the front end infers from the body."""
    tu, k = _kernel(stem)
    spec = load_spec(CORPUS / f"{stem}.toml")
    tables = {c.name for c in tu.constants if c.space == "constant"}
    for t in spec.tensors:
        if t.cuda_param in tables:  # a __constant__ table the host fills: read, an input
            assert t.role == "in", t.name
            continue
        assert k.param(t.cuda_param).role == t.role, t.name
    for s in spec.scalars:
        assert k.param(s.cuda_param).role == "scalar"


def test_every_corpus_kernel_is_covered() -> None:
    stems = {p.stem for p in CORPUS.glob("*.cu")}
    assert stems <= set(EXPECT), f"add IR expectations for {sorted(stems - set(EXPECT))}"


def test_ir_round_trips_through_json() -> None:
    from migrator.cuda.ir import TranslationUnit

    for stem in EXPECT:
        tu, _ = _kernel(stem)
        again = TranslationUnit.model_validate_json(tu.model_dump_json())
        assert again == tu
