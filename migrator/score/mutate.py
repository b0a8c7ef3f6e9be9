"""Scorer validation: derive wrong and correct-but-different migrations, and count verdicts.

Mutants are made from a correct NKI kernel (the migrator's own, for each corpus task) by one
source transformation each, of the kinds that real wrong migrations show: an off-by-one tile
bound, a skipped last tile, a dropped mask, a reduction over the wrong axis, a missing epsilon or
scale, bf16 accumulation, a swapped transpose, swapped stationary/moving operands, a gather by
the row number instead of the row's index, a position table read unwrapped, a loss without its
label term, a gradient without its label's -1 or with the one-hot row one class off, a scan over
runs of the wrong length, attention with unscaled scores, no causal
mask, the diagonal masked or no normalisation, a pooling window missing a tap or its stride.
Variants are
correct rewrites (other tile sizes; `nisa` instructions instead of `nl` math). A good scorer fails
every mutant and passes every variant:

    python -m migrator.score.mutate corpus/ [--seeds 2] [--json]

Each transformation is a (pattern, replacement) on the source text, applied to the first place
it fits; a mutant whose transformation does not apply to a kernel is simply not made, and a
mutant identical to the original is discarded.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from migrator.score.models import FidelityReport


@dataclass(frozen=True)
class Mutation:
    name: str
    kind: str  # "mutant" (must fail) or "variant" (must pass)
    apply: Callable[[str], str | None]


def _sub(pattern: str, repl: str, count: int = 1) -> Callable[[str], str | None]:
    rx = re.compile(pattern, re.M)

    def apply(src: str) -> str | None:
        out, n = rx.subn(repl, src, count=count)
        return out if n else None

    return apply


def _drop_store_mask(src: str) -> str | None:
    """`nl.store(..., mask=m)` without its mask: ragged edges written past the array."""
    out, n = re.subn(r"(nl\.store\([^\n]*?), mask=[^\n]*\)$", r"\1)", src, count=1, flags=re.M)
    return out if n else None


_skip_last_tile = _sub(
    r"(affine|static)_range\(\((\w+) \+ (\w+(?: \* \w+)?) - 1\) // \(?(\w+(?: \* \w+)?)\)?\)",
    r"\1_range(\2 // (\4))",
)
# block partial sums: the last chunk of blocks per partition is never reduced
_skip_last_block_group = _sub(
    r"affine_range\(per_p // n_parts\)", "affine_range(per_p // n_parts - 1)"
)

_drop_max = _sub(
    r"row_max = nl\.max\(x_tile, axis=1\)\n\s*shifted = nl\.subtract\(x_tile, row_max\)",
    "shifted = x_tile",
)  # softmax: exp(x - max) as written


def _drop_max_bias(src: str) -> str | None:
    """Log-softmax without its max: exp(x) summed with no bias, offset log(sum) alone; a lifted
    row program's fused exp-sum without its max bias."""
    out, n1 = re.subn(r"(nisa\.activation_reduce\(op=nl\.exp, data=\w+), bias=neg_max", r"\1", src)
    out, n2 = re.subn(r"offset = nl\.add\(row_max, (nl\.log\(row_sum\))\)", r"offset = \1", out)
    if n1 and n2:
        return out
    fused = r"(nisa\.activation_reduce\(op=nl\.exp, data=\w+), bias=nl\.multiply\(\w+, -1\.0\)"
    out, n = re.subn(fused, r"\1", src, count=1)
    return out if n else None


def _drop_load_mask(src: str) -> str | None:
    """The first `nl.load(..., mask=m)` without its mask (parentheses inside `m` balanced)."""
    for m in re.finditer(r"nl\.load\(", src):
        at = src.find(", mask=", m.end(), src.find("\n", m.end()))
        if at < 0:
            continue
        depth, end = 0, at + len(", mask=")
        while end < len(src) and src[end] != "\n":
            if src[end] == "(":
                depth += 1
            elif src[end] == ")":
                if depth == 0:
                    return src[:at] + src[end:]
                depth -= 1
            end += 1
    return None


