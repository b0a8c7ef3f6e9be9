"""Lowering rule for counts per bin (histograms) over a lifted program:

    bins[i] = bins[i] + sum_{k < N} (g(keys[k]) == i ? 1 : 0)

with `g` the key itself, `key % m`, `key & mask`, `key >> s` or `(key >> s) & mask` (the old
counts term only for an in-place output). Trainium has no scatter-add into SBUF at
data-dependent addresses, so the counts are a compare-and-reduce against each bin: keys go on
the partitions ([P, F] per tile), their bins are computed in int32 (bit operations exact on
VectorE), each bin's matches are counted along the free axis by one `tensor_scalar_reduce`
(equal, then add), and a ones-vector matmul sums the partitions into PSUM, accumulating over the
key tiles. The work is N * bins / 128 compare steps: fine for tens to hundreds of bins, and the
plan refuses more than one PSUM bank of bins (512).
"""

from __future__ import annotations

from migrator.patterns.lifted import (
    _bind,
    _carrying_tensor,
    _clip,
    _lift_note,
    _NoFit,
    _reads,
    _sum_plus_old,
    _tensor,
    _the_output,
)

from migrator.contract import InputDist, TaskSpec, int_range
from migrator.cuda.ir import Kernel, TranslationUnit
from migrator.lift.program import Expr, Program
from migrator.plan import PMAX, Plan, note

MAX_BINS = 512  # fp32 counts of every bin in one PSUM bank
F_TILE = 2048  # keys per partition per tile
EXACT_FP32 = 1 << 24  # integers fp32 holds exactly (arithmetic ALU ops go through fp32)


def histogram(program: Program, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    a = _the_output(program, 1)
    (i,) = a.vars
    hit, kv, carried = _sum_plus_old(a, lambda ld: _reads(ld, i), "a count")
    if not (hit.kind == "op" and hit.op == "select" and hit.name == "=="
            and [x.value for x in hit.args[2:]] == [1, 0]):  # fmt: skip
        raise _NoFit("not a count of matches")
    coords = [x for x in hit.args[:2] if x.kind == "coord"]
    keyed = [x for x in hit.args[:2] if x.kind != "coord"]
    if len(coords) != 1 or len(keyed) != 1 or coords[0].index[0].render() != i:
        raise _NoFit("a count that does not compare with the output's own bin")
    steps, key = _bin_steps(keyed[0], kv)
    p = _bind(tu, k, spec, "histogram", "lifted")
    keys, out = _tensor(p, key), _carrying_tensor(p, a.tensor, carried)
    if len(keys.shape) != 1 or keys.nl_dtype not in ("nl.int32", "nl.uint32"):
        raise _NoFit(f"{key} is not a 1-D tensor of 32-bit integers")
    bins = spec.shape_of(spec.tensor_named(a.tensor), spec.sizes)[0]
    if bins > MAX_BINS:
        raise _NoFit(f"{bins} bins (at most {MAX_BINS}, one PSUM bank of fp32 counts)")
    lo, hi = int_range(spec.inputs.get(key, InputDist()), spec.sizes)
    if steps and lo < 0:
        # C's `%` and `>>` of a negative key differ from NKI's floor mod and logical shift
        raise _NoFit(f"{key} may be negative: its bin would need C's signed `%` / `>>`")
    if any(op == "mod" for op, _ in steps) and hi > EXACT_FP32:
        raise _NoFit(f"`% m` with m no power of two goes through fp32: {key} reaches {hi}")
    p.constants = {"P_TILE": PMAX, "F_TILE": F_TILE}
    g = " -> ".join(f"{op} {v}" for op, v in steps) or "the key itself"
    p.notes = {
        "tiles": note(k.span, "keys on the partitions, F per partition per tile; those past the "
                     "end get bin -1 (counted nowhere)"),
        "bins": note(k.span, f"each key's bin in int32 ({g})"),
        "count": note(k.span, "per bin, the matches along the free axis: one "
                      "tensor_scalar_reduce (equal, add) each"),
        "split": note(k.span, "three bins in five compared on GpSimd and summed on ScalarE, so "
                      "three engines share the compare-and-count work"),
        "columns": note(k.span, "fewer keys per partition than bins: per key column, its "
                        "one-hot row against the bin numbers (one tensor_scalar), summed over "
                        "the partitions by a ones-vector matmul into PSUM"),
        "sum": note(k.span, "partitions summed by a ones-vector matmul, accumulated in PSUM "
                    "over the key tiles (fp32: exact below 2**24 keys)"),
        "store": _lift_note(k, program),
    }  # fmt: skip
    p.fields.update({
        "key_tensor": keys.name, "out": out.var,
        "out_in": out.name if carried is not None else None,
        "n": keys.shape[0], "bins": out.shape[0], "steps": steps, "uses_isa": True,
        "out_dtype": out.nl_dtype, "summary": _clip(a.render(), 200),
        "constant_notes": {"P_TILE": "partitions per key tile",
                           "F_TILE": "keys per partition per tile, at most"},
    })  # fmt: skip
    return p


_NL = {"and": "bitwise_and", "shr": "right_shift", "mod": "mod"}


def _bin_steps(g: Expr, kv: str) -> tuple[list[tuple[str, int]], str]:
    """The integer steps from `keys[k]` to its bin, innermost first, as (nl operation,
    literal operand), and the keys tensor; `% m` by a power of two is `& (m - 1)` (equal for
    the non-negative keys the plan requires)."""
    steps: list[tuple[str, int]] = []
    while g.kind == "op":
        if g.op not in _NL or len(g.args) != 2 or g.args[1].kind != "const" \
                or not isinstance(g.args[1].value, int):  # fmt: skip
            raise _NoFit(f"the bin {_clip(g.render(), 80)} is not integer steps by literals")
        v = g.args[1].value
        if g.op == "mod" and v > 0 and v & (v - 1) == 0:
            steps.insert(0, ("bitwise_and", v - 1))
        else:
            steps.insert(0, (_NL[g.op], v))
        g = g.args[0]
    if g.kind != "load" or len(g.index) != 1 or g.index[0].render() != kv:
        raise _NoFit(f"the bin is not computed from one key per summed element ({g.render()})")
    return steps, g.tensor or ""
