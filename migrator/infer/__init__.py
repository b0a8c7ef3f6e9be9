"""Inferring a task spec from the CUDA source when no sidecar exists.

Sizes are the host launch function's integer parameters; the launch configuration is the launch
site's grid/block with host locals substituted; scalar kernel arguments are sizes (integers) or
values (floats, with stated defaults); each tensor's logical shape comes from its index
expressions and the bounds that guard them: ``A[row*K + k]`` with ``row < M`` and a loop
``k < K`` is ``A[M, K]``; ``out[blockIdx.x]`` is ``out[grid.x]``. What cannot be inferred is
reported, never guessed; the inferred spec is written out for the user to review.
"""

from migrator.infer.error import InferenceError
from migrator.infer.spec import (
    DTYPES,
    deduced_template_args,
    infer_for_file,
    infer_spec,
    site_arguments,
    site_launch,
    to_toml,
    whole_vectors,
)

__all__ = [
    "DTYPES",
    "InferenceError",
    "deduced_template_args",
    "infer_for_file",
    "infer_spec",
    "site_arguments",
    "site_launch",
    "to_toml",
    "whole_vectors",
]