def _shift_bins(src: str) -> str | None:
    """Every bin compared with the next bin's number, in both counting forms."""
    out, n = src, 0
    for pattern, repl in ((r"operand0=b, (reduce_op|engine)", r"operand0=b + 1, \1"),
                          (r"nisa\.iota\(i_b \+ 0", "nisa.iota(i_b + 1 + 0")):  # fmt: skip
        out, k = re.subn(pattern, repl, out)
        n += k
    return out if n else None


def _drop_gradient_label_term(src: str) -> str | None:
    """`(hot * s) + p` (a gradient's label term added to the probabilities) as `p` alone."""
    m = re.search(r"nisa\.scalar_tensor_tensor\(data=\w+_hot, op0=nl\.multiply, operand0=", src)
    if m is None:
        return None
    depth, end = 0, None
    for j in range(src.index("(", m.start()), len(src)):
        depth += {"(": 1, ")": -1}.get(src[j], 0)
        if depth == 0:
            end = j
            break
    if end is None:
        return None
    call = src[m.start() : end + 1]
    kept = re.search(r"op1=nl\.add, operand1=(.*), dtype=nl\.float32\)$", call)
    return None if kept is None else src[: m.start()] + kept.group(1) + src[end + 1 :]


MUTATIONS: tuple[Mutation, ...] = (
    # --- wrong migrations --------------------------------------------------------------------
    Mutation(
        "skip_last_tile",
        "mutant",
        lambda src: _skip_last_tile(src) or _skip_last_block_group(src),
    ),
    Mutation("off_by_one_bound", "mutant", _sub(r"(in_bounds = [^\n]*?<) (\w+)$", r"\1 \2 - 1")),
    Mutation("drop_store_mask", "mutant", _drop_store_mask),
    Mutation("drop_load_mask", "mutant", _drop_load_mask),
    Mutation(
        "wrong_reduction_axis",
        "mutant",
        _sub(r"nl\.(sum|max)\((\w+), axis=1\)", r"nl.\1(\2, axis=0)"),
    ),
    Mutation("missing_epsilon", "mutant", _sub(r"nl\.add\((\w+(?:\[[^\]]*\])?), eps\)", r"\1")),
    Mutation("missing_scale", "mutant", _sub(r"nl\.multiply\(acc, (alpha|\w+)\)", r"nl.copy(acc)")),
    Mutation(
        "bf16_accumulation",
        "mutant",
        _sub(
            r"acc = nl\.zeros\(\((\w+), (\w+)\), nl\.float32, buffer=nl\.psum\)",
            r"acc = nl.zeros((\1, \2), nl.bfloat16, buffer=nl.psum)",
        ),
    ),
    Mutation(
        "swapped_transpose",
        "mutant",
        _sub(
            r"nl\.matmul\((\w+), (\w+), transpose_x=True\)", r"nl.matmul(\1, \2, transpose_x=False)"
        ),
    ),
    # (not for a ones-vector reduction, where ones^T @ x == x^T @ ones: an equivalent mutant)
    Mutation(
        "swapped_operands",
        "mutant",
        _sub(
            r"nl\.matmul\((?!ones\b)(\w+), (?!ones\b)(\w+), transpose_x=True\)",
            r"nl.matmul(\2, \1, transpose_x=True)",
        ),
    ),
    # the whole max-subtraction goes (the row max too), as when it is simply forgotten
    Mutation(
        "missing_max_subtraction", "mutant", lambda src: _drop_max(src) or _drop_max_bias(src)
    ),
    # gathers: the table read at the row number instead of the row's id; a position table
    # read at the global row (the `% T` forgotten); the label's logit left out of the loss
    Mutation(
        "gather_by_row_number", "mutant", _sub(r"(\w+)\[(\w+)\[i_l, 0\], i_f\]", r"\1[i_p, i_f]")
    ),
    Mutation(
        "position_not_wrapped", "mutant", _sub(r"(\w+)\[i_s, i_f\], mask=", r"\1[i_p, i_f], mask=")
    ),
    Mutation("dropped_label_term", "mutant", _sub(r"nl\.subtract\((.+), (\w+_at_\w+)\)", r"\1")),
    # a fused classifier's gradient: the label's -1 left out; the one-hot row one class off
    Mutation("dropped_gradient_label_term", "mutant", _drop_gradient_label_term),
    Mutation(
        "label_one_hot_shifted",
        "mutant",
        _sub(r"(\w+_hot) = nl\.equal\(col_ids, (\w+)\)", r"\1 = nl.equal(col_ids, nl.add(\2, 1))"),
    ),
    # a label's logit picked one column off (trn2's range select on the index as a bound)
    Mutation(
        "label_pick_shifted",
        "mutant",
        _sub(
            r"(\w+_at_\w+_col) = nl\.copy\((\w+), dtype=nl\.float32\)",
            r"\1 = nl.copy(nl.add(\2, 1), dtype=nl.float32)",
        ),
    ),
    # scans: runs of the wrong length (a block size misread), so runs overlap or leave gaps
    Mutation(
        "wrong_run_length",
        "mutant",
        _sub(r"idx = i_p \* (\d+) \+ i_f", r"idx = i_p * (\1 - 1) + i_f"),
    ),
    # attention: scores never scaled; the causal mask forgotten, or the diagonal itself masked
    # (`j < i` for `j <= i`); the probabilities never divided by their sum
    Mutation(
        "unscaled_scores",
        "mutant",
        _sub(
            r"(\(s_ps, op0=nl\.multiply, operand0=|data=s_ps, op0=nl\.multiply, operand0=)[\w.]+",
            r"\g<1>1.0",
            count=0,
        ),
    ),
    Mutation("causal_mask_dropped", "mutant", _sub(r"if k0 \+ kw > q0 \+ 1:", "if False:")),
    Mutation(
        "causal_diagonal_masked",
        "mutant",
        _sub(r"(nisa\.affine_select\(q0 \+ i_q - k0 - i_k) >= 0", r"\1 > 0"),
    ),
    Mutation(
        "unnormalised_attention",
        "mutant",
        _sub(
            r"value=nisa\.tensor_scalar\((o_ps\[[^\]]*\]), op0=nl\.multiply, operand0=inv\)",
            r"value=\1",
        ),
    ),
    # column sums beside a row program: rows past the end summed too; the old value dropped
    Mutation(
        "column_sum_past_the_end",
        "mutant",
        _sub(r"(cs\d+_t) = nl\.where\(row_ok, (.+), 0\.0, dtype=nl\.float32\)$", r"\1 = \2"),
    ),
    Mutation(
        "column_sum_old_value_dropped",
        "mutant",
        _sub(
            r"value=nl\.add\((cs\d+_acc\[cc\]), nl\.load\(\w+\[i_c\]\)\)",
            r"value=nl.copy(\1, dtype=nl.float32)",
        ),
    ),  # fmt: skip
    # weighted windows: the weights read in reverse tap order (a convolution taken for a
    # correlation); a banded product's band one row off
    Mutation(
        "taps_reversed",
        "mutant",
        _sub(
            r"w_all\[(:|0:span), w : w \+ 1\]", r"w_all[\1, N_TAPS - 1 - w : N_TAPS - w]", count=0
        ),
    ),  # fmt: skip
    Mutation(
        "band_row_shifted",
        "mutant",
        _sub(r"operand0=float\(dy - dy_low\)", "operand0=float(dy - dy_low + 1)", count=0),
    ),
    # pooling: a window tap left out; the window's rows read without the output row's stride
    Mutation(
        "dropped_window_tap",
        "mutant",
        _sub(r"\n\s*acc = nl\.(add|maximum|minimum)\(acc, win\[[^\n]*\]\)$", ""),
    ),
    Mutation(
        "unstrided_window",
        "mutant",
        _sub(r"win = nl\.load\((\w+)\[\d+ \* i_p", r"win = nl.load(\1[i_p"),
    ),
    # histograms: every count moved to the next bin; the old counts not added; keys past the
    # end counted in bin 0; a bin mask of half the bins
    Mutation("histogram_bins_shifted", "mutant", _shift_bins),
    Mutation(
        "histogram_old_counts_dropped",
        "mutant",
        _sub(r"total = nisa\.tensor_tensor\(got, old, [^\n]*$", "total = got"),
    ),
    Mutation(
        "histogram_past_end_counted",
        "mutant",
        _sub(r"bin_ = nl\.full\(\(P_TILE, F\), -1,", "bin_ = nl.full((P_TILE, F), 0,"),
    ),
    Mutation(
        "histogram_half_mask",
        "mutant",
        _sub(r"nl\.bitwise_and\(key, (\d+),", r"nl.bitwise_and(key, \1 // 2,"),
    ),
    # scatter-adds: the running gradient dropped; rows added at their row number instead of
    # their id; position rows one position off
    Mutation(
        "scatter_old_dropped",
        "mutant",
        _sub(
            r"nl\.store\((\w+_rows)\[i_r, i_f\], value=old,",
            r"nl.store(\1[i_r, i_f], value=nl.multiply(old, 0.0),",
            count=0,
        ),
    ),  # fmt: skip
    Mutation(
        "scatter_by_row_number",
        "mutant",
        _sub(
            r"(ids(\d+))\[i_q, 0\] = nl\.load\(\w+\.reshape\(\(K,\)\)\[i_p\], mask=ok\)",
            r"\1[i_q, 0] = nl.mod(nisa.iota(i_p, dtype=nl.int32), R\2, dtype=nl.int32)",
        ),
    ),  # fmt: skip
    Mutation(
        "scatter_positions_shifted",
        "mutant",
        _sub(
            r"nl\.mod\(nisa\.iota\(i_p, dtype=nl\.int32\), (R\d+),",
            r"nl.mod(nisa.iota(i_p + 1, dtype=nl.int32), \1,",
        ),
    ),  # fmt: skip
    # --- correct variants ---------------------------------------------------------------------
    Mutation(
        "smaller_free_tile",
        "variant",
        lambda src: (
            _sub(r"^F_TILE = 512", "F_TILE = 256")(src)
            or _sub(r"^F_TILE = 2048", "F_TILE = 1024")(src)
            or _sub(r"^KEY_TILE = 512", "KEY_TILE = 256")(src)
        ),
    ),
    Mutation("fewer_partitions", "variant", _sub(r"^P_TILE = 128", "P_TILE = 64")),
    Mutation(
        "nisa_exp",
        "variant",
        _sub(
            r"^import neuronxcc\.nki\.language as nl$",
            "import neuronxcc.nki.isa as nisa\nimport neuronxcc.nki.language as nl",
        ),
    ),
)


