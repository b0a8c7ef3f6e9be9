"""The attention rule recognises softmax(scale * Q K^T) V in a lifted program whatever its
spelling (normaliser inside or outside the key sum, K stored transposed, causal key ranges,
bound variables named anyhow, heads batched in leading axes), rejects near misses, and the
emitted kernel matches numpy at sequence lengths 512-4096 with head dims 64 and 128, ragged
lengths included."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from migrator.patterns.lifted import _NoFit
from migrator.patterns.lifted_attention import _match, _per_matrix

from migrator.lift.program import Expr, IndexMap, Term
from migrator.migration import migrate

CORPUS = Path(__file__).resolve().parents[2] / "corpus"


def ix(*names: str) -> list[IndexMap]:
    return [IndexMap(terms=[Term(coef=1, var=n)]) for n in names]


def load(t: str, *names: str) -> Expr:
    return Expr(kind="load", tensor=t, index=ix(*names))


def op(o: str, *args: Expr) -> Expr:
    return Expr(kind="op", op=o, args=list(args))


def red(o: str, var: str, body: Expr, extent: str = "S", upto: IndexMap | None = None) -> Expr:
    return Expr(kind="reduce", op=o, var=var, args=[body], extent=None if upto else extent,
                upto=upto)  # fmt: skip


SCALE = Expr(kind="param", name="scale")
ONE = Expr(kind="const", value=1)


def score(t: str, d: str, k_t: bool = False) -> Expr:
    kk = load("K", d, t) if k_t else load("K", t, d)
    return op("*", SCALE, red("sum", d, op("*", kk, load("Q", "i", d)), extent="D"))


def prob(t: str, u: str, d: str, d2: str, upto: IndexMap | None = None, k_t: bool = False) -> Expr:
    mx = red("max", u, score(u, d2, k_t), upto=upto)
    return op("exp", op("+", score(t, d, k_t), op("*", Expr(kind="const", value=-1), mx)))


def attention(names: str = "tukqsrwv", *, inside: bool = False, upto: IndexMap | None = None,
              k_t: bool = False) -> Expr:  # fmt: skip
    t, u, k, q, s, r, w, v = names
    num_p = prob(t, u, s, r, upto, k_t)
    den = red("sum", k, prob(k, q, w, v, upto, k_t), upto=upto)
    if inside:  # sum_t V[t, j] * (p_t / den)
        return red("sum", t, op("*", load("V", t, "j"), op("/", num_p, den)), upto=upto)
    num = red("sum", t, op("*", load("V", t, "j"), num_p), upto=upto)
    return op("*", op("/", ONE, den), num)


CAUSAL = IndexMap(terms=[Term(coef=1, var="i")], const=1)


def test_the_two_pass_spelling_is_attention() -> None:
    m = _match(attention(), "i", "j")
    assert (m["q"], m["k"], m["v"], m["causal"]) == ("Q", "K", "V", False)
    assert [f.name for f in m["scale"]] == ["scale"] and not m["k_transposed"]


def test_the_normaliser_may_sit_inside_the_key_sum() -> None:
    assert _match(attention(inside=True), "i", "j")["v"] == "V"


def test_keys_stored_transposed_are_read_as_k_t() -> None:
    assert _match(attention(k_t=True), "i", "j")["k_transposed"]


def test_keys_up_to_the_query_are_causal() -> None:
    m = _match(attention(upto=CAUSAL), "i", "j")
    assert m["causal"] and m["t_extent"] is None


@settings(max_examples=30, deadline=None)
@given(st.permutations(["t", "u", "k", "q", "s", "r", "w", "v"]))
def test_bound_variable_names_do_not_matter(names: list[str]) -> None:
    assert _match(attention("".join(names)), "i", "j")["q"] == "Q"


def test_a_max_of_another_score_is_rejected() -> None:
    e = attention()
    # the numerator's exponent subtracts the max of unscaled dot products
    bad_max = red("max", "u", red("sum", "r", op("*", load("K", "u", "r"), load("Q", "i", "r")),
                                  extent="D"))  # fmt: skip
    num = red("sum", "t", op("*", load("V", "t", "j"), op("exp", op(
        "+", score("t", "s"), op("*", Expr(kind="const", value=-1), bad_max)))))  # fmt: skip
    with pytest.raises(_NoFit, match="not one probability|normaliser|score minus"):
        _match(e.model_copy(update={"args": [e.args[0], num]}), "i", "j")


def test_a_strict_causal_range_is_rejected() -> None:
    strict = IndexMap(terms=[Term(coef=1, var="i")])  # keys k < i: the diagonal left out
    with pytest.raises(_NoFit, match="neither every key nor causal"):
        _match(attention(upto=strict), "i", "j")


def test_values_read_transposed_are_rejected() -> None:
    e = attention()
    num = e.args[1]
    body = num.args[0]
    swapped = body.model_copy(update={"args": [load("V", "j", "t"), body.args[1]]})
    num = num.model_copy(update={"args": [swapped]})
    with pytest.raises(_NoFit, match="no value row"):
        _match(e.model_copy(update={"args": [e.args[0], num]}), "i", "j")


def test_batched_loads_drop_their_batch_coordinates() -> None:
    def batched(e: Expr) -> Expr:
        if e.kind == "load":
            return e.model_copy(update={"index": ix("b", "h") + e.index})
        return e.model_copy(update={"args": [batched(a) for a in e.args]})

    e = batched(attention(upto=CAUSAL))
    assert _match(_per_matrix(e, ["b", "h"]), "i", "j")["causal"]
    # one tensor read at another head's slice: no attention per (batch, head)
    swapped = e.model_copy(update={"args": [e.args[0], e.args[1].model_copy(update={
        "args": [_with_v_heads_swapped(e.args[1].args[0])]})]})  # fmt: skip
    with pytest.raises(_NoFit, match="not read per batch entry"):
        _per_matrix(swapped, ["b", "h"])


def _with_v_heads_swapped(e: Expr) -> Expr:
    if e.kind == "load" and e.tensor == "V":
        return e.model_copy(update={"index": ix("h", "b") + e.index[2:]})
    return e.model_copy(update={"args": [_with_v_heads_swapped(a) for a in e.args]})


# --- the emitted kernels at real sizes ---------------------------------------------------------
def _reference(stem: str) -> object:
    spec = importlib.util.spec_from_file_location(f"ref_{stem}", CORPUS / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.reference


@pytest.mark.parametrize(
    ("stem", "api", "sizes"),
    [
        ("attention_fwd", "legacy", [(512, 64), (1000, 128)]),
        ("attention_fwd", "new", [(777, 64)]),
        ("attention_causal_online", "legacy", [(1000, 128), (4096, 64)]),
        ("attention_causal_online", "new", [(513, 128)]),
        ("attention_mha", "legacy", [(2, 3, 640, 64)]),
        ("attention_mha", "new", [(1, 2, 1000, 128)]),
    ],
)
def test_generated_attention_matches_numpy_at_long_sequences(
    stem: str, api: str, sizes: list[tuple[int, ...]], tmp_path: Path
) -> None:
    import migrator.nki as mn

    (k,) = migrate(CORPUS / f"{stem}.cu", out_dir=tmp_path, check=False, nki_api=api).kernels
    assert (k.family, k.status) == ("attention", "complete")
    fn = getattr(mn.load_kernel_module(k.nki_file), stem)
    reference = _reference(stem)
    for shape in sizes:
        rng = np.random.default_rng(sum(shape))
        q, kk, v = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
        scale = np.float32(1 / np.sqrt(shape[-1]))
        out, _ = mn.run_kernel(fn, q, kk, v, scale=scale)
        want = reference(q, kk, v, scale=float(scale))  # type: ignore[operator]
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
