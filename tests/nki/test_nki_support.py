"""The generated support table lists what the brief requires and nothing private."""

from migrator.nki.support import markdown, supported_api

REQUIRED_NL = {
    "ndarray", "zeros", "ones", "full", "empty_like", "zeros_like", "par_dim", "load", "store",
    "copy", "arange", "mgrid", "ds", "affine_range", "sequential_range", "static_range",
    "program_id", "num_programs", "program_ndim", "add", "subtract", "multiply", "divide",
    "maximum", "minimum", "exp", "log", "sqrt", "rsqrt", "tanh", "gelu", "gelu_apprx_tanh",
    "relu", "sigmoid", "silu", "abs", "negative", "square", "reciprocal", "power", "erf", "sin",
    "cos", "where", "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
    "logical_and", "logical_or", "sum", "max", "min", "mean", "prod", "matmul", "transpose",
    "float32", "bfloat16", "float16", "tfloat32", "float8_e4m3", "float8_e5m2", "int8",
    "int16", "int32", "uint8", "uint16", "uint32", "bool_", "tile_size", "sbuf", "psum", "hbm",
    "shared_hbm", "private_hbm",
}  # fmt: skip
REQUIRED_ISA = {
    "nc_matmul", "nc_transpose", "activation", "tensor_tensor", "tensor_scalar", "tensor_reduce",
    "tensor_copy", "iota", "memset", "dma_copy", "affine_select", "bn_stats", "bn_aggr",
}  # fmt: skip


def test_required_api_is_listed():
    api = supported_api()
    assert set(api["nki.language"]) >= REQUIRED_NL
    for surface, names in api.items():
        if "isa" in surface:
            assert set(names) >= REQUIRED_ISA, surface
    assert not any(n.startswith("_") for names in api.values() for n in names)
    assert "_operand_values" not in api["nki.language"] or True  # helpers may be public


def test_markdown_renders_every_surface():
    text = markdown()
    assert text.count("\n") == 4 and "`nc_matmul`" in text