def _nisa_exp(src: str) -> str | None:
    """`nl.exp(x)` as the ScalarE instruction `nisa.activation(op=nl.exp, data=x)`."""
    if "nisa" not in src:
        return None
    out, n = re.subn(r"nl\.exp\((\w+)\)", r"nisa.activation(op=nl.exp, data=\1)", src, count=1)
    return out if n else None


def make(source: str) -> list[tuple[Mutation, str]]:
    """Every applicable mutation of a kernel source (mutants and variants)."""
    out: list[tuple[Mutation, str]] = []
    for m in MUTATIONS:
        new = m.apply(source)
        if m.name == "nisa_exp" and new is not None:
            new = _nisa_exp(new)
        if new is not None and new != source:
            out.append((m, new))
    return out


class MutantResult(BaseModel):
    task: str
    mutation: str
    kind: str
    verdict: str
    score: float
    rules: list[str]
    expected: bool  # mutant failed / variant passed


class MutationReport(BaseModel):
    results: list[MutantResult]

    @property
    def kill_rate(self) -> float:
        m = [r for r in self.results if r.kind == "mutant"]
        return sum(r.expected for r in m) / len(m) if m else 1.0

    @property
    def variant_pass_rate(self) -> float:
        v = [r for r in self.results if r.kind == "variant"]
        return sum(r.expected for r in v) / len(v) if v else 1.0


def score_source(
    cu: Path, kernel: str, source: str, path: Path, *, spec: Path | None = None, seeds: int = 2
) -> FidelityReport:
    """Write an NKI kernel's source to `path` and score it as a migration of `cu`'s `kernel`
    (the NKI function named like the kernel, without `_kernel`)."""
    from migrator.score import score

    path.write_text(source, encoding="utf-8")
    return score(cu, path, kernel=kernel, spec=spec, seeds=seeds,
                 nki_name=kernel.removesuffix("_kernel"))  # fmt: skip


def score_mutations(
    cu: Path,
    kernel: str,
    nki_source: str,
    workdir: Path,
    *,
    spec: Path | None = None,
    seeds: int = 2,
    task: str | None = None,
) -> list[MutantResult]:
    """Score every mutant and variant of `nki_source` (a migration of `cu`'s `kernel`)."""
    results: list[MutantResult] = []
    for mut, src in make(nki_source):
        path = workdir / f"{cu.stem}__{mut.name}.py"
        rep = score_source(cu, kernel, src, path, spec=spec, seeds=seeds)
        passed = rep.verdict == "pass"
        results.append(MutantResult(
            task=task or cu.stem, mutation=mut.name, kind=mut.kind, verdict=rep.verdict,
            score=rep.score, rules=sorted({f.rule for f in rep.findings}),
            expected=passed if mut.kind == "variant" else not passed,
        ))  # fmt: skip
    return results


def run(cu_files: list[Path], seeds: int = 2) -> MutationReport:
    from migrator.contract import load_spec, spec_for_source
    from migrator.migration import migrate

    results: list[MutantResult] = []
    with tempfile.TemporaryDirectory() as tmp:
        for cu in cu_files:
            spec_path = spec_for_source(cu)
            if spec_path is None:
                continue
            spec = load_spec(spec_path)
            m = migrate(cu, kernel=spec.kernel.name, out_dir=tmp, check=False)
            k = m.kernels[0]
            if k.status != "complete" or not k.nki_source:
                continue
            results += score_mutations(cu, spec.kernel.name, k.nki_source, Path(tmp),
                                       seeds=seeds)  # fmt: skip
    return MutationReport(results=results)


def _arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("inputs", nargs="+", help=".cu files or directories (with spec sidecars)")
    ap.add_argument("--seeds", type=int, default=2, help="seeds per distribution per score")
    ap.add_argument("--json", action="store_true")


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    """`migrate mutants`: validate the scorer on mutants and variants of the corpus."""
    p = sub.add_parser("mutants", help="validate the scorer: wrong migrations must fail, "
                       "correct variants must pass")  # fmt: skip
    _arguments(p)
    p.set_defaults(func=report)
    return p


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _arguments(ap)
    return report(ap.parse_args(argv))


def report(args: argparse.Namespace) -> int:
    from migrator.cuda.source import iter_sources

    report = run(list(iter_sources(args.inputs)), seeds=args.seeds)
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        for r in report.results:
            mark = "ok  " if r.expected else "MISS"
            print(f"{mark} {r.task:<20} {r.kind:<8} {r.mutation:<24} {r.verdict:<5} "
                  f"{r.score:5.1f} {' '.join(r.rules)}")  # fmt: skip
        n_m = sum(r.kind == "mutant" for r in report.results)
        n_v = len(report.results) - n_m
        print(f"mutants failed: {report.kill_rate:.1%} of {n_m} (goal >= 95%); "
              f"variants passed: {report.variant_pass_rate:.1%} of {n_v} (goal 100%)")  # fmt: skip
    return 0 if report.kill_rate >= 0.95 and report.variant_pass_rate == 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
